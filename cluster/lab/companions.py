"""A local cluster's companions: Toxiproxy, the txnlab exporter and Prometheus, plain processes beside its nodes.

Owns: starting each that is not running (its port checked free first, then waited for until it listens), the
layout's Toxiproxy proxies (restored on every start) and the network faults made through them (a node's links cut,
every toxic removed), the stack's prometheus.yml (rewritten on every start; a running Prometheus reloads it when it
changed), whether Prometheus scrapes the exporter, their status and stopping them; and what the whole local
launcher shares with them: ClusterError and the one check that ports are free.
Must not: start, stop or signal a Kafka node, or format, register or configure one (cluster/lab/local.py's
LocalCluster does, and orders the companions around its nodes); import or locate the exporter (the caller passes
its command in); only loopback addresses are ever used.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from cluster.lab import java, security, versions
from cluster.lab.layout import LOOPBACK, ClusterLayout, render_prometheus_config
from cluster.lab.prometheus import Prometheus, PrometheusError
from cluster.lab.supervisor import Supervisor
from cluster.lab.toxiproxy import ISOLATE_TOXIC, Toxiproxy, add_toxic_on_links, restore_proxies
from cluster.access.waiting import WaitTimeout, port_open, wait_until
from cluster.access.progress import Progress
from cluster.access.errors import TxnlabError

EXPORTER_INTERVAL_SECONDS = 15


class ClusterError(TxnlabError, RuntimeError):
    """The local cluster cannot do what was asked; the message says what to do."""


PORTS_RELEASE_S = 15.0     # how long a process just killed may keep listening (see require_ports_free)


def require_ports_free(ports: list[int], what: str, release_s: float = PORTS_RELEASE_S) -> None:
    """Every port free, or ClusterError naming the busy ones. A port still busy is looked at again for up to
    `release_s`: a multithreaded process just killed (a Kafka node, Toxiproxy) shows as gone once its main thread is
    a zombie, while its other threads may still be closing its listening sockets; the next side of a bug run, on the
    same ports, met that in a CI run on a loaded machine (2026-12-01)."""
    busy = [p for p in ports if port_open(p)]
    if busy:
        try:
            wait_until(lambda: not any(port_open(p) for p in busy), release_s, f"ports {busy} to be released", 0.2)
        except WaitTimeout:
            busy = [p for p in busy if port_open(p)]
            if busy:
                raise ClusterError(f"ports {busy} needed by {what} are in use by another program: "
                                   "stop it or choose another --base-port") from None


class Companions:
    """Toxiproxy, the txnlab exporter and Prometheus of one layout, recorded by the cluster's Supervisor as
    `toxiproxy`, `exporter` and `prometheus`."""

    def __init__(self, layout: ClusterLayout, supervisor: Supervisor, alert_rules: Path | None = None,
                 exporter_command: Sequence[str] | None = None):
        """alert_rules and exporter_command: see LocalCluster.__init__ (cluster/lab/local.py)."""
        self.layout = layout
        self.supervisor = supervisor
        self.alert_rules = Path(alert_rules) if alert_rules is not None else None
        self.exporter_command = tuple(exporter_command) if exporter_command else None
        self.toxiproxy = Toxiproxy(f"http://{LOOPBACK}:{layout.toxiproxy_port}")

    @property
    def _secrets(self) -> security.Secrets:
        return security.Secrets(self.layout.secrets_dir)

    @staticmethod
    def require_installs() -> None:
        """Toxiproxy's binary and Prometheus are installed (`make setup`), else MissingInstall."""
        if not versions.toxiproxy_binary().exists():
            raise java.MissingInstall(f"toxiproxy-server not found at {versions.toxiproxy_binary()}: run `make setup`")
        if not shutil.which("prometheus"):
            raise java.MissingInstall("prometheus not found on PATH: run `make setup` (Debian package prometheus)")

    # ---- start -------------------------------------------------------------------------------------
    def ensure_toxiproxy(self, progress: Progress) -> None:
        if not self.supervisor.is_running("toxiproxy"):
            require_ports_free([self.layout.toxiproxy_port], "toxiproxy")
            argv = [str(versions.toxiproxy_binary()), "-host", LOOPBACK, "-port", str(self.layout.toxiproxy_port)]
            self.supervisor.start("toxiproxy", argv, self.layout.logs_dir / "toxiproxy.log")
            wait_until(lambda: port_open(self.layout.toxiproxy_port), 15, "toxiproxy API", 0.2, ClusterError)
            progress(f"toxiproxy up on {LOOPBACK}:{self.layout.toxiproxy_port}")
        restore_proxies(self.toxiproxy, self.layout.proxies())

    def ensure_prometheus(self, progress: Progress) -> None:
        config = self.layout.state_dir / "prometheus" / "prometheus.yml"
        config.parent.mkdir(parents=True, exist_ok=True)
        changed = not config.exists() or config.read_text() != self.prometheus_config()
        config.write_text(self.prometheus_config())
        if self.supervisor.is_running("prometheus"):
            if changed:            # a running Prometheus re-reads its configuration (--web.enable-lifecycle)
                self.prometheus().reload()
            return
        require_ports_free([self.layout.prometheus_port], "prometheus")
        argv = [shutil.which("prometheus") or "prometheus", f"--config.file={config}",
                f"--storage.tsdb.path={config.parent / 'data'}", f"--web.listen-address={LOOPBACK}:{self.layout.prometheus_port}",
                "--web.enable-lifecycle", "--storage.tsdb.retention.time=2d"]
        self.supervisor.start("prometheus", argv, self.layout.logs_dir / "prometheus.log")
        wait_until(lambda: port_open(self.layout.prometheus_port), 30, "prometheus", 0.2, ClusterError)
        progress(f"prometheus up on http://{LOOPBACK}:{self.layout.prometheus_port}")

    def ensure_exporter(self, progress: Progress) -> None:
        """The txnlab exporter as a process of the stack, started with the caller's exporter_command
        (cluster/ neither imports nor locates it); nothing when there is none."""
        if self.exporter_command is None or self.supervisor.is_running("exporter"):
            return
        require_ports_free([self.layout.exporter_port], "the txnlab exporter")
        argv = [*self.exporter_command, "--bootstrap", self.layout.bootstrap, "--listen-address", LOOPBACK,
                "--port", str(self.layout.exporter_port), "--interval", str(EXPORTER_INTERVAL_SECONDS)]
        env = None
        if self.layout.secured:      # its principal, HTTPS and basic auth from a 0600 config file, not argv
            config = self.layout.secrets_dir / "exporter.yaml"
            security.write_private(config, security.exporter_config(self._secrets, self.layout.bootstrap))
            env = {**os.environ, "TXNLAB_EXPORTER_CONFIG": str(config)}
        self.supervisor.start("exporter", argv, self.layout.logs_dir / "exporter.log", cwd=versions.REPO_ROOT, env=env)
        wait_until(lambda: port_open(self.layout.exporter_port), 30, "the txnlab exporter", 0.2, ClusterError)
        scheme = "https" if self.layout.secured else "http"
        progress(f"exporter up on {scheme}://{LOOPBACK}:{self.layout.exporter_port}/metrics")

    # ---- Prometheus ----------------------------------------------------------------------------------
    def prometheus(self, timeout: float = 10.0) -> Prometheus:
        return Prometheus(f"http://{LOOPBACK}:{self.layout.prometheus_port}", timeout)

    def prometheus_config(self) -> str:
        """prometheus.yml of the local stack: the brokers' JMX agents and the txnlab exporter, evaluated
        against the alert_rules passed in (txnlab's: dashboards/alerts/, the same file the compose stack loads)."""
        labels = {"cluster": self.cluster_label}
        jmx = [f"{LOOPBACK}:{self.layout.jmx_port(n)}" for n in self.layout.node_ids]
        jobs = {"kafka-jmx": {"targets": jmx, "labels": labels}}
        settings = {}
        if self.exporter_command is not None:
            jobs["txnlab-exporter"] = {"targets": [f"{LOOPBACK}:{self.layout.exporter_port}"], "labels": labels}
            if self.layout.secured:
                settings["txnlab-exporter"] = security.prometheus_scrape_settings(self._secrets)
        return render_prometheus_config(str(self.alert_rules) if self.alert_rules else None, jobs, settings)

    @property
    def cluster_label(self) -> str:
        """The `cluster` label every series of this stack carries (dashboards are templated by it)."""
        return self.layout.state_dir.name

    def wait_scraped(self, timeout: float, progress: Progress) -> None:
        """Until Prometheus has scraped the exporter reaching the cluster; nothing when the stack runs none."""
        if self.exporter_command is None:
            return
        wait_until(self._exporter_scraped, timeout, "Prometheus to scrape the exporter (kafkatxn_up == 1)", 0.5,
                   ClusterError)
        progress("prometheus scrapes the exporter")

    def _exporter_scraped(self) -> bool:
        try:
            return self.prometheus(timeout=5).values('kafkatxn_up{job="txnlab-exporter"}')[:1] == [1.0]
        except PrometheusError:
            return False

    # ---- network faults ------------------------------------------------------------------------
    def isolate(self, node: int, scope: str = "all") -> list[str]:
        """Cut node off (client and/or inter-node links) with timeout toxics on both streams."""
        return add_toxic_on_links(self.toxiproxy, self.layout.links_of(node, scope), ISOLATE_TOXIC)

    def heal_network(self) -> None:
        """Remove every toxic from every proxy; every proxy back on its own upstream."""
        self.toxiproxy.reset()
        restore_proxies(self.toxiproxy, self.layout.proxies())

    # ---- status and stop ---------------------------------------------------------------------------
    def status(self) -> dict:
        return {"toxiproxy": self._service_status("toxiproxy", self.layout.toxiproxy_port),
                "prometheus": self._service_status("prometheus", self.layout.prometheus_port),
                "exporter": self._service_status("exporter", self.layout.exporter_port)}

    def _service_status(self, name: str, port: int) -> dict:
        proc = self.supervisor.process(name)
        return {"pid": proc.pid if proc else None, "health": "up" if proc and port_open(port) else "down",
                "port": port}

    def stop_exporter(self, kill: bool) -> None:
        """Before the nodes stop (it reads them): SIGTERM, or with kill SIGKILL (a purge keeps nothing it writes)."""
        self._stop("exporter", kill)

    def stop_prometheus_and_toxiproxy(self, kill: bool) -> None:
        """After the nodes stopped (the brokers reach each other through Toxiproxy); kill: as stop_exporter."""
        for name in ("prometheus", "toxiproxy"):
            self._stop(name, kill)

    def _stop(self, name: str, kill: bool) -> None:
        if kill:
            self.supervisor.kill(name, 10)
        else:
            self.supervisor.stop(name, 10)
