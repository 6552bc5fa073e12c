"""The secured cluster end to end (docs/security.md): SASL_SSL with SCRAM-SHA-512 users per role, TLS from
the cluster's own CA, the StandardAuthorizer and each role's least-privilege ACLs. The stack's exporter
serves HTTPS with basic auth to the stack's Prometheus as the read-only exporter principal; the workloads
commit as the workload principal; `txnlab txn` works as the operator and is refused as the exporter; an
exporter principal that may not describe some transactional ids never calls their live transactions
hanging, and still finds a real hanging transaction it may see."""
from __future__ import annotations

import json
import logging
import stat
import threading
import time
import uuid
from collections import Counter

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from chaos.record.history import read_history
from chaos.record.ids import decode_value
from chaos.workloads.plans import plan
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from cluster.lab import security
from cluster.access.connection import ConnectionSettings
from cluster.access.reads import read_to_end
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import NotYet, wait_until
from tests.integration.conftest import CAMPAIGN
from tests.integration.helpers import running_exporter, scrape, value
from tests.cli import txnlab
from tests.integration.test_workloads import run_plan

pytestmark = pytest.mark.cluster


def test_secrets_are_generated_per_cluster_and_private(secured_cluster):
    folder = secured_cluster.layout.secrets_dir
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = list(folder.iterdir())
    assert len(files) >= 10 and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), files
    passwords = {role: secured_cluster.secrets.password(role) for role in security.ROLES}
    assert len(set(passwords.values())) == len(passwords) and all(len(p) >= 32 for p in passwords.values())
    for node in secured_cluster.layout.node_ids:       # they hold the brokers' own password
        assert stat.S_IMODE(secured_cluster.layout.properties_file(node).stat().st_mode) == 0o600


