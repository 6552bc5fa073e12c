"""The exporter's HTTP endpoints: paths, readiness, basic auth, TLS (no Kafka needed)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import requests
from prometheus_client import CollectorRegistry, Gauge

from exporter.config import load_config
from exporter.web import MetricsServer


@pytest.fixture
def registry():
    registry = CollectorRegistry()
    Gauge("kafkatxn_test", "a test gauge", registry=registry).set(3)
    return registry


def serve(registry, ready=lambda: True, **web):
    config = load_config(env={}, flags={"web.port": 0, **{f"web.{k}": v for k, v in web.items()}})
    server = MetricsServer(registry, ready, config.web)
    server.start()
    return server


def test_paths_and_readiness(registry):
    state = {"ready": False}
    server = serve(registry, lambda: state["ready"])
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert "kafkatxn_test 3.0" in requests.get(f"{base}/metrics", timeout=5).text
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
        assert requests.get(f"{base}/ready", timeout=5).status_code == 503
        state["ready"] = True
        assert requests.get(f"{base}/ready", timeout=5).status_code == 200
        assert requests.get(f"{base}/other", timeout=5).status_code == 404
    finally:
        server.close()


def test_basic_auth_guards_every_path(registry):
    server = serve(registry, basic_auth_username="prom", basic_auth_password="s3cret")
    base = f"http://127.0.0.1:{server.port}"
    try:
        for path in ("/metrics", "/healthz", "/ready"):
            assert requests.get(base + path, timeout=5).status_code == 401
        assert requests.get(f"{base}/metrics", auth=("prom", "wrong"), timeout=5).status_code == 401
        ok = requests.get(f"{base}/metrics", auth=("prom", "s3cret"), timeout=5)
        assert ok.status_code == 200 and "kafkatxn_test" in ok.text
    finally:
        server.close()


def test_tls(registry, tmp_path):
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = serve(registry, tls_cert_file=str(cert), tls_key_file=str(key))
    try:
        response = requests.get(f"https://127.0.0.1:{server.port}/metrics", verify=str(cert), timeout=5)
        assert response.status_code == 200 and "kafkatxn_test" in response.text
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
    finally:
        server.close()


def test_exporter_with_no_cluster_keeps_serving_and_is_not_ready():
    from exporter.app import Exporter
    config = load_config(env={}, flags={"web.port": 0, "kafka.bootstrap": "127.0.0.1:9",
                                        "kafka.request_timeout_seconds": 1.0, "collection.interval_seconds": 1.0})
    exporter = Exporter.build(config).start()
    base = f"http://127.0.0.1:{exporter.server.port}"
    try:
        for _ in range(2):
            text = requests.get(f"{base}/metrics", timeout=30).text
            assert "kafkatxn_up 0.0" in text and 'kafkatxn_collector_up{collector="offsets"} 0.0' in text
        assert 'kafkatxn_collector_errors_total{collector="offsets",error="KafkaUnavailable"}' in text
        assert requests.get(f"{base}/ready", timeout=5).status_code == 503
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
    finally:
        exporter.close()
