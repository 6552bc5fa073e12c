"""Cluster backends: the node and network capabilities a fault needs, behind one small interface.

Owns: the Backend protocol (kill, stop, start, pause, resume a node; wait until it serves requests
and is registered; Toxiproxy toxics on a node's links; heal) and its implementations. heal() of the
two ToxiproxyBackends removes every toxic, resumes and starts every node, waits until each is
registered, then elects the preferred leaders (the one write it makes to the cluster's metadata), each
step on its own (cluster/lab/heal.py: a failure skips none of the others; HealError names the failed ones);
the local cluster's is LocalCluster.heal itself (one heal path, also behind `txnlab chaos heal`);
ExistingBackend's heal() does nothing, as none of the faults it could undo can start there.
Two share ToxiproxyBackend (toxics, waiting, the heal):
  - LocalBackend: the local launcher (cluster/lab/local.py), node control by thin delegation;
  - DockerBackend: the compose stack (docker-compose.yml, rendered by cluster/lab/compose.py): containers
    found by their compose service label and signalled through the Docker SDK (`pip install docker`,
    imported only when a DockerBackend needs a client), Toxiproxy through its published API port with
    the same proxy names as the local stack.
And ExistingBackend, a cluster txnlab does not run: no node or network control (those faults refuse).
Every toxic a backend adds is named `txnlab-<name>-<stream>`, on both streams unless told otherwise,
and heal_network() removes every toxic of every proxy.
Must not: resolve fault targets or decide what a fault is (chaos/nemesis/faults.py), or touch anything but
loopback addresses and the containers of the compose services it names (an existing cluster is
only ever reached as a Kafka client).
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from cluster.access.admin import ClusterAdmin, broker_answers, registered_brokers, registered_in_every_view
from cluster.lab import compose
from cluster.lab.docker import PROJECT_LABEL, SERVICE_LABEL
from cluster.lab.docker import client as docker_client
from cluster.access.connection import ConnectionSettings
from cluster.lab.heal import heal_cluster
from cluster.lab.layout import LOOPBACK, ClusterLayout
from cluster.lab.local import LocalCluster
from cluster.lab.toxiproxy import ISOLATE_TOXIC, Proxy, Toxiproxy, add_toxic_on_links, toxic_names
from cluster.access.waiting import wait_until
from cluster.access.errors import TxnlabError

HEAL_TIMEOUT_S = 120.0
DOCKER_STOP_TIMEOUT_S = 30


class BackendError(TxnlabError, RuntimeError):
    """A backend cannot do what was asked; the message says what to do."""


@runtime_checkable
class Backend(Protocol):
    """What faults may do to a cluster. Node ids are the KRaft node ids (1..n)."""

    def node_ids(self) -> list[int]: ...

    def kill(self, node: int) -> None:
        """Hard crash (SIGKILL)."""

    def stop(self, node: int) -> None:
        """Clean shutdown (SIGTERM, controlled shutdown)."""

    def start(self, node: int) -> None:
        """Start the node if it is not running (a no-op when it is)."""

    def pause(self, node: int) -> None:
        """Freeze the node (SIGSTOP, or the cgroup freezer)."""

    def resume(self, node: int) -> None:
        """Unfreeze the node (a no-op when it is not paused)."""

    def wait_registered(self, node: int, timeout: float) -> None:
        """Until the node serves requests and is a registered, unfenced broker; BackendError after timeout."""

    def isolate(self, node: int, scope: str) -> list[str]:
        """Cut the node's links (client, inter or all) with timeout toxics; the proxy names."""

    def add_toxic(self, node: int, scope: str, toxic: dict) -> list[str]:
        """A Toxiproxy toxic {type, attributes, [name], [streams], [toxicity]} on the node's links."""

    def heal_network(self) -> None:
        """Remove every toxic."""

    def heal(self, timeout: float) -> None:
        """Everything back: no toxics, every node resumed and started, every broker registered."""

    def connection(self) -> ConnectionSettings: ...

    def prometheus_url(self) -> str | None: ...

    def describe(self) -> dict:
        """What this backend controls, secret-free, for cluster.json and the report."""


