"""Every fault kind on the real local cluster: start it, see its real effect, heal it, see it gone.

Broker faults act through LocalBackend on the session cluster (heal_after restores it even when a
test fails); workload faults act on the processes of a real chaos.workloads.run.Run; the hanging transaction
is injected on the drill cluster and aborted by the heal.
"""
from __future__ import annotations

import json
import random
import time

import pytest
from kafka.errors import KafkaError

from chaos.nemesis.backends import LocalBackend, answers
from chaos.nemesis.faults import FaultEnv, make_fault
from chaos.record.history import read_history
from chaos.workloads.plans import WorkloadSpec, option_value, plan
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from cluster.access.admin import transaction_state_partition
from cluster.access.reads import partition_offsets, read_to_end, topic_partitions
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until

pytestmark = pytest.mark.cluster


@pytest.fixture
def env(heal_after, conn):
    """A FaultEnv on the session cluster, without a run."""
    return FaultEnv(LocalBackend(heal_after), None, conn, random.Random(11), new_run_tag())


@pytest.fixture
def run(conn, tmp_path):
    tag = new_run_tag()
    with Run(conn, new_run_dir(tmp_path, "faults", tag), tag, seed=3, name="faults") as the_run:
        yield the_run


def run_env(cluster, run: Run) -> FaultEnv:
    return FaultEnv.for_run(LocalBackend(cluster), run)


def ops_of(run: Run, process: str, f: str, op_type: str) -> list[dict]:
    """The operations recorded so far (the history files are flushed every 0.2 s)."""
    return [op for op in read_history(run.dir).ops if (op["process"], op["f"], op["type"]) == (process, f, op_type)]


def wait_for_ops(run: Run, process: str, f: str, op_type: str, timeout: float = 30.0) -> list[dict]:
    return wait_until(lambda: ops_of(run, process, f, op_type), timeout, f"{process} {op_type} {f}", interval=0.3)


def reachable(cluster, node: int) -> bool:
    """Whether clients reach the node through its client proxy."""
    return answers(cluster.connection(), f"127.0.0.1:{cluster.layout.client_proxy_port(node)}")


# ---- broker faults --------------------------------------------------------------------------------------
def test_kill_the_coordinator_of_a_transactional_id_and_heal(env, admin):
    cluster = env.backend.cluster
    txn_id = f"{env.tag}.eos-0"
    coordinator = admin.leader_of("__transaction_state", transaction_state_partition(txn_id))
    old_pid = cluster.node_pid(coordinator)

    fault = make_fault("kill-broker", {"target": "coordinator:{tag}.eos-0"})
    assert fault.start(env) == {"node": coordinator, "target": f"coordinator:{txn_id}", "signal": "SIGKILL"}
    assert cluster.node_pid(coordinator) is None

    assert fault.heal(env) == {"node": coordinator, "registered": True}
    assert cluster.node_pid(coordinator) not in (None, old_pid)
    assert coordinator in cluster.registered_brokers()


def test_pause_the_leader_of_a_partition_and_heal(env, admin, topic):
    cluster = env.backend.cluster
    leader = wait_until(lambda: admin.leader_of(topic, 1), 30, "topic metadata", ignore=(KafkaError,))
    fault = make_fault("pause-broker", {"target": f"leader:{topic}:1"})
    assert fault.start(env)["node"] == leader
    wait_until(lambda: cluster.supervisor.is_paused(cluster.node_name(leader)), 5, f"node {leader} stopped")
    fault.heal(env)
    assert not cluster.supervisor.is_paused(cluster.node_name(leader))
    assert fault.heal(env) == {"node": leader, "signal": "SIGCONT", "registered": True}     # idempotent


@pytest.mark.parametrize("params, toxic_type", [
    ({"toxic": "latency", "latency_ms": 250, "jitter_ms": 20, "scope": "client"}, "latency"),
    ({"toxic": "bandwidth", "rate_kb": 8, "scope": "inter"}, "bandwidth"),
])
def test_network_toxics_are_on_the_links_then_gone(env, params, toxic_type):
    toxiproxy = env.backend.cluster.toxiproxy
    fault = make_fault("network", {"target": "node:2", **params})
    started = fault.start(env)
    toxics = toxiproxy.toxics()
    assert set(toxics) == set(started["proxies"]) == set(env.backend.cluster.layout.links_of(2, params["scope"]))
    assert all(sorted(t["type"] for t in ts) == [toxic_type, toxic_type] for ts in toxics.values())
    fault.heal(env)
    assert toxiproxy.toxics() == {}


