"""The compose stack on a real Docker engine: the engine found or started, the Debian base image, txnlab's
images built, a stack up, checked and down (`txnlab docker up|down|status`, docs/docker.md).

Owns: the engine's life as txnlab sees it: a Docker engine that answers is used as it is; when none answers,
dockerd is started (as root; host networking only: no bridge, no iptables rules) with its pid recorded in
.txnlab/docker/engine/, and only an engine recorded there is ever stopped. The base every image is built FROM
(`debian:bookworm-slim`): present, else pulled, else made from Debian's packages with debootstrap (`--variant=
minbase`, the mirror apt uses) and `docker import`ed under that tag, so the same Dockerfiles serve machines with
and without a public registry. A stack: a compose project whose files cluster/lab/compose.py renders into
.txnlab/docker/<project>/ for its layout (host network, loopback ports only), built, brought up and waited for
(every broker registered, the exporter and Prometheus answering), and brought down with its volumes, checked
to leave no container, network or volume of the project.
Must not: signal a container itself (faults are chaos/nemesis/backends.py's DockerBackend), reach anything but
loopback addresses, or put a secret on a command line (the secured stack's secrets are files, mounted).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cluster.lab import compose, security
from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError
from cluster.lab.layout import LOOPBACK, ClusterLayout
from cluster.lab.supervisor import Supervisor
from cluster.lab.versions import txnlab_home
from cluster.access.waiting import WaitTimeout, port_open, wait_until

DOCKERD_ARGS = ["--iptables=false", "--ip6tables=false", "--bridge=none"]
ENGINE_READY_S = 60.0
PING_TIMEOUT_S = 3
BASE_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
STACK_READY_S = 240.0
DEFAULT_PROJECT = "txnlab"
SERVICE_LABEL = "com.docker.compose.service"         # what compose labels every container with
PROJECT_LABEL = "com.docker.compose.project"
# The on-demand services' profile: the lab (`txnlab verify` in a container, its Spark master and workers).
LAB_PROFILE = "verify"


class DockerError(TxnlabError, RuntimeError):
    """The engine, an image or a stack cannot do what was asked; the message says what to do."""


def docker_home() -> Path:
    return txnlab_home() / "docker"


def sdk() -> Any:
    """The Docker SDK module (`pip install docker`: the `docker` extra, which `make setup` installs)."""
    try:
        import docker
    except ImportError as exc:
        raise DockerError("the Docker SDK for Python is missing: pip install 'txnlab[docker]' (make setup does)") from exc
    return docker


def client(timeout: int = 120) -> Any:
    """A client of the engine the environment names (DOCKER_HOST, else the local socket)."""
    docker = sdk()
    try:
        return docker.from_env(timeout=timeout)
    except docker.errors.DockerException as exc:
        raise DockerError(f"cannot reach the Docker engine ({exc}): `txnlab docker up` starts one") from exc


def engine_answers() -> bool:
    docker = sdk()
    try:
        return bool(docker.from_env(timeout=PING_TIMEOUT_S).ping())
    except (docker.errors.DockerException, OSError):
        return False


# ---- the engine -----------------------------------------------------------------------------------------
class Engine:
    """The Docker engine txnlab uses: one that answers, or a dockerd it starts and records (and alone stops)."""

    def __init__(self, home: Path | None = None):
        self.home = home or docker_home() / "engine"
        self.supervisor = Supervisor(self.home / "pids")

    @property
    def started_here(self) -> bool:
        return self.supervisor.is_running("dockerd")

    def ensure(self, progress: Callable[[str], None] = print) -> bool:
        """An engine answers when this returns; True when it was started now."""
        if engine_answers():
            return False
        dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None)
        if dockerd is None:
            raise DockerError("no Docker engine answers and dockerd is not installed: `make setup-docker` installs "
                              "Debian's docker.io (or start your own engine)")
        if os.geteuid() != 0:
            raise DockerError("no Docker engine answers, and starting dockerd needs root: start your engine "
                              "(systemctl start docker) or run as root")
        if self.supervisor.record("dockerd") and not self.started_here:
            self.supervisor.forget("dockerd")                       # a record of one that died
        progress(f"starting dockerd (host networking only: {' '.join(DOCKERD_ARGS)}), log {self.home / 'dockerd.log'}")
        self.supervisor.start("dockerd", [dockerd, *DOCKERD_ARGS], self.home / "dockerd.log")
        try:
            wait_until(lambda: engine_answers() or self._died(), ENGINE_READY_S, interval=0.5,
                       what="dockerd answering")
        except WaitTimeout as exc:
            raise DockerError(f"dockerd did not answer in {ENGINE_READY_S:.0f} s: see {self.home / 'dockerd.log'}") from exc
        if not engine_answers():
            raise DockerError(f"dockerd exited at start: see {self.home / 'dockerd.log'}")
        return True

    def _died(self) -> bool:
        return not self.supervisor.is_running("dockerd")

    def stop(self, progress: Callable[[str], None] = print) -> bool:
        """Stop dockerd if txnlab started it (recorded here); an engine txnlab did not start is left alone."""
        if not self.started_here:
            return False
        progress("stopping the dockerd txnlab started")
        self.supervisor.stop("dockerd", timeout=60)
        self.supervisor.forget("dockerd")
        return True


# ---- the base image -----------------------------------------------------------------------------------
def apt_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources), else deb.debian.org."""
    texts = [p.read_text() for p in sorted(sources.glob("sources.list.d/*.sources")) + [sources / "sources.list"]
             if p.exists()]
    for text in texts:
        for uri in re.findall(r"^URIs:\s*(\S+)", text, re.M) + re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+\S+", text, re.M):
            if "security" not in uri:
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def base_sources(mirror: str) -> str:
    """The base image's apt sources: the mirror's release and its updates, and Debian's security archive."""
    return (f"deb {mirror} {BASE_SUITE} main\ndeb {mirror} {BASE_SUITE}-updates main\n"
            f"deb {SECURITY_MIRROR} {BASE_SUITE}-security main\n")