# ---- shared by both backends ----------------------------------------------------------------------
answers = broker_answers


def elect_preferred_leaders(conn: ConnectionSettings) -> None:
    with ClusterAdmin(conn) as admin:
        admin.elect_preferred_leaders()


class ToxiproxyBackend:
    """What both backends share: a layout (node ids, proxy names), a Toxiproxy client, how to reach a
    node directly, and the heal. Subclasses add node control (kill, stop, start, pause, resume)."""
    layout: ClusterLayout
    toxiproxy: Toxiproxy

    def node_address(self, node: int) -> str:
        """host:port where the node itself answers Kafka clients."""
        raise NotImplementedError

    def node_ids(self) -> list[int]:
        return list(self.layout.node_ids)

    def wait_registered(self, node: int, timeout: float) -> None:
        """Until the node serves requests and every broker that answers counts it registered and unfenced.

        Registration alone is not enough: right after a kill the controller still lists the dead
        broker until broker.session.timeout.ms passes."""
        addresses = {n: self.node_address(n) for n in self.node_ids()}
        wait_until(lambda: registered_in_every_view(self.connection(), node, addresses), timeout,
                   f"node {node} up and registered in every broker's view", error=BackendError)

    def isolate(self, node: int, scope: str) -> list[str]:
        return self.add_toxic(node, scope, ISOLATE_TOXIC)

    def add_toxic(self, node: int, scope: str, toxic: dict) -> list[str]:
        return add_toxic_on_links(self.toxiproxy, self.layout.links_of(node, scope), toxic)

    def toxic_names(self, node: int, scope: str, toxic: dict) -> list[tuple[str, str]]:
        """(proxy, toxic name) of every toxic add_toxic(node, scope, toxic) adds (for the fault journal)."""
        return toxic_names(self.layout.links_of(node, scope), toxic)

    def remove_toxics(self, toxics: list[tuple[str, str]]) -> None:
        """Remove the named toxics (one already gone is fine)."""
        for proxy, name in toxics:
            self.toxiproxy.remove_toxic(proxy, name)

    def heal_network(self) -> None:
        self.toxiproxy.reset()

    def reroute_client(self, node: int, upstream: str | None) -> None:
        """Point the node's client proxy at upstream, a relay on this machine (None: back at the node's own
        listener). Toxiproxy closes the proxy's open connections: their clients reconnect."""
        raise BackendError("this backend cannot put a relay in front of a node (the local cluster can)")

    def reroute_link(self, node: int, src: int, upstream: str | None) -> None:
        """Point the proxy of the link from node src to node's inter-broker listener at upstream (None: back at
        node's own listener); the brokers reconnect."""
        raise BackendError("this backend cannot put a relay between two nodes (the local cluster can)")

    def heal(self, timeout: float = HEAL_TIMEOUT_S) -> None:
        """No toxics, every node resumed and running, serving and registered, leadership back on the
        preferred replicas (faults leave it piled on the survivors); each step on its own (cluster/lab/heal.py)."""
        heal_cluster(self.node_ids(), reset_toxics=self.heal_network, resume=self.resume, start=self.start,
                     wait_serving=self.wait_registered, elect=lambda: elect_preferred_leaders(self.connection()),
                     timeout=timeout)

    def connection(self) -> ConnectionSettings:
        return ConnectionSettings(bootstrap=self.layout.bootstrap)

    def prometheus_url(self) -> str | None:
        return f"http://{LOOPBACK}:{self.layout.prometheus_port}"


