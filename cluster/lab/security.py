"""The secured local cluster: TLS from a local CA, SASL/SCRAM-SHA-512 users, the StandardAuthorizer's ACLs.

Owns: the security modes of a local cluster (`plaintext`, the default, and `sasl_ssl`); the per-cluster
secrets folder (state_dir/secrets, mode 0700, every file 0600): one generated password per role, a local
CA and the certificates brokers and the exporter's HTTPS serve (valid for 127.0.0.1 and localhost, the
addresses clients dial); the broker settings of a `sasl_ssl` node (SASL_SSL on the client and
inter-broker listeners with SCRAM-SHA-512, SASL_SSL with PLAIN on the controller listener: KRaft keeps
SCRAM credentials in the metadata log, which the controllers must reach first); the SCRAM users written
at format time (through a Java argument file: never on a command line); the roles and their
least-privilege ACLs, as data, as confluent-kafka AclBindings and as a `kafka-acls.sh` script (docs/security.md);
the ConnectionSettings of each role.
Must not: write a secret anywhere but the secrets folder, log one, or put one in a process's argv.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, NamedTuple

from cluster.access.connection import LOG_SECRETS, ConnectionSettings
from cluster.access.errors import TxnlabError

MECHANISM = "SCRAM-SHA-512"
CONTROLLER_MECHANISM = "PLAIN"
ADMIN = "admin"
# Each role is one SCRAM user (principal User:<role>) with the least privilege its commands need.
ROLES: dict[str, str] = {
    ADMIN: "the brokers' own principal (inter-broker and controller traffic) and cluster set-up: a super user",
    "exporter": "txnlab's exporter: reads metadata, offsets, configs, producer state and transactions; writes nothing",
    "workload": "txnlab's workloads (txn-producer, the exactly-once processor, Kafka's Java clients): "
                "creates topics, produces transactionally, consumes in groups, commits offsets in transactions",
    "operator": "`txnlab txn list|hanging|abort`: what the exporter reads, plus aborting a hanging transaction",
    "verify": "`txnlab verify` (Spark's Kafka connector and the evidence check): reads topics and offsets",
}
WEB_USER = "prometheus"
SCRAM_ITERATIONS = 8192
CERT_DAYS = 825


class SecurityError(TxnlabError, RuntimeError):
    """The secured cluster's material is missing or unusable."""


class Acl(NamedTuple):
    """One ALLOW ACL: principal User:<role> may <operation> on <resource> <name> (literal or prefixed)."""
    role: str
    resource: Literal["cluster", "topic", "group", "transactional-id"]
    name: str
    operation: str
    pattern: Literal["literal", "prefixed"] = "literal"


def _grant(role: str, resource: str, name: str, *operations: str) -> list[Acl]:
    return [Acl(role, resource, name, op) for op in operations]  # type: ignore[arg-type]


# What each request needs (Kafka 4.3's KafkaApis / AuthHelper), by role:
#   Metadata: Describe topic; ListOffsets: Describe topic; Fetch: Read topic; DescribeProducers: Read topic;
#   DescribeConfigs(broker): DescribeConfigs cluster; DescribeCluster: Describe cluster;
#   ListTransactions: only the ids the principal may Describe; DescribeTransactions: Describe transactional id;
#   ListGroups/OffsetFetch: Describe group (+ Describe topic); CreateTopics: Create topic (or cluster);
#   transactional produce: Write transactional id + Write topic; TxnOffsetCommit: Read group;
#   WriteTxnMarkers (Admin.abortTransaction, KIP-664): Alter cluster.
ACLS: tuple[Acl, ...] = tuple(
    _grant("exporter", "cluster", "kafka-cluster", "Describe", "DescribeConfigs")
    + _grant("exporter", "topic", "*", "Describe", "Read", "DescribeConfigs")
    + _grant("exporter", "group", "*", "Describe")
    + _grant("exporter", "transactional-id", "*", "Describe")
    + _grant("workload", "cluster", "kafka-cluster", "Describe", "IdempotentWrite")
    + _grant("workload", "topic", "*", "Create", "Describe", "DescribeConfigs", "Read", "Write")
    + _grant("workload", "group", "*", "Describe", "Read")
    + _grant("workload", "transactional-id", "*", "Describe", "Write")
    + _grant("operator", "cluster", "kafka-cluster", "Describe", "DescribeConfigs", "Alter")
    + _grant("operator", "topic", "*", "Describe", "Read", "DescribeConfigs")
    + _grant("operator", "transactional-id", "*", "Describe")
    + _grant("verify", "cluster", "kafka-cluster", "Describe")
    + _grant("verify", "topic", "*", "Describe", "Read")
    + _grant("verify", "group", "*", "Describe", "Read"))