APT_CONF = 'Acquire::Languages "none";\nAPT::Install-Recommends "false";\n'
LOCAL_CAS = Path("/usr/local/share/ca-certificates")


def trust_local_cas(rootfs: Path, cas: Path = LOCAL_CAS) -> list[str]:
    """The certificate authorities this machine adds to Debian's (its /usr/local/share/ca-certificates: a TLS-
    inspecting egress proxy's, a company's) added to the base's too, so builds reach Maven Central, PyPI and the Go
    module proxy from inside a container as they do from the host; the names added."""
    added = []
    for cert in sorted(cas.glob("*.crt")) if cas.is_dir() else []:
        target = rootfs / cas.relative_to("/") / cert.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cert, target)
        added.append(cert.name)
    if added:
        proc = subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise DockerError(f"update-ca-certificates in the base failed: {proc.stderr.strip()[-300:]}")
    return added


def unmount_under(root: Path, mounts: Path = Path("/proc/mounts")) -> list[str]:
    """Unmount whatever is mounted at or below `root` (deepest first), so that the folder can be removed: the
    mount points unmounted."""
    prefix = str(root.resolve())
    try:
        points = [fields[1].replace("\\040", " ") for fields in map(str.split, mounts.read_text().splitlines())
                  if len(fields) > 1]
    except OSError:
        return []
    inside = sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True)
    for point in inside:
        subprocess.run(["umount", "-l", point], capture_output=True)
    return inside


