"""The java-copier workload without Kafka: the tools' JSON events -> history operations (hand-written lines
in the 4.3.1 formats, malformed ones included), and the JVM runner on stand-in tool processes."""
from __future__ import annotations

import argparse
import json
import random
import sys
import textwrap

from pathlib import Path

import pytest

from chaos.workloads import java_copier as jc, jvm
from chaos.workloads.base import WorkloadContext
from cluster.access.connection import ConnectionSettings
from cluster.access.waiting import Deadline


# ---- VerifiableProducer -------------------------------------------------------------------------------
def vp_line(name: str, **fields) -> str:
    return json.dumps({"timestamp": 1795308241185, "name": name, **fields}) + "\n"


def test_send_success_is_an_acknowledged_produce_of_the_value_as_id():
    line = vp_line("producer_send_success", key="7", value="123.41", offset=12, topic="in", partition=2)
    assert jc.ProducerEvents().convert(line) == [jvm.Op("ok", "produce", {
        "id": "123.41", "key": "7", "topic": "in", "partition": 2, "offset": 12, "tool_ms": 1795308241185})]


def test_send_success_without_key_keeps_a_null_key():
    line = vp_line("producer_send_success", key=None, value="5.0", offset=0, topic="in", partition=0)
    [op] = jc.ProducerEvents().convert(line)
    assert op.value["key"] is None and op.value["id"] == "5.0"


def test_send_error_is_an_invoke_completed_as_info():
    line = vp_line("producer_send_error", key=None, value="5.3", topic="in",
                   exception="org.apache.kafka.common.errors.TimeoutException", message="Expiring 1 record(s)")
    invoke, info = jc.ProducerEvents().convert(line)
    assert invoke == jvm.Op("invoke", "produce", {"id": "5.3", "key": None, "topic": "in"})
    assert info.type == "info" and info.value["id"] == "5.3"
    assert info.value["error"] == "org.apache.kafka.common.errors.TimeoutException: Expiring 1 record(s)"


@pytest.mark.parametrize("name, fields", [("startup_complete", {}), ("shutdown_complete", {}),
                                          ("tool_data", {"sent": 200, "acked": 199, "target_throughput": 500,
                                                         "avg_throughput": 48.9})])
def test_other_producer_events_are_vp_observations(name, fields):
    [op] = jc.ProducerEvents().convert(vp_line(name, **fields))
    assert op == jvm.Op("ok", "vp", {"event": name, "timestamp": 1795308241185, **fields})


@pytest.mark.parametrize("line, error", [
    ("Option --producer.config has been deprecated", "not JSON"),
    ('{"name": "producer_send_success", "value": "1.0"', "not JSON"),           # torn line
    ("[1, 2]", "not a JSON object"),
    ('{"timestamp": 1}', "KeyError"),                                            # no name
    (vp_line("producer_send_success", key=None, value=None, offset=0, topic="in", partition=0), "without a value"),
    (vp_line("producer_send_success", key=None, value="1.0", offset="x", topic="in", partition=0), "ValueError"),
])
def test_malformed_producer_lines_are_recorded_as_stdout(line, error):
    [op] = jc.ProducerEvents().convert(line)
    assert op.type == "ok" and op.f == "stdout" and error in op.value["error"]
    assert op.value["line"] == line.strip()[:jvm.LINE_LIMIT]


def test_blank_lines_are_skipped_and_long_lines_cut():
    assert jc.ProducerEvents().convert("  \n") == []
    [op] = jc.ProducerEvents().convert("x" * 5000)
    assert len(op.value["line"]) == jvm.LINE_LIMIT


# ---- TransactionalMessageCopier -------------------------------------------------------------------------
def copier_line(stage: str, total: int, consumed: int, remaining: int) -> str:
    return json.dumps({"transactionalId": "r1.java-copier-0", "stage": stage, "time": "2026/11/22 00:44:10:444",
                       "totalProcessed": total, "consumed": consumed, "remaining": remaining}) + "\n"


def copy_events(lines: list[str]) -> list[tuple]:
    events = jc.CopierEvents()
    return [(op.value["event"], op.value["total_processed"], op.value["remaining"], op.value["copied"])
            for line in lines for op in events.convert(line)]


def test_copier_records_each_change_once_with_the_records_copied_since():
    lines = [copier_line("ProcessLoop", 0, 0, jc.LONG_MAX)] * 3 + [
        copier_line("RebalanceComplete", 0, 0, 200), copier_line("ProcessLoop", 0, 0, 200),
        copier_line("ProcessLoop", 50, 50, 150), copier_line("ProcessLoop", 50, 50, 150),
        copier_line("RebalanceComplete", 50, 0, 100), copier_line("ProcessLoop", 150, 100, 0),
        copier_line("ShutdownComplete", 150, 100, 0)]
    assert copy_events(lines) == [("ProcessLoop", 0, None, 0), ("RebalanceComplete", 0, 200, 0),
                                  ("ProcessLoop", 50, 150, 50),
                                  ("RebalanceComplete", 50, 100, 0), ("ProcessLoop", 150, 0, 100),
                                  ("ShutdownComplete", 150, 0, 0)]


