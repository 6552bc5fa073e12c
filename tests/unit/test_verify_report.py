"""The verdict rules, the run files a verification needs, the HTML page, and how spark-submit is called."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from spark_analysis import page, submit, verdict
from spark_analysis.evidence import load_run_files


def test_any_anomaly_makes_the_run_invalid_and_missing_evidence_makes_it_unknown_never_valid():
    assert verdict.overall({"a": {"valid": True}, "b": {"valid": True}}) is True
    assert verdict.overall({"a": {"valid": True}, "b": {"valid": False}, "c": {"valid": "unknown"}}) is False
    assert verdict.overall({"a": {"valid": True}, "b": {"valid": "unknown"}}) == "unknown"
    assert [verdict.exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]


def test_incomplete_evidence_leaves_every_check_unknown():
    report = verdict.unknown_checks(["topic t no longer exists"])
    assert {c["valid"] for c in report["checks"].values()} == {"unknown"}
    assert set(report["checks"]) == {c.name for c in verdict.CHECKS}
    assert verdict.overall(report["checks"]) == "unknown"


def test_a_run_that_did_not_finish_is_a_gap(tmp_path):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("{}\n")
    evidence = load_run_files(tmp_path)
    assert not evidence.complete and "end_offsets.json" in evidence.gaps[0]
    (tmp_path / "end_offsets.json").write_text(json.dumps({"t": {"0": {"hwm": 3, "lso": 3}}}))
    assert load_run_files(tmp_path).complete and load_run_files(tmp_path).group_offsets == {}


def report(valid, gaps=()):
    checks = verdict.unknown_checks(list(gaps))["checks"] if gaps else {
        c.name: {"valid": True, "count": 0, "description": c.description, "examples": [], "seconds": 0.1}
        for c in verdict.CHECKS}
    if valid is False:
        checks["duplicate"] = {"valid": False, "count": 1, "description": "d", "seconds": 0.1,
                               "examples": [{"id": "r.p.0.<1>", "copies": 2, "positions": [{"offset": 1}]}]}
    return {"run": "/runs/x", "valid": valid, "evidence": {"complete": not gaps, "gaps": list(gaps)},
            "counts": {"operations": 5, "records": {"read_committed": 3}}, "checks": checks,
            "info_attempts": {"committed": 1, "aborted": 0, "torn": 0}, "unrecognised": {"count": 0, "examples": []},
            "topics": ["t"], "seconds": 1.0}


def test_the_page_shows_the_verdict_the_checks_and_escaped_examples():
    html = page.render(report(False))
    assert ">anomalies<" in html and "duplicate" in html and "r.p.0.&lt;1&gt;" in html and "<1>" not in html
    assert "records.read_committed" in html
    unknown = page.render(report("unknown", gaps=["topic t no longer exists"]))
    assert ">unknown<" in unknown and "topic t no longer exists" in unknown


def test_the_page_says_where_the_views_were_read():
    assert "topics t (read from the run's archive, offline);" in page.render({**report(True), "views_from": "archive"})
    assert "topics t (read from the cluster);" in page.render({**report(True), "views_from": "kafka"})
    assert "topics t; " in page.render(report(True))                  # a report from before the archive


def test_only_connector_jars_pyspark_lacks_are_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(submit, "connector_dir", lambda: tmp_path)
    with pytest.raises(submit.SetupError, match="make setup"):
        submit.connector_jars()
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar", "scala-library-2.13.15.jar"):
        (tmp_path / name).write_text("")
    assert [j.name for j in submit.connector_jars()] == ["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]
    assert submit._artifact(Path("commons-pool2-2.13.1.jar")) == "commons-pool2"


def test_the_command_keeps_the_driver_on_loopback_and_secrets_off_the_command_line(tmp_path, monkeypatch):
    from cluster.access.connection import ConnectionSettings
    monkeypatch.setattr(submit, "connector_jars", lambda: [Path("/j/a.jar"), Path("/j/b.jar")])
    cmd = submit.command(tmp_path, master="spark://127.0.0.1:7077", conf=("spark.executor.memory=1g",))
    assert cmd[cmd.index("--master") + 1] == "spark://127.0.0.1:7077" and "/j/a.jar,/j/b.jar" in cmd
    assert "spark.driver.bindAddress=127.0.0.1" in cmd and "spark.executor.memory=1g" in cmd
    conn = ConnectionSettings(bootstrap="127.0.0.1:9093", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_username="u", sasl_password="s3cret")
    env = submit.environment(conn)
    assert env["TXNLAB_KAFKA_SASL_PASSWORD"] == "s3cret" and not any("s3cret" in part for part in cmd)


def test_small_runs_get_a_c1_only_driver_and_large_or_unreadable_ones_do_not(tmp_path):
    def run(name: str, hwms: list[int] | None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        if hwms is not None:
            ends = {"t": {str(i): {"lso": h, "hwm": h} for i, h in enumerate(hwms)}}
            (folder / "end_offsets.json").write_text(json.dumps(ends))
        return folder
    small, large, missing = run("small", [2_000, 3_000]), run("large", [150_000, 100_000]), run("missing", None)
    (broken := run("broken", None)).joinpath("end_offsets.json").write_text('{"t": [1, 2]}')
    assert submit.recorded_records([small, large]) == 255_000
    assert submit.recorded_records(missing) is None and submit.recorded_records(broken) is None
    assert "-XX:TieredStopAtLevel=1" in submit.driver_java_options(small)
    for runs in (large, [small, large], [small, missing], broken):
        options = submit.driver_java_options(runs)
        assert "TieredStopAtLevel" not in options and "log4j2.configurationFile=file:" in options, runs
    cmd = submit.command(small)
    assert cmd[cmd.index("--driver-java-options") + 1] == submit.driver_java_options(small)


def test_the_driver_class_archive_is_written_once_then_mapped_and_never_half_written(tmp_path, monkeypatch):
    """First verification: the JVM writes the archive to a temporary name, renamed when the job ran its checks
    (exit 0 or 1); later ones map it; a killed job, or one that may have ended early (exit 2), leaves none. Its name follows what it is made of."""
    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_text("x")
    monkeypatch.setattr(submit, "pyspark_home", lambda: tmp_path / "pyspark")
    monkeypatch.setattr(submit, "connector_jars", lambda: [Path("/j/spark-sql-kafka.jar")])
    monkeypatch.setattr(submit, "txnlab_home", lambda: tmp_path / "home")
    monkeypatch.setattr(submit, "check_reachable", lambda runs, conn: None)
    monkeypatch.delenv("TXNLAB_SPARK_REMOTE", raising=False)     # spark-submit's path (the suite's server is not)
    monkeypatch.setenv("TXNLAB_CLASS_ARCHIVES", "write")          # the suite's own JVMs only map (tests/conftest.py)
    archive = submit.class_archive()
    (jars / "spark-sql.jar").write_text("y")
    assert submit.class_archive() != archive                 # other jars, another archive
    archive = submit.class_archive()
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    seen = []

    def spark_submit(code):
        def fake(cmd, env, stdout):
            options = cmd[cmd.index("--driver-java-options") + 1].split()
            seen.append([o for o in options if "Archive" in o])
            for o in options:
                if o.startswith("-XX:ArchiveClassesAtExit="):
                    Path(o.split("=", 1)[1]).write_bytes(b"classes")
            return subprocess.CompletedProcess(cmd, code)
        return fake
    monkeypatch.setattr(submit.subprocess, "run", spark_submit(-9))
    assert submit.run(run, None) == -9
    assert not archive.exists() and not list(archive.parent.glob("*.tmp"))
    monkeypatch.setattr(submit.subprocess, "run", spark_submit(2))     # may have ended before its checks ran
    assert submit.run(run, None) == 2
    assert not archive.exists() and not list(archive.parent.glob("*.tmp"))
    monkeypatch.setattr(submit.subprocess, "run", spark_submit(1))
    assert submit.run(run, None) == 1
    assert archive.read_bytes() == b"classes" and not list(archive.parent.glob("*.tmp"))
    assert seen[2][0].startswith("-XX:ArchiveClassesAtExit=") and seen[2][0].endswith(".tmp")
    assert submit.run(run, None) == 1
    assert seen[3] == [f"-XX:SharedArchiveFile={archive}"]
    monkeypatch.setenv("TXNLAB_CLASS_ARCHIVES", "map")           # map what exists, write nothing
    assert submit.run(run, None) == 1 and seen[4] == [f"-XX:SharedArchiveFile={archive}"]
    archive.unlink()
    assert submit.run(run, None) == 1 and seen[5] == [] and not list(archive.parent.iterdir())
    monkeypatch.setenv("TXNLAB_CLASS_ARCHIVES", "yes")
    with pytest.raises(submit.SetupError, match="TXNLAB_CLASS_ARCHIVES is 'yes': write"):
        submit.run(run, None)


def test_a_run_without_any_bootstrap_is_a_one_line_error_not_a_crash(tmp_path, monkeypatch):
    from spark_analysis import job
    monkeypatch.delenv("TXNLAB_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(job.JobError, match="no Kafka bootstrap"):
        job.connection(tmp_path, None)
    (tmp_path / "cluster.json").write_text(json.dumps({"bootstrap": "127.0.0.1:9"}))
    assert job.connection(tmp_path, None).bootstrap == "127.0.0.1:9"


class _FakeSpark:
    def stop(self):
        pass


def test_a_crashing_job_exits_2_never_1(monkeypatch, tmp_path, capsys):
    from spark_analysis import job

    def boom(spark, run_dir, args, conn=None):
        raise RuntimeError("spark fell over")
    monkeypatch.setattr(job, "session", lambda remote, conf: _FakeSpark())
    monkeypatch.setattr(job, "verify", boom)
    assert job.main([str(tmp_path)]) == 2
    assert "spark fell over" in capsys.readouterr().err


def test_several_runs_share_one_session_and_exit_with_the_worst(monkeypatch, tmp_path):
    from spark_analysis import job
    sessions, seen = [], []

    def fake_verify(spark, run_dir, args, conn=None):
        seen.append((spark, run_dir.name))
        if run_dir.name == "broken":
            raise job.JobError("no history")
        good = run_dir.name == "good"
        check = {"valid": good, "count": 0 if good else 1, "description": "one id at two offsets", "examples": []}
        return {"run": str(run_dir), "valid": good, "topics": ["t"], "seconds": 1.0, "counts": {"records": 3},
                "evidence": {"complete": True, "gaps": []}, "checks": {"duplicates": check}}
    monkeypatch.setattr(job, "session", lambda remote, conf: sessions.append(_FakeSpark()) or sessions[-1])
    monkeypatch.setattr(job, "verify", fake_verify)
    runs = [tmp_path / name for name in ("good", "bad", "broken")]
    assert job.main([str(r) for r in runs[:2]]) == 1
    assert job.main([str(r) for r in runs]) == 2
    assert len(sessions) == 2 and {s for s, _ in seen[:2]} == {sessions[0]}
    assert json.loads((runs[0] / "verify" / "report.json").read_text())["valid"] is True
    assert json.loads((runs[1] / "verify" / "report.json").read_text())["valid"] is False
    assert not (runs[2] / "verify").exists()
    with pytest.raises(SystemExit):
        job.parse_args([str(runs[0]), str(runs[1]), "--out", str(tmp_path / "o")])


def test_shuffle_partitions_are_sized_to_the_run():
    from spark_analysis.job import RECORDS_PER_SHUFFLE_PARTITION, SHUFFLE_PARTITIONS_MAX, sized_partitions
    assert sized_partitions(5_000, 2) == 2                     # a demo-size run: one per core
    assert sized_partitions(10_000_000, 2) == -(-10_000_000 // RECORDS_PER_SHUFFLE_PARTITION) == 50
    assert sized_partitions(0, 4) == 4
    assert sized_partitions(10**12, 2) == SHUFFLE_PARTITIONS_MAX


def test_a_small_run_is_checked_in_one_partition_without_code_generation_and_a_large_one_with_both():
    from spark_analysis.job import CODEGEN, HISTORY_BATCH_ROWS, ONE_PARTITION_BELOW, SHUFFLE, sized_settings
    from spark_analysis.submit import SMALL_RUNS_RECORDS

    def never() -> int:
        raise AssertionError("a small run needs no parallelism (a query on Spark Connect)")
    small = sized_settings(5_000, never)
    assert small[SHUFFLE] == "1" and small == {SHUFFLE: "1", **CODEGEN[False], **HISTORY_BATCH_ROWS}
    assert small["spark.sql.codegen.wholeStage"] == "false"
    assert sized_settings(ONE_PARTITION_BELOW, lambda: 2)[SHUFFLE] == "2"
    middle = sized_settings(SMALL_RUNS_RECORDS - 1, lambda: 2)
    assert middle == {SHUFFLE: "2", **CODEGEN[False], **HISTORY_BATCH_ROWS}
    large = sized_settings(10_000_000, lambda: 2)
    assert large == {SHUFFLE: "50", "spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK",
                     "spark.sql.parquet.columnarReaderBatchSize": "256"}


def test_the_views_consumers_share_a_group_per_connection_and_isolation_never_naming_the_password():
    from spark_analysis.load import consumer_group
    plain = {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "PLAINTEXT"}
    sasl = {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.jaas.config": 'x required username="u" password="s3cret";'}
    assert consumer_group(plain, "read_committed") == consumer_group(dict(plain), "read_committed")
    assert consumer_group(plain, "read_committed") != consumer_group(plain, "read_uncommitted")   # one pool per view
    assert consumer_group(plain, "read_committed") != consumer_group(sasl, "read_committed")
    other_password = {**sasl, "kafka.sasl.jaas.config": 'x required username="u" password="other";'}
    other_user = {**sasl, "kafka.sasl.jaas.config": 'x required username="v" password="s3cret";'}
    assert consumer_group(sasl, "read_committed") == consumer_group(other_password, "read_committed")
    assert consumer_group(sasl, "read_committed") != consumer_group(other_user, "read_committed")
    assert consumer_group(sasl, "read_committed").startswith("spark-kafka-relation-")   # the connector's ACL prefix
