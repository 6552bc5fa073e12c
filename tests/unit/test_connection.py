"""The one connection-settings builder: validation, client configs, and no secret in logs."""
from __future__ import annotations

import pytest

from cluster.connection import ConnectionSettings, ConnectionSettingsError


def test_plaintext_defaults():
    conn = ConnectionSettings("127.0.0.1:9092,127.0.0.1:9093")
    assert conn.confluent()["bootstrap.servers"] == "127.0.0.1:9092,127.0.0.1:9093"
    assert conn.kafka_python()["bootstrap_servers"] == ["127.0.0.1:9092", "127.0.0.1:9093"]
    assert "sasl.mechanism" not in conn.confluent()


def test_sasl_scram_over_tls(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    conn = ConnectionSettings("k:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_username="alice", sasl_password="s3cret", tls_ca_file=str(ca))
    rd = conn.confluent()
    assert rd["sasl.mechanism"] == "SCRAM-SHA-512" and rd["sasl.password"] == "s3cret"
    assert rd["ssl.ca.location"] == str(ca) and rd["ssl.endpoint.identification.algorithm"] == "https"
    kp = conn.kafka_python()
    assert kp["sasl_plain_username"] == "alice" and kp["ssl_cafile"] == str(ca) and kp["ssl_check_hostname"]
    java = conn.java_properties()
    assert "ScramLoginModule" in java["sasl.jaas.config"] and java["ssl.truststore.type"] == "PEM"


def test_secrets_never_appear_in_repr_or_describe():
    conn = ConnectionSettings("k:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_username="bob", sasl_password="hunter2", tls_key_password="kp")
    assert "hunter2" not in repr(conn) and "hunter2" not in conn.describe() and "kp" not in repr(conn)
    assert "bob" in conn.describe()


@pytest.mark.parametrize("kwargs,match", [
    ({"bootstrap": ""}, "bootstrap"),
    ({"bootstrap": "no-port"}, "bootstrap"),
    ({"bootstrap": "k:1", "security_protocol": "TLS"}, "security_protocol"),
    ({"bootstrap": "k:1", "security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI",
      "sasl_username": "u", "sasl_password": "p"}, "sasl_mechanism"),
    ({"bootstrap": "k:1", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "sasl_username"),
    ({"bootstrap": "k:1", "security_protocol": "SSL", "tls_ca_file": "/nonexistent.pem"}, "tls_ca_file"),
])
def test_bad_settings_name_the_field(kwargs, match):
    with pytest.raises(ConnectionSettingsError, match=match):
        ConnectionSettings(**kwargs)


def test_from_env(monkeypatch):
    monkeypatch.setenv("TXNLAB_KAFKA_BOOTSTRAP", "k:1")
    monkeypatch.setenv("TXNLAB_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("TXNLAB_KAFKA_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("TXNLAB_KAFKA_SASL_USERNAME", "u")
    monkeypatch.setenv("TXNLAB_KAFKA_SASL_PASSWORD", "p")
    monkeypatch.setenv("TXNLAB_KAFKA_TLS_VERIFY_HOSTNAME", "false")
    conn = ConnectionSettings.from_env()
    assert conn.bootstrap == "k:1" and conn.sasl_mechanism == "SCRAM-SHA-256" and not conn.tls_verify_hostname
    assert ConnectionSettings.from_env(bootstrap="other:2").bootstrap == "other:2"


def test_to_env_round_trips_through_from_env():
    from cluster.connection import ConnectionSettings
    conn = ConnectionSettings(bootstrap="a:1,b:2", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_username="u", sasl_password="p w", tls_verify_hostname=False, client_id="x")
    assert ConnectionSettings.from_env(environ=conn.to_env()) == conn
