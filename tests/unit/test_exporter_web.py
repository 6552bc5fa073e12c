"""The exporter's HTTP endpoints: paths, readiness, basic auth, TLS, idle connections, no secret served
(no Kafka needed)."""
from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time

import pytest
import requests
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from exporter.config import load_config
from exporter.web import MetricsServer


@pytest.fixture
def registry():
    registry = CollectorRegistry()
    Gauge("kafkatxn_test", "a test gauge", registry=registry).set(3)
    return registry


def serve(registry, ready=lambda: True, **web):
    config = load_config(env={}, flags={"web.port": 0, **{f"web.{k}": v for k, v in web.items()}})
    server = MetricsServer(lambda: generate_latest(registry), ready, config.web)
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


@pytest.fixture
def certificate(tmp_path):
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_tls(registry, certificate, caplog):
    cert, key = certificate
    server = serve(registry, tls_cert_file=cert, tls_key_file=key, basic_auth_username="prom",
                   basic_auth_password="s3cret")
    try:
        response = requests.get(f"https://127.0.0.1:{server.port}/metrics", verify=cert, auth=("prom", "s3cret"),
                                timeout=5)
        assert response.status_code == 200 and "kafkatxn_test" in response.text
        assert "plain HTTP" not in caplog.text
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
    finally:
        server.close()


def test_basic_auth_over_plain_http_warns(registry, caplog):
    caplog.set_level(logging.WARNING, logger="txnlab.exporter.web")
    serve(registry).close()
    assert "plain HTTP" not in caplog.text
    serve(registry, basic_auth_username="prom", basic_auth_password="s3cret").close()
    assert "basic auth over plain HTTP" in caplog.text and "s3cret" not in caplog.text


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed this connection (recv gives b""), None if it still held it."""
    sock.settimeout(seconds)
    started = time.monotonic()
    try:
        while sock.recv(4096):
            pass                       # e.g. the 408 of a request that never ended
        return time.monotonic() - started
    except (socket.timeout, ConnectionResetError):
        return None


@pytest.mark.parametrize("sent", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
def test_an_idle_connection_is_closed_after_the_timeout(registry, sent):
    server = serve(registry, connection_timeout_seconds=0.5)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as idle:
            idle.sendall(sent)         # nothing, or a request whose headers never end
            waited = _closed_within(idle, 5.0)
        assert waited is not None and 0.3 < waited < 3.0, waited
        assert requests.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5).status_code == 200
    finally:
        server.close()


def test_exporter_with_no_cluster_keeps_serving_is_not_ready_and_shows_no_secret(caplog):
    """Also: the SASL and basic-auth passwords are in no body it serves and in none of txnlab's own logs."""
    from exporter.app import Exporter
    caplog.set_level(logging.DEBUG, logger="txnlab")
    env = {"TXNLAB_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "TXNLAB_KAFKA_SASL_MECHANISM": "PLAIN",
           "TXNLAB_KAFKA_SASL_USERNAME": "svc", "TXNLAB_KAFKA_SASL_PASSWORD": "sasl-pw-4711"}
    config = load_config(env=env, flags={"web.port": 0, "kafka.bootstrap": "127.0.0.1:9",
                                         "kafka.request_timeout_seconds": 1.0, "collection.interval_seconds": 1.0,
                                         "web.basic_auth_username": "prom", "web.basic_auth_password": "web-pw-4712"})
    exporter = Exporter.build(config).start()
    base, auth = f"http://127.0.0.1:{exporter.server.port}", ("prom", "web-pw-4712")
    try:
        for _ in range(2):
            text = requests.get(f"{base}/metrics", auth=auth, timeout=30).text
            assert "kafkatxn_up 0.0" in text and 'kafkatxn_collector_up{collector="offsets"} 0.0' in text
        assert 'kafkatxn_collector_errors_total{collector="offsets",error="KafkaUnavailable"}' in text
        types = [line for line in text.splitlines() if line.startswith("# TYPE ")]    # registry + collector:
        assert len(types) == len(set(types))                                          # each family once
        ready, healthz = (requests.get(base + path, auth=auth, timeout=5) for path in ("/ready", "/healthz"))
        assert ready.status_code == 503 and healthz.status_code == 200
        refused = requests.get(f"{base}/metrics", auth=("prom", "wrong"), timeout=5)
    finally:
        exporter.close()
    assert refused.status_code == 401 and "127.0.0.1:9" in caplog.text
    served = text + ready.text + healthz.text + refused.text + caplog.text
    assert "sasl-pw-4711" not in served and "web-pw-4712" not in served


def test_glibc_is_loaded_once_however_many_cycles_hand_memory_back(monkeypatch):
    """release_free_memory runs after every background cycle: a CDLL made each time kept a little of each (the
    soak's tracemalloc, issue 50)."""
    import ctypes

    from exporter import app
    loads = []
    real = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: loads.append(a) or real(*a, **k))
    app._glibc.cache_clear()
    for _ in range(5):
        app.release_free_memory()
    assert len(loads) == 1
    app._glibc.cache_clear()