def test_isolate_a_broker_from_its_clients_and_heal(env):
    cluster = env.backend.cluster
    fault = make_fault("isolate-broker", {"target": "not-controller", "scope": "client"})
    node = fault.start(env)["node"]
    assert not reachable(cluster, node)
    fault.heal(env)
    assert cluster.toxiproxy.toxics() == {} and reachable(cluster, node)


def test_hold_an_endtxn_of_one_client_on_the_wire_and_heal(env, conn, topic):
    """A real transactional producer's commit: held once (its EndTxn reaches the broker after hold_ms),
    another client's and the next commit not; the proxy back on the node after the heal; the data intact."""
    from confluent_kafka import Producer
    cluster = env.backend.cluster
    fault = make_fault("hold-requests", {"target": "coordinator:{tag}.hold-0", "apis": ["EndTxn"],
                                         "clients": ["{tag}.held-*"], "hold_ms": 2500, "every_ms": 60000})

    def producer(client_id: str, txn_id: str) -> Producer:
        p = Producer({**conn.confluent(), "client.id": client_id, "transactional.id": txn_id})
        p.init_transactions(30)
        return p

    def commit_seconds(p: Producer, value: str) -> float:
        p.begin_transaction()
        p.produce(topic, value=value.encode(), partition=0)
        started = time.monotonic()
        p.commit_transaction(30)
        return time.monotonic() - started

    held = producer(f"{env.tag}.held-producer", f"{env.tag}.hold-0")
    other = producer(f"{env.tag}.other-producer", f"{env.tag}.hold-1")
    started = fault.start(env)
    coordinator = started["node"]
    assert started["relay"] == f"127.0.0.1:{cluster.layout.request_hold_port(coordinator)}"
    assert cluster.toxiproxy.proxies()[f"n{coordinator}-client"]["upstream"] == started["relay"]
    assert commit_seconds(other, "other") < 2.0                # another client's EndTxn is not held
    assert commit_seconds(held, "held-1") >= 2.4               # held 2.5 s, then the broker answers
    assert commit_seconds(held, "held-2") < 2.0                # at most one hold per every_ms
    healed = fault.heal(env)
    assert [(h["api_key"], h["client_id"]) for h in healed["held"]] == [(26, f"{env.tag}.held-producer")]
    assert healed["delivered_after_client_closed"] == []
    assert cluster.toxiproxy.proxies()[f"n{coordinator}-client"]["upstream"] == \
        f"127.0.0.1:{cluster.layout.client_port(coordinator)}"
    values = sorted(r.value.decode() for r in read_to_end(conn, topic, committed=True))
    assert values == ["held-1", "held-2", "other"]
    held.flush(5)
    other.flush(5)
    # after a runner died mid-fault, the journal's step (the network heal) puts the proxy back too
    env.backend.reroute_client(coordinator, started["relay"])
    env.backend.heal_network()
    assert cluster.toxiproxy.proxies()[f"n{coordinator}-client"]["upstream"] == \
        f"127.0.0.1:{cluster.layout.client_port(coordinator)}"
    assert make_fault("hold-requests", {"clients": ["x"]}).undo_steps(env) == [{"step": "remove-all-toxics"}]


def test_an_epoch_climb_reaches_its_epoch_and_a_min_epoch_hold_holds_only_the_endtxn_from_there(env, conn, admin,
                                                                                                 topic):
    """climb-epoch's InitProducerIds bring a transactional id to its epoch (as the coordinator then reports it); a
    real librdkafka producer initialises one above; a hold with min_epoch two above lets its commit through, then
    holds the commit of the next producer of the id (initialised one epoch higher), reading the epoch from its
    real EndTxn."""
    from confluent_kafka import Producer
    climb = make_fault("climb-epoch", {"txn_id": "{tag}.climb-0", "to_epoch": 200})
    climbed = climb.start(env)
    assert (climbed["txn_id"], climbed["epoch"], climbed["process"]) == (f"{env.tag}.climb-0", 200, None)
    assert admin.client.describe_transactions([climbed["txn_id"]])[climbed["txn_id"]].producer_epoch == 200
    assert climb.heal(env)["resumed"] is False
    hold = make_fault("hold-requests", {"target": "coordinator:{tag}.climb-0", "apis": ["EndTxn"],
                                        "clients": ["{tag}.climb-*"], "hold_ms": 2500, "every_ms": 0, "min_epoch": 202})

    def commit_seconds(value: str) -> float:
        p = Producer({**conn.confluent(), "client.id": f"{env.tag}.climb-producer", "transactional.id": climbed["txn_id"]})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=value.encode(), partition=0)
        started = time.monotonic()
        p.commit_transaction(30)
        took = time.monotonic() - started
        p.flush(5)
        return took

    hold.start(env)
    try:
        assert commit_seconds("at-201") < 2.0                  # epoch 201: below min_epoch, not held
        assert commit_seconds("at-202") >= 2.4                 # the next producer, epoch 202: held 2.5 s
    finally:
        healed = hold.heal(env)
    assert [(h["producer_epoch"], h["result"], h["producer_id"]) for h in healed["held"]] == [
        (202, "commit", climbed["producer_id"])]
    assert sorted(r.value.decode() for r in read_to_end(conn, topic, committed=True)) == ["at-201", "at-202"]


