"""Workload plans (what `txnlab chaos workload NAME` starts) and the workload helpers' pure logic."""
from __future__ import annotations

import argparse
import random
import threading
import time

import pytest

from chaos.workloads.plans import plan
from chaos.runner.solo import _topics_of
from chaos.workloads import WORKLOADS
from chaos.workloads.base import Pacer, error_text
from chaos.workloads.confluent.txn_producer import TransactionalWorker, add_arguments


def test_every_workload_has_a_plan_with_unique_processes():
    for name in WORKLOADS:
        extra = ["--topics", "x"] if name == "observer" else []
        the_plan = plan(name, "rtag", 2, extra)
        processes = [s.process for s in the_plan.specs]
        assert len(processes) == len(set(processes)) and all("." not in p for p in processes)
        assert all(s.workload in WORKLOADS for s in the_plan.specs)


def test_apart_leads_every_output_partition_by_another_broker_than_the_same_inputs_partition():
    from cluster.access.smoke import shifted_assignment
    the_plan = plan("streams", "rtag", 2, [])
    shifts = the_plan.leader_shifts("apart")
    assert shifts == {"rtag-sin-a": 0, "rtag-sin-b": 0, "rtag-sout": 1, "rtag-scounts": 1}
    assert the_plan.leader_shifts("kafka") == {}
    brokers = [4, 1, 7]
    for n_brokers in (1, 2, 3):
        ids = sorted(brokers[:n_brokers])
        inputs, outputs = (shifted_assignment(ids, 6, shift, min(3, n_brokers)) for shift in (0, 1))
        assert all(len(set(r)) == len(r) == min(3, n_brokers) for r in inputs + outputs)   # no broker twice
        if n_brokers > 1:
            assert all(i[0] != o[0] for i, o in zip(inputs, outputs))      # partition p: two leaders
        assert sorted(r[0] for r in outputs) == sorted(ids * (6 // n_brokers))  # leaders spread evenly
    assert shifted_assignment([1, 2, 3], 3, 1, 2) == [[2, 3], [3, 1], [1, 2]]


def test_processor_is_fed_by_a_transactional_producer_and_writes_its_own_output():
    the_plan = plan("processor", "rtag", 3, ["--batch", "20"])
    assert [s.process for s in the_plan.specs] == ["feeder", "eos-0", "eos-1", "eos-2"]
    feeder, first = the_plan.specs[0], the_plan.specs[1]
    assert feeder.args[:3] == ("--topics", "rtag-in-a", "rtag-in-b")
    assert first.args == ("--inputs", "rtag-in-a", "rtag-in-b", "--output", "rtag-out", "--batch", "20")
    assert set(the_plan.topics) == {"rtag-in-a", "rtag-in-b", "rtag-out"}


def test_txn_producer_plan_includes_both_observers():
    processes = [s.process for s in plan("txn-producer", "rtag", 2, []).specs]
    assert processes == ["txp-0", "txp-1", "obs-rc", "obs-ru"]


def test_unknown_workload_and_observer_without_topics():
    with pytest.raises(ValueError, match="unknown workload"):
        plan("nope", "r", 1, [])
    with pytest.raises(ValueError, match="needs the topics"):
        plan("observer", "r", 1, ["--isolation", "read_committed"])
    assert _topics_of(["--topics", "a", "b", "--batch", "3"]) == ["a", "b"]


def test_pacer_holds_the_rate():
    stop = threading.Event()
    pacer = Pacer(50.0, stop)
    started = time.monotonic()
    for _ in range(10):
        pacer.wait()
    assert 0.15 <= time.monotonic() - started < 1.0
    unbounded = Pacer(0, stop)
    started = time.monotonic()
    unbounded.wait()
    assert time.monotonic() - started < 0.01


def test_transaction_plan_is_deterministic_given_the_seed():
    args = argparse.ArgumentParser()
    add_arguments(args)
    parsed = args.parse_args(["--topics", "a", "b", "--records", "5"])

    def planned(seed: int) -> list:
        worker = TransactionalWorker.__new__(TransactionalWorker)
        worker.ctx = argparse.Namespace(rng=random.Random(seed), run_tag="r", process="txp-0")
        worker.args, worker.partitions, worker.attempt_no = parsed, {"a": 6, "b": 3}, 4
        return worker.plan("r.txp-0.4")
    first = planned(1)
    assert first == planned(1) and first != planned(2)
    assert [w["topic"] for w in first] == ["a", "b", "a", "b", "a"]
    assert [w["id"] for w in first] == [f"r.txp-0.4.{i}" for i in range(5)]
    assert all(0 <= w["partition"] < (6 if w["topic"] == "a" else 3) for w in first)


def test_error_text_names_kafka_errors():
    from confluent_kafka import KafkaError, KafkaException
    assert error_text(KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow"))).startswith("_TIMED_OUT")
    assert error_text(ValueError("x")) == "ValueError: x"
