"""Test-suite wide rules: every test carries its tier's marker (unit, corpus, live: docs/testing.md); in CI a
skipped test is a failure (an integration test needs the real cluster; the unit
tests that skip without Go, Node.js or a JDK check clients set-up builds with them); JVMs map the class archives
that exist and write none (spark_analysis/submit.py writes_class_archives: on a clean clone each write cost 40-75 s at a JVM's
exit, for nothing after it in the session to map; the unit tests of the archives set "write" themselves)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest


os.environ.setdefault("TXNLAB_CLASS_ARCHIVES", "map")


def pytest_configure(config):
    """SIGTERM ends the session as Ctrl-C does: pytest stops where it is and every fixture's teardown runs (the
    clusters a session started are stopped). scripts/gate.sh stops its background streams so."""
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)


TIERS = {"unit": "unit", "corpus": "corpus", "integration": "live"}     # tests/<folder> -> its tier's marker


def pytest_collection_modifyitems(config, items):
    """Each test carries its tier's marker (docs/testing.md), from the folder it lives in: `-m unit`, `-m corpus`,
    `-m live` select a tier. A live test marked `campaign` left the gate: it is of the campaign's tier only (the
    default `-m 'not campaign'` of pyproject.toml leaves it out; `-m campaign` runs it)."""
    for item in items:
        parts = item.path.relative_to(config.rootpath).parts
        tier = TIERS.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None
        if tier and not item.get_closest_marker("campaign"):
            item.add_marker(tier)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        report.outcome = "failed"
        report.longrepr = f"test skipped in CI (a skip there is a failure): {report.longrepr}"


def machine_cpu_s() -> float:
    """CPU seconds the whole machine spent busy since boot (/proc/stat: every state but idle and iowait)."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With $TXNLAB_CPU_LOG set, one JSON line per test appended to that file: its wall seconds (set-up, call and
    teardown, module fixtures included where they run) and the machine's busy CPU seconds meanwhile: where the
    gate's cores go (docs/testing.md). Machine-wide: run one tier alone for a tier's figures."""
    path = os.environ.get("TXNLAB_CPU_LOG")
    if not path:
        yield
        return
    wall, cpu = time.monotonic(), machine_cpu_s()
    yield
    with open(path, "a") as out:
        out.write(json.dumps({"test": item.nodeid, "wall_s": round(time.monotonic() - wall, 1),
                              "cpu_s": round(machine_cpu_s() - cpu, 1)}) + "\n")
