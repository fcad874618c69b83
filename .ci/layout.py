#!/usr/bin/env python3
"""Layout rules of ARCHITECTURE.md, checked in CI: no non-test file of a library or program
crate has more than 400 lines of logic (comments, doc comments, blank lines and the
`#[cfg(test)] mod tests` block excluded; generated code excluded), and no two files of a crate
import each other, directly or through a chain (`use crate::…` / `crate::…` paths).
Against ARCHITECTURE.md: the folders of a crate are imported only downward in the order its
"Folders, bottom to top" block declares, and its table of the host library's rooms names every
file of `broker/src` (and only files that exist)."""
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


ARCHITECTURE = pathlib.Path("ARCHITECTURE.md")
HOST_LIBRARY = pathlib.Path("broker/src")


def code_of(path: pathlib.Path) -> str:
    """A file's code without comments and without its `#[cfg(test)] mod tests` block."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    test = text.find("#[cfg(test)]\nmod tests")
    return text[:test] if test >= 0 else text


def declared_orders(architecture: str) -> dict:
    """`crate/src: a, b, c` lines of the fenced block under "Folders, bottom to top"."""
    section = re.search(r"^## Folders, bottom to top\n.*?```\n(.*?)```", architecture, re.S | re.M)
    if not section:
        return {}
    orders = {}
    for line in section.group(1).splitlines():
        if ":" in line:
            src, units = line.split(":", 1)
            orders[pathlib.Path(src.strip())] = [u.strip() for u in units.split(",") if u.strip()]
    return orders


def back_edges(folder: pathlib.Path, order: list) -> list:
    """Imports from a unit (sub-folder or file) of `folder` to one declared above it in
    `order`; every sub-folder of `folder` must be declared. `folder` is a crate's `src` or a
    folder inside it (`broker/src/launch`)."""
    problems = []
    src = next(p for p in [folder, *folder.parents] if p.name == "src")
    prefix = "".join(f"{part}::" for part in folder.relative_to(src).parts)
    rank = {unit: i for i, unit in enumerate(order)}
    for sub in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        if sub not in rank and sub not in ("generated", "bin"):
            problems.append(f"{folder}/{sub}/: a folder missing from the order in ARCHITECTURE.md (Folders, bottom to top)")
    for path in sorted(folder.rglob("*.rs")):
        parts = path.relative_to(folder).parts
        unit = parts[0].removesuffix(".rs")
        if unit not in rank or "generated" in parts:
            continue
        for target in sorted(set(re.findall(rf"crate::{prefix}([a-z_][a-z0-9_]*)", code_of(path)))):
            if target in rank and rank[target] > rank[unit]:
                problems.append(
                    f"{path}: imports crate::{prefix}{target}, which sits above {unit} in ARCHITECTURE.md's folder order: move the shared part down"
                )
    return problems


def unnamed_modules(architecture: str) -> list:
    """Files of the host library that the rooms table of ARCHITECTURE.md does not name, and
    files it names that do not exist. A row names its folder's files by file name (`plan.rs`)
    and its sub-folders' by folder (`process/`) and file name; a folder's `mod.rs` is named
    with its folder."""
    rows = {}
    for folder, files in re.findall(r"^\| `([a-z_/]+(?:/|\.rs))` \|([^\n]*)\|\s*$", architecture, re.M):
        rows[folder] = files
    if not rows:
        return [f"{ARCHITECTURE}: no table of the host library's rooms (| `folder/` | concern | files |)"]
    problems = []
    for path in sorted(HOST_LIBRARY.rglob("*.rs")):
        rel = path.relative_to(HOST_LIBRARY).as_posix()
        if rel == "lib.rs":
            continue
        row = max((f for f in rows if rel == f or (f.endswith("/") and rel.startswith(f))), key=len, default=None)
        if row is None:
            problems.append(f"{path}: ARCHITECTURE.md's rooms table has no row for it: add one")
            continue
        if row == rel:
            continue
        inner = rel[len(row):].split("/")
        names = set(re.findall(r"`([a-z_]+(?:\.rs|/))", rows[row]))
        if (inner[-1] not in names and inner[-1] != "mod.rs") or any(f"{d}/" not in names for d in inner[:-1]):
            problems.append(f"{path}: not named in ARCHITECTURE.md's row for `{row}`: say what it holds")
    for row, files in rows.items():
        for name in re.findall(r"`([a-z_]+\.rs)`", files):
            if row.endswith("/") and not list((HOST_LIBRARY / row).rglob(name)):
                problems.append(f"{ARCHITECTURE}: the row for `{row}` names `{name}`, which is not in {HOST_LIBRARY / row}")
    return problems


def main() -> int:
    problems = []
    architecture = ARCHITECTURE.read_text()
    for src, order in declared_orders(architecture).items():
        problems.extend(back_edges(src, order))
    problems.extend(unnamed_modules(architecture))
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
