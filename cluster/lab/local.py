"""The local launcher: a real Kafka KRaft cluster, Toxiproxy and Prometheus as plain processes.

Owns: bringing the local stack up and down (the order of it all: Toxiproxy, the nodes, the exporter,
Prometheus; the companions themselves are cluster/lab/companions.py's), its state directory (cluster.json,
node folders, pid records, logs), node control for the chaos work (start, stop, kill, pause, resume,
restart, network isolation through Toxiproxy), the heal, the status and per-run broker config overrides.
Must not: run workloads or judge results; only loopback addresses are ever used.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from cluster.lab import java, security, versions
from cluster.access.admin import ClusterAdmin, registered_brokers, registered_in_every_view
from cluster.access.connection import ConnectionSettings
from cluster.lab.companions import ClusterError, Companions, require_ports_free
# re-exported: read from here (tests/unit/test_spec.py) since before the companions had a module of their own
from cluster.lab.companions import EXPORTER_INTERVAL_SECONDS as EXPORTER_INTERVAL_SECONDS
from cluster.lab.layout import LOOPBACK, ClusterLayout, new_cluster_id, render_properties
from cluster.lab.prometheus import Prometheus
from cluster.lab.supervisor import Supervisor
from cluster.lab.heal import heal_cluster
from cluster.lab.install import install_kafka
from cluster.lab.toxiproxy import Toxiproxy
from cluster.access.waiting import Deadline, wait_until
from cluster.access.progress import Progress


def default_state_dir() -> Path:
    return versions.txnlab_home() / "cluster"



class LocalCluster:
    """One local cluster, described by a ClusterLayout and remembered in state_dir/cluster.json."""

    def __init__(self, layout: ClusterLayout, alert_rules: Path | None = None,
                 exporter_command: Sequence[str] | None = None):
        """alert_rules: the Prometheus rule file the stack's Prometheus evaluates (none: no rules);
        exporter_command: the argv that starts txnlab's exporter (the cluster adds --bootstrap,
        --listen-address, --port and --interval; none: the stack runs no exporter). Both belong to the
        packages above cluster/, so the caller passes them in (report/stack.py builds txnlab's)."""
        self.layout = layout
        self.supervisor = Supervisor(layout.pid_dir)
        self.companions = Companions(layout, self.supervisor, alert_rules, exporter_command)
        self._acls_in_place = False

    @property
    def alert_rules(self) -> Path | None:
        return self.companions.alert_rules

    @property
    def exporter_command(self) -> tuple[str, ...] | None:
        return self.companions.exporter_command

    @property
    def toxiproxy(self) -> Toxiproxy:
        return self.companions.toxiproxy

    @toxiproxy.setter
    def toxiproxy(self, toxiproxy: Toxiproxy) -> None:
        self.companions.toxiproxy = toxiproxy

    # ---- construction --------------------------------------------------------------------------
    @classmethod
    def load(cls, state_dir: Path | None = None, alert_rules: Path | None = None,
             exporter_command: Sequence[str] | None = None, **overrides: object) -> "LocalCluster":
        """The cluster recorded in state_dir, or a default layout there; overrides replace layout fields
        (alert_rules and exporter_command: see __init__)."""
        state_dir = Path(state_dir or default_state_dir()).resolve()
        saved = _read_json(state_dir / "cluster.json").get("layout", {})
        fields = {k: v for k, v in saved.items() if k in ClusterLayout.__dataclass_fields__}
        fields.update({k: v for k, v in overrides.items() if v is not None})
        fields["state_dir"] = state_dir
        return cls(ClusterLayout(**fields), alert_rules, exporter_command)

    def connection(self, role: str | None = None) -> ConnectionSettings:
        """How to reach the cluster: PLAINTEXT, or on a sasl_ssl cluster as `role` (cluster/lab/security.py
        ROLES; default admin, the super user txnlab's own set-up and node control use)."""
        if not self.layout.secured:
            return ConnectionSettings(bootstrap=self.layout.bootstrap)
        return security.connection(self.secrets, self.layout.bootstrap, role or security.ADMIN)

    @property
    def secrets(self) -> security.Secrets:
        return security.Secrets(self.layout.secrets_dir)

    @property
    def cluster_id(self) -> str | None:
        return _read_json(self.layout.state_dir / "cluster.json").get("cluster_id")

    # ---- lifecycle ---------------------------------------------------------------------------------
    def up(self, progress: Progress = print, timeout: float = 120.0) -> str:
        """Start whatever is not running, wait until ready, return the bootstrap address. Idempotent."""
        self._require_installs(progress)
        self._check_settings_match()
        self._check_port_plan()
        already = {n for n in self.supervisor.names() if self.supervisor.is_running(n)}
        try:
            self._start_missing(progress)
            self.wait_ready(timeout, progress)
        except BaseException:
            self._stop_all_but(already)        # nothing half-done left behind (Ctrl-C included)
            raise
        return self.layout.bootstrap

    def _start_missing(self, progress: Progress) -> None:
        self._save_state()
        if self.layout.secured:
            self.secrets.ensure()
        self.companions.ensure_toxiproxy(progress)
        self._prepare_nodes(progress)
        starting = [n for n in self.layout.node_ids if not self.supervisor.is_running(self.node_name(n))]
        for node in starting:
            self.start_node(node)
        if starting:
            progress(f"started Kafka nodes {starting}")
        if self.layout.secured and self.exporter_command is not None:
            self._wait_registered(Deadline(120), progress)  # ACLs before the exporter's first look at the cluster
        self.companions.ensure_exporter(progress)
        self.companions.ensure_prometheus(progress)

    def _stop_all_but(self, keep: set[str]) -> None:
        for name in self.supervisor.names():
            if name not in keep:
                self.supervisor.stop(name, timeout=20)
                self.supervisor.forget(name)

    def down(self, purge: bool = False, progress: Progress = print) -> None:
        """Stop every process this cluster started (pid records only); purge also wipes its data, so its
        processes are killed (SIGKILL) instead: nothing a clean shutdown would write is kept (three brokers'
        controlled shutdown took ~7 s, paid by every test cluster)."""
        nodes = [self.node_name(n) for n in self.layout.node_ids]

        def stop(name: str) -> None:
            if purge:
                self.supervisor.kill(name, 20)
            else:
                self.supervisor.stop(name, 20)
        self.companions.stop_exporter(kill=purge)
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(stop, nodes))
        self.companions.stop_prometheus_and_toxiproxy(kill=purge)
        for name in self.supervisor.names():
            if not self.supervisor.is_running(name):
                self.supervisor.forget(name)
        progress("cluster stopped")
        if purge:
            shutil.rmtree(self.layout.state_dir, ignore_errors=True)
            progress(f"removed {self.layout.state_dir}")

    def wait_ready(self, timeout: float = 120.0, progress: Progress = print) -> None:
        """Until all brokers are registered, a transactional produce + commit round-trips, and Prometheus
        has scraped the stack's exporter (when it runs one) reaching the cluster (so PromQL probes can be
        asked at once)."""
        deadline = Deadline(timeout)
        self._wait_registered(deadline, progress)
        from cluster.access.smoke import transactional_round_trip
        transactional_round_trip(self.connection(), timeout=max(5.0, deadline.left()))
        progress("transactional produce + commit round-trip ok")
        self.companions.wait_scraped(max(30.0, deadline.left()), progress)

    def _wait_registered(self, deadline: Deadline, progress: Progress) -> None:
        """Until every broker is registered; on a sasl_ssl cluster, then the roles' ACLs are put in place."""
        expected = self.layout.node_ids
        wait_until(lambda: self._all_registered(expected), deadline.left(), f"brokers {expected} all registered "
                   f"(see {self.layout.state_dir}/node-*/logs/server.log)", 0.5, ClusterError)
        progress(f"brokers {expected} registered")
        if self.layout.secured and not self._acls_in_place:
            self._ensure_acls(deadline)
            self._acls_in_place = True
            progress(f"ACLs of the roles {', '.join(r for r in security.ROLES if r != security.ADMIN)} in place")

    def _ensure_acls(self, deadline: Deadline) -> None:
        """The roles' ACLs (cluster/lab/security.py ACLS), created as admin (an existing one is left as it is)."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(self.connection().confluent())
        try:
            for future in admin.create_acls(security.acl_bindings()).values():
                future.result(timeout=max(5.0, deadline.left()))
        except Exception as exc:  # noqa: BLE001 - KafkaException or a timeout: one message either way
            raise ClusterError(f"creating the roles' ACLs failed: {exc}") from None

    def _all_registered(self, expected: list[int]) -> bool:
        self._fail_if_node_died()
        return sorted(self.registered_brokers()) == expected

    def prometheus(self, timeout: float = 10.0) -> Prometheus:
        return self.companions.prometheus(timeout)

    def prometheus_config(self) -> str:
        """prometheus.yml of the local stack (Companions.prometheus_config)."""
        return self.companions.prometheus_config()

    @property
    def cluster_label(self) -> str:
        """The `cluster` label every series of this stack carries (dashboards are templated by it)."""
        return self.companions.cluster_label

    def registered_brokers(self) -> list[int]:
        return registered_brokers(self.connection())

    def direct_connection(self) -> ConnectionSettings:
        """connection() with the brokers' own client ports as bootstrap: reaches them without Toxiproxy."""
        direct = ",".join(f"{LOOPBACK}:{self.layout.client_port(n)}" for n in self.layout.node_ids)
        return self.connection().model_copy(update={"bootstrap": direct})

    # ---- node control ------------------------------------------------------------------------------
    @staticmethod
    def node_name(node: int) -> str:
        return f"kafka-{node}"

    def start_node(self, node: int) -> None:
        self._check_node(node)
        if self.supervisor.is_running(self.node_name(node)):
            return
        logs = self.layout.node_dir(node) / "logs"
        self.supervisor.start(self.node_name(node), self._broker_command(node), logs / "stdout.log")

    def stop_node(self, node: int, timeout: float = 30.0) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after timeout."""
        self._check_node(node)
        self.supervisor.stop(self.node_name(node), timeout)

    def kill_node(self, node: int) -> None:
        """Hard crash (SIGKILL)."""
        self._check_node(node)
        self.supervisor.kill(self.node_name(node))

    def pause_node(self, node: int) -> None:
        """Freeze the JVM (SIGSTOP), as a long GC pause would."""
        self._check_node(node)
        if not self.supervisor.pause(self.node_name(node)):
            raise ClusterError(f"node {node} is not running")

    def resume_node(self, node: int) -> None:
        self._check_node(node)
        self.supervisor.resume(self.node_name(node))

    def restart_node(self, node: int, clean: bool = True) -> None:
        (self.stop_node if clean else self.kill_node)(node)
        self.start_node(node)

    def node_pid(self, node: int) -> int | None:
        proc = self.supervisor.process(self.node_name(node))
        return proc.pid if proc else None

    # ---- network faults ------------------------------------------------------------------------
    def isolate_node(self, node: int, scope: str = "all") -> list[str]:
        """Cut node off (client and/or inter-node links) with timeout toxics on both streams."""
        self._check_node(node)
        return self.companions.isolate(node, scope)

    def heal_network(self) -> None:
        """Remove every toxic from every proxy; every proxy back on its own upstream."""
        self.companions.heal_network()

    def wait_serving(self, node: int, timeout: float) -> None:
        """Until the node answers on its own port and every broker that answers counts it registered and
        unfenced (each asked on its own port, so a stopped Toxiproxy does not hide them). Registration alone is
        not enough: right after a SIGKILL the controller still lists the dead broker for
        broker.session.timeout.ms."""
        direct = self.direct_connection()
        addresses = {n: f"{LOOPBACK}:{self.layout.client_port(n)}" for n in self.layout.node_ids}
        wait_until(lambda: registered_in_every_view(direct, node, addresses), timeout,
                   f"node {node} up and registered in every broker's view", error=ClusterError)

    def heal(self, timeout: float = 120.0) -> None:
        """Undo every fault (cluster/lab/heal.py: each step on its own, HealError naming those that failed):
        no toxics, every node resumed, running, serving and registered, and leadership back on the
        preferred replicas. The one heal of the local cluster (chaos/nemesis/backends.py's LocalBackend uses it)."""
        heal_cluster(self.layout.node_ids, reset_toxics=self.heal_network, resume=self.resume_node,
                     start=self.start_node, wait_serving=self.wait_serving, elect=self._elect_preferred_leaders,
                     timeout=timeout)

    def unhealed(self) -> dict[str, object]:
        """What faults left on this cluster, {} when nothing: `stopped` nodes (no process), `unregistered`
        nodes (not registered and unfenced), `paused` nodes (SIGSTOP), `toxics` {proxy: [toxic names]}. What
        "healed" means for the tests and bench/heal_trials.py."""
        left: dict[str, object] = {}
        if stopped := [n for n in self.layout.node_ids if not self.supervisor.is_running(self.node_name(n))]:
            left["stopped"] = stopped
        if unregistered := sorted(set(self.layout.node_ids) - set(self.registered_brokers())):
            left["unregistered"] = unregistered
        if paused := [n for n in self.layout.node_ids if self.supervisor.is_paused(self.node_name(n))]:
            left["paused"] = paused
        if toxics := self.toxiproxy.toxics():
            left["toxics"] = {proxy: [t["name"] for t in found] for proxy, found in sorted(toxics.items())}
        return left

    def _elect_preferred_leaders(self) -> None:
        with ClusterAdmin(self.direct_connection()) as admin:      # Toxiproxy need not run
            admin.elect_preferred_leaders()

    # ---- status ------------------------------------------------------------------------------------
    def status(self) -> dict:
        registered = set(self.registered_brokers())
        controller = self._active_controller() if registered else None
        nodes = [self._node_status(n, registered, controller) for n in self.layout.node_ids]
        return {"state_dir": str(self.layout.state_dir), "cluster_id": self.cluster_id,
                "bootstrap": self.layout.bootstrap, "active_controller": controller, "nodes": nodes,
                **self.companions.status(), "kafka_version": self.layout.kafka_version,
                "broker_overrides": self.layout.broker_overrides, "features": self.layout.features}

    def _node_status(self, node: int, registered: set[int], controller: int | None) -> dict:
        name = self.node_name(node)
        proc = self.supervisor.process(name)
        paused = self.supervisor.is_paused(name)
        health = ("down" if proc is None else "paused" if paused
                  else "up" if node in registered else "unregistered")
        return {"node": node, "pid": proc.pid if proc else None, "health": health,
                "active_controller": controller == node,
                "ports": {"client": self.layout.client_proxy_port(node), "client_direct": self.layout.client_port(node),
                          "controller": self.layout.controller_port(node), "jmx": self.layout.jmx_port(node)}}

    def _active_controller(self) -> int | None:
        try:
            with ClusterAdmin(self.connection(), request_timeout_ms=3000) as admin:
                return admin.active_controller()
        except Exception:  # noqa: BLE001 - status reports what it can see
            return None

    # ---- internals ---------------------------------------------------------------------------------
    def _check_node(self, node: int) -> None:
        if node not in self.layout.node_ids:
            raise ClusterError(f"no node {node}: this cluster has nodes {self.layout.node_ids}")

    def _require_installs(self, progress: Progress) -> None:
        if self.layout.kafka_version == versions.pinned()["KAFKA_VERSION"]:
            java.require_kafka_libs(self.layout.kafka_version)         # `make setup` assembles the pinned one
        else:
            install_kafka(self.layout.kafka_version, progress)          # another release: once, on first use
        java.java_binary()
        self.companions.require_installs()

    def _check_settings_match(self) -> None:
        """Refuse to silently change a running cluster's layout or broker settings, or the Kafka release of
        nodes whose storage another release formatted (a layout saved before releases were recorded ran the
        pinned one)."""
        saved = _read_json(self.layout.state_dir / "cluster.json").get("layout")
        if saved:
            saved.setdefault("kafka_version", versions.pinned()["KAFKA_VERSION"])
        running = [n for n in self.supervisor.names() if self.supervisor.is_running(n)]
        if saved and running and saved != self._layout_json():
            raise ClusterError("a cluster with other settings is running in "
                               f"{self.layout.state_dir}: run `txnlab cluster down` first")
        formatted = [n for n in self.layout.node_ids if (self.layout.data_dir(n) / "meta.properties").exists()]
        if saved and formatted and saved["kafka_version"] != self.layout.kafka_version:
            raise ClusterError(f"the cluster in {self.layout.state_dir} holds the data of Kafka "
                               f"{saved['kafka_version']}, not {self.layout.kafka_version}: run `txnlab cluster down "
                               f"--purge --state-dir {self.layout.state_dir}` first (its data is then deleted)")

    def _layout_json(self) -> dict:
        data = asdict(self.layout)
        data.pop("state_dir")
        return data

    def _save_state(self) -> None:
        self.layout.state_dir.mkdir(parents=True, exist_ok=True)
        state = _read_json(self.layout.state_dir / "cluster.json")
        state.update({"layout": self._layout_json(), "cluster_id": state.get("cluster_id") or new_cluster_id()})
        (self.layout.state_dir / "cluster.json").write_text(json.dumps(state, indent=2))

    def _prepare_nodes(self, progress: Progress) -> None:
        todo = []
        for node in self.layout.node_ids:
            node_dir = self.layout.node_dir(node)
            (node_dir / "logs").mkdir(parents=True, exist_ok=True)
            props = self.layout.server_properties(node)
            if self.layout.secured:              # holds the brokers' own password: the file is 0600
                props.update(security.broker_properties(self.secrets, self.layout.sasl_listeners()))
            security.write_private(self.layout.properties_file(node), render_properties(props))
            if not (self.layout.data_dir(node) / "meta.properties").exists():
                todo.append(node)
        if todo:
            with ThreadPoolExecutor(max_workers=len(todo)) as pool:
                list(pool.map(self._format_storage, todo))
            progress(f"formatted KRaft storage of nodes {todo} (cluster id {self.cluster_id})")

    def _format_storage(self, node: int) -> None:
        args = ["format", "-t", str(self.cluster_id), "-c", str(self.layout.properties_file(node)), "--ignore-formatted"]
        for name, level in sorted(self.layout.storage_features.items()):
            args += ["--feature", f"{name}={level}"]
        java.run_tool("kafka.tools.StorageTool", args, version=self.layout.kafka_version,
                      secret_args=security.format_arguments(self.secrets) if self.layout.secured else None)

    def _broker_command(self, node: int) -> list[str]:
        logs = self.layout.node_dir(node) / "logs"
        agent = f"{versions.jmx_agent_jar(self.layout.kafka_version)}={LOOPBACK}:{self.layout.jmx_port(node)}:{java.TEMPLATES / 'jmx-kafka.yaml'}"
        jvm = [f"-Xms{self.layout.heap}", f"-Xmx{self.layout.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-XX:InitiatingHeapOccupancyPercent=35", "-Djava.awt.headless=true",
               f"-Dkafka.logs.dir={logs}", f"-Dlog4j2.configurationFile={java.TEMPLATES / 'log4j2.properties'}",
               f"-javaagent:{agent}", f"-Dtxnlab.node={self.layout.state_dir}/node-{node}"]
        return [java.java_binary(), *jvm, "-cp", f"{java.require_kafka_libs(self.layout.kafka_version)}/*", "kafka.Kafka",
                str(self.layout.properties_file(node))]

    def _check_port_plan(self) -> None:
        """The plan must avoid the kernel's ephemeral ports (a client socket could take one), and on a
        cold start every port of it must be free."""
        if why := self.layout.ephemeral_clash():
            raise ClusterError(why)
        if not any(self.supervisor.is_running(n) for n in self.supervisor.names()):
            require_ports_free(self.layout.all_ports(), "the local cluster")

    def _fail_if_node_died(self) -> None:
        for node in self.layout.node_ids:
            if not self.supervisor.is_running(self.node_name(node)) and self.supervisor.record(self.node_name(node)):
                log = self.layout.node_dir(node) / "logs"
                raise ClusterError(f"Kafka node {node} exited during start-up; see {log}/server.log and {log}/stdout.log")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
