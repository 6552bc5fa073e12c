"""versions.env parsing: the one place versions are pinned."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cluster.lab import install, versions
from cluster.access.errors import TxnlabError
from cluster.lab.layout import ClusterLayout, LayoutError
from cluster.lab.local import ClusterError, LocalCluster
from cluster.lab.versions import parse_env_file, pinned


def test_repository_pins():
    pins = pinned()
    assert pins["KAFKA_VERSION"] == "4.4.0"
    assert pins["TOXIPROXY_VERSION"].startswith("v2.12.")


def test_parse_ignores_comments_and_rejects_garbage():
    assert parse_env_file("# c\n\nA=1\nB = x y\n") == {"A": "1", "B": "x y"}
    with pytest.raises(ValueError, match="line 2"):
        parse_env_file("A=1\nnot a pair\n")


def test_the_supported_releases_include_the_pin_and_the_variable_chooses_among_them(monkeypatch):
    supported = versions.supported_kafka_versions()
    assert pinned()["KAFKA_VERSION"] in supported and "4.4.0" in supported and "4.1.1" in supported
    monkeypatch.delenv(versions.KAFKA_VERSION_VARIABLE, raising=False)
    assert versions.kafka_version() == pinned()["KAFKA_VERSION"]
    monkeypatch.setenv(versions.KAFKA_VERSION_VARIABLE, "4.4.0")
    assert versions.kafka_version() == "4.4.0"
    assert versions.kafka_version("4.1.1") == "4.1.1"                     # an explicit one wins
    assert versions.kafka_libs_dir().name == "libs" and versions.kafka_libs_dir().parent.name == "kafka-4.4.0"
    assert versions.jmx_agent_jar("4.1.1").parent.parent.name == "kafka-4.1.1"


def test_an_unsupported_release_is_a_clear_user_error(monkeypatch):
    monkeypatch.setenv(versions.KAFKA_VERSION_VARIABLE, "3.5.1")
    with pytest.raises(TxnlabError, match=r"Kafka 3\.5\.1 is not supported: choose one of 3\.5\.2, .*3\.9\.1, 4\.0\.2, .*4\.4\.0"):
        versions.kafka_version()
    with pytest.raises(LayoutError, match="Kafka 9.9.9 is not supported"):
        ClusterLayout(state_dir=Path("/tmp/x"), kafka_version="9.9.9")


def test_the_kraft_3x_lines_are_supported_beside_4x():
    supported = versions.supported_kafka_versions()
    assert {"3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.1"} <= set(supported)
    assert [versions.release(v) for v in supported] == sorted(versions.release(v) for v in supported)   # oldest first


def test_transaction_version_is_a_4x_feature(tmp_path):
    """Before 4.0 no transaction.version exists: levels 0 and 1 are the release's only behaviour (left out of the
    storage format), a higher level is refused, a 4.x release formats with what was asked."""
    old = ClusterLayout(state_dir=tmp_path, kafka_version="3.9.1", features={"transaction.version": "1", "x.y": "2"})
    assert old.storage_features == {"x.y": "2"}
    new = ClusterLayout(state_dir=tmp_path, kafka_version="4.0.2", features={"transaction.version": "2"})
    assert new.storage_features == {"transaction.version": "2"}
    with pytest.raises(LayoutError, match=r"Kafka 3\.5\.2 has no transaction\.version 2 .*KIP-890 part 2.*4\.0"):
        ClusterLayout(state_dir=tmp_path, kafka_version="3.5.2", features={"transaction.version": "2"})


def test_a_layout_runs_the_chosen_release_else_the_variable_else_the_pin(monkeypatch, tmp_path):
    monkeypatch.delenv(versions.KAFKA_VERSION_VARIABLE, raising=False)
    assert ClusterLayout(state_dir=tmp_path).kafka_version == pinned()["KAFKA_VERSION"]
    monkeypatch.setenv(versions.KAFKA_VERSION_VARIABLE, "4.1.1")
    assert ClusterLayout(state_dir=tmp_path).kafka_version == "4.1.1"
    assert ClusterLayout(state_dir=tmp_path, kafka_version="4.4.0").kafka_version == "4.4.0"


def test_the_install_stamp_is_the_one_setup_sh_wrote_before(tmp_path):
    """Folders assembled by the shell version of the step stay valid: same input, same 16 hex digits."""
    pins = pinned()
    line = f"4.3.1 {pins['SCALA_BINARY_VERSION']} {pins['LOG4J_VERSION']} {pins['JMX_EXPORTER_VERSION']}"
    shell = subprocess.run(["bash", "-c", f'echo "{line}" | cat - "{install.POM}" | sha256sum | cut -c1-16'],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert install.stamp("4.3.1") == shell
    assert install.stamp("4.4.0") != shell


def test_a_release_is_installed_only_with_its_own_stamp(monkeypatch, tmp_path):
    monkeypatch.setenv("TXNLAB_HOME", str(tmp_path))
    libs = versions.kafka_libs_dir("4.4.0")
    assert not install.installed("4.4.0")
    libs.mkdir(parents=True)
    (libs / ".txnlab-stamp").write_text(install.stamp("4.1.1") + "\n")      # another release's stamp
    assert not install.installed("4.4.0")
    (libs / ".txnlab-stamp").write_text(install.stamp("4.4.0") + "\n")
    assert install.installed("4.4.0")
    assert install.install_kafka("4.4.0", progress=lambda m: pytest.fail(m)) == libs   # nothing to do


def test_a_cluster_refuses_another_release_on_data_formatted_by_one(monkeypatch, tmp_path):
    monkeypatch.delenv(versions.KAFKA_VERSION_VARIABLE, raising=False)
    old = LocalCluster.load(tmp_path, kafka_version="4.1.1")
    old._save_state()
    old.layout.data_dir(1).mkdir(parents=True)
    LocalCluster.load(tmp_path)._check_settings_match()                      # its own release: fine
    assert LocalCluster.load(tmp_path).layout.kafka_version == "4.1.1"       # a saved cluster keeps it
    with pytest.raises(ClusterError, match=r"holds the data of Kafka 4\.1\.1, not 4\.4\.0: run `txnlab cluster "
                                           r"down --purge"):
        (old.layout.data_dir(1) / "meta.properties").write_text("node.id=1\n")
        LocalCluster.load(tmp_path, kafka_version="4.4.0")._check_settings_match()
