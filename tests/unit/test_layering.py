"""The layering as a test: imports only point down, siblings never import each other.

    txnlab (CLI)  ->  report  ->  chaos | exporter | spark_analysis  ->  cluster
    dashboards stands apart: it imports nothing of txnlab's, and nothing of txnlab's imports it.
    chaos/ has rooms of its own, layered the same way: catalog -> runner -> nemesis -> workloads -> record.
    cluster/ has two: lab -> access; the exporter may use access only (its core install has none of the lab's needs).
    exporter/access/ (the access layer by request family) sits behind one facade, exporter/kafka_access.py.

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


def imported_rooms(source: str, package: str, room: str | None = None) -> set[str]:
    """The rooms of `package` (chaos, cluster) a module imports: a relative import stays in its own `room` (a
    module of the package's room; None: a module of another package); `from chaos import runner` names the room."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            if room:
                found.add(room)
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            modules = [f"{package}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        found.update(m.split(".")[1] for m in modules if m.startswith(f"{package}.") and m.count(".") >= 1)
    return found


def room_violations(package_dir: Path, rooms: dict[str, set[str]]) -> list[str]:
    """'module imports package.room' for every import from a room of the package (chaos/, cluster/) to one above
    it or beside it, and every module of the package outside its rooms."""
    found, package = [], package_dir.name
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent)
        if len(rel.parts) == 2:
            body = ast.parse(path.read_text()).body
            if rel.name != "__init__.py" or any(not isinstance(n, ast.Expr) for n in body):
                found.append(f"{rel} is outside {package}/'s rooms")
            continue
        if rel.parts[1:3] == ("bugs", "repro"):      # standalone programs, not of the package: see the test below
            continue
        room = rel.parts[1]
        if room not in rooms:
            found.append(f"{rel} is in no room of {package}/")
            continue
        for other in sorted(imported_rooms(path.read_text(), package, room) & set(rooms) - {room} - rooms[room]):
            found.append(f"{rel} imports {package}.{other}")
    return found


def test_chaos_keeps_its_rooms():
    assert room_violations(ROOT / "chaos", CHAOS_ROOMS) == []


def test_the_standalone_reproductions_import_nothing_of_txnlab():
    """chaos/bugs/repro/<bug>/ is a program for a client's maintainers, who have neither txnlab nor its packages: its
    Python imports its client and the standard library, nothing of the repository."""
    ours = {"txnlab", "cluster", "exporter", "chaos", "spark_analysis", "report", "dashboards", "bench", "tests"}
    found = []
    for path in sorted((ROOT / "chaos" / "bugs" / "repro").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n.split(".")[0] in ours]
    assert list((ROOT / "chaos" / "bugs" / "repro").rglob("*.py")) and found == []


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


# cluster/'s rooms -> the rooms they may import (besides themselves); cluster/__init__.py holds no code
CLUSTER_ROOMS: dict[str, set[str]] = {"access": set(), "lab": {"access"}}
# packages above cluster/ -> the rooms of cluster/ they may import
CLUSTER_USERS: dict[str, set[str]] = {"exporter": {"access"}, "chaos": {"access", "lab"},
                                      "spark_analysis": {"access", "lab"}, "report": {"access", "lab"},
                                      "txnlab": {"access", "lab"}}


def cluster_room_violations(root: Path) -> list[str]:
    """room_violations of cluster/, and every import of a room of cluster/ that a package above may not use."""
    found = room_violations(root / "cluster", CLUSTER_ROOMS)
    for package, may in sorted(CLUSTER_USERS.items()):
        for path in sorted((root / package).rglob("*.py")):
            for other in sorted(imported_rooms(path.read_text(), "cluster") - may):
                found.append(f"{path.relative_to(root)} imports cluster.{other}")
    return found


def test_cluster_keeps_its_rooms_and_the_exporter_uses_access_only():
    assert cluster_room_violations(ROOT) == []


def test_a_planted_import_across_cluster_s_rooms_fails(tmp_path):
    for package in ("cluster/access", "cluster/lab", *CLUSTER_USERS):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "cluster" / "__init__.py").write_text('"""doc"""\n')
    (tmp_path / "cluster" / "access" / "admin.py").write_text("def f():\n    from cluster.lab.local import LocalCluster\n")
    (tmp_path / "cluster" / "lab" / "local.py").write_text("from cluster.access.admin import ClusterAdmin\nfrom . import ports\n")
    (tmp_path / "cluster" / "flat.py").write_text("import os\n")
    (tmp_path / "exporter" / "service.py").write_text("from cluster.access import admin\nfrom cluster.lab import versions\n")
    (tmp_path / "chaos" / "run.py").write_text("import cluster.lab.local\nfrom cluster.access.waiting import wait_until\n")
    assert cluster_room_violations(tmp_path) == [
        "cluster/access/admin.py imports cluster.lab",
        "cluster/flat.py is outside cluster/'s rooms",
        "exporter/service.py imports cluster.lab"]


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


# exporter/access/: the request families behind the one facade; what they may import of the exporter besides themselves
EXPORTER_ACCESS_MAY = {"exporter.readable_lag"}
EXPORTER_ACCESS_FACADE = "exporter/kafka_access.py"


def exporter_modules(source: str) -> set[str]:
    """The exporter modules a module imports, by dotted name (`from exporter import access` names exporter.access)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "exporter":
            found.update(f"exporter.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] == "exporter"}


def exporter_access_violations(root: Path) -> list[str]:
    """Every import of exporter/access/ from a module of the exporter other than the facade, and every import
    of the rest of the exporter (but readable_lag.py) from exporter/access/."""
    found = []
    for path in sorted((root / "exporter").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        inside = rel.startswith("exporter/access/")
        for module in sorted(exporter_modules(path.read_text())):
            into = module == "exporter.access" or module.startswith("exporter.access.")
            if inside and not into and module not in EXPORTER_ACCESS_MAY:
                found.append(f"{rel} imports {module}")
            elif not inside and into and rel != EXPORTER_ACCESS_FACADE:
                found.append(f"{rel} imports {module}")
    return found


def test_the_exporter_s_access_layer_stays_behind_its_facade():
    assert exporter_access_violations(ROOT) == []


def test_a_planted_import_around_the_access_facade_fails(tmp_path):
    (tmp_path / "exporter" / "access").mkdir(parents=True)
    (tmp_path / "exporter" / "kafka_access.py").write_text("from exporter.access.lanes import AdminLanes\n")
    (tmp_path / "exporter" / "service.py").write_text("from exporter import access\n")
    (tmp_path / "exporter" / "access" / "lanes.py").write_text("from exporter.access.results import ItemError\n")
    (tmp_path / "exporter" / "access" / "fetches.py").write_text(
        "from exporter.readable_lag import ReadableRange\ndef f():\n    import exporter.service\n")
    assert exporter_access_violations(tmp_path) == ["exporter/access/fetches.py imports exporter.service",
                                                   "exporter/service.py imports exporter.access"]
