"""The compose stack on a real Docker engine (Debian's docker.io): the engine started when none answers, the images
built from compose/*.Dockerfile FROM a Debian base made with debootstrap, the stack up on loopback ports (host
network, no bridge), faults through the DockerBackend healed and verified, `txnlab chaos heal` after a kill -9 of
the runner, and the stack down leaving nothing of the project. docs/docker.md.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from chaos.nemesis.journal import FAULTS_DIR, WORKLOADS, read_journal
from cluster.lab import compose
from cluster.lab.docker import Engine, Stack, client, ensure_base
from cluster.lab.versions import REPO_ROOT
from cluster.access.waiting import wait_until
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, verify_reports as reports
from chaos.runner.spec import with_client
from tests.integration.test_clients import assert_through_the_fault, on_client_document
from tests.cli import chaos_run, txnlab

pytestmark = pytest.mark.docker

DOCKER_BASE_PORT = TEST_BASE_PORT - 4000            # 17000 (the secured stack 18000): clear of every other port plan
                                                   # of the suite and below the ephemeral range (32768+)
PROJECT = "txnlab-test"


@pytest.fixture(scope="module")
def engine():
    """An engine that answers (started here when none did: stopped at the end by its recorded pid), the base."""
    engine = Engine()
    started = engine.ensure(progress=print)
    try:                                    # a base that cannot be made (or a Ctrl-C in debootstrap) stops it too
        ensure_base(client(), progress=print)
        yield engine
    finally:
        if started:
            engine.stop(progress=print)


@pytest.fixture(scope="module")
def stack(engine):
    stack = Stack.named(PROJECT, compose.compose_layout(base_port=DOCKER_BASE_PORT))
    stack.down(progress=print)                          # what an aborted earlier session left
    stack.render()
    stack.build(progress=print, lab=False)             # the lab's image: `txnlab docker up` builds it (docs/docker.md)
    stack.up(progress=print)
    yield stack
    stack.down(progress=print)


def verify(*runs: Path) -> dict[str, dict]:
    out = txnlab("verify", *map(str, runs), "--json", timeout=900)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return {r["run"]: r for r in reports(out.stdout)}


def spec(name: str, faults: list[dict], duration_s: int) -> dict:
    return {"name": name, "description": "faults on the compose stack's containers and links",
            "cluster": {"compose": {"project": PROJECT}},
            "workloads": [{"workload": "txn-producer", "instances": 2}], "duration_s": duration_s,
            "schedule": {"faults": faults}, "quiescence": {"timeout_s": 30}}


def pause(at_s: int, duration_s: int) -> dict:
    return {"kind": "pause-broker", "at_s": at_s, "duration_s": duration_s, "params": {"target": "node:2"}}


def latency(at_s: int, duration_s: int) -> dict:
    return {"kind": "network", "at_s": at_s, "duration_s": duration_s, "params": {"target": "node:3", "toxic": "latency"}}


# every node and network capability the DockerBackend claims, besides coordinator-kill's kill: pause and resume,
# a toxic, a clean stop and start, an isolation (toxics that cut a node's clients off)
# (the last heal planned 14 s before the end: a stopped container's start under load took 14 s in a CI run, and
# franz-go's processor commits ~5 s after it: its group's offsets need a sample after that to show the recovery)
CONTAINER_FAULTS = [pause(4, 7), latency(5, 7),
                    {"kind": "stop-broker", "at_s": 14, "duration_s": 6, "params": {"target": "node:1"}},
                    {"kind": "isolate-broker", "at_s": 25, "duration_s": 5, "params": {"target": "node:3", "scope": "client"}}]


def test_the_stack_runs_on_the_host_network_and_prometheus_scrapes_the_exporter(stack):
    containers = client().containers.list(filters={"label": f"com.docker.compose.project={PROJECT}"})
    assert {c.labels["com.docker.compose.service"] for c in containers} == {
        "kafka-1", "kafka-2", "kafka-3", "toxiproxy", "exporter", "prometheus"}
    assert {c.attrs["HostConfig"]["NetworkMode"] for c in containers} == {"host"}
    assert stack.leftovers()["networks"] == []                          # no bridge: nothing but loopback ports
    assert all(c.image.tags[0].startswith("txnlab/") for c in containers)
    prometheus = f"http://127.0.0.1:{stack.layout.prometheus_port}/api/v1/query"

    def exporter_up() -> bool:
        found = requests.get(prometheus, params={"query": 'up{job="txnlab-exporter"}'}, timeout=5).json()["data"]["result"]
        return bool(found) and found[0]["value"][1] == "1"
    wait_until(exporter_up, 60, "Prometheus (container) scraping the exporter (container)", interval=2)
    core = {"kafkatxn_up", "kafkatxn_build_info", "kafkatxn_collector_up", "kafkatxn_partition_lso_lag",
            "kafkatxn_broker_active_producers", "kafkatxn_hanging_unresolved_transactions"}

    def families() -> set[str] | None:              # the background collectors' families after their first run
        emitted = set(re.findall(r"^# TYPE (kafkatxn_\w+) ", requests.get(stack.exporter_url(), timeout=10).text, re.M))
        return emitted if core <= emitted else None
    emitted = wait_until(families, 60, "the exporter's families after its first collection", interval=2)
    catalog = (REPO_ROOT / "docs" / "exporter.md").read_text()        # as test_exporter_collectors.py reads it
    names = {n.removeprefix("kafkatxn_") for n in emitted}             # a counter's _total and _created: its name
    undocumented = [n for n in names if not any(f"`{v}`" in catalog for v in (
        n, n.removesuffix("_total") + "_total", n.removesuffix("_created") + "_total"))]
    assert len(names) > 30 and not undocumented, undocumented
    assert "kafkatxn_up 1" in requests.get(stack.exporter_url(), timeout=10).text


def test_coordinator_kill_and_every_container_fault_through_the_docker_backend_heal_and_verify_valid(stack, tmp_path):
    """The built-in coordinator-kill (short) on the stack's containers, its processors and an added producer on
    Kafka's Java clients, then a paused broker, a latency toxic, a clean stop and an isolation under franz-go's
    producers and processor (the gate's runs of those two clients through faults: test_clients.py's assertions):
    every fault recovered, nothing left unhealed, both runs verified valid."""
    runs = tmp_path / "runs"
    runs.mkdir()
    coordinator_kill = chaos_run(on_client_document("coordinator-kill", "java"), runs, "--short", "--compose", PROJECT)
    results = [finished(coordinator_kill, stack, {"kill-broker", "pause-broker"})]
    faults = chaos_run(on_franz_go(spec("docker-container-faults", CONTAINER_FAULTS, 44)), runs)
    results.append(finished(faults, stack, {f["kind"] for f in CONTAINER_FAULTS}))
    reports = verify(*(Path(r["run_dir"]) for r in results))
    assert [reports[r["run_dir"]]["valid"] for r in results] == [True, True], reports
    for result, on in zip(results, ("java", "franz-go")):
        run = Path(result["run_dir"])
        summary = json.loads((run / "experiment.json").read_text())["summary"]
        assert_through_the_fault(run, reports[str(run)], summary, on)


def on_franz_go(document: dict) -> dict:
    """The container faults' run with an exactly-once processor beside its producers, all on franz-go (the gate's
    run of that client through faults: test_clients.py's assertions)."""
    return with_client({**document, "workloads": [*document["workloads"], {"workload": "processor", "instances": 1}]},
                       "franz-go")