def ensure_base(docker_client: Any, progress: Callable[[str], None] = print) -> str:
    """`debian:bookworm-slim` present when this returns: "present", "pulled" or "debootstrap"."""
    docker = sdk()
    repository, tag = compose.BASE_IMAGE.split(":")
    try:
        docker_client.images.get(compose.BASE_IMAGE)
        return "present"
    except docker.errors.ImageNotFound:
        pass
    try:
        docker_client.images.pull(repository, tag=tag)
        progress(f"pulled {compose.BASE_IMAGE}")
        return "pulled"
    except docker.errors.DockerException as exc:
        progress(f"{compose.BASE_IMAGE} cannot be pulled ({str(exc).splitlines()[0][:120]}): making it with debootstrap")
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if debootstrap is None:
        raise DockerError(f"{compose.BASE_IMAGE} is neither present nor pullable, and debootstrap is not installed: "
                          "`make setup-docker` installs it")
    mirror = apt_mirror()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="txnlab-base-", dir=docker_home()) as tmp:
        rootfs = Path(tmp) / "rootfs"
        try:
            proc = subprocess.run([debootstrap, "--variant=minbase", "--include=ca-certificates", BASE_SUITE,
                                   str(rootfs), mirror], capture_output=True, text=True)
        finally:            # an interrupted debootstrap leaves its /proc (and /sys) mounted in the rootfs
            unmount_under(rootfs)
        if proc.returncode != 0:
            raise DockerError(f"debootstrap {BASE_SUITE} from {mirror} failed:\n" + "\n".join(proc.stdout.splitlines()[-10:]))
        (rootfs / "etc" / "apt" / "sources.list").write_text(base_sources(mirror))
        (rootfs / "etc" / "apt" / "apt.conf.d" / "99txnlab").write_text(APT_CONF)
        if added := trust_local_cas(rootfs):
            progress(f"the base trusts this machine's added certificate authorities too: {', '.join(added)}")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for leftover in (rootfs / cache).glob("*"):
                if leftover.is_file():
                    leftover.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            docker_client.api.import_image_from_stream(tar.stdout, repository=repository, tag=tag,
                                                      changes=['CMD ["bash"]'])
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
    progress(f"made {compose.BASE_IMAGE} from {mirror} with debootstrap in {time.monotonic() - started:.0f} s")
    return "debootstrap"