# ---- the local launcher -------------------------------------------------------------------------
class LocalBackend(ToxiproxyBackend):
    """The local cluster (cluster/lab/local.py): node control, isolation, waiting and the heal are
    LocalCluster's (one implementation for `txnlab cluster`, experiments and `txnlab chaos heal`)."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster

    @property
    def layout(self) -> ClusterLayout:
        return self.cluster.layout

    @property
    def toxiproxy(self) -> Toxiproxy:
        return self.cluster.toxiproxy

    def wait_registered(self, node: int, timeout: float) -> None:
        self.cluster.wait_serving(node, timeout)

    def heal(self, timeout: float = HEAL_TIMEOUT_S) -> None:
        self.cluster.heal(timeout)

    def kill(self, node: int) -> None:
        self.cluster.kill_node(node)

    def stop(self, node: int) -> None:
        self.cluster.stop_node(node)

    def start(self, node: int) -> None:
        self.cluster.start_node(node)

    def pause(self, node: int) -> None:
        self.cluster.pause_node(node)

    def resume(self, node: int) -> None:
        self.cluster.resume_node(node)

    def isolate(self, node: int, scope: str) -> list[str]:
        return self.cluster.isolate_node(node, scope)

    def heal_network(self) -> None:
        self.cluster.heal_network()

    def reroute_client(self, node: int, upstream: str | None) -> None:
        self._reroute(f"n{node}-client", upstream)

    def reroute_link(self, node: int, src: int, upstream: str | None) -> None:
        self._reroute(f"n{node}-repl-from-{src}", upstream)

    def _reroute(self, name: str, upstream: str | None) -> None:
        own = next(p for p in self.layout.proxies() if p.name == name)
        self.toxiproxy.ensure_proxy(Proxy(own.name, own.listen, upstream or own.upstream))

    def connection(self) -> ConnectionSettings:
        return self.cluster.connection()

    def describe(self) -> dict:
        return {"backend": "local", "state_dir": str(self.layout.state_dir), "bootstrap": self.layout.bootstrap,
                "nodes": self.node_ids(), "kafka_version": self.layout.kafka_version, **self.layout.settings}


# ---- the compose stack ----------------------------------------------------------------------------
class DockerBackend(ToxiproxyBackend):
    """The compose stack: node i is the container of compose service kafka-i (of `project`, when given); its
    ports are those of the layout its containers carry (cluster/lab/compose.py's LAYOUT_LABEL: a stack of
    `txnlab docker up` may sit on other ports than the committed file's), else the committed file's."""

    def __init__(self, client: Any | None = None, project: str | None = None, layout: ClusterLayout | None = None):
        self._client = client
        self.project = project
        self._layout = layout
        self._toxiproxy: Toxiproxy | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    @property
    def layout(self) -> ClusterLayout:
        if self._layout is None:
            labels = [f"{SERVICE_LABEL}=kafka-1"] + ([f"{PROJECT_LABEL}={self.project}"] if self.project else [])
            carried = {c.labels.get(compose.LAYOUT_LABEL) for c in self.client.containers.list(
                all=True, filters={"label": labels})} - {None}
            if len(carried) > 1:
                raise BackendError("the compose stacks running differ in their layouts: name the compose project")
            self._layout = compose.layout_of_label(carried.pop()) if carried else compose.compose_layout()
        return self._layout

    @property
    def toxiproxy(self) -> Toxiproxy:
        if self._toxiproxy is None:
            self._toxiproxy = Toxiproxy(f"http://{LOOPBACK}:{self.layout.toxiproxy_port}")
        return self._toxiproxy

    @toxiproxy.setter
    def toxiproxy(self, value: Toxiproxy) -> None:
        self._toxiproxy = value

    def container(self, node: int) -> Any:
        """The container of service kafka-<node>, its state freshly read."""
        if node not in self.layout.node_ids:
            raise BackendError(f"no node {node}: the compose stack has nodes {self.layout.node_ids}")
        labels = [f"{SERVICE_LABEL}=kafka-{node}"] + ([f"{PROJECT_LABEL}={self.project}"] if self.project else [])
        found = self.client.containers.list(all=True, filters={"label": labels})
        if len(found) != 1:
            where = f" of compose project {self.project}" if self.project else ""
            raise BackendError(f"{len(found)} containers of compose service kafka-{node}{where}: "
                               + ("is the stack up (docker compose up -d)?" if not found else "name the compose project"))
        return found[0]

    def node_address(self, node: int) -> str:
        return f"{LOOPBACK}:{self.layout.client_proxy_port(node)}"   # only the proxies publish ports

    def kill(self, node: int) -> None:
        self.container(node).kill(signal="SIGKILL")

    def stop(self, node: int) -> None:
        self.container(node).stop(timeout=DOCKER_STOP_TIMEOUT_S)

    def start(self, node: int) -> None:
        container = self.container(node)
        if container.status not in ("running", "paused"):
            container.start()

    def pause(self, node: int) -> None:
        container = self.container(node)
        if container.status != "running":
            raise BackendError(f"node {node} is not running (container {container.name} is {container.status})")
        container.pause()

    def resume(self, node: int) -> None:
        container = self.container(node)
        if container.status == "paused":
            container.unpause()

    def describe(self) -> dict:
        return {"backend": "docker", "project": self.project, "services": [f"kafka-{n}" for n in self.node_ids()],
                "toxiproxy": self.toxiproxy.api, "bootstrap": self.layout.bootstrap,
                "kafka_version": self.layout.kafka_version, **self.layout.settings}


# ---- a cluster txnlab does not run --------------------------------------------------------------------
class ExistingBackend:
    """An existing cluster reached by its bootstrap address (security from TXNLAB_KAFKA_*): no node or
    network control, so only workload faults (pause-workload, zombie-producer, storm) and
    hanging-transaction run on it; the others fail at start with a BackendError, and heals have
    nothing to undo. `existing` has .bootstrap and .prometheus_url (chaos.runner.spec.ExistingClusterSpec)."""

    def __init__(self, existing: Any, environ: dict[str, str] | None = None):
        self.existing = existing
        self.conn = ConnectionSettings.from_env(bootstrap=existing.bootstrap, environ=environ)

    def _cannot(self, what: str) -> BackendError:
        return BackendError(f"cannot {what} on an existing cluster ({self.existing.bootstrap}): txnlab does not run "
                            "its nodes or sit between them; use a local cluster or the compose stack")

    def node_ids(self) -> list[int]:
        return registered_brokers(self.conn)

    def kill(self, node: int) -> None:
        raise self._cannot(f"kill node {node}")

    def stop(self, node: int) -> None:
        raise self._cannot(f"stop node {node}")

    def start(self, node: int) -> None:
        """Nothing was stopped: nothing to start."""

    def pause(self, node: int) -> None:
        raise self._cannot(f"pause node {node}")

    def resume(self, node: int) -> None:
        """Nothing was paused: nothing to resume."""

    def wait_registered(self, node: int, timeout: float) -> None:
        wait_until(lambda: node in registered_brokers(self.conn), timeout, f"node {node} registered",
                   error=BackendError)

    def isolate(self, node: int, scope: str) -> list[str]:
        raise self._cannot(f"isolate node {node}")

    def add_toxic(self, node: int, scope: str, toxic: dict) -> list[str]:
        raise self._cannot(f"add a {toxic['type']} toxic to node {node}'s links")

    def heal_network(self) -> None:
        """No toxics were added: nothing to remove."""

    def heal(self, timeout: float = HEAL_TIMEOUT_S) -> None:
        """Node and network faults cannot start here: nothing to undo."""

    def connection(self) -> ConnectionSettings:
        return self.conn

    def prometheus_url(self) -> str | None:
        return self.existing.prometheus_url

    def describe(self) -> dict:
        return {"backend": "existing", "bootstrap": self.existing.bootstrap, "connection": self.conn.describe(),
                "prometheus_url": self.existing.prometheus_url}
