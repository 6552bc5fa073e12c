"""The one Kafka connection-settings builder: bootstrap, SASL (PLAIN, SCRAM) and TLS.

Owns: ConnectionSettings and its translation into confluent-kafka (librdkafka) and kafka-python
configuration dicts. Every Kafka client txnlab creates gets its settings from here. Also the one log
redaction: LOG_SECRETS, a logging filter that replaces every secret it knows with ***; settings register
their passwords in it when built, other secrets (the exporter's basic-auth password) are added where
they are read, and install_log_redaction() puts it on the handlers wherever txnlab sets up logging
(kafka-python logs its whole configuration, passwords included, at DEBUG).
Must not: log or print secrets (the password is kept out of repr and describe()).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


REDACTED = "***"


class SecretRedactor(logging.Filter):
    """A handler filter: every registered secret in a record's message, traceback or stack becomes ***."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()

    def add(self, *secrets: str | None) -> None:
        """Register secrets, also as a repr shows them inside a logged dict (quotes, backslashes escaped)."""
        known = set(self.secrets) | {s for s in secrets if s} | {repr(s)[1:-1] for s in secrets if s}
        self.secrets = tuple(sorted(known, key=len, reverse=True))  # longest first: one may contain another

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = _message(record)
        if (redacted := self.redact(message)) != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_text = record.exc_text and self.redact(record.exc_text)
        record.stack_info = record.stack_info and self.redact(record.stack_info)
        return True


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except (TypeError, ValueError):  # a malformed logging call: keep what it said, unformatted
        return f"{record.msg} {record.args}"


LOG_SECRETS = SecretRedactor()


def install_log_redaction(*handlers: logging.Handler) -> None:
    """Put LOG_SECRETS on these handlers (default: the root logger's and Python's last-resort one)."""
    for handler in handlers or (*logging.getLogger().handlers, logging.lastResort):
        if handler is not None:
            handler.addFilter(LOG_SECRETS)


class ConnectionSettingsError(ValueError):
    """Bad connection settings (raised before anything talks to Kafka)."""


@dataclass(frozen=True)
class ConnectionSettings:
    """How to reach one cluster. Validated on construction."""

    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)
    tls_verify_hostname: bool = True
    client_id: str = "txnlab"

    def __post_init__(self) -> None:
        LOG_SECRETS.add(self.sasl_password, self.tls_key_password)
        if not self.bootstrap or not all(":" in h for h in self.bootstrap.split(",")):
            raise ConnectionSettingsError(f"bootstrap must be host:port[,host:port...], got {self.bootstrap!r}")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConnectionSettingsError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, got {self.security_protocol!r}")
        if self.uses_sasl:
            self._check_sasl()
        for name in ("tls_ca_file", "tls_cert_file", "tls_key_file"):
            path = getattr(self, name)
            if path and not os.path.isfile(path):
                raise ConnectionSettingsError(f"{name}: no such file {path!r}")

    def _check_sasl(self) -> None:
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConnectionSettingsError(
                f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)} with {self.security_protocol}, "
                f"got {self.sasl_mechanism!r}")
        if not self.sasl_username or self.sasl_password is None:
            raise ConnectionSettingsError("SASL needs sasl_username and sasl_password")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def describe(self) -> str:
        """A one-line, secret-free description for logs and messages."""
        auth = f" sasl={self.sasl_mechanism} user={self.sasl_username}" if self.uses_sasl else ""
        return f"{self.bootstrap} ({self.security_protocol}{auth})"

    def confluent(self, **extra: Any) -> dict[str, Any]:
        """librdkafka configuration for confluent-kafka producers, consumers and admin clients."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol,
                                "client.id": self.client_id}
        if self.uses_sasl:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username,
                         "sasl.password": self.sasl_password})
        if self.uses_tls:
            conf.update(_drop_none({"ssl.ca.location": self.tls_ca_file, "ssl.certificate.location": self.tls_cert_file,
                                    "ssl.key.location": self.tls_key_file, "ssl.key.password": self.tls_key_password}))
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.tls_verify_hostname else "none"
        conf.update(extra)
        return conf

    def kafka_python(self, **extra: Any) -> dict[str, Any]:
        """kafka-python configuration (KafkaAdminClient, KafkaConsumer, KafkaProducer)."""
        conf: dict[str, Any] = {"bootstrap_servers": self.bootstrap.split(","),
                                "security_protocol": self.security_protocol, "client_id": self.client_id}
        if self.uses_sasl:
            conf.update({"sasl_mechanism": self.sasl_mechanism, "sasl_plain_username": self.sasl_username,
                         "sasl_plain_password": self.sasl_password})
        if self.uses_tls:
            conf.update(_drop_none({"ssl_cafile": self.tls_ca_file, "ssl_certfile": self.tls_cert_file,
                                    "ssl_keyfile": self.tls_key_file, "ssl_password": self.tls_key_password}))
            conf["ssl_check_hostname"] = self.tls_verify_hostname
        conf.update(extra)
        return conf

    def java_properties(self) -> dict[str, str]:
        """Client properties for Kafka's own Java tools (TransactionsCommand, copier, perf tools)."""
        props = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.uses_sasl:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if self.sasl_mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            props["sasl.mechanism"] = str(self.sasl_mechanism)
            props["sasl.jaas.config"] = (f'{module} required username="{self.sasl_username}" '
                                         f'password="{self.sasl_password}";')
        if self.uses_tls and self.tls_ca_file:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.tls_ca_file})
        if self.uses_tls and not self.tls_verify_hostname:
            props["ssl.endpoint.identification.algorithm"] = ""
        return props

    def to_env(self, prefix: str = "TXNLAB_KAFKA_") -> dict[str, str]:
        """The inverse of from_env: how a child process gets these settings (secrets stay out of argv)."""
        env = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is not None:
                env[prefix + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return env

    @classmethod
    def from_env(cls, bootstrap: str | None = None, prefix: str = "TXNLAB_KAFKA_",
                 environ: dict[str, str] | None = None) -> "ConnectionSettings":
        """Settings from TXNLAB_KAFKA_* environment variables (BOOTSTRAP, SECURITY_PROTOCOL, SASL_*, TLS_*)."""
        env = {k[len(prefix):].lower(): v for k, v in (environ if environ is not None else os.environ).items()
               if k.startswith(prefix)}
        known = {f for f in cls.__dataclass_fields__}
        values: dict[str, Any] = {k: v for k, v in env.items() if k in known}
        if "tls_verify_hostname" in values:
            values["tls_verify_hostname"] = values["tls_verify_hostname"].lower() not in ("0", "false", "no")
        values["bootstrap"] = bootstrap or values.get("bootstrap", "")
        return cls(**values)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