def test_hold_the_markers_a_coordinator_sends_and_heal(env, conn, admin, topic):
    """A real commit whose markers to a partition led by another node are held on the coordinator's link to it:
    the producer is told committed at once, read_committed sees nothing of it until the markers arrive (the last
    stable offset stays), then sees it; the links back on their nodes after the heal."""
    from confluent_kafka import Producer
    cluster = env.backend.cluster
    txn_id = f"{env.tag}.markers-0"
    producer = Producer({**conn.confluent(), "transactional.id": txn_id})
    producer.init_transactions(30)
    coordinator = admin.coordinator_of(txn_id)
    partition = next(p for p in range(3) if admin.leader_of(topic, p) != coordinator)
    fault = make_fault("hold-requests", {"target": f"coordinator:{txn_id}", "link": "markers",
                                         "apis": ["WriteTxnMarkers"], "clients": ["broker-*-txn-marker-sender"],
                                         "hold_ms": 6000, "every_ms": 60000})
    started = fault.start(env)
    assert started["node"] == coordinator and set(started["relays"].values()) == {
        f"n{peer}-repl-from-{coordinator}" for peer in cluster.layout.peers(coordinator)}
    producer.begin_transaction()
    producer.produce(topic, value=b"held", partition=partition)
    producer.commit_transaction(30)                         # answered once the coordinator wrote PREPARE_COMMIT
    committed = time.monotonic()
    assert partition_offsets(conn, topic, [partition], committed=True)[partition] == 0      # no marker yet
    wait_until(lambda: partition_offsets(conn, topic, [partition], committed=True)[partition] == 2, 20,
               "the held marker written")
    assert time.monotonic() - committed >= 3.0
    healed = fault.heal(env)
    assert [(h["api_key"], h["client_id"]) for h in healed["held"]][:1] == [(27, f"broker-{coordinator}-txn-marker-sender")]
    assert {p["name"]: p["upstream"] for p in cluster.toxiproxy.proxies().values()} == \
        {p.name: p.upstream for p in cluster.layout.proxies()}
    assert [r.value for r in read_to_end(conn, topic, committed=True)] == [b"held"]


def test_transaction_version_is_set_to_the_other_level_under_a_transaction_and_set_back(env, conn, topic):
    """The cluster's transaction.version changed with Kafka's feature tool while a real transactional producer is
    mid-transaction: the transaction begun before commits, one begun after too; the heal sets the level back, and a
    journal step written before the start holds that level."""
    from confluent_kafka import Producer
    from cluster.lab.features import finalized_level
    before = finalized_level(conn, "transaction.version")
    other = 1 if before == 2 else 2
    fault = make_fault("set-feature", {"feature": "transaction.version", "level": other})
    fault.prepare(env)
    assert fault.undo_steps(env) == [{"step": "set-feature", "feature": "transaction.version", "level": before,
                                      "expected": other}]
    producer = Producer({**conn.confluent(), "transactional.id": f"{env.tag}.flip"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"before", partition=0)
    assert fault.start(env) == {"feature": "transaction.version", "from": before, "to": other}
    assert finalized_level(conn, "transaction.version") == other
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"during", partition=1)
    producer.commit_transaction(30)
    assert fault.heal(env) == {"feature": "transaction.version", "level": before}
    assert finalized_level(conn, "transaction.version") == before
    assert sorted(r.value for r in read_to_end(conn, topic, committed=True)) == [b"before", b"during"]


# ---- restarts, on the one-node drill cluster (a restart of a node of the session cluster takes a minute:
# it reloads every partition the other tests left behind) ------------------------------------------------
@pytest.fixture
def drill_env(drill_cluster, drill_conn):
    backend = LocalBackend(drill_cluster)
    yield FaultEnv(backend, None, drill_conn, random.Random(1), new_run_tag())
    backend.heal()


