"""Choosing a workload's Kafka client: `--client` read off a workload's arguments, planned onto a workload's own
processes only, a spec's `client:` and `txnlab chaos run --client` (with_client), refused where it cannot run, and
each client's pin in versions.env agreeing with its source's manifest."""
from __future__ import annotations

import pytest

from chaos.workloads.plans import PlanError, plan
from chaos.runner.spec import SpecError, load_spec, parse_spec, with_client
from chaos.workloads.native import REFERENCE, ClientError, clients, split_client
from cluster.clients import CLIENTS
from tests.unit.test_spec import minimal_spec, problems_of


def test_the_clients_are_the_reference_and_each_native_one():
    assert clients() == (REFERENCE, "java", "franz-go", "kafkajs")


@pytest.mark.parametrize("argv, client, rest", [
    (["--topics", "a", "b"], REFERENCE, ["--topics", "a", "b"]),
    (["--client", "franz-go", "--topics", "a", "b"], "franz-go", ["--topics", "a", "b"]),
    (["--topics", "a", "b", "--client=kafkajs"], "kafkajs", ["--topics", "a", "b"]),
    (["--client", "kafkajs", "--client", "confluent"], REFERENCE, []),          # argparse's last one wins
])
def test_split_client_takes_the_client_off_the_workload_s_arguments(argv, client, rest):
    assert split_client("txn-producer", argv) == (client, rest)


def test_an_unknown_client_or_a_workload_it_cannot_run_is_refused():
    with pytest.raises(ClientError, match="one of confluent, java, franz-go, kafkajs"):
        split_client("processor", ["--client", "sarama"])
    with pytest.raises(ClientError, match="runs on confluent only"):
        split_client("observer", ["--client", "franz-go"])
    with pytest.raises(PlanError, match="runs on confluent only"):
        plan("streams", "t", 1, [], client="kafkajs")


def test_a_client_is_planned_onto_the_workload_s_own_processes_not_its_feeder_or_observers():
    processor = plan("processor", "t", 2, ["--batch", "5"], client="franz-go")
    args = {s.process: s.args for s in processor.specs}
    assert "--client" not in args["feeder"]
    assert args["eos-0"][-4:] == ("--batch", "5", "--client", "franz-go") and "--client" in args["eos-1"]
    producer = {s.process: s.args for s in plan("txn-producer", "t", 1, [], client="kafkajs").specs}
    assert "kafkajs" in producer["txp-0"] and not any("--client" in producer[o] for o in ("obs-rc", "obs-ru"))
    assert all("--client" not in s.args for s in plan("processor", "t", 1, []).specs)     # the reference: nothing


def test_a_spec_names_a_workload_s_client_and_a_bad_one_is_refused_by_field():
    spec = parse_spec(minimal_spec(workloads=[{"workload": "txn-producer", "client": "franz-go"}]))
    assert spec.workloads[0].client == "franz-go" and "--client" in spec.processes()[0].args
    assert "workloads[0].client" in problems_of(minimal_spec(workloads=[{"workload": "txn-producer", "client": "x"}]))
    assert "workloads[0].client" in problems_of(minimal_spec(workloads=[{"workload": "storm", "client": "kafkajs"}]))


def test_with_client_puts_every_transactional_workload_of_a_spec_on_the_client_short_mode_included():
    spec = load_spec("coordinator-kill", short=True, client="kafkajs")
    assert [w.client for w in spec.workloads] == ["kafkajs"]
    assert load_spec("zombie-producer", client="franz-go").workloads[0].client == "franz-go"
    data = minimal_spec(workloads=[{"workload": "storm"}])
    with pytest.raises(SpecError, match="no txn-producer or processor workload to run on franz-go"):
        with_client(data, "franz-go")
    assert "client" not in minimal_spec()["workloads"][0]                     # the document given is not changed


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_each_client_s_pin_agrees_with_its_source_s_manifest(name):
    client = CLIENTS[name]
    assert client.version and client.manifest_version() == client.version, (client.source, client.pin)
