"""cluster/lab/features.py without a cluster: Kafka's feature tool answered by a stand-in that records its arguments
(the tool itself runs on the real cluster in tests/integration/test_fault_kinds.py)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cluster.access.connection import ConnectionSettings
from cluster.lab import features

DESCRIBED = ("Feature: group.version    SupportedMinVersion: 0    SupportedMaxVersion: 1    FinalizedVersionLevel: 1    "
             "Epoch: 100\nFeature: transaction.version    SupportedMinVersion: 0    SupportedMaxVersion: 2    "
             "FinalizedVersionLevel: {level}    Epoch: 100\n")


@pytest.fixture
def tool(monkeypatch):
    """The calls the feature tool got: (args, the --command-config file's text then, or None)."""
    calls, state = [], {"level": 2}

    def run_tool(main, args, timeout=120.0, **kw):
        assert main == features.FEATURE_TOOL
        config = args[args.index("--command-config") + 1] if "--command-config" in args else None
        calls.append((args, Path(config).read_text() if config else None, config))
        if args[-1] == "describe":
            return subprocess.CompletedProcess(args, 0, DESCRIBED.format(level=state["level"]), "")
        if args[-3] in ("upgrade", "downgrade"):
            state["level"] = int(args[-1].split("=")[1])
        return subprocess.CompletedProcess(args, 0, "", "")
    monkeypatch.setattr(features.java, "run_tool", run_tool)
    return calls


def test_a_level_is_read_and_changed_in_the_direction_it_needs(tool):
    conn = ConnectionSettings("127.0.0.1:19001")
    assert features.finalized_level(conn, "transaction.version") == 2
    assert features.finalized_level(conn, "group.version") == 1
    assert features.set_level(conn, "transaction.version", 1) == 2
    assert features.set_level(conn, "transaction.version", 1, expected=2) == 1  # there already: nothing changed
    assert features.set_level(conn, "transaction.version", 2, expected=1) == 1  # read again as it writes
    assert [args[2:] for args, _, _ in tool] == [
        ["describe"], ["describe"], ["describe"], ["downgrade", "--feature", "transaction.version=1"], ["describe"],
        ["describe"], ["upgrade", "--feature", "transaction.version=2"]]
    assert all(args[:2] == ["--bootstrap-server", "127.0.0.1:19001"] and text is None for args, text, _ in tool)
    with pytest.raises(features.FeatureError, match="no feature 'share.version'"):
        features.finalized_level(conn, "share.version")


def test_a_level_changed_meanwhile_is_refused_and_left_as_it_is(tool):
    """A change that expects the level it left (a fault's heal: the level it set) finds another one (someone upgraded
    or downgraded meanwhile): refused, nothing written."""
    conn = ConnectionSettings("127.0.0.1:19001")
    with pytest.raises(features.FeatureError, match="is at level 2, not the 1 this change expects"):
        features.set_level(conn, "transaction.version", 0, expected=1)
    assert [args[2:] for args, _, _ in tool] == [["describe"]]
    assert features.finalized_level(conn, "transaction.version") == 2


def test_a_secured_connection_s_settings_reach_the_tool_in_a_private_file_never_on_its_command_line(tool, tmp_path):
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    conn = ConnectionSettings("127.0.0.1:30001", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_username="admin", sasl_password="s3cret", tls_ca_file=str(tmp_path / "ca.pem"))
    assert features.finalized_level(conn, "transaction.version") == 2
    [(args, text, path)] = tool
    assert "s3cret" not in " ".join(args) and 'password="s3cret"' in text and "security.protocol=SASL_SSL" in text
    assert not Path(path).exists()                      # removed once the tool ran


def test_a_tool_that_fails_is_a_feature_error(monkeypatch):
    def failing(main, args, **kw):
        raise RuntimeError("exited 1: InvalidUpdateVersionException")
    monkeypatch.setattr(features.java, "run_tool", failing)
    with pytest.raises(features.FeatureError, match="kafka-features describe: exited 1"):
        features.finalized_level(ConnectionSettings("127.0.0.1:9"), "transaction.version")
