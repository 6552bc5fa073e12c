"""The layering as a test: imports only point down, siblings never import each other.

    txnlab (CLI)  ->  report  ->  chaos | exporter | spark_analysis  ->  cluster
    dashboards stands apart: it imports nothing of txnlab's, and nothing of txnlab's imports it.
    chaos/ has rooms of its own, layered the same way: catalog -> runner -> nemesis -> workloads -> record.

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


# chaos/'s rooms -> the rooms they may import (besides themselves); chaos/__init__.py holds no code
CHAOS_ROOMS: dict[str, set[str]] = {
    "record": set(),
    "workloads": {"record"},
    "nemesis": {"record", "workloads"},
    "runner": {"record", "workloads", "nemesis"},
    "catalog": {"record", "workloads", "nemesis", "runner"},
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


def imported_rooms(source: str, room: str) -> set[str]:
    """chaos/'s rooms a module of chaos/<room>/ imports (relative imports stay in its room)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.add(room)
        elif isinstance(node, ast.ImportFrom) and node.module == "chaos":
            modules = [f"chaos.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        found.update(m.split(".")[1] for m in modules if m.startswith("chaos.") and m.count(".") >= 1)
    return found


def room_violations(chaos: Path, rooms: dict[str, set[str]]) -> list[str]:
    """'module imports room' for every import from a chaos/ room to one above it or beside it, and every
    module of chaos/ outside its rooms."""
    found = []
    for path in sorted(chaos.rglob("*.py")):
        rel = path.relative_to(chaos.parent)
        if len(rel.parts) == 2:
            body = ast.parse(path.read_text()).body
            if rel.name != "__init__.py" or any(not isinstance(n, ast.Expr) for n in body):
                found.append(f"{rel} is outside chaos/'s rooms")
            continue
        room = rel.parts[1]
        if room not in rooms:
            found.append(f"{rel} is in no room of chaos/")
            continue
        for other in sorted(imported_rooms(path.read_text(), room) & set(rooms) - {room} - rooms[room]):
            found.append(f"{rel} imports chaos.{other}")
    return found


def test_chaos_keeps_its_rooms():
    assert room_violations(ROOT / "chaos", CHAOS_ROOMS) == []


def test_a_planted_import_up_chaos_rooms_fails(tmp_path):
    chaos = tmp_path / "chaos"
    for room in CHAOS_ROOMS:
        (chaos / room).mkdir(parents=True)
        (chaos / room / "__init__.py").write_text("")
    (chaos / "__init__.py").write_text('"""doc"""\n')
    (chaos / "record" / "history.py").write_text("def f():\n    from chaos.workloads.base import STALL_F\n")
    (chaos / "workloads" / "run.py").write_text("from chaos.record.history import HistoryWriter\nfrom . import base\n")
    (chaos / "nemesis" / "faults.py").write_text("from chaos import runner\nfrom chaos.workloads.run import Run\n")
    (chaos / "runner" / "spec.py").write_text("from chaos.nemesis import fault_kinds\nimport chaos.record.ids\n")
    (chaos / "flat.py").write_text("import os\n")
    (chaos / "bugs").mkdir()
    (chaos / "bugs" / "tool.py").write_text("")
    assert room_violations(chaos, CHAOS_ROOMS) == [
        "chaos/bugs/tool.py is in no room of chaos/",
        "chaos/flat.py is outside chaos/'s rooms",
        "chaos/nemesis/faults.py imports chaos.runner",
        "chaos/record/history.py imports chaos.workloads"]


def test_every_package_of_the_tree_has_a_place_in_the_layers():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages == set(ALLOWED)


def test_a_planted_back_import_or_sibling_import_fails(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "cluster" / "local.py").write_text("def f():\n    from chaos.nemesis.faults import Fault\n")
    (tmp_path / "exporter" / "x.py").write_text("import spark_analysis.checks\nfrom cluster import admin\n")
    (tmp_path / "dashboards" / "build.py").write_text("from cluster.versions import REPO_ROOT\n")
    (tmp_path / "report" / "ok.py").write_text("from chaos import experiment\nfrom . import html\n")
    assert violations(tmp_path, ALLOWED) == ["cluster/local.py imports chaos", "dashboards/build.py imports cluster",
                                             "exporter/x.py imports spark_analysis"]
