"""Exporter configuration: layering, unknown keys, the reference file, secrets kept out of messages."""
from __future__ import annotations

import pytest
import yaml

from exporter.config import REFERENCE_FILE, ConfigError, ExporterConfig, load_config


def test_reference_file_is_the_defaults_and_names_every_key():
    reference = yaml.safe_load(REFERENCE_FILE.read_text())
    assert load_config(REFERENCE_FILE, env={}) == ExporterConfig()
    for section, model in ExporterConfig.model_fields.items():
        assert set(reference[section]) == set(model.annotation.model_fields), section


def test_layers_file_then_env_then_flags(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("kafka: {bootstrap: 'file:1'}\ncollection: {interval_seconds: 7}\nweb: {port: 1111}\n")
    env = {"TXNLAB_KAFKA_BOOTSTRAP": "env:2", "TXNLAB_EXPORTER__WEB__PORT": "2222"}
    config = load_config(path, env=env, flags={"web.port": 3333, "metrics.granularity": None})
    assert config.kafka.bootstrap == "env:2"
    assert config.collection.interval_seconds == 7.0
    assert config.web.port == 3333
    assert config.metrics.granularity == "partition"


def test_config_file_from_environment(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("metrics: {granularity: topic}\n")
    assert load_config(env={"TXNLAB_EXPORTER_CONFIG": str(path)}).metrics.granularity == "topic"


@pytest.mark.parametrize("text, expected", [
    ("kafka: {bootstrapp: x:1}", "kafka.bootstrapp: unknown key"),
    ("extra: {}", "extra: unknown key"),
    ("collection: {interval_seconds: 0}", "collection.interval_seconds"),
    ("filters: {topic_allow: '('}", "not a regular expression"),
    ("metrics: {granularity: broker}", "metrics.granularity"),
    ("- a list", "must be a mapping"),
    ("kafka: [", "not valid YAML"),
])
def test_bad_config_is_one_clear_error(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(")):
        load_config(path, env={})


def test_unknown_env_key_is_rejected():
    with pytest.raises(ConfigError, match="web.colour: unknown key"):
        load_config(env={"TXNLAB_EXPORTER__WEB__COLOUR": "red"})


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", env={})


def test_secrets_stay_out_of_repr_and_errors(tmp_path):
    env = {"TXNLAB_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "TXNLAB_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "TXNLAB_KAFKA_SASL_USERNAME": "svc", "TXNLAB_KAFKA_SASL_PASSWORD": "hunter2-secret"}
    config = load_config(env=env)
    assert "hunter2-secret" not in repr(config) and "hunter2-secret" not in str(config.model_dump())
    conn = config.kafka
    assert conn.kafka_python()["sasl_plain_password"] == "hunter2-secret"
    assert "hunter2-secret" not in repr(conn) and "hunter2-secret" not in conn.describe()
    with pytest.raises(ConfigError) as info:
        load_config(env={**env, "TXNLAB_EXPORTER__KAFKA__SASL_PASSWORD": "hunter2-secret",
                         "TXNLAB_EXPORTER__KAFKA__PORT": "1"})
    assert "hunter2-secret" not in str(info.value)


@pytest.mark.parametrize("given, missing", [
    ({"basic_auth_username": "prom"}, "basic_auth_password"),
    ({"basic_auth_username": "prom", "basic_auth_password": ""}, "basic_auth_password"),
    ({"basic_auth_password": "s3cret"}, "basic_auth_username"),
    ({"tls_cert_file": "cert.pem"}, "tls_key_file"),
    ({"tls_key_file": "key.pem"}, "tls_cert_file"),
])
def test_web_pairs_are_both_or_neither(given, missing):
    with pytest.raises(ConfigError) as info:
        load_config(env={}, flags={f"web.{key}": value for key, value in given.items()})
    assert f"web: {next(iter(given))} is set without {missing}: set both or neither" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_web_pairs_given_together_and_the_connection_timeout():
    web = load_config(env={}, flags={"web.basic_auth_username": "prom", "web.basic_auth_password": "pw",
                                     "web.tls_cert_file": "c.pem", "web.tls_key_file": "k.pem"}).web
    assert web.basic_auth and web.tls and web.connection_timeout_seconds == 10.0
    assert not ExporterConfig().web.basic_auth and not ExporterConfig().web.tls
    env = {"TXNLAB_EXPORTER__WEB__CONNECTION_TIMEOUT_SECONDS": "2.5"}
    assert load_config(env=env).web.connection_timeout_seconds == 2.5
    with pytest.raises(ConfigError, match="web.connection_timeout_seconds"):
        load_config(env={}, flags={"web.connection_timeout_seconds": 0})


def test_filters():
    filters = ExporterConfig().filters
    assert filters.topic_allowed("orders") and filters.topic_allowed("__consumer_offsets")
    assert not filters.topic_allowed("__transaction_state")
    narrowed = load_config(env={}, flags={"filters.topic_allow": "orders-.*", "filters.topic_deny": ".*-dlq"}).filters
    assert narrowed.topic_allowed("orders-eu") and not narrowed.topic_allowed("orders-eu-dlq")
    assert not narrowed.topic_allowed("payments")