def acl_script(acls: Iterable[Acl] = ACLS, bootstrap: str = "$BOOTSTRAP",
               admin_config: str = "$ADMIN_CONFIG") -> str:
    """A copy-pastable `kafka-acls.sh` script granting the ACLs (docs/security.md prints ACLS this way)."""
    flag = {"cluster": "--cluster", "topic": "--topic", "group": "--group", "transactional-id": "--transactional-id"}
    lines = ["#!/bin/sh", "# txnlab's roles and the least privilege each needs (cluster/lab/security.py ACLS)",
             "# BOOTSTRAP=broker:9093 ADMIN_CONFIG=admin.properties (a super user's client properties)", "set -e"]
    grouped: dict[tuple, list[str]] = {}
    for acl in acls:
        grouped.setdefault((acl.role, acl.resource, acl.name, acl.pattern), []).append(acl.operation)
    for (role, resource, name, pattern), ops in grouped.items():
        target = flag[resource] if resource == "cluster" else f"{flag[resource]} '{name}'"
        pattern_flag = " --resource-pattern-type prefixed" if pattern == "prefixed" else ""
        operations = " ".join(f"--operation {op}" for op in ops)
        lines.append(f'kafka-acls.sh --bootstrap-server "{bootstrap}" --command-config "{admin_config}" '
                     f"--add --allow-principal User:{role} {operations} {target}{pattern_flag}")
    return "\n".join(lines) + "\n"


def acl_bindings(acls: Iterable[Acl] = ACLS) -> list:
    """The ACLs as confluent-kafka AclBindings (AdminClient.create_acls; creating an existing one is a no-op)."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    kinds = {"cluster": ResourceType.BROKER, "topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
             "transactional-id": ResourceType.TRANSACTIONAL_ID}
    operations = {"Describe": AclOperation.DESCRIBE, "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
                  "Read": AclOperation.READ, "Write": AclOperation.WRITE, "Create": AclOperation.CREATE,
                  "Alter": AclOperation.ALTER, "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE}
    return [AclBinding(kinds[a.resource], a.name,
                       ResourcePatternType.PREFIXED if a.pattern == "prefixed" else ResourcePatternType.LITERAL,
                       f"User:{a.role}", "*", operations[a.operation], AclPermissionType.ALLOW) for a in acls]


# ---- the secrets folder ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Secrets:
    """state_dir/secrets: role passwords, the CA and the certificates (0700 folder, 0600 files).
    seen_at: where the processes given settings built from these secrets see the folder (a container's mount;
    default: the folder itself)."""

    folder: Path
    seen_at: Path | None = None

    def seen(self, path: Path) -> str:
        """path (a file of the folder) as the configured processes see it."""
        return str(self.seen_at / path.relative_to(self.folder)) if self.seen_at else str(path)

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def ca_key_file(self) -> Path:
        return self.folder / "ca-key.pem"

    @property
    def server_cert_file(self) -> Path:
        return self.folder / "server.pem"

    @property
    def server_key_file(self) -> Path:
        return self.folder / "server-key.pem"

    @property
    def broker_keystore(self) -> Path:
        """PEM keystore of the brokers: the private key, then the certificate chain."""
        return self.folder / "broker-keystore.pem"

    @property
    def web_password_file(self) -> Path:
        """The exporter's HTTPS basic-auth password (user WEB_USER: Prometheus)."""
        return self.folder / "web.password"

    def password_file(self, role: str) -> Path:
        if role not in ROLES:
            raise SecurityError(f"no role {role!r}: the roles are {', '.join(ROLES)}")
        return self.folder / f"{role}.password"

    def password(self, role: str) -> str:
        try:
            value = self.password_file(role).read_text().strip()
        except FileNotFoundError:
            raise SecurityError(f"no password for {role} in {self.folder}: run `txnlab cluster up --security "
                                "sasl_ssl` (it generates them)") from None
        LOG_SECRETS.add(value)
        return value

    def ensure(self) -> None:
        """Generate whatever is missing (idempotent: existing passwords and certificates are kept)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        for role in ROLES:
            if not self.password_file(role).exists():
                write_private(self.password_file(role), secrets.token_hex(24) + "\n")
        if not self.web_password_file.exists():
            write_private(self.web_password_file, secrets.token_hex(24) + "\n")
        if not (self.ca_file.exists() and self.ca_key_file.exists()):
            _write_ca(self)
        if not (self.server_cert_file.exists() and self.server_key_file.exists() and self.broker_keystore.exists()):
            _write_server_cert(self)


def write_private(path: Path, text: str | bytes) -> None:
    """Create path with mode 0600 before anything is written into it."""
    data = text.encode() if isinstance(text, str) else text
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(0o600)


def _key_pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write_ca(s: Secrets) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"txnlab local CA {s.folder.parent.name}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    write_private(s.ca_key_file, _key_pem(key))
    write_private(s.ca_file, cert.public_bytes(serialization.Encoding.PEM))
    for stale in (s.server_cert_file, s.server_key_file, s.broker_keystore):   # signed by a CA that is gone
        stale.unlink(missing_ok=True)


def _write_server_cert(s: Secrets) -> None:
    """One certificate for every broker and the exporter's HTTPS: all listen on 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    ca_key = serialization.load_pem_private_key(s.ca_key_file.read_bytes(), password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise TxnlabError(f"{s.ca_key_file}: not the RSA key this CA was made with")
    ca = x509.load_pem_x509_certificate(s.ca_file.read_bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    write_private(s.server_key_file, _key_pem(key))
    write_private(s.server_cert_file, cert_pem + s.ca_file.read_bytes())
    write_private(s.broker_keystore, _key_pem(key) + cert_pem + s.ca_file.read_bytes())


# ---- brokers ------------------------------------------------------------------------------------------------
def _jaas(module: str, **options: str) -> str:
    return f"{module} required" + "".join(f' {k}="{v}"' for k, v in options.items()) + ";"


SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def broker_properties(s: Secrets, sasl_listeners: Iterable[str], controller_listener: str = "CONTROLLER") -> dict[str, str]:
    """A sasl_ssl node's settings: TLS everywhere (PEM keystore and truststore), SCRAM-SHA-512 on the
    client and inter-broker listeners (the brokers log in as admin), PLAIN on the controller listener,
    the StandardAuthorizer with admin as the only super user. Holds the admin password: the caller writes
    it to a 0600 file."""
    admin = s.password(ADMIN)
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": s.seen(s.broker_keystore),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": s.seen(s.ca_file),
             "ssl.client.auth": "none", "ssl.endpoint.identification.algorithm": "https",
             "sasl.enabled.mechanisms": MECHANISM, "sasl.mechanism.inter.broker.protocol": MECHANISM,
             "sasl.mechanism.controller.protocol": CONTROLLER_MECHANISM,
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "super.users": f"User:{ADMIN}", "allow.everyone.if.no.acl.found": "false"}
    for listener in sasl_listeners:
        props[f"listener.name.{listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config"] = _jaas(
            SCRAM_MODULE, username=ADMIN, password=admin)
    lower = controller_listener.lower()
    props[f"listener.name.{lower}.sasl.enabled.mechanisms"] = CONTROLLER_MECHANISM
    props[f"listener.name.{lower}.{CONTROLLER_MECHANISM.lower()}.sasl.jaas.config"] = _jaas(
        PLAIN_MODULE, username=ADMIN, password=admin, **{f"user_{ADMIN}": admin})
    return props


