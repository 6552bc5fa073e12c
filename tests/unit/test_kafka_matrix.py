"""scripts/kafka_matrix.py: reading pytest's JUnit report into the matrix's table."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka_matrix.py"
spec = importlib.util.spec_from_file_location("kafka_matrix", SCRIPT)
matrix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matrix)

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1"
skipped="1" tests="5"><testcase classname="tests.integration.test_abort" name="test_ok"/>
<testcase classname="tests.integration.test_abort" name="test_bad"><failure message="x"/></testcase>
<testcase classname="tests.integration.test_exporter" name="test_setup"><error message="y"/></testcase>
<testcase classname="tests.integration.test_exporter" name="test_skip"><skipped/></testcase>
<testcase classname="tests.integration.test_exporter" name="test_fine"/></testsuite></testsuites>"""


def test_a_junit_report_becomes_counts_and_the_failing_tests(tmp_path):
    (tmp_path / "j.xml").write_text(JUNIT)
    got = matrix.junit_summary(tmp_path / "j.xml")
    assert got == {"passed": 2, "failed": 1, "errors": 1, "skipped": 1,
                   "failing": ["test_abort::test_bad", "test_exporter::test_setup"]}


def test_the_table_has_a_row_per_release_and_says_why_one_did_not_run():
    rows = [{"release": "4.4.0", "ran": True, "exit": 0, "minutes": 9.5, "passed": 22, "failed": 0, "errors": 0,
             "skipped": 0, "failing": []},
            {"release": "4.0.2", "ran": False, "minutes": 0.2, "error": "InstallError: maven could not"}]
    lines = matrix.table(rows).splitlines()
    assert lines[2] == "| 4.4.0 | 22 | 0 | 0 | 0 | 9.5 | - |"
    assert lines[3] == "| 4.0.2 | - | - | - | - | 0.2 | did not run: InstallError: maven could not |"
