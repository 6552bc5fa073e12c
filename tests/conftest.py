"""Test-suite wide rules: every test carries its tier's marker (unit, corpus, live: docs/testing.md); in CI a
skipped test is a failure (an integration test needs the real cluster; the unit
tests that skip without Go, Node.js or a JDK check clients set-up builds with them); JVMs map the class archives
that exist and write none (spark_analysis/submit.py writes_class_archives: on a clean clone each write cost 40-75 s at a JVM's
exit, for nothing after it in the session to map; the unit tests of the archives set "write" themselves)."""
from __future__ import annotations

import os

import pytest

from cluster.versions import txnlab_home

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


SPARK_CONNECT_BASE_PORT = 31800     # the session's Spark Connect server listens at +30


@pytest.fixture(scope="session")
def spark_remote():
    """One Spark Connect server (local[*]) for the whole session: every `txnlab verify` of the live tests (and of
    the demo's and bug runs they start) is its client through $TXNLAB_SPARK_REMOTE, so none pays a JVM start (the
    corpus verifies by spark-submit, the gate's proof of that backend); stopped by its pid at the end. Its URL, or that of $TXNLAB_SPARK_REMOTE when given."""
    from spark_analysis.standalone import SharedConnect
    shared = SharedConnect(txnlab_home() / "test-spark-connect", SPARK_CONNECT_BASE_PORT,
                           progress=lambda line: print(f"[spark-connect] {line}")).start()
    remote = shared.remote()         # "" when it could not start: each verify then runs spark-submit (slower);
    saved = os.environ.get("TXNLAB_SPARK_REMOTE")      # test_verify's remote test fails on its own then
    os.environ["TXNLAB_SPARK_REMOTE"] = remote
    yield remote
    if saved is None:
        os.environ.pop("TXNLAB_SPARK_REMOTE", None)
    shared.stop()
