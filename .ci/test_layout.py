"""Tests of the layout check's readers (run in CI beside it: `python3 -m pytest -q .ci`)."""

import importlib.util
import pathlib
import textwrap

_spec = importlib.util.spec_from_file_location("layout", pathlib.Path(__file__).with_name("layout.py"))
layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layout)


def write(root: pathlib.Path, files: dict) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_typescript_comments_are_not_logic_but_strings_templates_and_regexes_are():
    text = textwrap.dedent(
        """\
        /** A doc comment
         * over two lines. */
        const a = "// not a comment"; // a trailing comment
        // a comment line

        const re = /\\/\\*[^/]*/g; /* a block comment */
        const t = `a template ${ {a: 1}.a } // still the template
        /* still the template */ ${ `nested ${1}` }`;
        /* a block comment
           over two lines */
        const x = a.length / 2 / 3; // division, not a regex
        """
    )
    assert layout.typescript_logic_lines(text) == 5


def test_python_docstrings_and_comments_are_not_logic_but_string_values_are():
    text = textwrap.dedent(
        '''\
        """Module docstring."""

        import os  # a trailing comment

        # a comment line
        X = 1
        """Attribute docstring."""


        def f():
            """Function docstring
            over two lines."""
            return os.sep

        S = """a string value
        over two lines"""
        '''
    )
    assert layout.python_logic_lines(text) == 6


def test_a_deferred_python_import_that_closes_a_cycle_is_reported(tmp_path):
    src = write(
        tmp_path,
        {
            "pkg/__init__.py": "from ._a import A\n",
            "pkg/_a.py": "from . import _b\nA = 1\n",
            "pkg/_b.py": "def f():\n    from ._a import A\n    return A\n",
            "pkg/_c.py": "from . import _b\nfrom .errors import E\n",
            "pkg/errors.py": "E = 1\n",
        },
    )
    groups = [sorted(".".join(m) for m in group) for group in layout.cyclic_groups(layout.python_imports(src))]
    assert groups == [["pkg._a", "pkg._b"]]


def test_importing_a_name_from_the_package_is_an_edge_to_its_init(tmp_path):
    src = write(tmp_path, {"pkg/__init__.py": "from ._a import A\nB = 2\n", "pkg/_a.py": "from . import B\nA = 1\n"})
    groups = [sorted(".".join(m) for m in group) for group in layout.cyclic_groups(layout.python_imports(src))]
    assert groups == [["pkg", "pkg._a"]]


def test_a_typescript_type_import_and_a_re_export_close_a_cycle_and_commented_imports_do_not(tmp_path):
    src = write(
        tmp_path,
        {
            "a.ts": 'import type { B } from "./b.js";\nexport const a = 1;\n',
            "b.ts": 'export { a } from "./a.js";\nexport type B = number;\n',
            "c.ts": 'import { d } from "./d.js";\nexport const c = 1;\n',
            "d.ts": '/* import { c } from "./c.js"; */\nexport const d = 1;\n',
            "e.ts": 'import { f } from "./f.js";\nexport const e = 1;\n',
            "f.ts": '// import { e } from "./e.js";\nexport const f = 1;\n',
        },
    )
    groups = [sorted(str(p) for p in group) for group in layout.cyclic_groups(layout.typescript_imports(src))]
    assert groups == [["a.ts", "b.ts"]]


def test_rust_files_that_use_each_other_are_reported(tmp_path):
    src = write(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B(crate::a::A);\n",
            "c.rs": "use crate::a::A;\n",
        },
    )
    assert [sorted(group) for group in layout.cycles(src)] == [["a", "b"]]
