"""The one connection-settings builder: validation, client configs, and no secret in logs."""
from __future__ import annotations

import io
import logging
import uuid

import pytest

from cluster.access.connection import LOG_SECRETS, ConnectionSettings, ConnectionSettingsError, install_log_redaction


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
    from cluster.access.connection import ConnectionSettings
    conn = ConnectionSettings(bootstrap="a:1,b:2", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_username="u", sasl_password="p w", tls_verify_hostname=False, client_id="x")
    assert ConnectionSettings.from_env(environ=conn.to_env()) == conn


def _capture(redacted: bool) -> logging.StreamHandler:
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    if redacted:
        install_log_redaction(handler)
    return handler


@pytest.fixture
def debug_root(monkeypatch):
    """The root logger at DEBUG with two capturing handlers, without and with the redaction (in that
    order: the redaction rewrites the shared record); LOG_SECRETS knows only this test's secrets."""
    monkeypatch.setattr(LOG_SECRETS, "secrets", ())
    root, kafka = logging.getLogger(), logging.getLogger("kafka")
    levels = root.level, kafka.level          # an exporter run earlier in the session quiets "kafka"
    root.setLevel(logging.DEBUG)
    kafka.setLevel(logging.NOTSET)
    bare, redacted = _capture(False), _capture(True)
    root.addHandler(bare)
    root.addHandler(redacted)
    yield lambda: (bare.stream.getvalue(), redacted.stream.getvalue())
    root.removeHandler(bare)
    root.removeHandler(redacted)
    root.setLevel(levels[0])
    kafka.setLevel(levels[1])


def test_kafka_python_debug_logs_never_show_the_password(debug_root):
    from kafka.admin import KafkaAdminClient
    password = f"pw-{uuid.uuid4().hex}\\q"              # the backslash: a logged dict shows it escaped
    conn = ConnectionSettings("127.0.0.1:9", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                              sasl_username="svc", sasl_password=password)
    with pytest.raises(Exception) as failed:               # nothing listens on port 9
        KafkaAdminClient(**conn.kafka_python(bootstrap_timeout_ms=300))
    bare, redacted = debug_root()
    escaped = repr(password)[1:-1]
    assert "Starting KafkaAdminClient" in redacted and "'sasl_plain_password': '***'" in redacted
    assert escaped in bare                                  # without the filter kafka-python shows it
    assert password not in redacted and escaped not in redacted and password not in str(failed.value)


def test_redaction_covers_arguments_tracebacks_and_malformed_calls(debug_root):
    secret = f"tls-{uuid.uuid4().hex}"
    ConnectionSettings("k:1", tls_key_password=secret)     # settings register their secrets when built
    log = logging.getLogger("txnlab.test.redaction")
    log.info("plain %s", {"key": secret})
    try:
        raise RuntimeError(f"login failed with {secret}")
    except RuntimeError:
        log.exception("traceback follows")
    log.warning("malformed %s %s", secret)  # noqa: PLE1206 - a malformed call, on purpose
    log.info("nothing secret")
    bare, redacted = debug_root()
    assert bare.count(secret) == 2 and secret not in redacted  # bare: the malformed call is logging's error
    assert "plain {'key': '***'}" in redacted and "login failed with ***" in redacted
    assert "malformed %s %s" in redacted and "nothing secret" in redacted


def test_a_workload_process_names_itself_on_the_wire_unless_a_client_id_is_given(monkeypatch):
    """A default client.id is not handed to a child process; a workload process then takes `<run tag>.<process>`
    (what a hold-requests fault's `clients` pattern selects), a given one is kept."""
    from chaos.workloads.base import process_connection
    assert "TXNLAB_KAFKA_CLIENT_ID" not in ConnectionSettings(bootstrap="127.0.0.1:9092").to_env()
    for name, value in ConnectionSettings(bootstrap="127.0.0.1:9092").to_env().items():
        monkeypatch.setenv(name, value)
    assert process_connection("r1", "eos-0").client_id == "r1.eos-0"
    given = ConnectionSettings(bootstrap="127.0.0.1:9092", client_id="mine").to_env()
    assert given["TXNLAB_KAFKA_CLIENT_ID"] == "mine"
    monkeypatch.setenv("TXNLAB_KAFKA_CLIENT_ID", "mine")
    assert process_connection("r1", "eos-0").client_id == "mine"