def test_stop_the_controller_cleanly_and_heal(drill_env):
    cluster = drill_env.backend.cluster
    fault = make_fault("stop-broker", {"target": "controller"})
    assert fault.start(drill_env) == {"node": 1, "target": "controller", "signal": "SIGTERM"}
    assert cluster.node_pid(1) is None
    assert fault.heal(drill_env) == {"node": 1, "registered": True}
    assert cluster.node_pid(1) is not None and cluster.registered_brokers() == [1]


def test_rolling_restart_restarts_every_node_in_turn(drill_env):
    cluster = drill_env.backend.cluster
    before = cluster.node_pid(1)
    fault = make_fault("rolling-restart", {"clean": False, "pause_between_s": 0})
    assert fault.start(drill_env) == {"nodes": [1], "clean": False}
    assert cluster.node_pid(1) not in (None, before) and cluster.registered_brokers() == [1]
    assert fault.heal(drill_env) == {"nodes": [1], "restarted": [1], "registered": True}


# ---- workload faults ---------------------------------------------------------------------------------------
def start_producer(run: Run, *extra: str) -> str:
    topics = [f"{run.info.run_tag}-a", f"{run.info.run_tag}-b"]
    run.create_topics({t: 3 for t in topics})
    run.start(WorkloadSpec("txn-producer", "txp-0", ("--topics", *topics, "--rate", "5", "--abort-share", "0",
                                                     "--transaction-timeout-ms", "60000", *extra)))
    wait_for_ops(run, "txp-0", "txn", "ok")
    return "txp-0"


def test_pause_a_workload_process_and_heal(cluster, run):
    process = start_producer(run)
    env = run_env(cluster, run)
    fault = make_fault("pause-workload", {"process": process})
    fault.start(env)
    wait_until(lambda: run.supervisor.is_paused(process), 5, f"{process} stopped")
    assert fault.heal(env)["resumed"] and not run.supervisor.is_paused(process)
    committed = len(ops_of(run, process, "txn", "ok"))
    wait_until(lambda: len(ops_of(run, process, "txn", "ok")) > committed, 30, "a commit after the pause")


def test_a_zombie_producer_is_fenced_and_exits(cluster, run):
    process = start_producer(run, "--on-fenced", "exit")
    env = run_env(cluster, run)
    fault = make_fault("zombie-producer", {"process": process})
    started = fault.start(env)
    assert started["txn_id"] == f"{run.info.run_tag}.{process}"
    wait_until(lambda: run.supervisor.is_paused(process), 5, f"{process} stopped")
    wait_for_ops(run, started["successor"], "init", "ok")              # the successor fenced txp-0
    fault.heal(env)
    wait_until(lambda: not run.supervisor.is_running(process), 60, f"{process} to exit after being fenced")
    fenced = [op for op in read_history(run.dir).ops
              if op["process"] == process and op["type"] in ("fail", "info") and op["value"].get("fenced")]
    assert fenced and "FENCED" in fenced[0]["value"]["error"].upper()
    wait_for_ops(run, started["successor"], "txn", "ok")
    assert started["successor"] in run.alive()


def test_a_group_moves_to_the_consumer_protocol_instance_by_instance_and_back(cluster, run):
    """KIP-848's online migration: two processors of one group on classic, rolled onto consumer (the coordinator
    converts the group), then back (converted again), each committing after its restart. Exactly-once through it
    is the campaign's (group-protocol-migration on each client)."""
    tag = run.info.run_tag
    planned = plan("processor", tag, instances=2, extra=[], partitions=2)
    run.create_topics(planned.topics)
    for spec in planned.specs:
        run.start(spec)
    processors = [s.process for s in planned.specs if s.workload == "processor"]
    assert processors == ["eos-0", "eos-1"]
    for process in processors:
        wait_for_ops(run, process, "process", "ok", timeout=60)
    env = run_env(cluster, run)
    fault = make_fault("migrate-group-protocol", {"processes": processors, "pause_between_s": 3})
    started = fault.start(env)
    assert started["to"] == "consumer" and started["group"] == f"{tag}.eos"
    assert started["group_type"] == "consumer" and started["converted"] is True, started     # the online upgrade
    assert [s["stopped_cleanly"] for s in started["steps"]] == [True, True]
    before = {p: len(ops_of(run, p, "process", "ok")) for p in processors}    # the old incarnations' are over
    for process in processors:
        wait_until(lambda p=process: len(ops_of(run, p, "process", "ok")) > before[p], 60,
                   f"{process} committing on the consumer protocol")
    healed = fault.heal(env)
    assert healed["back"] is True and healed["group_type"] == "classic" and healed["converted"] is True, healed
    assert [(s["process"], s["to"]) for s in healed["steps"]] == [("eos-0", "classic"), ("eos-1", "classic")]
    assert option_value(run.last_spec("eos-1").args, "--group-protocol") == "classic"


