"""Why a cluster could not be reached: the one diagnosis of a failed first request, and the one wording of
an authorization refusal.

Owns: `diagnose(conn)`, which, after a client's first request failed (kafka-python and librdkafka only
log why and time out), finds out why within a few seconds, per bootstrap address until one gets past the
TCP connect: a TCP connect (refused, unresolvable, no answer), then with TLS a handshake with Python's ssl
module against tls_ca_file and the hostname check (untrusted certificate, hostname mismatch, other
handshake failure), then one kafka-python connection of its own (ApiVersions, and the SASL handshake and
authentication: wrong credentials, mechanism not enabled, a listener that speaks another protocol). The
result is a `Diagnosis`: a kind and a one-line message naming the setting to fix (the classification
functions are pure). `ClusterUnreachable`, the error of a command that could not reach the cluster, and
`require_reachable`, the check a command runs before it starts anything. `not_authorized`, the one
message of a request the ACLs refused ("principal User:<name> lacks <operation> on <resource>") and its
error, `NotAuthorized`.
Only the standard library and kafka-python (the exporter's install has no confluent-kafka).
Must not: include a password in any message (only user names and file paths are named), retry, or
write anything to Kafka.
"""
from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass
from typing import Literal

import kafka.errors as Errors

from cluster.access.connection import LOG_SECRETS, ConnectionSettings
from cluster.access.errors import TxnlabError

Kind = Literal["ok", "unreachable", "tls_trust", "tls_hostname", "tls", "authentication", "protocol"]
Stage = Literal["api_versions", "sasl", "request"]   # how far a kafka-python connection's set-up got
DIAGNOSE_TIMEOUT_S = 3.0           # the whole diagnosis (a healthy cluster passes in well under a second)
CONNECT_TIMEOUT_S = 1.0            # one TCP connect (a local or LAN broker answers in milliseconds)
HOSTNAME_CODES = {62, 64}          # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
EXPIRY_CODES = {9, 10}             # X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED
SECURITY_DOC = "docs/security.md"
# Where each kind's setting lives: the key of ConnectionSettings and its TXNLAB_KAFKA_* variable.
CA_SETTING = "tls_ca_file (TXNLAB_KAFKA_TLS_CA_FILE)"
SASL_SETTINGS = "sasl_username, sasl_password or sasl_password_file (TXNLAB_KAFKA_SASL_*)"
PROTOCOL_SETTING = "security_protocol (TXNLAB_KAFKA_SECURITY_PROTOCOL)"


@dataclass(frozen=True)
class Diagnosis:
    """Why the cluster could not be used: `kind` (ok: every check passed) and a one-line message."""
    kind: Kind
    message: str

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class ClusterUnreachable(TxnlabError, RuntimeError):
    """The cluster could not be reached or refused these settings; the message says which and what to fix."""


class NotAuthorized(TxnlabError, PermissionError):
    """The ACLs refused a request (the message is not_authorized's)."""


# ---- classification (pure) ----------------------------------------------------------------------------
def classify_connect(exc: BaseException, address: str) -> Diagnosis:
    """A failed TCP connect to address."""
    if isinstance(exc, socket.gaierror):
        why = f"cannot resolve {address.rsplit(':', 1)[0]}"
    elif isinstance(exc, ConnectionRefusedError):
        why = f"connection to {address} refused: nothing listens there"
    elif isinstance(exc, (socket.timeout, TimeoutError)):
        why = f"{address} did not answer a TCP connect within {CONNECT_TIMEOUT_S:.0f}s"
    else:
        why = f"cannot connect to {address}: {_text(exc)}"
    return Diagnosis("unreachable", why)


