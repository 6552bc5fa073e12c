"""Exporter configuration: defaults < YAML file < environment < command-line flags, validated.

Owns: the ExporterConfig model (unknown keys rejected at every level) and loading and layering. Its
`kafka` section is the one connection model (cluster/access/connection.py's ConnectionSettings: its keys, values,
checks and TXNLAB_KAFKA_* variables) with the exporter's defaults and request timeout. The annotated reference
file is exporter/txnlab-exporter.yaml; a test keeps it in step with this model.
Must not: talk to Kafka or print secrets (passwords are SecretStr; repr and errors never show them).

Environment: TXNLAB_EXPORTER_CONFIG names a file; TXNLAB_EXPORTER__<SECTION>__<KEY>=value sets one
key (e.g. TXNLAB_EXPORTER__COLLECTION__INTERVAL_SECONDS=5); TXNLAB_KAFKA_* as everywhere in txnlab.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cluster.access.connection import ConnectionSettings, validation_problems
from cluster.access.errors import TxnlabError

ENV_PREFIX = "TXNLAB_EXPORTER__"
REFERENCE_FILE = Path(__file__).with_name("txnlab-exporter.yaml")


class ConfigError(TxnlabError, ValueError):
    """A configuration the exporter cannot start with; the message says which key and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSection(ConnectionSettings):
    """The cluster to watch: the connection settings every txnlab client uses, with the exporter's defaults,
    plus its per-request timeout."""
    bootstrap: str = "127.0.0.1:19001"
    client_id: str = "txnlab-exporter"
    request_timeout_seconds: float = Field(5.0, gt=0, le=60)


class WebSection(_Strict):
    listen_address: str = "127.0.0.1"
    port: int = Field(19800, ge=0, le=65535)         # 0: any free port
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    basic_auth_username: str | None = None
    basic_auth_password: SecretStr | None = None
    connection_timeout_seconds: float = Field(10.0, gt=0, le=600)

    @model_validator(mode="after")
    def _pairs_complete(self) -> "WebSection":
        for pair in (("tls_cert_file", "tls_key_file"), ("basic_auth_username", "basic_auth_password")):
            given = [key for key in pair if getattr(self, key)]
            if len(given) == 1:
                missing = next(key for key in pair if key not in given)
                raise PydanticCustomError("incomplete_pair", "{given} is set without {missing}: set both or neither",
                                          {"given": given[0], "missing": missing})
        return self

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_file)

    @property
    def basic_auth(self) -> bool:
        return bool(self.basic_auth_username)


class CollectionSection(_Strict):
    interval_seconds: float = Field(15.0, ge=0.5, le=3600)
    producers_batch_size: int = Field(500, ge=1, le=500)
    metadata_max_age_seconds: float = Field(30.0, ge=0, le=3600)
    consumer_groups: bool = True
    readable_lag_max_bytes: int = Field(1024 * 1024, ge=0, le=64 * 1024 * 1024)
    hanging_confirm_seconds: float = Field(5.0, ge=0, le=600)
    group_commit_stall_seconds: float = Field(300.0, gt=0, le=86400)
    scrape_timeout_seconds: float = Field(5.0, gt=0, le=60)
    offsets_cache_seconds: float = Field(1.0, ge=0, le=60)
    metadata_min_refresh_seconds: float = Field(5.0, ge=0, le=3600)


class FiltersSection(_Strict):
    topic_allow: str = ".*"
    topic_deny: str = "^__transaction_state$"
    group_allow: str = ".*"
    group_deny: str = "^$"

    @field_validator("topic_allow", "topic_deny", "group_allow", "group_deny")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value

    def topic_allowed(self, topic: str) -> bool:
        return bool(re.fullmatch(self.topic_allow, topic)) and not re.fullmatch(self.topic_deny, topic)

    def group_allowed(self, group: str) -> bool:
        return bool(re.fullmatch(self.group_allow, group)) and not re.fullmatch(self.group_deny, group)


class MetricsSection(_Strict):
    granularity: Literal["partition", "topic"] = "partition"
    hanging_info_limit: int = Field(100, ge=0, le=10000)
    top_transactions: int = Field(0, ge=0, le=1000)


class ExporterConfig(_Strict):
    kafka: KafkaSection = KafkaSection()
    web: WebSection = WebSection()
    collection: CollectionSection = CollectionSection()
    filters: FiltersSection = FiltersSection()
    metrics: MetricsSection = MetricsSection()


def load_config(path: str | Path | None = None, env: dict[str, str] | None = None,
                flags: dict[str, Any] | None = None) -> ExporterConfig:
    """Layer defaults, the YAML file, the environment and flags (dotted keys, e.g. "web.port")."""
    env = dict(os.environ if env is None else env)
    data: dict[str, Any] = {}
    path = path or env.get("TXNLAB_EXPORTER_CONFIG")
    if path:
        _merge(data, _read_yaml(Path(path)))
    _merge(data, _kafka_env(env))
    _merge(data, _prefixed_env(env))
    for dotted, value in (flags or {}).items():
        if value is not None:
            _merge(data, _nest(dotted.split("."), value))
    try:
        return ExporterConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must be a mapping of sections, got {type(loaded).__name__}")
    return loaded


def _kafka_env(env: dict[str, str]) -> dict[str, Any]:
    values = KafkaSection.env_values(env)
    return {"kafka": values} if values else {}


def _prefixed_env(env: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIX):
            _merge(data, _nest([part.lower() for part in key[len(ENV_PREFIX):].split("__")], value))
    return data


def _nest(parts: list[str], value: Any) -> dict[str, Any]:
    for part in reversed(parts):
        value = {part: value}
    return value


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _describe(exc: ValidationError) -> str:
    return "invalid exporter configuration:\n  " + "\n  ".join(validation_problems(exc))
