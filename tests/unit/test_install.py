"""cluster/lab/install.py's streams app build and cluster/lab/java.py's extra classpath, without Maven or a network:
the app's stamp, the once-per-release build (mvn stood in for), and the java command line."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster.lab import install, java, versions


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A copy of the streams app's sources (pom.xml, src/) to change."""
    copy = tmp_path / "app"
    shutil.copytree(install.STREAMS_APP / "src", copy / "src")
    shutil.copy(install.STREAMS_APP / "pom.xml", copy / "pom.xml")
    return copy


def test_the_streams_stamp_is_the_same_for_the_same_sources_and_release(app):
    assert install.streams_stamp("4.3.1", app) == install.streams_stamp("4.3.1", app)
    assert install.streams_stamp("4.3.1", app) == install.streams_stamp("4.3.1")      # the repository's own
    assert install.streams_stamp("4.4.0", app) != install.streams_stamp("4.3.1", app)


def test_the_streams_stamp_changes_with_any_source_file_or_the_pom(app):
    before = install.streams_stamp("4.3.1", app)
    source = next((app / "src").rglob("EosApp.java"))
    source.write_text(source.read_text() + "\n// changed\n")
    changed = install.streams_stamp("4.3.1", app)
    assert changed != before
    (source.parent / "Extra.java").write_text("package dev.txnlab.streams;\nclass Extra {}\n")
    added = install.streams_stamp("4.3.1", app)
    assert added != changed
    (app / "pom.xml").write_text((app / "pom.xml").read_text().replace("4.4.0", "4.2.2"))
    assert install.streams_stamp("4.3.1", app) != added
    # a file's name counts, not only its bytes
    (source.parent / "Extra.java").rename(source.parent / "Other.java")
    assert install.streams_stamp("4.3.1", app) not in (before, changed, added)


@pytest.fixture
def home(monkeypatch, tmp_path: Path) -> Path:
    """TXNLAB_HOME in tmp_path with the release's libs taken as assembled (install_kafka does nothing)."""
    monkeypatch.setenv("TXNLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(versions.KAFKA_VERSION_VARIABLE, raising=False)
    calls = []
    monkeypatch.setattr(install, "install_kafka", lambda version=None, progress=print: calls.append(version))
    versions.kafka_libs_dir("4.3.1").mkdir(parents=True)
    return tmp_path / "home"


def fake_mvn(monkeypatch, returncode: int = 0, output: str = "") -> list[list[str]]:
    """mvn stood in for: records each command; on success writes the jar where -Dtxnlab.build.dir says."""
    commands: list[list[str]] = []

    def run(cmd, **kwargs):
        commands.append(cmd)
        if returncode == 0:
            built = Path(next(a for a in cmd if a.startswith("-Dtxnlab.build.dir=")).split("=", 1)[1])
            built.mkdir(parents=True, exist_ok=True)
            (built / install.STREAMS_JAR).write_bytes(b"PK")
        return subprocess.CompletedProcess(cmd, returncode, output, "")

    monkeypatch.setattr(install.subprocess, "run", run)
    monkeypatch.setattr(install.shutil, "which", lambda name: f"/usr/bin/{name}")
    return commands


def test_the_streams_app_is_built_once_per_release_beside_its_libs(monkeypatch, home):
    commands = fake_mvn(monkeypatch)
    jar = install.install_streams_app("4.3.1", progress=lambda m: None)
    built = versions.kafka_libs_dir("4.3.1").parent / "streams-app"
    assert jar == built / "txnlab-streams.jar" and jar.exists()
    assert commands == [["mvn", "-q", "-B", "-f", str(install.STREAMS_APP / "pom.xml"), "package",
                         "-Dkafka.version=4.3.1", f"-Dtxnlab.build.dir={built}"]]
    assert (built / ".txnlab-stamp").read_text().strip() == install.streams_stamp("4.3.1")
    assert install.streams_app_installed("4.3.1") and not install.streams_app_installed("4.4.0")
    # the second time: nothing to do
    assert install.install_streams_app("4.3.1", progress=lambda m: pytest.fail(m)) == jar
    assert len(commands) == 1
    # a stale stamp (the sources changed since): built again
    (built / ".txnlab-stamp").write_text("0000000000000000\n")
    install.install_streams_app("4.3.1", progress=lambda m: None)
    assert len(commands) == 2


def test_a_failed_streams_build_says_what_maven_said(monkeypatch, home):
    fake_mvn(monkeypatch, returncode=1, output="[ERROR] EosApp.java:[1,1] cannot find symbol\n")
    with pytest.raises(install.InstallError, match="cannot find symbol"):
        install.install_streams_app("4.3.1", progress=lambda m: None)
    assert not install.streams_app_installed("4.3.1")


def test_main_installs_the_release_the_streams_app_flink_and_the_clients(monkeypatch, capsys, home):
    fake_mvn(monkeypatch)
    monkeypatch.setattr(install, "install_flink", lambda progress=print: versions.flink_dir())   # pip: not here
    built = versions.txnlab_home() / "clients" / "franz-go"
    monkeypatch.setattr(install, "install_clients", lambda: [built])       # go, npm, mvn: tests/unit/test_clients.py
    assert install.main(["4.3.1"]) == 0
    out = capsys.readouterr().out
    assert "Kafka jars ready" in out and "Kafka Streams app ready" in out and "txnlab-streams.jar" in out
    assert f"Flink ready in {versions.flink_dir()}" in out and f"client workloads ready in {built}" in out


def test_flink_counts_as_installed_only_with_its_python_its_connector_and_the_pins_stamp(home):
    assert not install.flink_installed()
    python, jar = versions.flink_python(), versions.flink_connector_jar()
    for path in (python, jar):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (versions.flink_dir() / install.STAMP).write_text("2.0.0 4.0.0-2.0\n")          # other pins
    assert not install.flink_installed()
    (versions.flink_dir() / install.STAMP).write_text(install.flink_stamp() + "\n")
    assert install.flink_installed()
    assert install.install_flink(progress=lambda m: pytest.fail(m)) == versions.flink_dir()   # nothing to do
    jar.unlink()
    assert not install.flink_installed()


@pytest.fixture
def libs(monkeypatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(java, "require_kafka_libs", lambda version=None: tmp_path / "libs")
    monkeypatch.setattr(java, "java_binary", lambda: "java")
    return tmp_path / "libs"


def test_java_command_puts_extra_classpath_entries_before_the_release_libs(libs, tmp_path):
    jar, classes = tmp_path / "app.jar", tmp_path / "classes"
    argv = java.java_command("dev.txnlab.streams.EosApp", ["app.properties"], classpath=[jar, classes])
    cp = argv[argv.index("-cp") + 1]
    assert cp.split(os.pathsep) == [str(jar), str(classes), f"{libs}/*"]
    assert argv[argv.index("-cp") + 2:] == ["dev.txnlab.streams.EosApp", "app.properties"]


def test_java_command_without_extra_classpath_is_the_release_libs_alone(libs):
    argv = java.java_command("org.apache.kafka.tools.TransactionsCommand", ["list"], "128m", ["-Dx=1"])
    assert argv[argv.index("-cp") + 1] == f"{libs}/*"
    assert "-Xmx128m" in argv and "-Dx=1" in argv and argv[-2:] == ["org.apache.kafka.tools.TransactionsCommand", "list"]
