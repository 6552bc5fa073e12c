"""A Flink session cluster of local processes for the flink workload: its folder, ports, configuration, the
command lines of its JobManager and TaskManagers, and its REST API.

A run's Flink cluster lives in one folder (`home`, under the run's scratch folder): conf/config.yaml rendered
once by the first JobManager start (every later start, and the TaskManagers and the job's client, read the same
file), ports.json (the cluster's block of PORT_BLOCK loopback ports, chosen once, so a restarted JobManager
comes back where its TaskManagers and client look for it), log/ (Flink's own logs), checkpoints/ (retained
on cancellation: a job resubmitted after the JobManager's loss restores the latest) and tmp/.
Every address is 127.0.0.1; the ports come from FLINK_PORTS, below the ephemeral range (so no client's outgoing
connection takes one while a JobManager restarts), above the port plans of the Kafka clusters txnlab starts (from
30000 at most, 900 ports each) and below Spark's (cluster/lab/spark_layout.py: 31200 and up); a block is taken only
when all its ports are free.
The processes are Flink's own scripts from the PyFlink install (bin/jobmanager.sh and taskmanager.sh
start-foreground: they exec the JVM, so the pid started is the JVM's); who starts and stops them is the
workload (chaos/workloads/flink.py).
Must not: start or signal processes, or write anywhere but `home`.
"""
from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from cluster.lab import versions
from cluster.access.errors import TxnlabError
from cluster.lab.java import java_binary
from cluster.lab.layout import LOOPBACK

FLINK_PORTS = range(31000, 31200)
PORT_BLOCK = 16          # JobManager rpc, REST, blob; then TaskManager rpc and data port ranges (6 each)
JOB_NAME = "txnlab-flink {group}"      # the job's name: a restarted client finds its job by it


class FlinkError(TxnlabError, RuntimeError):
    """The Flink cluster cannot be set up or asked (no free ports, no install, a REST error)."""


def flink_home_dir() -> Path:
    """FLINK_HOME: the pyflink package of the pinned install (its bin/, lib/, opt/ and conf/)."""
    found = sorted((versions.flink_dir() / "venv" / "lib").glob("python3*/site-packages/pyflink"))
    if not found or not (found[0] / "bin" / "jobmanager.sh").exists():
        raise FlinkError(f"no PyFlink install in {versions.flink_dir()}: run `make setup` "
                         "(python -m cluster.lab.install installs it)")
    return found[0]


@dataclass(frozen=True)
class Ports:
    base: int

    @property
    def rpc(self) -> int:
        return self.base

    @property
    def rest(self) -> int:
        return self.base + 1

    @property
    def blob(self) -> int:
        return self.base + 2

    @property
    def tm_rpc(self) -> str:
        return f"{self.base + 4}-{self.base + 9}"

    @property
    def tm_data(self) -> str:
        return f"{self.base + 10}-{self.base + 15}"

    @property
    def rest_url(self) -> str:
        return f"http://{LOOPBACK}:{self.rest}"


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def choose_ports(home: Path, start_hint: int = 0) -> Ports:
    """The cluster's ports: ports.json when a JobManager chose them before, else the first block of FLINK_PORTS
    (from start_hint on, wrapping) whose ports are all free now, recorded."""
    recorded = home / "ports.json"
    if recorded.exists():
        return Ports(int(json.loads(recorded.read_text())["base"]))
    blocks = list(range(FLINK_PORTS.start, FLINK_PORTS.stop - PORT_BLOCK + 1, PORT_BLOCK))
    first = start_hint % len(blocks)
    for base in blocks[first:] + blocks[:first]:
        if all(_free(p) for p in range(base, base + PORT_BLOCK)):
            home.mkdir(parents=True, exist_ok=True)
            tmp = recorded.with_suffix(".tmp")
            tmp.write_text(json.dumps({"base": base}) + "\n")
            tmp.replace(recorded)
            return Ports(base)
    raise FlinkError(f"no {PORT_BLOCK} free loopback ports in {FLINK_PORTS.start}-{FLINK_PORTS.stop - 1}")


def recorded_ports(home: Path) -> Ports | None:
    path = home / "ports.json"
    return Ports(int(json.loads(path.read_text())["base"])) if path.exists() else None


