"""The clients besides confluent-kafka (cluster/lab/clients.py: franz-go, KafkaJS), each speaking the workload protocol
(docs/workload-protocol.md) on the real cluster. Per client: the conformance run (two of its transactional
producers and two of its exactly-once processors, no fault) verifies valid with both isolation levels read, and a
duplicate planted in a copy of it (a committed record of its producer re-sent outside any transaction) is counted
exactly once; then its producer and its processor go through coordinator-kill and zombie-producer in short mode
(the built-ins, run on the client, with the role each lacks added), with what every short run must show
(test_experiments.run_short: faults healed, every process committed, every fault recovered) and verified valid.
What a client does wrong is asserted here as its named finding (docs/findings.md), nothing else accepted: a KafkaJS
producer that reuses a written batch's sequence after a leader died loses a committed transaction's records (kafkajs-sequence-rollback), or
writes a batch twice when send() retries over a request in flight (kafkajs-retry-duplicates); a KafkaJS processor
that fell out of its group commits as a stale member (kafkajs-kip-447) or reads a partition given back from a seek
made before (kafkajs-stale-seek): each by its whole signature (not_kafkajs_findings, chaos/record/signatures.py). All runs of a client are verified in one `txnlab verify` call (the session's Spark server).
The gate runs coordinator-kill on KafkaJS here, on Kafka's Java clients through the compose stack, and the compose
stack's container faults on franz-go (test_docker.py), with what a clean run shows: both isolation levels read,
every invoke completed; the clean runs, planted duplicates, zombie-producer and the other clients' runs here are
the campaign's (`-m campaign`,
docs/testing.md), and a client's set-up makes only the runs its selected tests read."""
from __future__ import annotations

import json

import pytest
import yaml

from chaos.nemesis.backends import LocalBackend
from chaos.runner.experiment import Experiment
from chaos.record.history import read_history
from chaos.record.ids import headers
from chaos.runner.spec import builtin_specs, parse_spec, with_client
from chaos.catalog.bugs import matching_anomaly_bugs
from cluster.lab.clients import native_clients
from cluster.access.reads import read_to_end
from chaos.record.signatures import explained
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, cluster_state_dir, needed_runs, verify_reports
from tests.integration.test_experiments import assert_healed, assert_zombie_fenced, drop_run_topics, run_short
from tests.integration.test_verify import copy_run, record_end_offsets, send
from tests.cli import txnlab

pytestmark = pytest.mark.timeout(1500)        # a client's module set-up: three runs and one verify of four
CHECKS = ("duplicate", "aborted_read", "lost_write", "torn_transaction", "nonmonotonic_send", "inconsistent_offsets",
          "exactly_once_processing", "open_at_end", "unaccounted", "poll_skip", "nonmonotonic_poll", "unseen")
EXPERIMENTS = {"coordinator-kill": "txn-producer", "zombie-producer": "processor"}    # built-in -> the role it lacks
GATE = "coordinator-kill"       # each client once through a fault in the gate; its zombie-producer the campaign's
# Kafka's Java clients' gate run is coordinator-kill on the compose stack, franz-go's the container faults there
# (test_docker.py: the same assertions)
GATE_ELSEWHERE = {"java", "franz-go"}


def conformance_spec(client: str) -> dict:
    return {"name": f"conformance-{client}",
            "description": f"the workload protocol's conformance run of {client}: its producers and processors, no fault",
            "cluster": {"local": {"state_dir": str(cluster_state_dir()), "base_port": TEST_BASE_PORT}},
            "workloads": [{"workload": "txn-producer", "instances": 2}, {"workload": "processor", "instances": 2}],
            "duration_s": 20, "schedule": {"faults": []}, "quiescence": {"timeout_s": 30}}


def on_client_document(name: str, client: str) -> dict:
    """Built-in `name`'s document with the transactional role it lacks added, every transactional workload on
    `client`."""
    data = yaml.safe_load(builtin_specs()[name].read_text())
    for doc in (data, data.get("short") or {}):
        if "workloads" in doc:
            doc["workloads"].append({"workload": EXPERIMENTS[name], "instances": 1})
    return with_client(data, client)


