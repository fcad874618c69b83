"""Where this interpreter would import a module from, outside any sandbox.

Run by tether with the plugin's own interpreter and environment, confined to reading, when a
confined plugin exited with ModuleNotFoundError: argv is SCRIPT MODULE. The plugin's script is
READ, never run: the sys.path entries it adds (sys.path.insert/append of a string literal or of
a path built from __file__) are taken from its syntax tree. Nothing of the module is executed
either: the top-level name is looked up with the import system's finders, each submodule with
PathFinder in its parent's directories. Prints one JSON object: "found" (true, false, or null
when only running a parent module would tell), "entry" (the sys.path entry holding it, or
null for a built-in) and "origin" (its file, or null). An empty SCRIPT: the plugin runs no script file (`python -m`).
"""
import ast
import importlib.machinery
import importlib.util
import json
import os
import sys

MAX_SCRIPT_BYTES = 1 << 20
PATH_FUNCTIONS = {"dirname", "join", "abspath", "realpath", "normpath", "expanduser", "str"}


def value(node, script):
    """The string a path expression evaluates to, for the forms plugins use; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "__file__":
        return script
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        args = [value(a, script) for a in node.args]
        if None in args:
            return None
        if name in ("Path", "PurePath", "resolve", "absolute") and len(args) <= 1:
            inner = value(func.value, script) if isinstance(func, ast.Attribute) else None
            return os.path.abspath(args[0] if args else inner) if (args or inner) else None
        if name in PATH_FUNCTIONS and args:
            if name == "join":
                return os.path.join(*args)
            if name == "dirname":
                return os.path.dirname(args[0])
            if name == "expanduser":
                return os.path.expanduser(args[0])
            return os.path.normpath(os.path.abspath(args[0])) if name != "str" else args[0]
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = value(node.value, script)
        return os.path.dirname(inner) if inner is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
        left, right = value(node.left, script), value(node.right, script)
        if left is None or right is None:
            return None
        return os.path.join(left, right) if isinstance(node.op, ast.Div) else left + right
    return None


def is_sys_path(node):
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def added_entries(script):
    """The sys.path entries the script adds, in the order it adds them."""
    try:
        with open(script, "rb") as f:
            tree = ast.parse(f.read(MAX_SCRIPT_BYTES), script)
    except (OSError, SyntaxError, ValueError):
        return []
    entries = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("insert", "append") and is_sys_path(node.func.value)
                and node.args):
            entry = value(node.args[-1], script)
            # A relative entry is relative to the plugin's working directory, unknown here.
            if entry and os.path.isabs(entry):
                entries.append(os.path.normpath(entry))
    return entries


def find(name):
    """Whether the module is found (None: cannot tell without running a parent module), the
    sys.path entry that holds it and its file, without running any of it."""
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    if spec is None:
        return False, None, None
    places = list(spec.submodule_search_locations or [])
    anchor = spec.origin if spec.has_location else (places[0] if places else None)
    entry = next((e for e in sorted(sys.path, key=len, reverse=True)
                  if e and anchor and anchor.startswith(e.rstrip("/") + "/")), None)
    for i in range(1, len(parts)):
        if not places:
            # A module that is not a package sets its attributes when it runs (os.path).
            return None, None, None
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), places)
        if spec is None:
            return False, None, None
        places = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec.has_location else (places[0] if places else None)
    return True, entry or (os.path.dirname(origin) if origin else None), origin


def main():
    script = os.path.realpath(sys.argv[1]) if sys.argv[1] else None
    module = sys.argv[2]
    # As when the script runs: its directory first (not the lookup's working directory).
    if sys.path and sys.path[0] in ("", "."):
        sys.path.pop(0)
    if script:
        sys.path.insert(0, os.path.dirname(script))
        for entry in reversed(added_entries(script)):
            if entry not in sys.path:
                sys.path.insert(1, entry)
    sys.path_importer_cache.clear()
    found, entry, origin = find(module)
    print(json.dumps({"found": found, "entry": entry, "origin": origin}))


main()
