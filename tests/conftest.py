"""Test-suite wide rules: every test carries its tier's marker (unit, corpus, live: docs/testing.md); in CI a
skipped test is a failure (an integration test needs the real cluster; the unit
tests that skip without Go, Node.js or a JDK check clients set-up builds with them); JVMs map the class archives
that exist and write none (spark_analysis/submit.py writes_class_archives: on a clean clone each write cost 40-75 s at a JVM's
exit, for nothing after it in the session to map; the unit tests of the archives set "write" themselves)."""
from __future__ import annotations

import os

import pytest


os.environ.setdefault("TXNLAB_CLASS_ARCHIVES", "map")


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
