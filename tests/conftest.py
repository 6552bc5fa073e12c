"""Test-suite wide rules: in CI a skipped integration test is a failure."""
from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and "integration" in str(item.fspath):
        report.outcome = "failed"
        report.longrepr = f"integration test skipped in CI (a skip there is a failure): {report.longrepr}"
