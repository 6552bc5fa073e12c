"""Assembling a Kafka release from Maven Central: its broker, tools and Kafka Streams jars and the Prometheus
JMX agent; building the streams workload's Kafka Streams app against it; and the pinned Flink release for the
flink workload (PyFlink from PyPI in a virtualenv of its own, its Kafka connector jar from Maven Central). Its
command line also builds the client workloads besides confluent-kafka (cluster/lab/clients.py: franz-go, KafkaJS).

    python -m cluster.lab.install [VERSION]      (default: the pinned KAFKA_VERSION; scripts/setup.sh runs this)

Owns: the one way a Kafka release's classpath folder (versions.kafka_libs_dir) is filled: Maven's
dependency:copy-dependencies on cluster/lab/pom.xml with -Dkafka.version, once per release (a stamp of the
versions and the pom; rebuilt when either changes), under a file lock so two processes starting clusters of
one release do not assemble it twice at once. The same for the streams app's jar (chaos/workloads/streams_app,
`mvn package` into streams_app_dir(), beside the release's libs): once per release, stamped with the version,
the app's pom and every file of its src.
Must not: start anything (cluster/lab/local.py, chaos/workloads/flink.py do), or fetch from anywhere but Maven
Central through mvn and PyPI through pip (cluster/lab/clients.py fetches from the Go module proxy and npm).
"""
from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from cluster.lab import versions
from cluster.lab.clients import install_clients
from cluster.access.errors import TxnlabError

POM = Path(__file__).resolve().parent / "pom.xml"
KAFKA_JAR = "kafka_{scala}-{version}.jar"
STREAMS_APP = versions.WORKLOAD_SOURCES / "streams_app"     # its pom.xml and src/
STREAMS_JAR = "txnlab-streams.jar"                                       # the app pom's finalName + .jar
STAMP = ".txnlab-stamp"


class InstallError(TxnlabError, RuntimeError):
    """Maven could not assemble a Kafka release or build the streams app."""


def stamp(version: str) -> str:
    """What the folder was assembled from: the versions and the pom (as scripts/setup.sh computed it before)."""
    pins = versions.pinned()
    line = f"{version} {pins['SCALA_BINARY_VERSION']} {pins['LOG4J_VERSION']} {pins['JMX_EXPORTER_VERSION']}\n"
    return hashlib.sha256(line.encode() + POM.read_bytes()).hexdigest()[:16]


def installed(version: str | None = None) -> bool:
    libs = versions.kafka_libs_dir(version)
    marker = libs / STAMP
    return marker.exists() and marker.read_text().strip() == stamp(versions.kafka_version(version))


def _once(lock: Path, done: Callable[[], bool], build: Callable[[], None]) -> None:
    """build() under an exclusive file lock, unless done() (before, or after waiting for another process
    that was building the same thing)."""
    if done():
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if done():
            return
        if not shutil.which("mvn"):
            raise InstallError("mvn not found on PATH: run `make setup` (Debian package maven)")
        build()


def _maven(cmd: list[str], product: Path, failure: str, lines: int = 15) -> None:
    """Run mvn; InstallError with `failure` and the last lines of its output unless it made `product`."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not product.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-lines:])
        raise InstallError(f"{failure}:\n{tail}")


def install_kafka(version: str | None = None, progress: Callable[[str], None] = print) -> Path:
    """The release's classpath folder, assembled first when missing or stale. Idempotent."""
    version = versions.kafka_version(version)
    libs = versions.kafka_libs_dir(version)

    def assemble() -> None:
        progress(f"Kafka {version}: assembling its jars from Maven Central into {libs}")
        shutil.rmtree(libs, ignore_errors=True)
        libs.mkdir(parents=True)
        pins = versions.pinned()
        cmd = ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={libs}", f"-Dkafka.version={version}",
               f"-Dscala.binary.version={pins['SCALA_BINARY_VERSION']}", f"-Dlog4j.version={pins['LOG4J_VERSION']}",
               f"-Djmx.exporter.version={pins['JMX_EXPORTER_VERSION']}"]
        _maven(cmd, libs / KAFKA_JAR.format(scala=pins["SCALA_BINARY_VERSION"], version=version),
               f"maven could not assemble Kafka {version} (is Maven Central reachable? "
               f"mvn -f {POM} dependency:tree -Dkafka.version={version})")
        (libs / STAMP).write_text(stamp(version) + "\n")
    _once(libs.parent.parent / f".kafka-{version}.lock", lambda: installed(version), assemble)
    return libs


