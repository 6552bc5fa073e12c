"""The Kafka clients besides confluent-kafka that txnlab's transactional workloads run on, each a program of
its own built or installed from its registry at set-up: Kafka's Java clients (Maven Central, `mvn package` against
the pinned release's jars), franz-go (Go module proxy, `go build`) and KafkaJS (npm, `npm ci`). Their sources live
in chaos/workloads/<folder>/; their pins in versions.env, which the sources' own manifests (pom.xml, go.mod,
package.json) must agree with.

Owns: where each client's build lives ($TXNLAB_HOME/clients/<name>, stamped with what it was built from),
installing it once (idempotent, under a lock), and the command and environment that run it.
Must not: run a workload (chaos/workloads/native.py execs the command) or pick a client for a run.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cluster.lab import versions
from cluster.access.errors import TxnlabError
from cluster.lab.java import java_command

WORKLOADS_DIR = versions.WORKLOAD_SOURCES
STAMP = ".txnlab-stamp"


class ClientInstallError(TxnlabError, RuntimeError):
    """A client's program could not be built or installed, or is not."""


@dataclass(frozen=True)
class NativeClient:
    """A client's program: where its sources and build live, its pin, and how it is built and run (one subclass
    per toolchain)."""
    name: str                 # as a spec and --client name it
    folder: str               # under chaos/workloads/
    pin: str                  # its versions.env key

    @property
    def source(self) -> Path:
        return WORKLOADS_DIR / self.folder

    @property
    def home(self) -> Path:
        return versions.txnlab_home() / "clients" / self.name

    @property
    def version(self) -> str:
        return versions.pinned()[self.pin]

    def inputs(self) -> list[Path]:
        return sorted(p for p in self.source.rglob("*") if p.is_file() and "node_modules" not in p.parts)

    def stamp(self) -> str:
        digest = hashlib.sha256(f"{self.name} {self.version}\n".encode())
        for path in self.inputs():
            digest.update(str(path.relative_to(self.source)).encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()[:16]

    def installed(self) -> bool:
        marker = self.home / STAMP
        return marker.exists() and marker.read_text().strip() == self.stamp() and self.product().exists()

    def install(self, progress: Callable[[str], None] = print) -> Path:
        """Build or install the program once for these sources and pins (under a lock)."""
        if self.manifest_version() != self.version:
            raise ClientInstallError(f"{self.source} pins {self.name} {self.manifest_version()}, versions.env "
                                     f"{self.pin}={self.version}: make them agree")
        if self.installed():
            return self.home
        self.home.parent.mkdir(parents=True, exist_ok=True)
        with open(self.home.parent / f".{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.installed():
                progress(f"{self.name} {self.version}: building its workloads into {self.home}")
                shutil.rmtree(self.home, ignore_errors=True)
                self.home.mkdir(parents=True)
                self.build()
                (self.home / STAMP).write_text(self.stamp() + "\n")
        return self.home

    def command(self) -> list[str]:
        """The program's command line before its workload name (ClientInstallError when it is not built)."""
        if not self.installed():
            raise ClientInstallError(f"the {self.name} workloads are not built (or their sources changed): run "
                                     "`make setup` (python -m cluster.lab.install builds them)")
        return self.argv()

    def environment(self) -> dict[str, str]:
        return {}

    # ---- per toolchain ----------------------------------------------------------------------------
    def manifest_version(self) -> str | None:
        """The client's version as its source's own manifest pins it."""
        raise NotImplementedError

    def product(self) -> Path:
        raise NotImplementedError

    def build(self) -> None:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError


class GoClient(NativeClient):
    """A Go module (go.mod pins the client) built with `go build` into one binary."""

    def manifest_version(self) -> str | None:
        found = re.search(r"github\.com/twmb/franz-go (v\S+)", (self.source / "go.mod").read_text())
        return found.group(1) if found else None

    def product(self) -> Path:
        return self.home / f"txnlab-{self.name}"

    def build(self) -> None:
        go_build(self.source, self.product(), f"the {self.name} workloads")

    def argv(self) -> list[str]:
        return [str(self.product())]


class NodeClient(NativeClient):
    """A Node.js program whose package.json and package-lock.json pin the client, installed with `npm ci` into
    the build folder (NODE_PATH), run from its source folder."""

    def manifest_version(self) -> str | None:
        pinned = json.loads((self.source / "package.json").read_text()).get("dependencies", {}).get(self.name, "")
        return pinned if re.fullmatch(r"\d+\.\d+\.\d+", pinned) else None

    def product(self) -> Path:
        return self.home / "node_modules"

    def build(self) -> None:
        for manifest in ("package.json", "package-lock.json"):
            shutil.copy(self.source / manifest, self.home / manifest)
        _run([_tool("npm"), "ci", "--omit=dev", "--no-audit", "--no-fund"], self.home,
             f"npm ci of the {self.name} workloads failed (is the npm registry reachable?)")

    def argv(self) -> list[str]:
        return [_tool("node"), str(self.source / "main.js")]

    def environment(self) -> dict[str, str]:
        return {"NODE_PATH": str(self.product())}


class JavaClient(NativeClient):
    """A Maven project against a Kafka release's kafka-clients (`provided`: at run time the release's libs folder,
    as the Streams app), built with `mvn package` into one jar."""
    main = "dev.txnlab.workloads.Main"

    def manifest_version(self) -> str | None:
        found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (self.source / "pom.xml").read_text())
        return found.group(1) if found else None

    def product(self) -> Path:
        return self.home / "txnlab-java-workloads.jar"

    def build(self) -> None:
        from cluster.lab.install import install_kafka         # its jars first (cluster.lab.install imports this module)
        install_kafka(self.version)
        _run([_tool("mvn"), "-q", "-B", "-f", str(self.source / "pom.xml"), "package",
              f"-Dkafka.version={self.version}", f"-Dtxnlab.build.dir={self.home}"], self.source,
             f"mvn package of the {self.name} workloads failed (a JDK's javac is needed; is Maven Central reachable?)")

    def argv(self) -> list[str]:
        """Its jar on the classpath of the pin's release, or of the release the run asked its Java clients to be
        ($TXNLAB_JAVA_CLIENTS: the jar uses only kafka-clients' public API, compiled against the pin's)."""
        release = os.environ.get(versions.JAVA_CLIENTS_VARIABLE) or self.version
        return java_command(self.main, [], version=release, classpath=[self.product()])


def go_build(source: Path, product: Path, what: str) -> None:
    """`go build` of the Go module in `source` into the binary `product` (ClientInstallError naming `what`)."""
    _run([_tool("go"), "build", "-buildvcs=false", "-o", str(product), "."], source,
         f"go build of {what} failed (is the Go module proxy reachable?)")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise ClientInstallError(f"{name} not found on PATH: it builds and runs txnlab's client workloads")
    return found


def _run(cmd: list[str], cwd: Path, failure: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ClientInstallError(f"{failure}:\n{tail}")


CLIENTS = {c.name: c for c in (JavaClient("java", "javaclient", "KAFKA_VERSION"),
                               GoClient("franz-go", "franzgo", "FRANZ_GO_VERSION"),
                               NodeClient("kafkajs", "kafkajs", "KAFKAJS_VERSION"))}


def native_clients() -> tuple[str, ...]:
    return tuple(CLIENTS)


def install_clients(progress: Callable[[str], None] = print) -> list[Path]:
    return [client.install(progress) for client in CLIENTS.values()]