def settings(home: Path, ports: Ports, slots: int, parallelism: int, heartbeat_timeout_ms: int,
             python_mode: str = "thread") -> dict[str, str]:
    """config.yaml's settings: loopback everywhere, small memory, quick failure detection and restarts,
    checkpoints retained in home/checkpoints, Python workers from the install's virtualenv."""
    python = str(versions.flink_python())
    return {
        "jobmanager.rpc.address": LOOPBACK, "jobmanager.rpc.port": str(ports.rpc), "jobmanager.bind-host": LOOPBACK,
        "rest.address": LOOPBACK, "rest.bind-address": LOOPBACK, "rest.port": str(ports.rest),
        "blob.server.port": str(ports.blob),
        "taskmanager.host": LOOPBACK, "taskmanager.bind-host": LOOPBACK, "taskmanager.rpc.port": ports.tm_rpc,
        "taskmanager.data.bind-port": ports.tm_data,
        "jobmanager.memory.process.size": "1024m", "taskmanager.memory.process.size": "1536m",
        "taskmanager.numberOfTaskSlots": str(slots), "parallelism.default": str(parallelism),
        "heartbeat.interval": str(min(2000, heartbeat_timeout_ms // 4)), "heartbeat.timeout": str(heartbeat_timeout_ms),
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "100000",
        "restart-strategy.fixed-delay.delay": "2 s", "state.backend.type": "hashmap",
        "execution.checkpointing.dir": (home / "checkpoints").as_uri(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "io.tmp.dirs": str(home / "tmp"), "web.tmpdir": str(home / "tmp" / "web"),
        "python.executable": python, "python.client.executable": python, "python.execution-mode": python_mode,
    }


def write_config(home: Path, values: dict[str, str]) -> Path:
    """home/conf: config.yaml (the install's defaults, its JVM options among them, under `values`) and the
    install's log4j files. Written once: a restarted process reads what the first start wrote."""
    conf = home / "conf"
    if (conf / "config.yaml").exists():
        return conf
    defaults = flink_home_dir() / "conf"
    base = yaml.safe_load((defaults / "config.yaml").read_text()) or {}
    opts = base.get("env", {}).get("java", {}).get("opts", {}).get("all", "")
    tmp = home / "conf.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    for name in ("log4j-console.properties", "log4j-cli.properties", "logback-console.xml"):
        (tmp / name).write_bytes((defaults / name).read_bytes())
    (tmp / "config.yaml").write_text(yaml.safe_dump({"env.java.opts.all": opts, **values}, sort_keys=True))
    for sub in ("log", "checkpoints", "tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    tmp.replace(conf)
    return conf


def environment(home: Path, ident: str) -> dict[str, str]:
    """The variables Flink's scripts read: its home, this cluster's conf and log folders, the JVM."""
    java_home = Path(java_binary()).resolve().parents[1]
    flink = flink_home_dir()
    return {**os.environ, "FLINK_HOME": str(flink), "FLINK_CONF_DIR": str(home / "conf"),
            "FLINK_LOG_DIR": str(home / "log"), "FLINK_IDENT_STRING": ident, "JAVA_HOME": str(java_home),
            "PATH": f"{versions.flink_python().parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def process_command(role: str) -> list[str]:
    """A JobManager's or TaskManager's command line (the script execs the JVM in the foreground)."""
    script = {"jobmanager": "jobmanager.sh", "taskmanager": "taskmanager.sh"}[role]
    return [str(flink_home_dir() / "bin" / script), "start-foreground"]


def run_command(ports: Ports, job: Path, job_args: list[str], savepoint: str | None = None) -> list[str]:
    """`flink run` of a PyFlink program, detached, on this cluster (from a retained checkpoint when given)."""
    restore = ["-s", savepoint] if savepoint else []
    return [str(flink_home_dir() / "bin" / "flink"), "run", "-m", f"{LOOPBACK}:{ports.rest}", "-d", *restore,
            "-py", str(job), *job_args]


def latest_checkpoint(home: Path) -> str | None:
    """The newest retained checkpoint of any job of this cluster (its chk-N folder with a _metadata file)."""
    found = [(p.stat().st_mtime, int(p.parent.name[4:]), p.parent) for p in (home / "checkpoints").glob("*/chk-*/_metadata")]
    return str(max(found)[2]) if found else None


class Rest:
    """Flink's REST API on the cluster's JobManager (GET, PATCH): JSON, FlinkError on any failure."""

    def __init__(self, ports: Ports, timeout_s: float = 5.0):
        self.base, self.timeout_s = ports.rest_url, timeout_s

    def call(self, path: str, method: str = "GET") -> dict:
        request = urllib.request.Request(self.base + path, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise FlinkError(f"Flink REST {method} {path}: HTTP {exc.code}") from exc
        except (OSError, ValueError) as exc:
            raise FlinkError(f"Flink REST {method} {path}: {type(exc).__name__}: {exc}") from exc
        return json.loads(body) if body.strip() else {}

    def jobs(self) -> list[dict]:
        return self.call("/jobs/overview").get("jobs", [])

    def taskmanagers(self) -> int:
        return int(self.call("/overview").get("taskmanagers", 0))