# ---- a stack ------------------------------------------------------------------------------------------
def compose_command() -> list[str]:
    """Debian's docker-compose (v1), else the docker CLI's compose plugin (v2)."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    raise DockerError("neither docker-compose nor `docker compose` is installed: `make setup-docker` installs "
                      "Debian's docker-compose")


@dataclass
class Stack:
    """One compose project of txnlab's, its files in folder (rendered for layout)."""
    project: str
    layout: ClusterLayout
    folder: Path

    @classmethod
    def named(cls, project: str | None = None, layout: ClusterLayout | None = None) -> "Stack":
        project = project or DEFAULT_PROJECT
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", project):
            raise DockerError(f"a compose project name is lowercase letters, digits, - and _: got {project!r}")
        return cls(project, layout or compose.compose_layout(), docker_home() / project)

    @property
    def compose_file(self) -> Path:
        return self.folder / "docker-compose.yml"

    def render(self) -> list[Path]:
        """Write the stack's files (and, for a secured stack, its secrets, kept when present)."""
        written = []
        for path, text in compose.stack_files(self.layout, self.folder).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
        (self.folder / "runs").mkdir(exist_ok=True)
        if self.layout.secured:
            written += compose.write_secrets(self.folder / "secrets", self.layout)
        return written

    def compose(self, *args: str, capture: bool = True, timeout: float | None = None,
                lab: bool = True, check: bool = True) -> subprocess.CompletedProcess:
        """docker-compose on the stack's file and project; lab: with the on-demand lab's services. Not captured, its
        output goes to stderr (stdout is a command's answer, e.g. `txnlab docker up`'s bootstrap address). check: a
        failed exit raises."""
        cmd = [*compose_command(), "-f", str(self.compose_file), "-p", self.project, *args]
        env = {**os.environ, "COMPOSE_PROFILES": LAB_PROFILE if lab else ""}
        out = subprocess.PIPE if capture else 2                         # fd 2: whatever wraps sys.stderr
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE if capture else None, text=True, cwd=self.folder,
                              env=env, timeout=timeout)
        if check and proc.returncode != 0:
            tail = "\n".join(((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[-20:])
            raise DockerError(f"`{' '.join(cmd[len(compose_command()):])}` failed (exit {proc.returncode}):\n{tail}")
        return proc

    def build(self, progress: Callable[[str], None] = print, lab: bool = True) -> float:
        """Build the stack's images (from cache when nothing changed), the lab's too unless told; the seconds it
        took."""
        started = time.monotonic()
        progress(f"building the images of {self.project} (compose/*.Dockerfile, FROM {compose.BASE_IMAGE})"
                 + ("" if lab else ", not the lab's"))
        self.compose("build", capture=False, lab=lab)
        took = time.monotonic() - started
        progress(f"images built in {took:.0f} s")
        return took

    def up(self, progress: Callable[[str], None] = print, timeout: float = STACK_READY_S) -> None:
        """Start the stack's services (not the on-demand lab) and wait until it serves."""
        if why := self.layout.ephemeral_clash():
            raise DockerError(f"{self.project}: {why}")
        services = [name for name in self.services() if name not in self.on_demand()]
        if not any(row["status"] == "running" for row in self.status()):       # a stack already up is left as it is
            if busy := [port for port in self.layout.all_ports() if port_open(port)]:
                raise DockerError(f"ports {busy} of {self.project}'s layout are in use by another program (a local "
                                  "cluster on the same base port? `txnlab cluster down`), or choose another --base-port")
        try:                           # compose waits here for the one-shot services others depend on (format, ACLs)
            self.compose("up", "-d", "--no-build", *services, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DockerError(f"{self.project} did not come up: `docker-compose up` still waited after {timeout:.0f} s "
                              f"for its one-shot services\n{self.diagnosis()}") from None
        progress(f"{self.project} up: waiting for every broker registered, the exporter and Prometheus")
        try:
            self.wait_ready(timeout)
        except WaitTimeout as exc:
            raise DockerError(f"{self.project} did not come up: {exc}\n{self.diagnosis()}") from exc

    def diagnosis(self, lines: int = 15) -> str:
        """The containers' states and the last log lines of the nodes and Toxiproxy: why a stack is not serving."""
        states = "\n".join(f"  {row['name']}: {row['status']}" for row in sorted(self.status(), key=lambda r: r["name"]))
        logs = self.compose("logs", "--no-color", "--tail", str(lines), "toxiproxy",
                            *(f"kafka-{n}" for n in self.layout.node_ids), check=False).stdout
        return f"its containers:\n{states}\ntheir last log lines:\n{logs[-8000:]}"

    def _services(self) -> dict[str, dict]:
        import yaml
        return yaml.safe_load(self.compose_file.read_text())["services"]

    def services(self) -> list[str]:
        return list(self._services())

    def on_demand(self) -> set[str]:
        return {name for name, service in self._services().items() if service.get("profiles")}

    def wait_ready(self, timeout: float) -> None:
        from cluster.access.admin import registered_brokers
        conn = self.connection()
        wait_until(lambda: set(registered_brokers(conn)) >= set(self.layout.node_ids), timeout, interval=2,
                   what=f"every broker of {self.project} registered")
        trust = str(security.Secrets(self.folder / "secrets").ca_file) if self.layout.secured else True
        wait_until(lambda: _answers(self.exporter_url(), trust), 60, interval=1, what="the exporter answering")
        wait_until(lambda: _answers(f"http://{LOOPBACK}:{self.layout.prometheus_port}/-/ready"), 60, interval=1,
                   what="Prometheus ready")

    def connection(self) -> ConnectionSettings:
        """How a client on this host reaches the stack's brokers (a secured stack: as its admin)."""
        if self.layout.secured:
            return security.connection(security.Secrets(self.folder / "secrets"), self.layout.bootstrap, security.ADMIN)
        return ConnectionSettings(bootstrap=self.layout.bootstrap)

    def exporter_url(self) -> str:
        scheme = "https" if self.layout.secured else "http"
        return f"{scheme}://{LOOPBACK}:{self.layout.exporter_port}/metrics"

    def down(self, progress: Callable[[str], None] = print) -> dict:
        """Remove the stack's containers, its network if any and its volumes; what of the project is left."""
        if self.compose_file.exists():
            self.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
        left = self.leftovers()
        progress(f"{self.project} down" + (f": left {left}" if any(left.values()) else ""))
        return left

    def leftovers(self) -> dict[str, list[str]]:
        """The project's containers, networks and volumes the engine still has (by compose's project label)."""
        c = client()
        label = {"label": f"{PROJECT_LABEL}={self.project}"}
        return {"containers": [x.name for x in c.containers.list(all=True, filters=label)],
                "networks": [x.name for x in c.networks.list(filters=label)],
                "volumes": [x.name for x in c.volumes.list(filters=label)]}

    def unhealed(self) -> dict[str, object]:
        """What faults left on the stack, {} when nothing (LocalCluster.unhealed's meaning): `stopped` and `paused`
        nodes (their containers), `unregistered` nodes, `toxics` {proxy: [toxic names]}."""
        from cluster.access.admin import registered_brokers
        from cluster.lab.toxiproxy import Toxiproxy
        states = {row["service"]: row["status"] for row in self.status()}
        left: dict[str, object] = {}
        if stopped := [n for n in self.layout.node_ids if states.get(f"kafka-{n}") not in ("running", "paused")]:
            left["stopped"] = stopped
        if paused := [n for n in self.layout.node_ids if states.get(f"kafka-{n}") == "paused"]:
            left["paused"] = paused
        if unregistered := sorted(set(self.layout.node_ids) - set(registered_brokers(self.connection()))):
            left["unregistered"] = unregistered
        toxics = Toxiproxy(f"http://{LOOPBACK}:{self.layout.toxiproxy_port}").toxics()
        if toxics:
            left["toxics"] = {proxy: [t["name"] for t in found] for proxy, found in sorted(toxics.items())}
        return left

    def status(self) -> list[dict]:
        c = client()
        label = {"label": f"{PROJECT_LABEL}={self.project}"}
        return [{"name": x.name, "service": x.labels.get(SERVICE_LABEL), "status": x.status,
                 "image": x.attrs.get("Config", {}).get("Image")} for x in c.containers.list(all=True, filters=label)]


def _answers(url: str, verify: str | bool = True) -> bool:
    """The URL answers (any status below 500: a 401 of the secured exporter too); verify: the CA to trust."""
    import requests
    try:
        return requests.get(url, timeout=3, verify=verify).status_code < 500
    except requests.RequestException:
        return False


# ---- `txnlab docker up|down` ----------------------------------------------------------------------------
def bring_up(stack: Stack, progress: Callable[[str], None] = print, build: bool = True) -> dict:
    """The engine (started when none answers), the base image, the stack's files, its images, the stack up
    and serving: what it took."""
    engine = Engine()
    started = engine.ensure(progress)
    base = ensure_base(client(), progress)
    stack.render()
    took = stack.build(progress) if build else None
    stack.up(progress)
    progress(f"{stack.project} serving: bootstrap {stack.layout.bootstrap}, exporter {stack.exporter_url()}, "
             f"Prometheus http://{LOOPBACK}:{stack.layout.prometheus_port}")
    return {"engine_started": started, "base": base, "build_s": took, "bootstrap": stack.layout.bootstrap}


def bring_down(stack: Stack, progress: Callable[[str], None] = print, keep_engine: bool = False) -> dict:
    """The stack down with its volumes; then the engine stopped if txnlab started it and it runs nothing else."""
    if not engine_answers():
        progress("no Docker engine answers: nothing to bring down")
        return {"left": {}, "engine_stopped": False}
    left = stack.down(progress)
    engine = Engine()
    stopped = False
    if not keep_engine and engine.started_here:
        running = client().containers.list()
        if running:
            progress(f"the engine txnlab started still runs {len(running)} container(s): left running")
        else:
            stopped = engine.stop(progress)
    return {"left": left, "engine_stopped": stopped}