def streams_app_dir(version: str | None = None) -> Path:
    """Where a release's streams app is built (Maven's build directory): beside its libs folder."""
    return versions.kafka_libs_dir(version).parent / "streams-app"


def streams_stamp(version: str, app: Path | None = None) -> str:
    """What the app's jar was built from: the Kafka release, the app's pom and every file under its src
    (each by its path under the app folder and its bytes)."""
    app = app or STREAMS_APP
    digest = hashlib.sha256(f"{version}\n".encode())
    for path in [app / "pom.xml", *sorted(p for p in (app / "src").rglob("*") if p.is_file())]:
        digest.update(path.relative_to(app).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def streams_app_installed(version: str | None = None) -> bool:
    version = versions.kafka_version(version)
    built = streams_app_dir(version)
    marker = built / STAMP
    return ((built / STREAMS_JAR).exists() and marker.exists()
            and marker.read_text().strip() == streams_stamp(version))


def install_streams_app(version: str | None = None, progress: Callable[[str], None] = print) -> Path:
    """The streams app's jar for a release (its classpath at run time: this jar and the release's libs),
    built first, after install_kafka, when missing or stale. Idempotent."""
    version = versions.kafka_version(version)
    install_kafka(version, progress)
    built = streams_app_dir(version)
    jar = built / STREAMS_JAR

    def build() -> None:
        progress(f"Kafka {version}: building the Kafka Streams app ({STREAMS_APP / 'pom.xml'}) into {jar}")
        shutil.rmtree(built, ignore_errors=True)     # no classes left over from removed sources
        cmd = ["mvn", "-q", "-B", "-f", str(STREAMS_APP / "pom.xml"), "package", f"-Dkafka.version={version}",
               f"-Dtxnlab.build.dir={built}"]
        _maven(cmd, jar, f"maven could not build the Kafka Streams app for Kafka {version} (a JDK's javac is "
                         f"needed; is Maven Central reachable?): {' '.join(cmd)}", lines=25)
        (built / STAMP).write_text(streams_stamp(version) + "\n")
    _once(built.parent.parent / f".streams-app-{version}.lock", lambda: streams_app_installed(version), build)
    return jar


def flink_stamp() -> str:
    pins = versions.pinned()
    return f"{pins['FLINK_VERSION']} {pins['FLINK_KAFKA_CONNECTOR_VERSION']}"


def flink_installed() -> bool:
    marker = versions.flink_dir() / STAMP
    return (marker.exists() and marker.read_text().strip() == flink_stamp() and versions.flink_python().exists()
            and versions.flink_connector_jar().exists())


def install_flink(progress: Callable[[str], None] = print) -> Path:
    """The pinned Flink release (versions.flink_dir): PyFlink from PyPI in a virtualenv of its own, its Kafka
    connector jar from Maven Central. Idempotent; the folder, made again when the pins change."""
    home = versions.flink_dir()
    pins = versions.pinned()

    def build() -> None:
        progress(f"Flink {pins['FLINK_VERSION']}: PyFlink (PyPI) into {home / 'venv'}, its Kafka connector "
                 f"{pins['FLINK_KAFKA_CONNECTOR_VERSION']} (Maven Central)")
        shutil.rmtree(home, ignore_errors=True)
        venv = home / "venv"
        steps = [([sys.executable, "-m", "venv", str(venv)], "python -m venv failed"),
                 ([str(venv / "bin" / "pip"), "install", "-q", f"apache-flink=={pins['FLINK_VERSION']}"],
                  f"pip could not install apache-flink=={pins['FLINK_VERSION']} (is PyPI reachable?)")]
        for cmd, failure in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise InstallError(f"{failure}:\n{tail}")
        jar = versions.flink_connector_jar()
        _maven(["mvn", "-q", "-B", "dependency:copy",
                f"-Dartifact=org.apache.flink:flink-sql-connector-kafka:{pins['FLINK_KAFKA_CONNECTOR_VERSION']}",
                f"-DoutputDirectory={jar.parent}"], jar,
               "maven could not fetch Flink's Kafka connector (is Maven Central reachable?)")
        (home / STAMP).write_text(flink_stamp() + "\n")
    _once(home.parent / f".flink-{pins['FLINK_VERSION']}.lock", flink_installed, build)
    return home


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    version = args[0] if args else None
    try:
        print(f"Kafka jars ready in {install_kafka(version)}")
        print(f"Kafka Streams app ready: {install_streams_app(version)}")
        print(f"Flink ready in {install_flink()}")
        for home in install_clients():
            print(f"client workloads ready in {home}")
    except TxnlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
