"""Pinned versions of everything txnlab installs, read from the repository's versions.env.

Owns: parsing versions.env and the install locations derived from it (TXNLAB_HOME), and which txnlab
source runs (git HEAD and the files changed on top of it: what a benchmark records with its results).
Must not: download or install anything (scripts/setup.sh does that).
"""
from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

from cluster.access.errors import TxnlabError

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO_ROOT / "versions.env"
# the folders of the repository outside cluster/ that the lab reads, declared here only: the workloads' sources it
# builds (the clients' programs, the Streams application) and the dashboards and alerting rules a stack mounts
WORKLOAD_SOURCES = REPO_ROOT / "chaos" / "workloads"
DASHBOARDS = REPO_ROOT / "dashboards"


def parse_env_file(text: str) -> dict[str, str]:
    """Parse KEY=VALUE lines; blank lines and # comments are ignored."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"versions.env line {number}: expected KEY=VALUE, got {raw!r}")
        values[key.strip()] = value.strip()
    return values


@lru_cache(maxsize=1)
def pinned() -> dict[str, str]:
    """The pins of versions.env as a dict."""
    return parse_env_file(VERSIONS_FILE.read_text())


def txnlab_source(*paths: str) -> dict:
    """{"head": commit, "changed": [files under paths changed on top of it]}; {} outside a git checkout."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                              check=True).stdout.rstrip()
    try:
        return {"head": git("rev-parse", "HEAD"),
                "changed": [line[3:] for line in git("status", "--porcelain", "--", *paths).splitlines()]}
    except (OSError, subprocess.SubprocessError):
        return {}


def txnlab_home() -> Path:
    """Where txnlab keeps downloads and local state: $TXNLAB_HOME, else <repo>/.txnlab."""
    return Path(os.environ.get("TXNLAB_HOME", REPO_ROOT / ".txnlab")).resolve()


KAFKA_VERSION_VARIABLE = "TXNLAB_KAFKA_VERSION"
# the release of Kafka's Java clients a run's Java-client workloads (chaos/workloads/javaclient) run on, set only when
# the run asks for one (an experiment's `java_clients`, a bug side's); otherwise they run the pin's (KAFKA_VERSION)
JAVA_CLIENTS_VARIABLE = "TXNLAB_JAVA_CLIENTS"


class UnsupportedVersion(TxnlabError, ValueError):
    """A Kafka release txnlab does not run (not in versions.env's KAFKA_VERSIONS)."""


def supported_kafka_versions() -> list[str]:
    """The Kafka releases a cluster can run, oldest first (versions.env KAFKA_VERSIONS)."""
    return pinned()["KAFKA_VERSIONS"].split(",")


def kafka_version(version: str | None = None) -> str:
    """The Kafka release to run: `version` when given, else $TXNLAB_KAFKA_VERSION, else the pin
    (KAFKA_VERSION); one of supported_kafka_versions()."""
    chosen = version or os.environ.get(KAFKA_VERSION_VARIABLE) or pinned()["KAFKA_VERSION"]
    if chosen not in supported_kafka_versions():
        raise UnsupportedVersion(f"Kafka {chosen} is not supported: choose one of "
                                 f"{', '.join(supported_kafka_versions())} (versions.env KAFKA_VERSIONS)")
    return chosen


def release(version: str | None = None) -> tuple[int, ...]:
    """A Kafka release (kafka_version(version)) as numbers to compare: "4.1.1" -> (4, 1, 1)."""
    return tuple(int(part) for part in kafka_version(version).split("."))


def kafka_libs_dir(version: str | None = None) -> Path:
    """The classpath folder of a Kafka release (kafka_version()), assembled from Maven Central
    (cluster/lab/install.py)."""
    return txnlab_home() / "dist" / f"kafka-{kafka_version(version)}" / "libs"


def toxiproxy_binary() -> Path:
    return txnlab_home() / "bin" / f"toxiproxy-server-{pinned()['TOXIPROXY_VERSION']}"


def jmx_agent_jar(version: str | None = None) -> Path:
    return kafka_libs_dir(version) / f"jmx_prometheus_javaagent-{pinned()['JMX_EXPORTER_VERSION']}.jar"


def flink_dir() -> Path:
    """The pinned Flink release's install (cluster/lab/install.py install_flink): its virtualenv (PyFlink, whose
    package holds Flink's jars and scripts) and its Kafka connector jar."""
    return txnlab_home() / "dist" / f"flink-{pinned()['FLINK_VERSION']}"


def flink_python() -> Path:
    return flink_dir() / "venv" / "bin" / "python"


def flink_connector_jar() -> Path:
    return flink_dir() / "lib" / f"flink-sql-connector-kafka-{pinned()['FLINK_KAFKA_CONNECTOR_VERSION']}.jar"
