"""cluster/lab/prometheus.py against a scripted HTTP server: answers parsed, every kind of failure one typed error."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from cluster.lab.prometheus import Prometheus, PrometheusError, Series


@pytest.fixture
def served():
    """(set the answer: status, body), the client, the requests seen as (method, path, params), and a
    switch that makes the server hold its answers."""
    answer, seen, release = {"status": 200, "body": b"", "hang": False}, [], threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            url = urlparse(self.path)
            seen.append((self.command, url.path, {k: v[0] for k, v in parse_qs(url.query).items()}))
            if answer["hang"]:
                release.wait(5)
            self.send_response(answer["status"])
            self.end_headers()
            self.wfile.write(answer["body"])

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    def answer_with(status: int, body: object) -> None:
        answer.update(status=status, body=body if isinstance(body, bytes) else json.dumps(body).encode())
    yield answer_with, Prometheus(f"http://127.0.0.1:{server.server_port}/", timeout=0.5), seen, answer
    release.set()
    server.shutdown()
    server.server_close()


def success(data):
    return {"status": "success", "data": data}


def test_instant_vector_scalar_and_range_answers_are_parsed(served):
    answer, prometheus, seen, _ = served
    answer(200, success({"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [10, "1"]},
                                                            {"metric": {"job": "b"}, "value": [10, "NaN"]}]}))
    assert prometheus.query('up{job=~"a|b"}', at=10)[0] == Series({"job": "a"}, [(10.0, 1.0)])
    assert seen[-1] == ("GET", "/api/v1/query", {"query": 'up{job=~"a|b"}', "time": "10"})
    answer(200, success({"resultType": "scalar", "result": [10, "3"]}))
    assert prometheus.values("scalar(1)") == [3.0]
    answer(200, success({"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "2"], [3, "4"]]}]}))
    assert prometheus.query_range("x", 1, 3, 2) == [Series({}, [(1.0, 2.0), (3.0, 4.0)])]
    assert seen[-1] == ("GET", "/api/v1/query_range", {"query": "x", "start": "1", "end": "3", "step": "2"})
    answer(200, success({"alerts": [{"labels": {"alertname": "A"}, "state": "firing"}]}))
    assert prometheus.alerts() == [{"labels": {"alertname": "A"}, "state": "firing"}]


@pytest.mark.parametrize("status,body,says", [
    (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, "parse error at char 3"),
    (503, b"<html>service unavailable</html>", "HTTP 503"),
    (200, b"not json", "HTTP 200: not json"),
    (200, {"status": "error", "error": "query timed out"}, "query timed out"),
    (200, success({"resultType": "vector", "result": [{"metric": {}}]}), "malformed answer"),
    (200, success({"resultType": "string", "result": [1, "s"]}), "unsupported result type 'string'"),
])
def test_every_failed_answer_is_a_prometheus_error_naming_the_query(served, status, body, says):
    answer, prometheus, _, _ = served
    answer(status, body)
    with pytest.raises(PrometheusError, match=says) as raised:
        prometheus.query("sum(up)")
    assert "'sum(up)'" in str(raised.value)


def test_no_answer_in_time_and_nobody_listening_are_prometheus_errors(served):
    _, prometheus, _, hold = served
    hold["hang"] = True
    with pytest.raises(PrometheusError, match="request failed"):
        prometheus.values("up")
    with pytest.raises(PrometheusError, match="request failed"):
        Prometheus("http://127.0.0.1:9", timeout=1).values("up")


def test_reload_posts_and_a_refusal_is_an_error(served):
    answer, prometheus, seen, _ = served
    answer(200, b"")
    prometheus.reload()
    assert seen[-1][:2] == ("POST", "/-/reload")
    answer(403, b"Lifecycle API is not enabled.")
    with pytest.raises(PrometheusError, match="403: Lifecycle API is not enabled"):
        prometheus.reload()