def on_client(name: str, client: str):
    """on_client_document's spec in short mode."""
    return parse_spec(on_client_document(name, client), name, short=True)


def assert_through_the_fault(run, report: dict, result_summary: dict, client: str) -> None:
    """What a client's run through a fault shows besides its verdict: its producer and its processor on the
    client, both isolation levels read (aborted records among what read_uncommitted saw), every invoke completed
    before the processes exited (the protocol)."""
    roles = {s["workload"] for s in json.loads((run / "spec.json").read_text())["specs"] if "--client" in s["args"]}
    assert roles == {"txn-producer", "processor"}, roles
    assert report["evidence"]["complete"], (client, report["evidence"])
    records = report["counts"]["records"]
    assert records["read_committed"] > 0 and records["read_uncommitted"] > records["read_committed"], (client, records)
    assert result_summary["completed_at_shutdown"] == 0, client


def plant_duplicate(run, conn) -> str:
    """A committed record of the client's producer txp-0 re-sent, the same value and ids, outside any
    transaction, into its partition: its id."""
    attempt = next(op for op in read_history(run).ops
                   if op["process"] == "txp-0" and op["f"] == "txn" and op["type"] == "ok")
    write = attempt["value"]["writes"][0]
    original = next(r for r in read_to_end(conn, write["topic"], committed=True)
                    if r.value and f'"{write["id"]}"'.encode() in r.value)
    send(conn, [(write["topic"], write["partition"], original.value,
                 headers(write["id"], attempt["value"]["attempt"], "txp-0"))], **{"enable.idempotence": False})
    record_end_offsets(conn, run)
    return write["id"]


@pytest.fixture(scope="module", params=[pytest.param(c, marks=CAMPAIGN if c in GATE_ELSEWHERE else ())
                                        for c in native_clients()])
def client_runs(request, cluster, tmp_path_factory):
    """One client's runs: {"conformance", "planted", <experiment>...: run dir}, their reports (one verify call),
    the planted id, and the experiments' results."""
    client, conn = request.param, cluster.connection()
    runs_dir = tmp_path_factory.mktemp(f"runs-{client}")
    drops = []
    needed = needed_runs(request, "experiment")
    try:
        results, runs, planted_id = {}, {}, None
        if needed & {"conformance", "planted"}:
            clean = Experiment(parse_spec(with_client(conformance_spec(client), client), "test"), seed=5,
                               runs_dir=runs_dir, progress=print, backend=LocalBackend(cluster)).run()
            drops.append(lambda: drop_run_topics(cluster, clean))
            assert clean.steady and clean.error is None, clean.error
            results["conformance"], runs["conformance"] = clean, clean.run_dir
            runs["planted"] = copy_run(clean.run_dir, tmp_path_factory.mktemp(f"planted-{client}"))
            planted_id = plant_duplicate(runs["planted"], conn)
        for name in sorted(needed & set(EXPERIMENTS)):
            results[name] = run_short(name, cluster, runs_dir, drops.append, spec=on_client(name, client))
            runs[name] = results[name].run_dir
        out = txnlab("verify", *map(str, runs.values()), "--json", "--examples", "20", timeout=1200)
        assert out.returncode in (0, 1), out.stderr[-4000:]
        by_dir = {r["run"]: r for r in verify_reports(out.stdout)}
        reports = {name: by_dir[str(run)] for name, run in runs.items()}
        yield client, runs, reports, planted_id, results
    finally:
        for drop in drops:
            drop()


def failing(report: dict) -> dict:
    return {name: c["examples"][:3] for name, c in report["checks"].items() if c["valid"] is not True}


def client_processes(run) -> set[str]:
    """The processes a run started on its client (their --client option), by name."""
    specs = json.loads((run / "spec.json").read_text())["specs"]
    return {s["process"] for s in specs if "--client" in s["args"]}