def finished(proc: subprocess.Popen, stack: Stack, kinds: set[str]) -> dict:
    """A chaos run's result, once it ended steady with every fault of `kinds` recovered and nothing left unhealed."""
    out = proc.communicate(timeout=600)[0]
    print(out)
    assert proc.returncode == 0, out[-3000:]
    result = json.loads(out[out.index("{\n"):])
    assert {f["kind"] for f in result["recovery"]["faults"]} == kinds
    assert all(f["recovered"] is True for f in result["recovery"]["faults"]), result["recovery"]
    assert not stack.unhealed(), stack.unhealed()
    return result


@CAMPAIGN          # the heal from the journal after a kill -9: test_chaos_heal (local); the docker backend's heal steps:
#                    the runs above; its rebuilding from a journal entry: tests/unit/test_journal.py (docs/testing.md)
def test_after_a_kill_9_of_the_runner_mid_pause_chaos_heal_leaves_nothing_paused_and_no_toxic(stack, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    proc = chaos_run(spec("docker-kill-me", [pause(3, 180), latency(4, 180)], 200), runs)

    def both_started() -> Path | None:
        assert proc.poll() is None, proc.communicate()[0]
        found = list(runs.glob("*"))
        if not found:
            return None
        entries = [e for e in read_journal(found[0] / FAULTS_DIR).entries if e["kind"] != WORKLOADS]
        return found[0] if len(entries) == 2 and all(e["phase"] == "started" for e in entries) else None
    run_dir = wait_until(both_started, 240, "the pause and the toxic started and journaled", interval=0.5)
    left = stack.unhealed()
    assert left.get("paused") == [2] and "toxics" in left, left
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert stack.unhealed().get("paused") == [2]                      # nobody healed it: the runner is gone
    healed = txnlab("chaos", "heal", str(run_dir), timeout=600)
    print(healed.stdout, healed.stderr)
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert not stack.unhealed(), stack.unhealed()
    assert [e for e in read_journal(run_dir / FAULTS_DIR).entries if e["kind"] != WORKLOADS] == []
    from cluster.lab.supervisor import Supervisor
    workloads = Supervisor(run_dir / "pids")                          # the killed run's own processes
    for name in workloads.names():
        workloads.stop(name, timeout=10)


def test_the_stack_down_leaves_no_container_network_or_volume_of_the_project(stack):
    assert stack.leftovers()["volumes"]                                  # the brokers' data, while up
    left = stack.down(progress=print)
    assert left == {"containers": [], "networks": [], "volumes": []}


@CAMPAIGN          # the stack is the gate's, its secured profile the campaign's (docs/testing.md)
def test_the_secured_stack_serves_https_and_prometheus_scrapes_it(engine):
    secured = Stack.named(PROJECT + "-secured", compose.compose_layout("sasl_ssl", base_port=DOCKER_BASE_PORT + 1000))
    secured.down(progress=print)
    secured.render()
    try:
        secured.build(progress=print, lab=False)
        secured.up(progress=print)
        from cluster.lab import security
        secrets = security.Secrets(secured.folder / "secrets")
        auth = (security.WEB_USER, secrets.web_password_file.read_text().strip())
        answer = requests.get(secured.exporter_url(), verify=str(secrets.ca_file), auth=auth, timeout=10)
        assert answer.status_code == 200 and "kafkatxn_up 1" in answer.text
        assert requests.get(secured.exporter_url(), verify=str(secrets.ca_file), timeout=10).status_code == 401
        prometheus = f"http://127.0.0.1:{secured.layout.prometheus_port}/api/v1/query"

        def scraped_over_https() -> bool:
            found = requests.get(prometheus, params={"query": 'up{job="txnlab-exporter"}'}, timeout=5).json()["data"]["result"]
            return bool(found) and found[0]["value"][1] == "1"
        wait_until(scraped_over_https, 90, "Prometheus scraping the exporter over HTTPS with basic auth", interval=2)
    finally:
        left = secured.down(progress=print)
    assert left == {"containers": [], "networks": [], "volumes": []}
