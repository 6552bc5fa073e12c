"""The layering as a test: imports only point down, siblings never import each other.

    txnlab (CLI)  ->  report  ->  chaos | exporter | spark_analysis  ->  cluster
    dashboards stands apart: it imports nothing of txnlab's, and nothing of txnlab's imports it.

Read from the source with `ast` (every `import` and `from ... import`, also those inside functions), so a
lazy import that runs back up is caught too. bench/ and tests/ may import anything.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# package -> the txnlab packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "cluster": set(),
    "chaos": {"cluster"},
    "exporter": {"cluster"},
    "spark_analysis": {"cluster"},
    "report": {"chaos", "exporter", "spark_analysis", "cluster"},
    "txnlab": {"report", "chaos", "exporter", "spark_analysis", "cluster", "dashboards"},
    "dashboards": set(),
}


def imported_packages(source: str, package: str) -> set[str]:
    """Top-level packages a module's source imports (relative imports resolved against its package)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:                   # relative: within the module's own package tree
                found.add(package)
            elif node.module:
                found.add(node.module.split(".")[0])
    return found


def violations(root: Path, allowed: dict[str, set[str]]) -> list[str]:
    """'module imports package' for every import that breaks the layering."""
    found = []
    for package, may in sorted(allowed.items()):
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            used = imported_packages(path.read_text(), package)
            for other in sorted(used & set(allowed) - {package} - may):
                found.append(f"{'/'.join(parts)}.py imports {other}")
    return found


def test_the_tree_keeps_its_layers():
    assert violations(ROOT, ALLOWED) == []


def test_every_package_of_the_tree_has_a_place_in_the_layers():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages == set(ALLOWED)


def test_a_planted_back_import_or_sibling_import_fails(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "cluster" / "local.py").write_text("def f():\n    from chaos.faults import Fault\n")
    (tmp_path / "exporter" / "x.py").write_text("import spark_analysis.checks\nfrom cluster import admin\n")
    (tmp_path / "dashboards" / "build.py").write_text("from cluster.versions import REPO_ROOT\n")
    (tmp_path / "report" / "ok.py").write_text("from chaos import experiment\nfrom . import html\n")
    assert violations(tmp_path, ALLOWED) == ["cluster/local.py imports chaos", "dashboards/build.py imports cluster",
                                             "exporter/x.py imports spark_analysis"]
