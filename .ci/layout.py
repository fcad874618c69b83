#!/usr/bin/env python3
"""Layout rules of ARCHITECTURE.md, checked in CI, for the Rust crates, the Python SDK and the
TypeScript SDK alike.

Size: no file has more than 400 lines of logic. A line of logic is a physical line that holds
code; what is not logic:
- Rust: blank lines, `//` comments and doc comments, the `#[cfg(test)] mod tests` block; files
  under `generated/` and `tests.rs` files are not checked.
- Python (`tokenize` + `ast`): blank lines, comment lines, and docstrings, i.e. a string literal
  standing alone as a statement (module, class, function and attribute docstrings), all its lines;
  generated `*_pb2.py` / `*_pb2_grpc.py` files are not checked. Tests live outside `src/`.
- TypeScript: blank lines and the lines that hold nothing but `//` and `/* … */` comments (JSDoc
  included); strings, template literals and regular expressions are read as code, so a `//` in
  them is not a comment. Tests live outside `src/`.

Imports: no two files of a package import each other, directly or through a chain:
- Rust: `use crate::…` / `crate::…` paths between the files of a crate.
- Python: every `import` / `from … import` of the package's own modules, wherever it stands
  (inside a function or under `TYPE_CHECKING` too: a deferred import is still a dependency).
  `from . import x` is an edge to module `x` when there is one, else to the package's
  `__init__.py`; the parents a Python import runs on the way are not edges.
- TypeScript: `import … from "./x.js"`, `export … from`, `import "./x.js"` and `import("./x.js")`
  of a relative file of the package, `import type` included.

Against ARCHITECTURE.md: the folders of a crate are imported only downward in the order its
"Folders, bottom to top" block declares, and its table of the host library's rooms names every
file of `broker/src` (and only files that exist).
"""
import ast
import io
import pathlib
import re
import sys
import tokenize

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
    return [["::".join(c) or "(crate root)" for c in group] for group in cyclic_groups(edges)]


def cyclic_groups(edges: dict) -> list:
    """The groups of nodes that reach each other through `edges` (Tarjan's strongly connected
    components of more than one node), each a list of nodes."""
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
                found.append(component)

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


PYTHON_PACKAGES = ["sdk-python/src"]
TYPESCRIPT_PACKAGES = ["sdk-typescript/src"]


def python_generated(path: pathlib.Path) -> bool:
    return path.name.endswith(("_pb2.py", "_pb2_grpc.py"))


def python_logic_lines(text: str) -> int:
    """Physical lines holding a code token, docstrings (string literals standing alone as a
    statement) left out."""
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docstrings.update(range(node.lineno, node.end_lineno + 1))
    code = set()
    not_code = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                tokenize.ENCODING, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in not_code:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