def classify_tls(exc: BaseException, conn: ConnectionSettings, address: str) -> Diagnosis:
    """A failed TLS handshake with address (an ssl.SSLError, or the connection dropped during it)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code, reason = getattr(exc, "verify_code", None), getattr(exc, "verify_message", None) or _text(exc)
        if code in HOSTNAME_CODES:
            return Diagnosis("tls_hostname", f"TLS hostname: the certificate of {address} is not valid for "
                                             f"{address.rsplit(':', 1)[0]} ({reason}); use an address the "
                                             "certificate names, or set tls_verify_hostname false "
                                             "(TXNLAB_KAFKA_TLS_VERIFY_HOSTNAME)")
        if code in EXPIRY_CODES:
            return Diagnosis("tls", f"TLS: the certificate of {address} is not valid now ({reason})")
        where = (f"a CA in tls_ca_file (TXNLAB_KAFKA_TLS_CA_FILE={conn.tls_ca_file})" if conn.tls_ca_file
                 else f"a CA this system trusts (no {CA_SETTING} is set)")
        return Diagnosis("tls_trust", f"TLS trust: the certificate of {address} is not signed by {where} ({reason})")
    return Diagnosis("tls", f"TLS handshake with {address} failed: {_text(exc)} (does that listener speak TLS? "
                            f"{PROTOCOL_SETTING} is {conn.security_protocol}; a client certificate it wants?)")


def classify_kafka(exc: BaseException, conn: ConnectionSettings, address: str, stage: Stage) -> Diagnosis:
    """A failed kafka-python connection with address after TCP (and TLS) worked, at `stage`: before the broker
    answered ApiVersions, during SASL (it answered ApiVersions), or on the first request after the set-up."""
    if isinstance(exc, Errors.UnsupportedSaslMechanismError):
        return Diagnosis("authentication", f"authentication: {address} does not enable sasl_mechanism "
                                           f"{conn.sasl_mechanism} (TXNLAB_KAFKA_SASL_MECHANISM): {_text(exc)}")
    if isinstance(exc, Errors.SaslAuthenticationFailedError) or (stage == "sasl" and conn.uses_sasl):
        # Kafka answers bad credentials with error 58, and an unknown mechanism or user often by closing
        why = "wrong username or password?" if isinstance(exc, Errors.SaslAuthenticationFailedError) else \
            f"the broker closed the connection: unknown user, wrong password, or {conn.sasl_mechanism} not enabled?"
        return Diagnosis("authentication", f"authentication failed: {conn.sasl_mechanism} user "
                                           f"'{conn.sasl_username}' was refused by {address} ({why} {SASL_SETTINGS})")
    wants = " (does it want SASL?)" if stage == "request" and not conn.uses_sasl else ""
    return Diagnosis("protocol", f"{address} accepted the connection but did not complete the Kafka "
                                 f"{conn.security_protocol} set-up{wants} ({_text(exc)}): does {PROTOCOL_SETTING} "
                                 "match that listener?")


def summarize(results: list[Diagnosis]) -> Diagnosis:
    """One diagnosis of the per-address ones: the first that got past the TCP connect (the settings are the
    same for every broker, so it speaks for all), else every address's reason. Pure."""
    past_tcp = next((d for d in results if d.kind != "unreachable"), None)
    if past_tcp is not None:
        return past_tcp
    if not results:
        return Diagnosis("unreachable", "no bootstrap address was tried (diagnosis ran out of time)")
    return Diagnosis("unreachable", "cluster unreachable: " + "; ".join(d.message for d in results)
                     + " (is it up? bootstrap: TXNLAB_KAFKA_BOOTSTRAP or --bootstrap)")


def not_authorized(conn: ConnectionSettings, operation: str, resource: str, request: str | None = None) -> str:
    """The one message of an ACL refusal, e.g. not_authorized(conn, "Alter", "the cluster", "WriteTxnMarkers")."""
    principal = f"User:{conn.sasl_username}" if conn.uses_sasl else "this client's principal"
    by = f" ({request})" if request else ""
    return f"not authorized: principal {principal} lacks {operation} on {resource}{by} ({SECURITY_DOC})"


def is_authorization_error(exc: BaseException | str) -> bool:
    """A kafka-python *AuthorizationFailedError, or a librdkafka *_AUTHORIZATION_FAILED error (by name)."""
    if isinstance(exc, Errors.AuthorizationError):
        return True
    name = exc if isinstance(exc, str) else getattr(exc, "message", None) or type(exc).__name__
    return "AUTHORIZATION_FAILED" in name.upper() or "AuthorizationFailed" in name


