"""Running Kafka's own Java programs (broker, storage tool, admin and test tools) from the libs folder.

Owns: the java command line (classpath, heap, logging) for anything run from the assembled Kafka
distribution. Must not: supervise long-running processes (cluster/supervisor.py does).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cluster import versions
from cluster.errors import TxnlabError

TEMPLATES = Path(__file__).parent / "templates"


class MissingInstall(TxnlabError, RuntimeError):
    """Something `make setup` installs is not there."""


def java_binary() -> str:
    found = shutil.which("java")
    if not found:
        raise MissingInstall("java not found on PATH: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)")
    return found


def require_kafka_libs() -> Path:
    libs = versions.kafka_libs_dir()
    if not any(libs.glob("kafka_*.jar")):
        raise MissingInstall(f"Kafka jars not found in {libs}: run `make setup`")
    return libs


def java_command(main: str, args: list[str], heap: str = "256m", jvm: list[str] | None = None) -> list[str]:
    """argv for `java ... main args` on the Kafka classpath, logging to stderr at WARN."""
    libs = require_kafka_libs()
    return [java_binary(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={TEMPLATES / 'log4j2-tools.yaml'}", *(jvm or []),
            "-cp", f"{libs}/*", main, *args]


def run_tool(main: str, args: list[str], timeout: float = 120.0, heap: str = "256m") -> subprocess.CompletedProcess:
    """Run a short-lived Kafka tool to completion; raises with its output on a non-zero exit."""
    proc = subprocess.run(java_command(main, args, heap), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{main} {' '.join(args[:3])}... exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc
