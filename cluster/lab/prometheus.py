"""A small client of Prometheus' HTTP API: the one way txnlab asks a Prometheus anything.

Owns: instant and range queries, the alerts listing and a configuration reload, each with a timeout and
one error behaviour: PrometheusError when Prometheus cannot be reached or does not answer in time, answers
an HTTP error, a body that is not the API's JSON, or a status other than "success" (its error text kept).
Must not: decide what a missing answer means (callers do: a probe that does not hold yet, a timeline
recorded as missing, a stack not ready yet).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from cluster.access.errors import TxnlabError


class PrometheusError(TxnlabError, RuntimeError):
    """A Prometheus request that did not give an answer; the message says which request and why."""


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]          # (unix seconds, value)


class Prometheus:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def query(self, promql: str, at: float | None = None) -> list[Series]:
        """An instant query (now, or at unix time `at`): one series of one point per vector element, or the
        scalar's point."""
        data = self._api("/api/v1/query", {"query": promql, **({"time": at} if at is not None else {})})
        return _parse(data, promql)

    def values(self, promql: str) -> list[float]:
        """An instant query's values (one per series, a scalar's one)."""
        return [s.points[-1][1] for s in self.query(promql)]

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        data = self._api("/api/v1/query_range", {"query": promql, "start": start, "end": end, "step": step})
        return _parse(data, promql)

    def alerts(self) -> list[dict]:
        """The alerts the rules hold now (each with labels, state, activeAt, value)."""
        data = self._api("/api/v1/alerts", {})
        if not isinstance(data, dict) or not isinstance(data.get("alerts"), list):
            raise PrometheusError(f"Prometheus /api/v1/alerts: malformed answer {str(data)[:300]}")
        return data["alerts"]

    def reload(self) -> None:
        """Re-read the configuration file (needs --web.enable-lifecycle)."""
        response = self._send("POST", "/-/reload", {})
        if response.status_code != 200:
            raise PrometheusError(f"Prometheus /-/reload: HTTP {response.status_code}: {response.text.strip()[:300]}")

    def _api(self, path: str, params: dict[str, Any]) -> Any:
        """The `data` of an API answer that is HTTP 200 with status "success"."""
        response = self._send("GET", path, params)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or response.status_code != 200 or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) and body.get("error") else response.text.strip()[:300]
            raise PrometheusError(f"{_what(path, params)}: HTTP {response.status_code}: {detail}")
        return body.get("data")

    def _send(self, method: str, path: str, params: dict[str, Any]) -> requests.Response:
        try:
            return requests.request(method, self.url + path, params=params, timeout=self.timeout)
        except requests.RequestException as exc:   # refused, reset, or no answer within the timeout
            raise PrometheusError(f"{_what(path, params)}: request failed (timeout {self.timeout:g}s): {exc}") \
                from exc


def _what(path: str, params: dict[str, Any]) -> str:
    return f"Prometheus {path}" + (f" {params['query']!r}" if "query" in params else "")


def _parse(data: Any, promql: str) -> list[Series]:
    try:
        kind, result = data["resultType"], data["result"]
        if kind == "scalar":
            return [Series({}, [(float(result[0]), float(result[1]))])]
        if kind == "vector":
            return [Series(r["metric"], [(float(r["value"][0]), float(r["value"][1]))]) for r in result]
        if kind == "matrix":
            return [Series(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in result]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PrometheusError(f"Prometheus {promql!r}: malformed answer ({type(exc).__name__}: {exc})") from exc
    raise PrometheusError(f"Prometheus {promql!r}: unsupported result type {kind!r}")