def python_imports(root: pathlib.Path) -> dict:
    """Module (dotted tuple) -> the package's own modules it imports."""
    files = [p for p in root.rglob("*.py") if not python_generated(p)]
    modules = {}
    for path in files:
        parts = path.relative_to(root).with_suffix("").parts
        modules[parts[:-1] if parts[-1] == "__init__" else parts] = path
    edges = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module[:-1]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [(tuple(alias.name.split(".")), None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else ()
                named = base + tuple(node.module.split(".")) if node.module else base
                targets = [(named, alias.name) for alias in node.names]
            else:
                continue
            for named, name in targets:
                target = named + (name,) if name and named + (name,) in modules else named
                if target in modules and target != module:
                    out.add(target)
        edges[module] = out
    return edges


def python_problems() -> list:
    problems = []
    for package in PYTHON_PACKAGES:
        src = pathlib.Path(package)
        paths = [p for p in sorted(src.rglob("*.py")) if not python_generated(p)]
        edges = python_imports(src)
        problems += package_problems(src, paths, python_logic_lines, edges, ".".join)
    return problems


def package_problems(src: pathlib.Path, paths: list, count, edges: dict, name) -> list:
    """The files among `paths` over the limit by `count`, and the cycles of `edges` (nodes
    written by `name`)."""
    problems = []
    for path in paths:
        n = count(path.read_text())
        if n > MAX_LOGIC_LINES:
            problems.append(f"{path}: {n} lines of logic (at most {MAX_LOGIC_LINES}): split it by concern")
    for group in cyclic_groups(edges):
        cycle = " -> ".join(name(node) for node in group)
        problems.append(f"{src}: files import each other: {cycle}: move the shared part down a layer")
    return problems


TS_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}
TS_REGEX_AFTER_WORDS = {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void",
                        "throw", "instanceof", "yield", "await"}


def typescript_code(text: str) -> str:
    """`text` with its comments blanked out (newlines kept), strings, template literals and
    regular expressions kept as they are."""
    out = []
    i, n = 0, len(text)
    braces = []  # per open template `${`: the brace depth at which it closes
    depth = 0
    last = ""  # the last significant code character or word

    def copy_string(i: int, quote: str) -> int:
        j = i + 1
        while j < n and text[j] != quote:
            j += 2 if text[j] == "\\" else 1
        out.append(text[i:j + 1])
        return j + 1

    def copy_template(i: int) -> tuple:
        """From just after a backquote or a `}` that closes `${`: copy up to the closing backquote
        (returns its end, False) or up to an opening `${` (returns its end, True)."""
        j = i
        while j < n:
            if text[j] == "\\":
                j += 2
            elif text[j] == "`":
                out.append(text[i:j + 1])
                return j + 1, False
            elif text.startswith("${", j):
                out.append(text[i:j + 2])
                return j + 2, True
            else:
                j += 1
        out.append(text[i:])
        return n, False

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "'\"":
            i, last = copy_string(i, c), "a"
        elif c == "`" or (c == "}" and braces and braces[-1] == depth):
            if c == "}":
                braces.pop()
            out.append(c)
            i, opened = copy_template(i + 1)
            if opened:
                braces.append(depth)
            last = "(" if opened else "a"
        elif c == "/" and (last in TS_REGEX_AFTER or last in TS_REGEX_AFTER_WORDS):
            j, in_class = i + 1, False
            while j < n and text[j] != "\n" and (in_class or text[j] != "/"):
                if text[j] == "\\":
                    j += 1
                elif text[j] == "[":
                    in_class = True
                elif text[j] == "]":
                    in_class = False
                j += 1
            out.append(text[i:j + 1])
            i, last = j + 1, "a"
        elif c.isalnum() or c in "_$":
            word = re.match(r"[\w$]+", text[i:]).group(0)
            out.append(word)
            i, last = i + len(word), word if word in TS_REGEX_AFTER_WORDS else "a"
        else:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            if not c.isspace():
                last = ")" if c in ")]" else c
            out.append(c)
            i += 1
    return "".join(out)


def typescript_logic_lines(text: str) -> int:
    return sum(1 for line in typescript_code(text).splitlines() if line.strip())


TS_IMPORT = re.compile(
    r"""(?:\b(?:import|export)\b[^;'"`]*?\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}/[^'"]+)\1"""
)


def typescript_imports(root: pathlib.Path) -> dict:
    """File (relative to `root`) -> the package's own files it imports (a `.js` specifier names
    its `.ts` source)."""
    root = root.resolve()
    files = {p.relative_to(root) for p in root.rglob("*.ts")}
    edges = {}
    for path in files:
        out = set()
        for m in TS_IMPORT.finditer(typescript_code((root / path).read_text())):
            target = (root / path.parent / re.sub(r"\.js$", ".ts", m.group(2))).resolve()
            if target.is_relative_to(root) and target.relative_to(root) in files and target != root / path:
                out.add(target.relative_to(root))
        edges[path] = out
    return edges


def typescript_problems() -> list:
    problems = []
    for package in TYPESCRIPT_PACKAGES:
        src = pathlib.Path(package)
        edges = typescript_imports(src)
        problems += package_problems(src, sorted(src.rglob("*.ts")), typescript_logic_lines, edges, str)
    return problems


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
    problems += python_problems()
    problems += typescript_problems()
    for p in problems:
        print(p, file=sys.stderr)
    packages = len(CRATES) + len(PYTHON_PACKAGES) + len(TYPESCRIPT_PACKAGES)
    print(f"layout: {packages} packages checked (Rust, Python, TypeScript), {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
