"""Test-suite wide rules: in CI a skipped integration test is a failure; JVMs map the class archives that exist and
write none (spark_analysis/submit.py writes_class_archives: on a clean clone each write cost 40-75 s at a JVM's
exit, for nothing after it in the session to map; the unit tests of the archives set "write" themselves)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TXNLAB_CLASS_ARCHIVES", "map")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and "integration" in str(item.fspath):
        report.outcome = "failed"
        report.longrepr = f"integration test skipped in CI (a skip there is a failure): {report.longrepr}"