def test_copier_event_carries_the_tools_fields():
    [op] = jc.CopierEvents().convert(copier_line("RebalanceComplete", 10, 4, 90))
    assert op == jvm.Op("ok", "copy", {"event": "RebalanceComplete", "transactional_id": "r1.java-copier-0",
                                      "total_processed": 10, "consumed": 4, "remaining": 90, "copied": 10,
                                      "tool_time": "2026/11/22 00:44:10:444"})


@pytest.mark.parametrize("line", ['{"transactionalId": "x", "totalProcessed": 1}',                  # no stage
                                  copier_line("ProcessLoop", 0, 0, 0).replace("0,", '"many",', 1),
                                  '{"progress": "x", "totalProcessed": 0, "remaining": 1}',          # pre-3.x shape
                                  "Shutting down after unexpected error"])
def test_malformed_copier_lines_are_recorded_and_do_not_disturb_the_counters(line):
    events = jc.CopierEvents()
    events.convert(copier_line("ProcessLoop", 50, 50, 0))
    [op] = events.convert(line)
    assert op.f == "stdout" and op.type == "ok"
    [after] = events.convert(copier_line("ProcessLoop", 100, 100, 0))
    assert after.value["copied"] == 50


# ---- command lines and settings ---------------------------------------------------------------------------
def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    jc.add_arguments(parser)
    return parser.parse_args(["--input", "in", "--output", "out", *argv])


class RecordingHistory:
    def __init__(self) -> None:
        self.ops: list[dict] = []

    def record(self, process: str, op_type: str, f: str, value) -> dict:
        op = {"process": process, "type": op_type, "f": f, "value": value}
        self.ops.append(op)
        return op

    def close(self) -> None:
        pass


