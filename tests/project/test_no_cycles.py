"""No import circles among eaglekit's modules, counting the imports placed inside functions (a
function-level import that breaks a circle is a circle all the same), and the package root's lazy table
and its TYPE_CHECKING mirror name the same things."""

from __future__ import annotations

import ast
from pathlib import Path

from cycles import cycles, graph

ROOT = Path(__file__).resolve().parents[2]


def test_no_import_cycles_even_inside_functions():
    assert cycles(graph(ROOT / "eaglekit")) == []


def test_the_cycle_check_sees_a_circle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "eaglekit"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from eaglekit.core.b import g\n")
    (pkg / "core" / "b.py").write_text("def g():\n    from eaglekit.core.a import f  # hidden\n")
    assert cycles(graph(pkg)) == [["eaglekit.core.a", "eaglekit.core.b"]]


def test_lazy_exports_and_type_checking_mirror_agree():
    import eaglekit

    tree = ast.parse((ROOT / "eaglekit" / "__init__.py").read_text())
    mirror: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    mirror[alias.name] = imp.module.removeprefix("eaglekit.")
    assert mirror == eaglekit._EXPORTS
    for name in eaglekit._EXPORTS:  # each resolves to a real object
        assert getattr(eaglekit, name) is not None


def test_notebooks_import_only_the_package_root():
    for nb in sorted((ROOT / "notebooks").glob("*.py")):
        for line in nb.read_text().splitlines():
            assert not line.lstrip().startswith(("from eaglekit.", "import eaglekit.")), f"{nb.name}: {line}"