@CAMPAIGN
@pytest.mark.reads_runs("conformance")
def test_a_clean_run_of_the_client_verifies_valid_reading_both_isolation_levels(client_runs):
    client, runs, reports, _, results = client_runs
    report = reports["conformance"]
    assert report["valid"] is True and report["evidence"]["complete"], (client, failing(report), report["evidence"])
    assert all(report["checks"][c]["count"] == 0 for c in CHECKS), (client, failing(report))
    records = report["counts"]["records"]
    assert records["read_committed"] > 0 and records["read_uncommitted"] > records["read_committed"], (client, records)
    ops = read_history(runs["conformance"]).ops
    on_client = client_processes(runs["conformance"])
    assert on_client == {"txp-0", "txp-1", "eos-0", "eos-1"}, on_client
    committed = {op["process"] for op in ops if op["type"] == "ok" and op["f"] in ("txn", "process")}
    assert on_client <= committed, f"{client}: never committed: {sorted(on_client - committed)}"
    aborted = [op for op in ops if op["process"] in on_client and op["type"] == "fail" and op["f"] == "txn"]
    assert aborted, f"{client}: no deliberate abort (--abort-share) was recorded"
    assert results["conformance"].summary["completed_at_shutdown"] == 0, \
        f"{client}: an invoke left open at SIGTERM (the protocol: complete every invoke, then exit)"


@CAMPAIGN          # the gate's planted anomalies: test_verify.py's, on the reference client's records
@pytest.mark.reads_runs("planted")
def test_a_planted_duplicate_is_counted_exactly_once(client_runs):
    client, _, reports, planted_id, _ = client_runs
    report = reports["planted"]
    assert report["valid"] is False and report["checks"]["duplicate"]["count"] == 1, (client, failing(report))
    assert planted_id in json.dumps(report["checks"]["duplicate"]["examples"]), report["checks"]["duplicate"]
    assert {name for name, c in report["checks"].items() if c["valid"] is not True} == {"duplicate"}, failing(report)


@pytest.mark.parametrize("experiment", [pytest.param(e, marks=() if e == GATE else CAMPAIGN) for e in sorted(EXPERIMENTS)])
def test_the_client_s_producer_and_processor_stay_exactly_once_through_the_experiment(client_runs, experiment, cluster):
    client, runs, reports, _, results = client_runs
    report = reports[experiment]
    if client == "kafkajs" and report["valid"] is False:   # its findings, named by the run's report (docs/bugs.md)
        assert (why := not_kafkajs_findings(report, read_history(runs[experiment]).ops)) is None, \
            (client, experiment, why, failing(report))
        assert set(KAFKAJS_FINDINGS) & {bug.id for bug in matching_anomaly_bugs(
            None, {n: c["count"] for n, c in report["checks"].items()},
            {n: c["problems"] for n, c in report["checks"].items() if c.get("problems")}, frozenset({"kafkajs"}))}
    else:
        assert report["valid"] is True, (client, experiment, failing(report))
    assert_through_the_fault(runs[experiment], report, results[experiment].summary, client)
    if experiment == "zombie-producer":
        assert_zombie_fenced(runs[experiment], cluster.connection())
    assert_healed(cluster)


KAFKAJS_FINDINGS = ("kafkajs-sequence-rollback", "kafkajs-retry-duplicates", "kafkajs-kip-447", "kafkajs-stale-seek")
STALE_MEMBER = ("stale-member-commit", "stale-seek")        # chaos/record/signatures.py
SEQUENCE_REUSE = {"lost_write", "torn_transaction", "inconsistent_offsets"}