def test_a_storm_runs_until_healed(cluster, run):
    run.create_topics({f"{run.info.run_tag}-storm": 3})
    env = run_env(cluster, run)
    fault = make_fault("storm", {"topic": "{tag}-storm", "rate": 20})
    process = fault.start(env)["process"]
    wait_for_ops(run, f"{process}-t0", "produce", "ok")
    assert fault.heal(env) == {"process": process, "stopped": True}
    assert process not in run.alive()


def test_a_hanging_transaction_is_injected_then_aborted(drill_env, drill_conn):
    env = drill_env
    topic = f"hang-{env.tag}"
    ensure_topic(drill_conn, topic, partitions=1, replication=1)
    fault = make_fault("hanging-transaction", {"topic": topic, "partition": 0})
    try:
        injected = fault.start(env)
        lso, hwm = (partition_offsets(drill_conn, topic, [0], committed=c)[0] for c in (True, False))
        assert (lso, hwm) == (injected["start_offset"], injected["start_offset"] + 1)
    finally:
        healed = fault.heal(env)
    assert healed["aborted"] and healed["producer_id"] == injected["producer_id"]
    wait_until(lambda: partition_offsets(drill_conn, topic, [0], committed=True)[0]
               == partition_offsets(drill_conn, topic, [0], committed=False)[0] > hwm, 15, "the LSO to catch up")
    assert fault.heal(env)["aborted"] is False                                  # nothing open any more


def test_an_input_topic_is_deleted_and_created_again_under_its_name(cluster, run):
    """recreate-topic on a running processor group (the reference client): the feeder paused between transactions,
    the group caught up, the old incarnation archived whole before the deletion and marked deleted after it, the
    topic back with a new id and its partitions, the feeder and the processors committing on it again. What each
    client makes of it, exactly-once or not, is the campaign's (input-topic-recreated)."""
    tag = run.info.run_tag
    planned = plan("processor", tag, instances=2, extra=[], partitions=2)
    run.create_topics(planned.topics)
    for spec in planned.specs:
        run.start(spec)
    for process in ("eos-0", "eos-1"):
        wait_for_ops(run, process, "process", "ok", timeout=60)
    env = run_env(cluster, run)
    fault = make_fault("recreate-topic", {"topic": "{tag}-in-b"})
    fault.prepare(env)
    assert fault.undo_steps(env)[0] == {"step": "create-topic", "topic": f"{tag}-in-b", "partitions": 2}
    started = fault.start(env)
    assert started["caught_up"] is True and started["resumed"] is True, started
    assert started["new_topic_id"] not in (None, started["topic_id"])
    manifest = json.loads((run.dir / started["archived"] / "manifest.json").read_text())
    assert manifest["deleted"] is True and manifest["alias"] == f"{tag}-in-b~1"
    for view in ("committed", "uncommitted"):          # read whole: each partition to its end (no transaction open)
        parts = manifest["views"][view]["partitions"][f"{tag}-in-b"]
        assert all(p["reached"] == p["end"] == started["ends"][n]["hwm"] for n, p in parts.items()), parts
        assert sum(p["rows"] for p in parts.values()) > 0
    assert all(started["group_offsets"][p] > 0 for p in started["ends"] if started["ends"][p]["hwm"])
    assert topic_partitions(run.conn, f"{tag}-in-b") == [0, 1]
    feeder = len(ops_of(run, "feeder", "txn", "ok"))
    wait_until(lambda: any(w["topic"] == f"{tag}-in-b" for op in ops_of(run, "feeder", "txn", "ok")[feeder:]
                           for w in op["value"]["writes"]), 60, "the feeder committing to the new incarnation")
    wait_until(lambda: any(i["topic"] == f"{tag}-in-b" and i["offset"] < 5 for op in read_history(run.dir).ops
                           if op["f"] == "process" and op["type"] == "invoke" and op["time"] > manifest["deleted_at"]
                           for i in op["value"].get("inputs") or []), 60, "a processor reading the new incarnation")
    assert fault.heal(env) == {"topic": f"{tag}-in-b"}