def context(protocol: str = "PLAINTEXT") -> WorkloadContext:
    sasl = {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"} if "SASL" in protocol else {}
    conn = ConnectionSettings("127.0.0.1:9092", security_protocol=protocol, **sasl)
    return WorkloadContext(conn=conn, history=RecordingHistory(), run_tag="r1", process="java-copier",
                           rng=random.Random(0), deadline=None)


def test_defaults_follow_the_brief():
    args = parsed()
    assert (args.messages, args.throughput, args.transaction_size, args.copiers, args.heap) == \
        (2000, 500, 50, 1, "256m")


def test_copier_args_use_group_mode_group_metadata_and_one_transactional_id_each():
    ctx = context()
    argv = jc.copier_args(ctx, parsed("--transaction-size", "20"), 1)
    assert argv[argv.index("--transactional-id") + 1] == "r1.java-copier-1"
    assert argv[argv.index("--consumer-group") + 1] == "r1.java-copier"
    assert argv[argv.index("--transaction-size") + 1] == "20"
    assert {"--group-mode", "--use-group-metadata"} <= set(argv) and "--enable-random-aborts" not in argv
    assert "--enable-random-aborts" in jc.copier_args(ctx, parsed("--random-aborts", "--group", "g"), 0)


def test_producer_args_and_config(tmp_path):
    ctx = context()
    config = jc.write_producer_config(ctx.conn, tmp_path)
    argv = jc.producer_args(ctx, parsed("--messages", "10", "--keys", "0"), config)
    assert argv[argv.index("--value-prefix") + 1] == str(jc.value_prefix("r1", "java-copier"))
    assert argv[argv.index("--max-messages") + 1] == "10" and "--repeating-keys" not in argv
    props = dict(line.split("=", 1) for line in config.read_text().splitlines())
    assert props["enable.idempotence"] == "true" and props["acks"] == "all" and int(props["retries"]) > 0
    assert props["bootstrap.servers"] == "127.0.0.1:9092" and oct(config.stat().st_mode)[-3:] == "600"


def test_the_client_properties_option_follows_the_release_of_the_jars(monkeypatch):
    """Before 4.2 the VerifiableProducer refuses --command-config (its name from 4.2 on): seen in the matrix on
    4.0.2 and 4.1.1 (`--help` of each release's tool)."""
    assert jc.config_flag("4.0.2") == jc.config_flag("4.1.1") == "--producer.config"
    assert jc.config_flag("4.2.2") == jc.config_flag("4.4.0") == "--command-config"
    monkeypatch.setenv("TXNLAB_KAFKA_VERSION", "4.0.2")
    argv = jc.producer_args(context(), parsed("--messages", "10"), Path("p.properties"))
    assert argv[argv.index("--producer.config") + 1] == "p.properties" and "--command-config" not in argv


def test_value_prefix_is_a_stable_non_negative_int_per_run():
    assert jc.value_prefix("r1", "p") == jc.value_prefix("r1", "p") != jc.value_prefix("r2", "p")
    assert 0 <= jc.value_prefix("r1", "p") < 2**31


def test_counts_below_one_are_refused():
    jc.check_args(parsed())
    with pytest.raises(jc.JavaCopierError, match="--messages, --copiers must be at least 1"):
        jc.check_args(parsed("--messages", "0", "--copiers", "0"))


def test_only_plaintext_connections_are_accepted():
    jc.check_connection(context().conn)
    with pytest.raises(jc.JavaCopierError, match="PLAINTEXT"):
        jc.check_connection(context("SASL_PLAINTEXT").conn)


# ---- the JVM runner, on stand-in tools --------------------------------------------------------------------
def fake_tool(ctx: WorkloadContext, script: str, name: str = "java-copier-0") -> tuple[jvm.JavaTool, list[str]]:
    argv = [sys.executable, "-u", "-c", textwrap.dedent(script)]
    return jvm.JavaTool(ctx, name, "Fake", argv, jc.CopierEvents()), ["--fake"]


def assert_paired(ops: list[dict]) -> None:
    """At most one outstanding invoke per process, every invoke completed."""
    open_invokes: dict[str, dict] = {}
    for op in ops:
        if op["type"] == "invoke":
            assert op["process"] not in open_invokes, op
            open_invokes[op["process"]] = op
        else:
            open_invokes.pop(op["process"], None)
    assert not open_invokes


def test_a_tool_that_exits_is_recorded_from_start_to_exit():
    ctx = context()
    jvm.run_tools(ctx, [fake_tool(ctx, f"""
        print({copier_line("ProcessLoop", 0, 0, 5)!r}, end="")
        print("garbage")
        print({copier_line("ShutdownComplete", 5, 5, 0)!r}, end="")
        """)])
    ops = ctx.history.ops
    assert [(op["process"], op["type"], op["f"]) for op in ops] == [
        ("java-copier-0/jvm", "invoke", "jvm"), ("java-copier-0", "ok", "copy"), ("java-copier-0", "ok", "stdout"),
        ("java-copier-0", "ok", "copy"), ("java-copier-0/jvm", "ok", "jvm")]
    assert ops[0]["value"] == {"tool": "Fake", "args": ["--fake"]}
    assert ops[-1]["value"]["exit_code"] == 0 and ops[-1]["value"]["stopped"] is False
    assert_paired(ops)


def test_a_failing_tool_is_a_fail_with_its_stderr():
    ctx = context()
    jvm.run_tools(ctx, [fake_tool(ctx, "import sys; print('boom', file=sys.stderr); sys.exit(3)")])
    done = ctx.history.ops[-1]
    assert done["type"] == "fail" and done["value"]["exit_code"] == 3 and done["value"]["stderr_tail"] == ["boom"]


def test_stopping_terminates_the_tools_and_drains_what_they_print_on_the_way_out(monkeypatch):
    monkeypatch.setattr(jvm, "STOP_GRACE_S", 1.0)
    ctx = context()
    ctx.deadline = Deadline(2.0)                             # time enough to install the handler
    polite = fake_tool(ctx, f"""
        import signal, sys, time
        def bye(*_):
            print({copier_line("ShutdownComplete", 0, 0, 0)!r}, end="")
            sys.exit(143)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(60)
        """, "java-copier-0")
    stubborn = fake_tool(ctx, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
        """, "java-copier-1")
    jvm.run_tools(ctx, [polite, stubborn])
    ends = {op["process"]: op["value"] for op in ctx.history.ops if op["f"] == "jvm" and op["type"] != "invoke"}
    assert ends["java-copier-0/jvm"]["stopped"] and ends["java-copier-1/jvm"]["signal"] == "SIGKILL"
    assert ends["java-copier-0/jvm"]["exit_code"] in (143, -15)         # -15: SIGTERM beat the handler
    if ends["java-copier-0/jvm"]["exit_code"] == 143:
        assert any(op["f"] == "copy" and op["value"]["event"] == "ShutdownComplete" for op in ctx.history.ops)
    assert not polite[0].running() and not stubborn[0].running()
    assert_paired(ctx.history.ops)


def test_a_tool_that_cannot_start_is_a_fail():
    ctx = context()
    tool = jvm.JavaTool(ctx, "java-vp", "Fake", ["/nonexistent/java"], jc.ProducerEvents())
    jvm.run_tools(ctx, [(tool, [])])
    assert [op["type"] for op in ctx.history.ops] == ["invoke", "fail"]
    assert "FileNotFoundError" in ctx.history.ops[-1]["value"]["error"]