def not_kafkajs_findings(report: dict, ops: list[dict]) -> str | None:
    """Why a KafkaJS run's anomalies are not (all) its four catalogued findings (chaos/bugs/), or None when they are.
    kafkajs-sequence-rollback: lost writes, the torn commits that lost them and their acknowledged offsets; every
    lost write acknowledged at an offset that holds a record of an earlier attempt of the same producer to the same
    partition, an attempt that failed and was aborted (its send() failed or came back without that record's answer,
    yet the broker had written the batch, and took the later one for its retry). kafkajs-retry-duplicates: records
    of a committed attempt twice or more, the attempt's whole batch to a partition written again right after itself
    (send() retried while that broker's request was still in flight, the next sequence numbers on the same records).
    kafkajs-kip-447 and kafkajs-stale-seek: inputs with committed outputs of two processors of the group across a
    rebalance, each explained by one of their history signatures (chaos/record/signatures.py: a stale member's commit, a
    seek made before the rebalance applied after it)."""
    checks = report["checks"]
    bad = {name for name, c in checks.items() if c["valid"] is not True}
    if not bad or not bad <= SEQUENCE_REUSE | {"duplicate", "exactly_once_processing"}:
        return f"anomalies {sorted(bad)}, not KafkaJS's findings alone"
    attempts = {op["value"]["attempt"]: op for op in ops if op["f"] == "txn" and op["type"] != "invoke"}
    why = _not_sequence_reuse(checks, attempts) if bad & SEQUENCE_REUSE else None
    why = why or (_not_retry_duplicates(checks["duplicate"], attempts) if "duplicate" in bad else None)
    return why or (_not_stale_member(checks["exactly_once_processing"], ops) if "exactly_once_processing" in bad
                   else None)


def _not_stale_member(processing: dict, ops: list[dict]) -> str | None:
    found = explained(processing, ops, STALE_MEMBER)
    return found if isinstance(found, str) else "; ".join(found.unexplained) or None


def _not_sequence_reuse(checks: dict, attempts: dict[str, dict]) -> str | None:
    lost, moved = checks["lost_write"], checks["inconsistent_offsets"]
    if not lost["count"] or lost["count"] != moved["count"] or len(lost["examples"]) != lost["count"]:
        return f"{lost['count']} lost writes, {moved['count']} acknowledged at another record's offset"
    for example in moved["examples"]:
        attempt, earlier = example["id"].rsplit(".", 1)[0], example["other_id"].rsplit(".", 1)[0]
        failed = attempts.get(earlier)
        if example["reader"] != "acknowledged write" or failed is None or failed["type"] != "fail" \
                or attempts.get(attempt, {}).get("process") != failed["process"] or earlier == attempt:
            return f"{example}: not an acknowledgement at an earlier failed attempt's record of the same producer"
        written = {w["id"]: (w["topic"], w["partition"]) for w in failed["value"]["writes"]}
        if written.get(example["other_id"]) != (example["topic"], example["partition"]):
            return f"{example}: {earlier} wrote it elsewhere"
    if {e["id"] for e in lost["examples"]} != {e["id"] for e in moved["examples"]}:
        return "the lost writes are not the ones acknowledged at another record's offset"
    torn = {e["attempt"] for e in checks["torn_transaction"]["examples"]}
    if not torn <= {e["attempt"] for e in lost["examples"]}:      # one that lost all its writes is not torn
        return f"torn attempts {sorted(torn)} are not those that lost writes"
    return None


def _not_retry_duplicates(duplicate: dict, attempts: dict[str, dict]) -> str | None:
    if len(duplicate["examples"]) != duplicate["count"]:
        return f"{duplicate['count']} duplicates, {len(duplicate['examples'])} examples"
    by_batch: dict[tuple, dict[str, list[int]]] = {}
    for example in duplicate["examples"]:
        places = {(p["topic"], p["partition"]) for p in example["positions"]}
        done = attempts.get(example["attempt"])
        if example["copies"] < 2 or len(places) != 1 or done is None or done["type"] != "ok":
            return f"{example}: not copies in one partition of a committed attempt"
        by_batch.setdefault((example["attempt"], *places.pop()), {})[example["id"]] = \
            sorted(p["offset"] for p in example["positions"])
    for (attempt, topic, partition), offsets in by_batch.items():
        batch = [w["id"] for w in attempts[attempt]["value"]["writes"] if (w["topic"], w["partition"]) == (topic, partition)]
        first, copies = min(o[0] for o in offsets.values()), len(next(iter(offsets.values())))
        if sorted(offsets) != sorted(batch) or any(offsets[i] != [first + j * len(batch) + k for j in range(copies)]
                                                   for k, i in enumerate(batch)):
            return f"{attempt}'s records on {topic}-{partition} are not its whole batch written again in a row: {offsets}"
    return None