def _text(exc: BaseException) -> str:
    """An exception's own words, one line, with any secret LOG_SECRETS knows redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return LOG_SECRETS.redact(text)


# ---- the probes (I/O) -----------------------------------------------------------------------------------
def diagnose(conn: ConnectionSettings, timeout_s: float = DIAGNOSE_TIMEOUT_S) -> Diagnosis:
    """Why `conn` cannot be used: TCP, then TLS, then the Kafka/SASL set-up, per bootstrap address until one
    gets past TCP; never longer than about timeout_s."""
    deadline = time.monotonic() + timeout_s
    results = []
    for address in conn.bootstrap.split(","):
        if time.monotonic() >= deadline:
            break
        results.append(_diagnose_address(conn, address.strip(), deadline))
        if results[-1].kind != "unreachable":
            break
    return summarize(results)


def describe_failure(conn: ConnectionSettings, what: str, timeout_s: float = DIAGNOSE_TIMEOUT_S) -> str:
    """`what` (e.g. "no broker of ... answered: KafkaTimeoutError") with the diagnosis of why, one line."""
    found = diagnose(conn, timeout_s)
    if found.ok:
        return f"{what} (the bootstrap brokers accept these settings: {found.message})"
    return found.message


def require_reachable(conn: ConnectionSettings, timeout_s: float = DIAGNOSE_TIMEOUT_S) -> None:
    """Raise ClusterUnreachable when diagnose(conn) finds a problem (a command's check before it starts)."""
    found = diagnose(conn, timeout_s)
    if not found.ok:
        raise ClusterUnreachable(found.message)


def _diagnose_address(conn: ConnectionSettings, address: str, deadline: float) -> Diagnosis:
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=_left(deadline, CONNECT_TIMEOUT_S))
    except OSError as exc:
        return classify_connect(exc, address)
    try:
        if conn.uses_tls:
            try:
                sock.settimeout(_left(deadline))
                _tls_context(conn).wrap_socket(sock, server_hostname=host).close()
            except (ssl.SSLError, OSError) as exc:
                return classify_tls(exc, conn, address)
    finally:
        sock.close()
    try:
        version = _kafka_handshake(conn, address, deadline)
    except _SetupFailed as failed:
        return classify_kafka(failed.cause, conn, address, failed.stage)
    return Diagnosis("ok", f"{address} answered ApiVersions and Metadata (broker {version})"
                     + (f" and accepted {conn.sasl_mechanism} user '{conn.sasl_username}'" if conn.uses_sasl else ""))


def _left(deadline: float, cap: float | None = None) -> float:
    left = max(0.05, deadline - time.monotonic())
    return min(left, cap) if cap else left


def _tls_context(conn: ConnectionSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=conn.tls_ca_file)
    context.check_hostname = conn.tls_verify_hostname   # like every txnlab client, the chain is always verified
    if conn.tls_cert_file:
        password = conn.tls_key_password.get_secret_value() if conn.tls_key_password else None
        context.load_cert_chain(conn.tls_cert_file, conn.tls_key_file, password)
    return context


class _SetupFailed(Exception):
    def __init__(self, stage: Stage, cause: BaseException):
        super().__init__(stage)
        self.stage, self.cause = stage, cause


def _kafka_handshake(conn: ConnectionSettings, address: str, deadline: float) -> str:
    """One kafka-python connection to address (ApiVersions, SASL when configured, then a Metadata request
    for no topic), on a loop of its own driven by this thread: the broker's version, or _SetupFailed."""
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.metadata.metadata import MetadataRequest
    timeout_ms = int(_left(deadline) * 1000)
    settings = conn.kafka_python(request_timeout_ms=timeout_ms, reconnect_backoff_max_ms=timeout_ms)
    settings["bootstrap_servers"] = [address]
    net = NetworkSelector()
    manager = KafkaConnectionManager(net, **settings)
    node = manager.cluster.bootstrap_brokers()[0]

    async def connect(m):
        connection = m.get_connection(node.node_id, timeout_ms=timeout_ms, pop_on_close=False,
                                      refresh_metadata_on_err=False)
        try:
            await m.wait_for(connection.init_future, timeout_ms)
        except Exception as exc:  # noqa: BLE001 - classified by how far the set-up got
            raise _SetupFailed("api_versions" if connection.broker_version is None else "sasl", exc) from exc
        try:
            await m.wait_for(connection.send_request(MetadataRequest(topics=[])), timeout_ms)
        except Exception as exc:  # noqa: BLE001
            raise _SetupFailed("request", exc) from exc
        return ".".join(map(str, connection.broker_version))

    try:
        return net.run(connect, manager)
    except _SetupFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. the loop itself failed
        raise _SetupFailed("api_versions", exc) from exc
    finally:
        manager.close()
        net.close()