def test_stack_exporter_serves_https_with_basic_auth_to_prometheus(secured_cluster):
    secrets = secured_cluster.secrets
    url = f"https://127.0.0.1:{secured_cluster.layout.exporter_port}/metrics"
    ca = str(secrets.ca_file)
    password = secrets.web_password_file.read_text().strip()
    assert requests.get(url, verify=ca, timeout=20).status_code == 401
    assert requests.get(url, verify=ca, auth=(security.WEB_USER, "wrong"), timeout=20).status_code == 401
    with pytest.raises(requests.exceptions.SSLError):                      # an untrusted CA is refused
        requests.get(url, timeout=20)
    conn = secured_cluster.connection("workload")
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    ensure_topic(conn, topic, partitions=3, replication=3)
    producer = Producer(conn.confluent(**{"transactional.id": f"sec-{uuid.uuid4().hex[:6]}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, partition=0, value=b"x")
    producer.commit_transaction(30)

    def served() -> str:
        response = requests.get(url, verify=ca, auth=(security.WEB_USER, password), timeout=20)
        response.raise_for_status()
        return response.text

    wait_until(lambda: f'topic="{topic}"' in served(), 60, "the exporter to serve the new topic", interval=2)
    text = served()
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE kafkatxn_")}
    for name in ("kafkatxn_partition_lso_lag", "kafkatxn_partition_high_watermark", "kafkatxn_broker_active_producers",
                 "kafkatxn_transactions", "kafkatxn_hanging_transactions", "kafkatxn_hanging_evidence_complete",
                 "kafkatxn_consumergroup_lso_lag", "kafkatxn_broker_transaction_max_timeout_seconds"):
        assert name in families, f"{name} not served; families: {sorted(families)}"
    assert "kafkatxn_hanging_evidence_complete 1.0" in text          # the exporter role may describe every id
    assert 'kafkatxn_up 1.0' in text
    assert "AUTHORIZATION_FAILED" not in text, [line for line in text.splitlines() if "AUTHORIZATION" in line]
    prometheus = secured_cluster.prometheus()
    wait_until(lambda: prometheus.values('up{job="txnlab-exporter"}') == [1.0], 60,
               "Prometheus to scrape the exporter over HTTPS with basic auth", interval=2)


def _run_workload(conn: ConnectionSettings, tmp_path, workload: str, seconds: float) -> tuple:
    _, the_plan, run_dir, _ = run_plan(conn, tmp_path, workload, seconds=seconds)
    return the_plan, run_dir


@pytest.fixture(scope="module")
def producer_run(secured_cluster, tmp_path_factory):
    """A transactional producer's run as the workload principal (its plan and run directory): committed through
    SASL_SSL below, verified through it by the verify principal after."""
    return _run_workload(secured_cluster.connection("workload"), tmp_path_factory.mktemp("producer"), "txn-producer", 15)


def test_workloads_commit_through_sasl_ssl_as_the_workload_principal(secured_cluster, producer_run, tmp_path):
    conn = secured_cluster.connection("workload")
    the_plan, run_dir = producer_run
    ops = read_history(run_dir).ops
    committed_ids = {w["id"] for op in ops if op["f"] == "txn" and op["type"] == "ok" for w in op["value"]["writes"]}
    seen = Counter(decode_value(r.value)["id"] for t in the_plan.topics for r in read_to_end(conn, t, committed=True))
    assert len(committed_ids) > 20 and committed_ids <= set(seen) and max(seen.values()) == 1

    the_plan, run_dir = _run_workload(conn, tmp_path, "processor", 12)
    output = next(t for t in the_plan.topics if t.endswith("-out"))
    out = Counter(decode_value(r.value)["input"] for r in read_to_end(conn, output, committed=True))
    assert out and max(out.values()) == 1, "the exactly-once processor committed nothing, or a duplicate"


def test_txn_commands_work_as_operator_and_are_refused_as_exporter(secured_cluster):
    workload, operator = secured_cluster.connection("workload"), secured_cluster.connection("operator")
    topic = f"sec-txn-{uuid.uuid4().hex[:8]}"
    ensure_topic(workload, topic, partitions=1, replication=3)
    # the injector is a drill tool: it reads broker configs (verification off?) and so runs as admin
    injected = txnlab("txn", "inject-hanging", "--topic", topic, "--partition", "0", conn=secured_cluster.connection())
    assert injected.returncode == 0, injected.stderr
    pid = str(json.loads(injected.stdout)["producer_id"])
    listed = txnlab("txn", "list", "--all", "--json", conn=operator)
    assert listed.returncode == 0, listed.stderr
    found = txnlab("txn", "hanging", "--confirm-after", "2", "--json", conn=operator)
    assert found.returncode == 1 and pid in found.stdout, (found.returncode, found.stdout, found.stderr)
    refused = txnlab("txn", "abort", "--topic", topic, "--partition", "0",
                     "--producer-id", pid, "--yes", conn=secured_cluster.connection("exporter"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "authoriz" in refused.stderr.lower(), refused.stderr
    aborted = txnlab("txn", "abort", "--topic", topic, "--partition", "0", "--producer-id", pid, "--yes", conn=operator)
    assert aborted.returncode == 0, aborted.stderr
    again = txnlab("txn", "hanging", "--confirm-after", "2", "--json", conn=operator)
    assert pid not in again.stdout, again.stdout


# ---- ACLs meet hanging verdicts ---------------------------------------------------------------------------
VISIBLE = "visible-"


@pytest.fixture(scope="module")
def limited_exporter(secured_cluster) -> ConnectionSettings:
    """A principal with the exporter's ACLs except that it may describe only the transactional ids starting
    with `visible-` (so ListTransactions leaves the others out)."""
    user, password = f"exporter-limited-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex * 2
    admin = AdminClient(secured_cluster.connection().confluent())
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, security.SCRAM_ITERATIONS)
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, password.encode())]).values():
        future.result(30)
    acls = [a._replace(role=user) for a in security.ACLS if a.role == "exporter" and a.resource != "transactional-id"]
    acls.append(security.Acl(user, "transactional-id", VISIBLE, "Describe", "prefixed"))
    for future in admin.create_acls(security.acl_bindings(acls)).values():
        future.result(30)
    base = secured_cluster.connection("exporter")
    return ConnectionSettings(**{**base.model_dump(exclude={"sasl_password"}), "sasl_username": user,
                                 "sasl_password": password})


def _flags(conn: ConnectionSettings) -> dict:
    return {f"kafka.{k.lower()}": v for k, v in conn.to_env(prefix="").items() if k != "BOOTSTRAP"}


def _live_transaction(conn: ConnectionSettings, topic: str, seconds: float, stop: threading.Event) -> None:
    """A hidden-id transaction that stays open and keeps writing (a live one), then commits."""
    producer = Producer(conn.confluent(**{"transactional.id": f"hidden-{uuid.uuid4().hex[:6]}",
                                          "transaction.timeout.ms": 15000}))
    producer.init_transactions(30)
    producer.begin_transaction()
    until = time.monotonic() + seconds
    while time.monotonic() < until and not stop.is_set():
        producer.produce(topic, partition=1, value=b"live")
        producer.flush(10)
        stop.wait(1)
    producer.commit_transaction(30)


def test_ids_hidden_by_acls_stay_unresolved_and_a_visible_hanging_one_is_found(secured_cluster, limited_exporter,
                                                                               caplog):
    workload = secured_cluster.connection("workload")
    topic = f"sec-acl-{uuid.uuid4().hex[:8]}"
    ensure_topic(workload, topic, partitions=2, replication=3)
    stop = threading.Event()
    live = threading.Thread(target=_live_transaction, args=(workload, topic, 12, stop), daemon=True)
    caplog.set_level(logging.WARNING, logger="txnlab")
    with running_exporter(limited_exporter, interval=2.0, **_flags(limited_exporter)) as url:
        live.start()
        unresolved_seen, hanging_seen = 0, []
        deadline = time.monotonic() + 11
        while time.monotonic() < deadline:                       # ~5 collections while it is open and live
            samples = scrape(url)
            unresolved_seen = max(unresolved_seen, value(samples, "kafkatxn_hanging_unresolved_transactions",
                                                         topic=topic, reason="transactional_id_acl") or 0)
            hanging_seen += [k for k, v in samples.items() if k[0] in ("kafkatxn_hanging_transactions",
                                                                     "kafkatxn_hanging_suspect_transactions")
                             and ("topic", topic) in k[1] and v > 0]
            time.sleep(1)
        live.join(30)
        assert not hanging_seen, f"a live transaction of a hidden id was called hanging: {hanging_seen}"
        assert unresolved_seen >= 1, "the hidden id's open transaction was not reported as unresolved"
        assert value(scrape(url), "kafkatxn_hanging_evidence_complete") == 0
        assert any("--transactional-id" in r.getMessage() and "Describe" in r.getMessage() for r in caplog.records)

        injected = txnlab("txn", "inject-hanging", "--topic", topic, "--partition", "0",
                          "--transactional-id", f"{VISIBLE}{uuid.uuid4().hex[:6]}", conn=secured_cluster.connection())
        assert injected.returncode == 0, injected.stderr
        pid = json.loads(injected.stdout)["producer_id"]

        def confirmed():
            about = {(name, tuple(sorted(labels))): v for (name, labels), v in scrape(url).items()
                     if name.startswith("kafkatxn_hanging") and ("topic", topic) in labels}
            hanging = sum(v for (name, _), v in about.items() if name == "kafkatxn_hanging_transactions")
            return hanging >= 1 or NotYet(f"hanging samples of {topic}: {about}")

        wait_until(confirmed, 30, "the visible injected hanging transaction to be confirmed", interval=1)
    aborted = txnlab("txn", "abort", "--topic", topic, "--partition", "0",
                     "--producer-id", str(pid), "--yes", conn=secured_cluster.connection("operator"))
    assert aborted.returncode == 0, aborted.stderr


# ---- no secret leaks -------------------------------------------------------------------------------------
def _cmdlines(supervisor) -> dict[str, str]:
    lines = {}
    for name in supervisor.names():
        record = supervisor.record(name)
        if record and supervisor.is_running(name):
            try:
                lines[name] = open(f"/proc/{record.pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                pass
    return lines


def test_no_password_in_logs_run_directories_reports_or_command_lines(secured_cluster, tmp_path):
    secrets = secured_cluster.secrets
    passwords = [secrets.password(role) for role in security.ROLES] + [secrets.web_password_file.read_text().strip()]
    conn = secured_cluster.connection("workload")
    tag = new_run_tag()
    the_plan = plan("txn-producer", tag, 1, [])
    run_dir = new_run_dir(tmp_path, "txn-producer", tag)
    with Run(conn, run_dir, tag, seed=5, name="leak-check") as run:
        run.create_topics(the_plan.topics)
        for spec in the_plan.specs:
            run.start(spec)
        run.wait(5)
        cmdlines = {**_cmdlines(run.supervisor), **_cmdlines(secured_cluster.supervisor)}
        run.finish()
    assert {"exporter", "prometheus", "kafka-1"} <= set(cmdlines) and the_plan.specs[0].process in cmdlines
    listed = txnlab("txn", "list", "--all", conn=secured_cluster.connection("operator"))
    assert listed.returncode == 0, listed.stderr
    leaks = [name for name, line in cmdlines.items() if any(p in line for p in passwords)]
    assert not leaks, f"a password on the command line of {leaks}"
    state = secured_cluster.layout.state_dir
    files = [p for p in [*state.glob("logs/**/*"), *state.glob("node-*/logs/**/*"), *state.glob("prometheus/*.yml"),
                         *run_dir.rglob("*")] if p.is_file()]
    assert len(files) > 5
    leaked = [str(p) for p in files if any(pw.encode() in p.read_bytes() for pw in passwords)]
    assert not leaked, f"a password written to {leaked}"
    assert not [p for p in passwords if p in listed.stdout + listed.stderr]


@CAMPAIGN          # the runner's faults and heal are the gate's on PLAINTEXT; here the campaign's (docs/testing.md)
def test_a_short_chaos_experiment_runs_and_heals_on_the_secured_cluster(secured_cluster, tmp_path):
    from chaos.nemesis.backends import LocalBackend
    from chaos.runner.experiment import Experiment
    from chaos.runner.spec import load_spec
    from tests.integration.test_experiments import assert_healed, nemesis

    spec = load_spec("coordinator-kill", short=True)
    result = Experiment(spec, seed=13, runs_dir=tmp_path, progress=print, backend=LocalBackend(secured_cluster)).run()
    ops = read_history(result.run_dir).ops
    commits = [op for op in ops if op["f"] == "txn" and op["type"] == "ok"]
    assert result.error is None, result.error
    assert nemesis(ops, "fault") and nemesis(ops, "heal-all") and len(commits) > 10
    assert_healed(secured_cluster)


def test_verify_reads_both_isolation_levels_through_sasl_ssl_and_finds_the_run_valid(secured_cluster, producer_run):
    """The verdict a clean run gets on PLAINTEXT (test_verify.py): valid, every check at 0, here with
    Spark's Kafka connector reading as the verify principal over SASL_SSL (the producer's run above)."""
    _, run_dir = producer_run
    proc = txnlab("verify", str(run_dir), "--json", timeout=600, conn=secured_cluster.connection("verify"))
    report = json.loads((run_dir / "verify" / "report.json").read_text())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["valid"] is True, report
    assert report["counts"]["records"]["read_committed"] > 20 and report["counts"]["records"]["read_uncommitted"] > 20
    assert all(c["valid"] is True for c in report["checks"].values()), report["checks"]
    passwords = [secured_cluster.secrets.password(role) for role in security.ROLES]
    written = [p for p in (run_dir / "verify").rglob("*") if p.is_file()]
    assert written and not [p for p in written if any(pw.encode() in p.read_bytes() for pw in passwords)]
    assert not [pw for pw in passwords if pw in proc.stdout + proc.stderr]
