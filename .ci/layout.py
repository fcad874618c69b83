#!/usr/bin/env python3
"""Layout rules of ARCHITECTURE.md, checked in CI: no non-test file of a library or program
crate has more than 400 lines of logic (comments, doc comments, blank lines and the
`#[cfg(test)] mod tests` block excluded; generated code excluded), and no two files of a crate
import each other, directly or through a chain (`use crate::…` / `crate::…` paths)."""
import pathlib
import re
import sys

MAX_LOGIC_LINES = 400
CRATES = [
    "proto", "transport", "broker", "sdk-rust", "sdk-rust/test-kit", "sdk-rust/build-helper",
    "cli", "agent", "bench", "examples",
]


def logic_lines(text: str) -> int:
    test = text.find("#[cfg(test)]\nmod tests")
    if test >= 0:
        text = text[:test]
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("//"))


def module_of(root: pathlib.Path, path: pathlib.Path) -> tuple:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def cycles(root: pathlib.Path) -> list:
    files = [p for p in root.rglob("*.rs") if "generated" not in p.parts and "bin" not in p.parts]
    modules = {module_of(root, p): p for p in files}
    edges = {}
    for module, path in modules.items():
        text = re.sub(r"//[^\n]*", "", path.read_text())
        test = text.find("#[cfg(test)]\nmod tests")
        if test >= 0:
            text = text[:test]
        out = set()
        for m in re.finditer(r"crate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
            parts = tuple(m.group(1).split("::"))
            for k in range(len(parts), -1, -1):
                if parts[:k] in modules:
                    if parts[:k] != module:
                        out.add(parts[:k])
                    break
        edges[module] = out
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(["::".join(c) or "(crate root)" for c in component])

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    problems = []
    for crate in CRATES:
        src = pathlib.Path(crate) / "src"
        for path in sorted(src.rglob("*.rs")):
            if "generated" in path.parts or path.name == "tests.rs":
                continue
            n = logic_lines(path.read_text())
            if n > MAX_LOGIC_LINES:
                problems.append(f"{path}: {n} lines of logic (at most {MAX_LOGIC_LINES}): split it by concern")
        for cycle in cycles(src):
            problems.append(f"{src}: files import each other: {' -> '.join(cycle)}: move the shared part down a layer")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"layout: {len(CRATES)} crates checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