def format_arguments(s: Secrets) -> list[str]:
    """kafka-storage format's --add-scram arguments: one SCRAM-SHA-512 user per role. They hold the
    passwords: pass them in a Java argument file (cluster/lab/java.py run_tool(argfile=...)), never in argv."""
    args: list[str] = []
    for role in ROLES:
        args += ["--add-scram", f"{MECHANISM}=[name={role},iterations={SCRAM_ITERATIONS},password={s.password(role)}]"]
    return args


def connection(s: Secrets, bootstrap: str, role: str) -> ConnectionSettings:
    """How role reaches the secured cluster: SASL_SSL, SCRAM-SHA-512, trusting the local CA."""
    return ConnectionSettings(bootstrap=bootstrap, security_protocol="SASL_SSL", sasl_mechanism=MECHANISM,
                              sasl_username=role, sasl_password=s.password(role), tls_ca_file=str(s.ca_file))


# ---- the stack's exporter and Prometheus ---------------------------------------------------------------------
def exporter_config(s: Secrets, bootstrap: str) -> str:
    """The stack exporter's config file (YAML, written 0600): the exporter principal over SASL_SSL, HTTPS
    with the cluster's certificate, basic auth for Prometheus."""
    import yaml
    kafka = {**connection(s, bootstrap, "exporter").to_env(prefix=""), "TLS_CA_FILE": s.seen(s.ca_file)}
    web = {"tls_cert_file": s.seen(s.server_cert_file), "tls_key_file": s.seen(s.server_key_file),
           "basic_auth_username": WEB_USER, "basic_auth_password": s.web_password_file.read_text().strip()}
    return yaml.safe_dump({"kafka": {k.lower(): v for k, v in kafka.items()}, "web": web}, sort_keys=False)


def prometheus_scrape_settings(s: Secrets) -> dict:
    """Prometheus' scrape of the secured exporter: HTTPS trusting the local CA, basic auth from the file."""
    return {"scheme": "https", "tls_config": {"ca_file": s.seen(s.ca_file)},
            "basic_auth": {"username": WEB_USER, "password_file": s.seen(s.web_password_file)}}
