"""One real local cluster for the whole integration session (started lazily, torn down at the end).

Set TXNLAB_TEST_KEEP_CLUSTER=1 to leave it running between local runs (faster iteration).
Fault tests use `heal_after`, which always restores the cluster: no toxics, every node running,
every broker registered.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest

from cluster.access.admin import ClusterAdmin
from cluster.lab.layout import DRILL_BROKER_CONFIG, HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES
from cluster.lab.local import LocalCluster
from cluster.access.smoke import ensure_topic
from cluster.lab.versions import kafka_version, txnlab_home
from report.stack import local_stack

CAMPAIGN = pytest.mark.campaign      # a live test that left the gate: docs/testing.md's moved-test table


def needed_runs(request, argname: str = "name") -> set[str]:
    """The runs this module's selected tests read: each one's `argname` parameter and the names of its
    `reads_runs` marker. A module that makes its runs in its set-up makes these and no others, so a tier's
    selection (the gate's, `-m campaign`'s, a -k) costs only what it reads."""
    needed: set[str] = set()
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if argname in params:
            needed.add(params[argname])
        for marker in item.iter_markers("reads_runs"):
            needed.update(marker.args)
    return needed


def verify_reports(stdout: str) -> list[dict]:
    """`txnlab verify --json`'s reports (one run: its report; several: a list), from the output's JSON document."""
    found = json.loads(stdout[re.search(r"^[\[{]$", stdout, re.M).start():])
    return found if isinstance(found, list) else [found]


TEST_BASE_PORT = int(os.environ.get("TXNLAB_TEST_BASE_PORT", "21000"))


def cluster_state_dir(name: str = "test-cluster") -> Path:
    return Path(os.environ.get("TXNLAB_TEST_STATE", txnlab_home() / name))


DRILL_BASE_PORT = TEST_BASE_PORT + 3000
# The drill cluster: one node, the demo's drill settings (cluster/lab/layout.py: hanging transactions can be
# injected, a small transaction.max.timeout.ms) at transaction.version=1, and the coordinator's timeout
# sweep slowed to once an hour so a transaction held past its timeout stays visible until the test ends it.
TEST_DRILL_BROKER_CONFIG = {**DRILL_BROKER_CONFIG,
                            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000"}


def _session_cluster(name: str, **settings: object):
    """The session's cluster `name` with `settings`, running the session's Kafka release
    ($TXNLAB_KAFKA_VERSION, else the pin: the version matrix runs the suite once per release)."""
    stale = LocalCluster.load(cluster_state_dir(name))
    local = LocalCluster.load(cluster_state_dir(name), **local_stack(), kafka_version=kafka_version(), **settings)
    if stale.layout != local.layout:          # left over from an aborted run with other settings
        stale.down(purge=True, progress=lambda msg: print(f"[stale {name}] {msg}"))
    local.up(progress=lambda msg: print(f"[{name}] {msg}"), timeout=240)
    yield local
    if not os.environ.get("TXNLAB_TEST_KEEP_CLUSTER"):
        local.down(purge=True)


SPARK_CONNECT_BASE_PORT = 31800     # the session's Spark Connect server listens at +30


@pytest.fixture(scope="session", autouse=True)
def spark_remote():
    """One Spark Connect server (local[*]) for the whole session: every `txnlab verify` of the live tests (and of
    the demo's and bug runs they start) is its client through $TXNLAB_SPARK_REMOTE, so none pays a JVM start (the
    corpus verifies by spark-submit, the gate's proof of that backend); stopped by its pid at the end. Its URL, or that of $TXNLAB_SPARK_REMOTE when given."""
    from spark_analysis.standalone import SharedConnect
    shared = SharedConnect(txnlab_home() / "test-spark-connect", SPARK_CONNECT_BASE_PORT,
                           progress=lambda line: print(f"[spark-connect] {line}")).start()
    remote = shared.remote()         # "" when it could not start: each verify then runs spark-submit (slower);
    saved = os.environ.get("TXNLAB_SPARK_REMOTE")      # test_verify's remote test fails on its own then
    os.environ["TXNLAB_SPARK_REMOTE"] = remote
    yield remote
    if saved is None:
        os.environ.pop("TXNLAB_SPARK_REMOTE", None)
    shared.stop()


@pytest.fixture(scope="session")
def cluster():
    yield from _session_cluster("test-cluster", base_port=TEST_BASE_PORT)


@pytest.fixture(scope="session")
def drill_cluster():
    yield from _session_cluster("test-drill-cluster", nodes=1, base_port=DRILL_BASE_PORT,
                                broker_overrides=TEST_DRILL_BROKER_CONFIG, features=dict(HANGING_DRILL_FEATURES))


SECURED_BASE_PORT = TEST_BASE_PORT + 9000


@pytest.fixture(scope="session")
def secured_cluster():
    """The secured cluster (docs/security.md): 3 nodes, SASL_SSL with SCRAM-SHA-512 users per role, TLS from
    its own CA, the StandardAuthorizer and the roles' ACLs; partition verification off, so a hanging
    transaction can be injected where ACLs hide transactional ids."""
    yield from _session_cluster("test-secured-cluster", base_port=SECURED_BASE_PORT, security="sasl_ssl",
                                broker_overrides=dict(HANGING_DRILL_BROKER_CONFIG), features=dict(HANGING_DRILL_FEATURES))


@pytest.fixture
def drill_conn(drill_cluster):
    return drill_cluster.connection()


@pytest.fixture
def conn(cluster):
    return cluster.connection()


@pytest.fixture
def admin(conn):
    with ClusterAdmin(conn) as client:
        yield client


@pytest.fixture
def topic(conn):
    """A fresh 3-partition, replication-factor-3 topic."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    ensure_topic(conn, name, partitions=3, replication=3)
    return name


@pytest.fixture
def heal_after(cluster):
    """Yields the cluster; afterwards removes toxics, resumes/starts every node, waits for health."""
    yield cluster
    cluster.heal()

