"""Running Kafka's own Java programs (broker, storage tool, admin and test tools) from the libs folder.

Owns: the java command line (classpath, heap, logging) for anything run from the assembled Kafka
distribution, with extra classpath entries of txnlab's own in front (the streams app's jar). Must not: supervise long-running processes (cluster/lab/supervisor.py does).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cluster.lab import versions
from cluster.access.errors import TxnlabError

TEMPLATES = Path(__file__).parent / "templates"


class MissingInstall(TxnlabError, RuntimeError):
    """Something `make setup` installs is not there."""


def java_binary() -> str:
    found = shutil.which("java")
    if not found:
        raise MissingInstall("java not found on PATH: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)")
    return found


def require_kafka_libs(version: str | None = None) -> Path:
    """The classpath folder of a Kafka release (versions.kafka_version: default $TXNLAB_KAFKA_VERSION, else
    the pin), which must have been assembled (`make setup`, or `txnlab cluster up` for another release)."""
    libs = versions.kafka_libs_dir(version)
    if not any(libs.glob("kafka_*.jar")):
        raise MissingInstall(f"Kafka jars not found in {libs}: run `make setup` (another release: `python -m "
                             f"cluster.lab.install {versions.kafka_version(version)}`)")
    return libs


def java_command(main: str, args: list[str], heap: str = "256m", jvm: list[str] | None = None,
                 version: str | None = None, classpath: list[Path] | None = None) -> list[str]:
    """argv for `java ... main args` on the classpath of a Kafka release (default: versions.kafka_version()),
    logging to stderr at WARN. classpath: extra entries (jars, folders) placed before the release's `libs/*`
    (e.g. the streams app's jar, cluster.lab.install.install_streams_app)."""
    libs = require_kafka_libs(version)
    entries = [str(entry) for entry in classpath or []] + [f"{libs}/*"]
    return [java_binary(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={TEMPLATES / 'log4j2-tools.properties'}", *(jvm or []),
            "-cp", os.pathsep.join(entries), main, *args]


def run_tool(main: str, args: list[str], timeout: float = 120.0, heap: str = "256m",
             secret_args: list[str] | None = None, version: str | None = None) -> subprocess.CompletedProcess:
    """Run a short-lived Kafka tool to completion; raises with its output on a non-zero exit.
    secret_args (e.g. SCRAM passwords) follow args but never reach the command line: the main class and
    all its arguments then go into a Java argument file (mode 0600, deleted afterwards) that the java
    launcher expands, so /proc/<pid>/cmdline shows only `@<file>`."""
    if not secret_args:
        proc = subprocess.run(java_command(main, args, heap, version=version), capture_output=True, text=True,
                              timeout=timeout)
    else:
        fd, argfile = tempfile.mkstemp(prefix="txnlab-args-", suffix=".txt")     # 0600
        try:
            with os.fdopen(fd, "w") as out:
                out.write(argfile_text([main, *args, *secret_args]))
            argv = java_command(main, [], heap, version=version)
            argv[-1] = f"@{argfile}"                                            # the main class's place
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        finally:
            os.unlink(argfile)
    if proc.returncode != 0:
        raise RuntimeError(f"{main} {' '.join(args[:3])}... exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def argfile_text(args: list[str]) -> str:
    """A java @argfile holding args, one a line (`java -cp ... @file` runs the main class it starts with)."""
    return "\n".join(_argfile_quote(a) for a in args) + "\n"


def _argfile_quote(arg: str) -> str:
    """One argument of a java @argfile: quoted (backslash and quote escaped) when it holds blanks or quotes."""
    if not any(c in arg for c in " \t\"'\\#"):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
