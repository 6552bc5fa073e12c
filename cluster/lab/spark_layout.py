"""The layout of a Spark standalone cluster, without touching a process (as layout.py is the Kafka cluster's):
the port plan from one base port, the master's and a worker's command line, and the settings every daemon of it
runs with (loopback only, no REST submission port). spark_analysis/standalone.py starts it on this machine,
compose.py renders the same command lines as the compose stack's spark services.
Must not: start anything.
"""
from __future__ import annotations

from dataclasses import dataclass

from cluster.access.errors import TxnlabError
from cluster.lab.ports import ephemeral_clash

DEFAULT_BASE_PORT = 31200          # below the ephemeral range (32768+), above every Kafka cluster txnlab starts
MAX_WORKERS = 8
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(TxnlabError, RuntimeError):
    """The standalone cluster could not be started, or is not running."""


CONNECT_PORT_OFFSET = 30


@dataclass(frozen=True)
class StandalonePlan:
    """Ports and sizes of one standalone cluster: master at base_port, its UI at +1; worker i at +10+i, UI +20+i;
    with `connect`, a Spark Connect server at +30 whose master is this cluster's, or local[*] when `local` (then
    no master nor workers: the server alone). The server's JIT is C1 only (quick to warm: demo-size runs) unless
    `connect_c2` (C2 too: slower to warm, faster on runs of millions of records in local mode)."""
    base_port: int = DEFAULT_BASE_PORT
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "2g"
    host: str = "127.0.0.1"
    connect: bool = False
    local: bool = False
    connect_memory: str = "4g"
    connect_c2: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise SparkClusterError(f"workers must be 1..{MAX_WORKERS}, not {self.workers}")
        if self.worker_cores < 1:
            raise SparkClusterError(f"worker cores must be at least 1, not {self.worker_cores}")
        if not 1024 <= self.base_port <= 65535 - CONNECT_PORT_OFFSET:
            raise SparkClusterError(f"base port {self.base_port} leaves no room for the master and workers")
        if self.local and not self.connect:
            raise SparkClusterError("local means a Spark Connect server on local[*]: it needs connect")

    def ephemeral_clash(self) -> str | None:
        """Why this port plan cannot serve on this machine (it overlaps the kernel's ephemeral ports), or None."""
        return ephemeral_clash(self.base_port, self.base_port + CONNECT_PORT_OFFSET)

    @property
    def standalone(self) -> bool:
        """Whether a master and workers run (not a local Connect server alone)."""
        return not self.local

    @property
    def connect_url(self) -> str | None:
        return f"sc://{self.host}:{self.base_port + CONNECT_PORT_OFFSET}" if self.connect else None

    @property
    def connect_port(self) -> int:
        return self.base_port + CONNECT_PORT_OFFSET

    @property
    def connect_master(self) -> str:
        return "local[*]" if self.local else self.master_url

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.base_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{self.host}:{self.base_port + 1}"

    def master_argv(self, spark_class: str) -> list[str]:
        return [spark_class, MASTER_CLASS, "--host", self.host, "--port", str(self.base_port),
                "--webui-port", str(self.base_port + 1)]

    def worker_argv(self, spark_class: str, i: int, work_dir: str) -> list[str]:
        return [spark_class, WORKER_CLASS, "--host", self.host, "--port", str(self.base_port + 10 + i),
                "--webui-port", str(self.base_port + 20 + i), "--cores", str(self.worker_cores),
                "--memory", self.worker_memory, "--work-dir", work_dir, self.master_url]


def daemon_settings() -> dict[str, str]:
    """Environment of the master and workers (and so of the executors a worker starts)."""
    return {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_PUBLIC_DNS": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}      # no REST submission port (6066)
