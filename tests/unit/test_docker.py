"""The Docker engine's and stack's logic that needs no engine: the apt mirror the base is made from, its sources,
the stack's names, a spec moved onto the compose stack (the DockerBackend's own: tests/unit/test_faults.py).
The engine itself, the images and the stack run in tests/integration/test_docker.py."""
from __future__ import annotations

import pytest

from chaos.runner.spec import SpecError, load_spec, with_compose
from cluster.lab import compose
from cluster.lab.docker import DockerError, Stack, apt_mirror, base_sources, trust_local_cas


def test_the_mirror_is_the_one_apt_uses_in_either_format(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    assert apt_mirror(tmp_path) == "http://deb.debian.org/debian"                    # nothing configured
    (tmp_path / "sources.list").write_text("# a comment\ndeb [arch=amd64] http://mirror.example/debian/ bookworm main\n")
    assert apt_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.local/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://deb.local/debian\nSuites: bookworm bookworm-updates\n")
    assert apt_mirror(tmp_path) == "http://deb.local/debian"                         # deb822 first, security skipped


def test_the_base_gets_updates_and_security_and_this_machines_added_authorities(tmp_path):
    assert base_sources("http://m/debian").splitlines() == [
        "deb http://m/debian bookworm main", "deb http://m/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main"]
    assert trust_local_cas(tmp_path / "rootfs", tmp_path / "none") == []               # nothing added, nothing run


def test_a_project_name_is_what_compose_accepts():
    assert Stack.named("txnlab-test").folder.name == "txnlab-test"
    with pytest.raises(DockerError, match="lowercase"):
        Stack.named("My Stack")


def test_an_experiment_moves_onto_the_compose_stack_unless_it_needs_its_own_cluster():
    spec = load_spec("coordinator-kill", short=True, compose="txnlab-test")
    assert spec.cluster.compose.project == "txnlab-test" and spec.cluster.local is None
    with pytest.raises(SpecError, match="hanging_drill: the compose stack has its own settings"):
        load_spec("hanging-transaction-drill", compose="txnlab")
    with pytest.raises(SpecError, match="only an experiment on the local cluster"):
        with_compose({"name": "x", "cluster": {"existing": {"bootstrap": "h:1", "disposable": True}}}, "txnlab")
    moved = with_compose({"name": "x", "cluster": {"local": {"nodes": 3, "state_dir": "/s"}}}, "p")
    assert moved["cluster"] == {"compose": {"project": "p"}}


def test_up_refuses_naming_the_ports_of_its_layout_another_program_holds(tmp_path, monkeypatch):
    import socket
    layout = compose.compose_layout(base_port=16000)                                 # a plan no txnlab stack uses
    with socket.socket() as held:
        held.bind(("127.0.0.1", layout.prometheus_port))
        held.listen()
        stack = Stack("p", layout, tmp_path)
        monkeypatch.setattr(Stack, "status", lambda self: [])                        # none of its containers runs
        monkeypatch.setattr(Stack, "services", lambda self: ["kafka-1"])
        monkeypatch.setattr(Stack, "on_demand", lambda self: set())
        monkeypatch.setattr(Stack, "compose", lambda self, *a, **k: pytest.fail("compose ran"))
        with pytest.raises(DockerError, match=rf"ports \[{layout.prometheus_port}\] of p's layout are in use"):
            stack.up(progress=lambda m: None)


def test_up_refuses_a_port_plan_in_the_ephemeral_range_before_anything_starts(tmp_path, monkeypatch):
    """An outgoing connection's local port comes from that range: one there makes a node's or proxy's bind fail
    (the CI of 9754f39: the secured test stack at 34000 never came up)."""
    stack = Stack("p", compose.compose_layout(base_port=33000), tmp_path)
    monkeypatch.setattr(Stack, "status", lambda self: pytest.fail("docker asked"))
    monkeypatch.setattr(Stack, "compose", lambda self, *a, **k: pytest.fail("compose ran"))
    monkeypatch.setattr("cluster.lab.ports.ephemeral_range", lambda: (32768, 60999))
    with pytest.raises(DockerError, match=r"p: ports 33000-33899 overlap this machine's ephemeral range 32768-60999"):
        stack.up(progress=lambda m: None)


def test_an_interrupted_debootstrap_s_mounts_under_the_rootfs_are_unmounted_deepest_first(tmp_path, monkeypatch):
    """debootstrap mounts /proc (and /sys) inside its target: a Ctrl-C left them mounted and the temporary folder
    could not be removed (2026-11-28). Only what is mounted under the rootfs is touched."""
    from cluster.lab import docker
    rootfs = tmp_path / "base dir" / "rootfs"
    escaped = str(rootfs).replace(" ", "\\040")              # /proc/mounts escapes a space so
    mounts = tmp_path / "mounts"
    mounts.write_text(f"proc /proc proc rw 0 0\nproc {escaped}/proc proc rw 0 0\nsysfs {escaped}/sys sysfs rw 0 0\n"
                      f"binfmt {escaped}/proc/sys/fs/binfmt_misc binfmt_misc rw 0 0\n"
                      f"tmpfs {rootfs}-other tmpfs rw 0 0\n")
    ran = []
    monkeypatch.setattr(docker.subprocess, "run", lambda argv, **kw: ran.append(argv))
    expected = [f"{rootfs}/proc/sys/fs/binfmt_misc", f"{rootfs}/proc", f"{rootfs}/sys"]
    assert docker.unmount_under(rootfs, mounts) == expected
    assert ran == [["umount", "-l", point] for point in expected]
    assert docker.unmount_under(tmp_path / "nowhere", mounts) == [] and len(ran) == 3
