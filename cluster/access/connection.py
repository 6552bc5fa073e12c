"""The one Kafka connection-settings builder: bootstrap, SASL (PLAIN, SCRAM) and TLS.

Owns: ConnectionSettings, the one model of a connection's keys (a pydantic model: allowed values,
validation, SecretStr passwords, TXNLAB_KAFKA_* environment variables; the exporter's config uses it as its
`kafka` section), and its translation into confluent-kafka (librdkafka), kafka-python and Java-tool
configuration, and where a run's cluster is found (run_bootstrap: given, $TXNLAB_KAFKA_BOOTSTRAP, the run's
cluster.json). Every Kafka client txnlab creates gets its settings from here. Also the one log
redaction: LOG_SECRETS, a logging filter that replaces every secret it knows with ***; settings register
their passwords in it when built, other secrets (the exporter's basic-auth password) are added where
they are read, and install_log_redaction() puts it on the handlers wherever txnlab sets up logging
(kafka-python logs its whole configuration, passwords included, at DEBUG).
Must not: log or print secrets (passwords are kept out of repr, errors and describe()).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cluster.access.errors import TxnlabError

ENV_PREFIX = "TXNLAB_KAFKA_"
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

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


def install_log_redaction(*handlers: logging.Handler | None) -> None:
    """Put LOG_SECRETS on these handlers (default: the root logger's and Python's last-resort one)."""
    chosen: tuple[logging.Handler | None, ...] = handlers or (*logging.getLogger().handlers, logging.lastResort)
    for handler in chosen:
        if handler is not None:
            handler.addFilter(LOG_SECRETS)


class ConnectionSettingsError(TxnlabError, ValueError):
    """Bad connection settings (raised before anything talks to Kafka)."""


def validation_problems(exc: ValidationError) -> list[str]:
    """One "key: what is wrong" per error (dotted keys, unknown keys named so), never the value given:
    it may be a password."""
    problems = []
    for err in exc.errors(include_input=False):
        where = ".".join(str(p) for p in err["loc"])
        what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        problems.append(f"{where}: {what}" if where else what)
    return problems


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


class ConnectionSettings(BaseModel):
    """How to reach one cluster: the keys, their allowed values and their checks, once. Validated when
    built (ConnectionSettingsError) or as a section of a larger config (the exporter's `kafka`, whose errors
    then name `kafka.<key>`). Passwords are SecretStr: out of repr and errors, registered in LOG_SECRETS."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap: str
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = Field(None, repr=False)
    sasl_password_file: str | None = None       # read when sasl_password is not given (keeps it out of env)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: SecretStr | None = Field(None, repr=False)
    tls_verify_hostname: bool = True
    client_id: str = "txnlab"

    def __init__(self, bootstrap: str | None = None, /, **values: Any) -> None:
        if bootstrap is not None:
            values["bootstrap"] = bootstrap
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConnectionSettingsError("; ".join(validation_problems(exc))) from None
    # It only adapts the arguments: nested in a larger model, pydantic validates without it (as for its own
    # RootModel), so the errors keep their keys there.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @field_validator("bootstrap")
    @classmethod
    def _host_ports(cls, bootstrap: str) -> str:
        if not bootstrap or not all(":" in h for h in bootstrap.split(",")):
            raise PydanticCustomError("bootstrap", "must be host:port[,host:port...], got {got}",
                                      {"got": repr(bootstrap)})
        return bootstrap

    @model_validator(mode="before")
    @classmethod
    def _password_from_file(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("sasl_password_file") and values.get("sasl_password") is None:
            path = values["sasl_password_file"]
            try:
                values = {**values, "sasl_password": open(path).read().strip()}
            except OSError as exc:
                raise PydanticCustomError("no_such_file", "cannot read sasl_password_file {path}: {why}",
                                          {"path": repr(path), "why": exc.strerror}) from None
        return values

    @field_validator("sasl_password", "tls_key_password")
    @classmethod
    def _registered(cls, secret: SecretStr | None) -> SecretStr | None:
        LOG_SECRETS.add(_plain(secret))
        return secret

    @field_validator("tls_ca_file", "tls_cert_file", "tls_key_file")
    @classmethod
    def _exists(cls, path: str | None) -> str | None:
        if path and not os.path.isfile(path):
            raise PydanticCustomError("no_such_file", "no such file {path}", {"path": repr(path)})
        return path

    @model_validator(mode="after")
    def _sasl_complete(self) -> "ConnectionSettings":
        if self.uses_sasl and self.sasl_mechanism is None:
            raise PydanticCustomError("sasl", "sasl_mechanism must be one of {allowed} with {protocol}",
                                      {"allowed": ", ".join(get_args(SaslMechanism)), "protocol": self.security_protocol})
        if self.uses_sasl and (not self.sasl_username or self.sasl_password is None):
            raise PydanticCustomError("sasl", "SASL needs sasl_username and sasl_password")
        return self

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
                         "sasl.password": _plain(self.sasl_password)})
        if self.uses_tls:
            conf.update(_drop_none({"ssl.ca.location": self.tls_ca_file, "ssl.certificate.location": self.tls_cert_file,
                                    "ssl.key.location": self.tls_key_file,
                                    "ssl.key.password": _plain(self.tls_key_password)}))
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.tls_verify_hostname else "none"
        conf.update(extra)
        return conf

    def kafka_python(self, **extra: Any) -> dict[str, Any]:
        """kafka-python configuration (KafkaAdminClient, KafkaConsumer, KafkaProducer)."""
        conf: dict[str, Any] = {"bootstrap_servers": self.bootstrap.split(","),
                                "security_protocol": self.security_protocol, "client_id": self.client_id}
        if self.uses_sasl:
            conf.update({"sasl_mechanism": self.sasl_mechanism, "sasl_plain_username": self.sasl_username,
                         "sasl_plain_password": _plain(self.sasl_password)})
        if self.uses_tls:
            conf.update(_drop_none({"ssl_cafile": self.tls_ca_file, "ssl_certfile": self.tls_cert_file,
                                    "ssl_keyfile": self.tls_key_file, "ssl_password": _plain(self.tls_key_password)}))
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
                                         f'password="{_plain(self.sasl_password)}";')
        if self.uses_tls and self.tls_ca_file:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.tls_ca_file})
        if self.uses_tls and not self.tls_verify_hostname:
            props["ssl.endpoint.identification.algorithm"] = ""
        return props

    def to_env(self, prefix: str = ENV_PREFIX) -> dict[str, str]:
        """The inverse of from_env: how a child process gets these settings (secrets stay out of argv).
        The connection's own keys only (not those a larger config's section adds); a client.id left at its default
        is not passed on (a workload process then names itself on the wire: chaos/workloads/base.py
        process_connection)."""
        env = {}
        for name, field in ConnectionSettings.model_fields.items():
            value = _plain(getattr(self, name))
            if name == "client_id" and value == field.default:
                continue
            if value is not None:
                env[prefix + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return env

    @classmethod
    def env_values(cls, environ: Mapping[str, str] | None = None, prefix: str = ENV_PREFIX) -> dict[str, str]:
        """This model's keys among the PREFIX<KEY> environment variables, unvalidated (other names are ignored)."""
        env = os.environ if environ is None else environ
        values = {k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)}
        return {k: v for k, v in values.items() if k in cls.model_fields}

    @classmethod
    def from_env(cls, bootstrap: str | None = None, prefix: str = ENV_PREFIX,
                 environ: Mapping[str, str] | None = None) -> "ConnectionSettings":
        """Settings from TXNLAB_KAFKA_* environment variables (BOOTSTRAP, SECURITY_PROTOCOL, SASL_*, TLS_*)."""
        values = cls.env_values(environ, prefix)
        values["bootstrap"] = bootstrap or values.get("bootstrap", "")
        return cls(**values)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def run_bootstrap(run_dir, given: str | None = None) -> str | None:
    """The bootstrap to reach a run's cluster: `given`, else $TXNLAB_KAFKA_BOOTSTRAP, else the run's cluster.json
    (None when there is none)."""
    info = Path(run_dir) / "cluster.json"
    return given or os.environ.get(f"{ENV_PREFIX}BOOTSTRAP") or (
        json.loads(info.read_text()).get("bootstrap") if info.exists() else None)

