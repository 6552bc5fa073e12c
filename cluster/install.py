"""Assembling a Kafka release from Maven Central: its broker and tools jars and the Prometheus JMX agent.

    python -m cluster.install [VERSION]      (default: the pinned KAFKA_VERSION; scripts/setup.sh runs this)

Owns: the one way a Kafka release's classpath folder (versions.kafka_libs_dir) is filled: Maven's
dependency:copy-dependencies on cluster/pom.xml with -Dkafka.version, once per release (a stamp of the
versions and the pom; rebuilt when either changes), under a file lock so two processes starting clusters of
one release do not assemble it twice at once.
Must not: start anything (cluster/local.py does), or fetch from anywhere but Maven Central through mvn.
"""
from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from cluster import versions
from cluster.errors import TxnlabError

POM = Path(__file__).resolve().parent / "pom.xml"
KAFKA_JAR = "kafka_{scala}-{version}.jar"


class InstallError(TxnlabError, RuntimeError):
    """Maven could not assemble a Kafka release."""


def stamp(version: str) -> str:
    """What the folder was assembled from: the versions and the pom (as scripts/setup.sh computed it before)."""
    pins = versions.pinned()
    line = f"{version} {pins['SCALA_BINARY_VERSION']} {pins['LOG4J_VERSION']} {pins['JMX_EXPORTER_VERSION']}\n"
    return hashlib.sha256(line.encode() + POM.read_bytes()).hexdigest()[:16]


def installed(version: str | None = None) -> bool:
    libs = versions.kafka_libs_dir(version)
    marker = libs / ".txnlab-stamp"
    return marker.exists() and marker.read_text().strip() == stamp(versions.kafka_version(version))


def install_kafka(version: str | None = None, progress: Callable[[str], None] = print) -> Path:
    """The release's classpath folder, assembled first when missing or stale. Idempotent."""
    version = versions.kafka_version(version)
    libs = versions.kafka_libs_dir(version)
    if installed(version):
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent.parent / f".kafka-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(version):                       # assembled by another process while we waited
            return libs
        if not shutil.which("mvn"):
            raise InstallError("mvn not found on PATH: run `make setup` (Debian package maven)")
        progress(f"Kafka {version}: assembling its jars from Maven Central into {libs}")
        shutil.rmtree(libs, ignore_errors=True)
        libs.mkdir(parents=True)
        pins = versions.pinned()
        cmd = ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={libs}", f"-Dkafka.version={version}",
               f"-Dscala.binary.version={pins['SCALA_BINARY_VERSION']}", f"-Dlog4j.version={pins['LOG4J_VERSION']}",
               f"-Djmx.exporter.version={pins['JMX_EXPORTER_VERSION']}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        jar = libs / KAFKA_JAR.format(scala=pins["SCALA_BINARY_VERSION"], version=version)
        if proc.returncode != 0 or not jar.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise InstallError(f"maven could not assemble Kafka {version} (is Maven Central reachable? "
                               f"mvn -f {POM} dependency:tree -Dkafka.version={version}):\n{tail}")
        (libs / ".txnlab-stamp").write_text(stamp(version) + "\n")
    return libs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        print(f"Kafka jars ready in {install_kafka(args[0] if args else None)}")
    except TxnlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
