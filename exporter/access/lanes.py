"""The admin clients the exporter's requests go through, one per lane, and the sending every family shares.

Owns: one kafka-python admin client per lane (SCRAPE, BACKGROUND), leased by the thread running a request and
retired, not closed, while another thread still uses it; running a coroutine on a lane's IO loop; sending a
request so that it fails its future instead of raising; awaiting the futures of one round under one deadline;
and why no broker answered (cluster.access.diagnose, found out again at most every DIAGNOSIS_MAX_AGE_S).
Must not: build or read any request of its own (the families do), or hold results between calls.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Awaitable, Callable

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.future import Future

from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import Diagnosis, diagnose
from exporter.access.results import KafkaUnavailable, error_name

SCRAPE, BACKGROUND = "scrape", "background"   # the two lanes (own clients, own connections)
DIAGNOSIS_MAX_AGE_S = 30.0            # why the cluster is unreachable is found out again at most this often


class AdminLanes:
    """The admin clients of one cluster, one per lane. Thread-safe (kafka-python's IO thread)."""

    def __init__(self, conn: ConnectionSettings, timeout_ms: int):
        self.conn = conn
        self.timeout_ms = timeout_ms
        self._admins: dict[str, KafkaAdminClient] = {}   # lane -> client: SCRAPE and BACKGROUND never share slots
        self._lock = threading.Lock()
        self._leases: dict[int, int] = {}          # id(client) -> runs using it now
        self._retired: list[KafkaAdminClient] = []  # dropped clients still in use
        self._diagnosis: tuple[float, Diagnosis] | None = None   # (when, why the cluster was last unreachable)

    # One client per lane serves every thread of that lane: scrape-time requests and background
    # collections each have their own connections, so neither can take the other's in-flight slots
    # (kafka-python pauses a connection with 5 requests in flight and fails further sends on it).
    # A client that failed is retired, not closed under the feet of a request another thread is running
    # on it: it is closed when its last lease ends.
    def _client(self, lane: str) -> KafkaAdminClient:
        with self._lock:
            if lane not in self._admins:
                try:
                    self._admins[lane] = KafkaAdminClient(**self.conn.kafka_python(
                        request_timeout_ms=self.timeout_ms, bootstrap_timeout_ms=self.timeout_ms,
                        reconnect_backoff_max_ms=2000))
                except Errors.KafkaError as exc:
                    raise KafkaUnavailable(self.why_unavailable(
                        f"no broker of {self.conn.describe()} answered: {error_name(exc)}")) from exc
            return self._admins[lane]

    def why_unavailable(self, what: str) -> str:
        """Why no broker answered, in one line (cluster.access.diagnose: unreachable, TLS trust or hostname,
        authentication), found out again at most every DIAGNOSIS_MAX_AGE_S; `what` failed when every check
        passes (the settings are fine: the brokers are slow or overloaded)."""
        if self._diagnosis is None or time.monotonic() - self._diagnosis[0] >= DIAGNOSIS_MAX_AGE_S:
            self._diagnosis = (time.monotonic(), diagnose(self.conn))
        found = self._diagnosis[1]
        return f"{what} ({found.message})" if found.ok else found.message

    def lease(self, lane: str = BACKGROUND) -> KafkaAdminClient:
        admin = self._client(lane)
        with self._lock:
            self._leases[id(admin)] = self._leases.get(id(admin), 0) + 1
        return admin

    def release(self, admin: KafkaAdminClient) -> None:
        with self._lock:
            left = self._leases.pop(id(admin), 1) - 1
            if left:
                self._leases[id(admin)] = left
            retired_now = not left and admin in self._retired
            if retired_now:
                self._retired.remove(admin)
        if retired_now:
            admin.close()

    def close(self, lane: str | None = None) -> None:
        """Drop a lane's client (every lane's when None); the next call bootstraps a new one. Each is
        closed now, or when its last user ends."""
        with self._lock:
            lanes = list(self._admins) if lane is None else [lane]
            dropped = [a for a in (self._admins.pop(name, None) for name in lanes) if a is not None]
            now = [a for a in dropped if not self._leases.get(id(a))]
            self._retired.extend(a for a in dropped if self._leases.get(id(a)))
        for admin in now:
            admin.close()

    def run(self, coro_fn: Callable[..., Awaitable[Any]], *args: Any, lane: str = BACKGROUND) -> Any:
        """Run coro_fn(manager, *args) on the IO loop of the lane's leased client."""
        admin = self.lease(lane)
        try:
            return admin._manager.run(coro_fn, admin._manager, *args)
        finally:
            self.release(admin)

    def send(self, manager: Any, request: Any, node_id: int | None = None, timeout_ms: int | None = None):
        """A future of the response; a request that cannot even be sent fails its future, never raises."""
        try:
            return manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms or self.timeout_ms)
        except Errors.KafkaError as exc:     # e.g. UnknownBrokerIdError: the client's own metadata lags a restart
            manager.cluster.request_update()
            return Future().failure(exc)

    async def gather(self, manager: Any, sends: list[tuple[Any, Any]],
                     deadline: float | None = None) -> list[tuple[Any, Any, BaseException | None]]:
        """Await futures that were all sent already, all of them together for at most until `deadline`
        (time.monotonic(); default: one request timeout from now), so N slow brokers cost one timeout, not
        N, and a request queued on a connection still being set up cannot hold a scrape;
        (key, response | None, error | None) each."""
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_ms / 1000
        results: list[tuple[Any, Any, BaseException | None]] = []
        for key, future in sends:
            try:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                response = await (manager.wait_for(future, left_ms) if not future.is_done else future)
                results.append((key, response, None))
            except Exception as exc:  # noqa: BLE001 - per-broker failure becomes an ItemError
                results.append((key, None, exc))
        return results
