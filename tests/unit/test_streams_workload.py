"""The streams workload without Kafka: its options, the application's settings (no secret on a command
line), the JVM's events -> history operations, and the plan's topics."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from chaos.workloads.plans import plan
from chaos.workloads import streams


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    streams.add_arguments(p)
    return p.parse_args(["--inputs", "a", "b", "--output", "o", "--counts", "c", *argv])


def test_settings_carry_the_options_and_extra_client_settings():
    args = parse("--config", "producer.delivery.timeout.ms=6000", "--commit-interval-ms", "50")
    streams.check_args(args)
    ctx = type("Ctx", (), {"run_tag": "r1", "process": "streams-0",
                           "conn": type("Conn", (), {"java_properties": lambda self: {"bootstrap.servers": "b:1",
                                                                                       "sasl.jaas.config": "secret"}})()})()
    got = streams.settings(ctx, args, Path("/tmp/s"))
    assert got["application.id"] == "r1.streams" and got["processing.guarantee"] == "exactly_once_v2"
    assert got["producer.delivery.timeout.ms"] == "6000" and got["commit.interval.ms"] == "50"
    assert got["txnlab.inputs"] == "a,b" and got["txnlab.instance"] == "streams-0"
    assert got["sasl.jaas.config"] == "secret"           # into the 0600 properties file, never the argv
    assert got["consumer.session.timeout.ms"] == "10000" and "group.protocol" not in got
    kip1071 = streams.settings(ctx, parse("--group-protocol", "streams"), Path("/tmp/s"))
    assert kip1071["group.protocol"] == "streams"       # its session is the broker's group.streams.session.timeout.ms
    assert "consumer.session.timeout.ms" not in kip1071


@pytest.mark.parametrize("bad, message", [
    (["--config", "no-equals"], "expected KEY=VALUE"),
    (["--config", "application.id=x"], "set by the workload itself"),
    (["--config", "sasl.jaas.config=x"], "set by the workload itself"),
    (["--commit-interval-ms", "0"], "--commit-interval-ms must be at least 1"),
    (["--application-id", " "], "may not be empty"),
])
def test_bad_options_are_refused_before_anything_starts(bad, message):
    with pytest.raises(streams.StreamsWorkloadError, match=message):
        streams.check_args(parse(*bad))


def test_events_become_observations_and_garbage_stays_readable():
    events = streams.StreamsEvents()
    line = json.dumps({"event": "tasks", "active": ["0_1"], "standby": [], "time": 5}) + "\n"
    [op] = events.convert(line)
    assert (op.type, op.f, op.value) == ("ok", "streams", {"event": "tasks", "active": ["0_1"], "standby": [],
                                                           "tool_ms": 5})
    [junk] = events.convert("log4j says hello\n")
    assert (junk.f, junk.value["error"]) == ("stdout", "not JSON")


def test_the_plan_tracks_the_changelog_streams_creates_itself():
    the_plan = plan("streams", "r9", 2, ["--application-id", "app"])
    assert the_plan.tracked == ("app-counts-changelog",)
    assert sorted(the_plan.topics) == ["r9-scounts", "r9-sin-a", "r9-sin-b", "r9-sout"]
    feeder, *instances = the_plan.specs
    assert feeder.workload == "txn-producer" and "--keys" in feeder.args
    assert [s.process for s in instances] == ["streams-0", "streams-1"]
    assert streams.topology("r9", parse())["changelog"] == "r9.streams-counts-changelog"


def test_the_keyed_feeder_puts_each_key_in_one_partition_number_of_both_topics():
    from chaos.workloads.confluent import txn_producer
    worker = txn_producer.TransactionalWorker.__new__(txn_producer.TransactionalWorker)
    worker.args = argparse.Namespace(records=50, topics=["a", "b"], keys=16)
    worker.partitions = {"a": 6, "b": 6}
    worker.attempt_no = 3
    worker.ctx = type("Ctx", (), {"run_tag": "r1", "process": "feeder", "rng": None})()
    writes = worker.plan("r1.feeder.3")
    partitions: dict[str, set] = {}
    for w in writes:
        assert w["key"] == f"k{txn_producer.key_number(w['id'], 16)}"
        partitions.setdefault(w["key"], set()).add(w["partition"])
    assert len(partitions) > 5 and all(len(ps) == 1 for ps in partitions.values())
    assert {w["topic"] for w in writes} == {"a", "b"}
