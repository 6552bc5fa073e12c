"""cluster/access/diagnose.py: how a failed connection is classified, and the one wording of an ACL refusal."""
from __future__ import annotations

import socket
import ssl
import time

import kafka.errors as Errors
import pytest

from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import (ClusterUnreachable, Diagnosis, classify_connect, classify_kafka, classify_tls, diagnose,
                              is_authorization_error, not_authorized, require_reachable, summarize)

PASSWORD = "pw-Never-Shown-42"
ADDRESS = "127.0.0.1:9093"


@pytest.fixture
def secured(tmp_path) -> ConnectionSettings:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read by the classification\n")
    return ConnectionSettings(bootstrap=ADDRESS, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_username="operator", sasl_password=PASSWORD, tls_ca_file=str(ca))


def cert_error(code: int, reason: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {reason}")
    exc.verify_code, exc.verify_message = code, reason
    return exc


def test_connect_failures_are_unreachable_and_name_the_address():
    refused = classify_connect(ConnectionRefusedError(111, "Connection refused"), ADDRESS)
    assert refused.kind == "unreachable" and ADDRESS in refused.message and "refused" in refused.message
    assert "cannot resolve nowhere.invalid" in classify_connect(socket.gaierror(-2, "Name or service not known"),
                                                                "nowhere.invalid:9092").message
    assert "did not answer" in classify_connect(socket.timeout("timed out"), ADDRESS).message


def test_untrusted_certificate_names_the_ca_file(secured):
    found = classify_tls(cert_error(19, "self-signed certificate in certificate chain"), secured, ADDRESS)
    assert found.kind == "tls_trust"
    assert "TLS trust" in found.message and f"TXNLAB_KAFKA_TLS_CA_FILE={secured.tls_ca_file}" in found.message


def test_untrusted_certificate_without_a_ca_file_says_to_set_one():
    conn = ConnectionSettings(bootstrap=ADDRESS, security_protocol="SSL")
    found = classify_tls(cert_error(20, "unable to get local issuer certificate"), conn, ADDRESS)
    assert found.kind == "tls_trust" and "no tls_ca_file (TXNLAB_KAFKA_TLS_CA_FILE) is set" in found.message


def test_hostname_mismatch_is_not_a_trust_problem(secured):
    found = classify_tls(cert_error(62, "Hostname mismatch, certificate is not valid for 'broker1'."), secured,
                         "broker1:9093")
    assert found.kind == "tls_hostname" and "TXNLAB_KAFKA_TLS_VERIFY_HOSTNAME" in found.message


def test_expired_certificate_and_other_handshake_failures_are_tls(secured):
    assert classify_tls(cert_error(10, "certificate has expired"), secured, ADDRESS).kind == "tls"
    other = classify_tls(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), secured, ADDRESS)
    assert other.kind == "tls" and "security_protocol" in other.message


def test_refused_credentials_are_authentication_and_never_show_the_password(secured):
    refused = Errors.SaslAuthenticationFailedError("Authentication failed during authentication due to invalid "
                                                   "credentials with SASL mechanism SCRAM-SHA-512")
    found = classify_kafka(refused, secured, ADDRESS, "sasl")
    assert found.kind == "authentication"
    assert "SCRAM-SHA-512 user 'operator' was refused" in found.message and "wrong username or password" in found.message
    closed = classify_kafka(Errors.KafkaConnectionError("socket disconnected"), secured, ADDRESS, "sasl")
    assert closed.kind == "authentication" and "closed the connection" in closed.message
    for message in (found.message, closed.message):
        assert PASSWORD not in message


def test_an_exception_quoting_the_password_is_redacted(secured):
    found = classify_kafka(Errors.KafkaConnectionError(f"odd failure near {PASSWORD}"), secured, ADDRESS, "api_versions")
    assert found.kind == "protocol" and PASSWORD not in found.message and "***" in found.message


def test_unsupported_mechanism_is_authentication(secured):
    found = classify_kafka(Errors.UnsupportedSaslMechanismError(), secured, ADDRESS, "sasl")
    assert found.kind == "authentication" and "TXNLAB_KAFKA_SASL_MECHANISM" in found.message


def test_a_listener_that_wants_sasl_is_a_protocol_mismatch():
    conn = ConnectionSettings(bootstrap=ADDRESS, security_protocol="SSL")
    found = classify_kafka(Errors.KafkaConnectionError("socket disconnected"), conn, ADDRESS, "request")
    assert found.kind == "protocol" and "want SASL" in found.message and "TXNLAB_KAFKA_SECURITY_PROTOCOL" in found.message


def test_summarize_takes_the_first_address_past_tcp():
    down = Diagnosis("unreachable", "connection to a:1 refused")
    auth = Diagnosis("authentication", "authentication failed")
    assert summarize([down, auth, Diagnosis("ok", "fine")]) == auth
    every = summarize([down, Diagnosis("unreachable", "connection to b:2 refused")])
    assert every.kind == "unreachable" and "a:1" in every.message and "b:2" in every.message
    assert summarize([]).kind == "unreachable"


def test_not_authorized_names_principal_operation_and_resource(secured):
    assert not_authorized(secured, "Alter", "the cluster", "WriteTxnMarkers") == (
        "not authorized: principal User:operator lacks Alter on the cluster (WriteTxnMarkers) (docs/security.md)")
    plain = ConnectionSettings(bootstrap=ADDRESS)
    assert "this client's principal lacks Read on topic t" in not_authorized(plain, "Read", "topic t")


@pytest.mark.parametrize("error, expected", [
    (Errors.ClusterAuthorizationFailedError(), True), (Errors.TopicAuthorizationFailedError(), True),
    (Errors.TransactionalIdAuthorizationFailedError(), True), ("TOPIC_AUTHORIZATION_FAILED", True),
    ("GroupAuthorizationFailedError", True), (Errors.SaslAuthenticationFailedError(), False),
    (Errors.KafkaTimeoutError(), False), ("_TRANSPORT", False)])
def test_authorization_errors_by_class_or_name(error, expected):
    assert is_authorization_error(error) is expected


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_diagnose_a_port_nobody_listens_on_quickly():
    conn = ConnectionSettings(bootstrap=f"127.0.0.1:{closed_port()},127.0.0.1:{closed_port()}")
    started = time.monotonic()
    found = diagnose(conn)
    assert found.kind == "unreachable" and found.message.count("refused") == 2
    assert time.monotonic() - started < 2
    with pytest.raises(ClusterUnreachable, match="refused"):
        require_reachable(conn)


def test_diagnose_a_listener_that_is_not_kafka():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        conn = ConnectionSettings(bootstrap=f"127.0.0.1:{server.getsockname()[1]}")
        found = diagnose(conn, timeout_s=1.0)      # accepted, never answered ApiVersions
    assert found.kind == "protocol" and "did not complete the Kafka PLAINTEXT set-up" in found.message


def test_the_access_layer_says_why_no_broker_answered():
    from exporter.kafka_access import KafkaAccess, KafkaUnavailable
    access = KafkaAccess(ConnectionSettings(bootstrap=f"127.0.0.1:{closed_port()}"), request_timeout_s=1.0)
    with pytest.raises(KafkaUnavailable, match="cluster unreachable: connection to 127.0.0.1:.* refused"):
        access.metadata()
    access.close()
