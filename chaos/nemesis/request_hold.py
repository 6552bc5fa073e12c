"""A Kafka-protocol-aware hold: a TCP relay between Toxiproxy and one broker's client listener that reads
the requests' framing and holds chosen requests of chosen clients on the wire for a while.

Why: Toxiproxy works on bytes. A latency toxic holds whatever a connection carries first, and a Java
producer's first request on a connection to its transaction coordinator is an AddPartitionsToTxn, never
the EndTxn that ends the transaction (docs/bugs.md, KAFKA-17754). A hold that understands Kafka's framing
delays exactly one request type of one client, the way a stalled middlebox or a lost-then-retransmitted
segment delays one request while the client's retry, on a new connection, goes through.

What it does: every connection is relayed both ways. Client -> broker, frame by frame (int32 size, then
the request header: int16 api key, int16 api version, int32 correlation id, nullable int16-length client
id); a request whose api key is one of `apis` from a client whose client id matches `clients` (fnmatch
patterns) is held `hold_ms` before it is forwarded (the connection's later requests wait behind it, as on
a stalled TCP stream), at most one hold per `every_ms` across all connections (the client's retry of the
held request, on a new connection, is not held). A held request is still delivered after its client has
given up and closed the connection: that late arrival is the fault. With `min_epoch` only EndTxn requests whose
producer epoch is at least that are held: the one place the relay reads past the header (EndTxn's transactional
id, producer id, epoch and result, every version): a hold at the edge of epoch exhaustion. Broker -> client: bytes
copied.
`stop()` releases every held request at once and closes everything; the report says how long each one
was held (`held_s`: less than the hold when the fault healed first).

The bytes are the client's own: nothing is rewritten, dropped or invented. Binds 127.0.0.1 only.
Must not: parse anything past the header but an EndTxn's fields for min_epoch, or hold requests of clients
not named.
"""
from __future__ import annotations

import fnmatch
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from cluster.lab.layout import LOOPBACK

MAX_FRAME = 100 * 1024 * 1024            # a Kafka request larger than this is no request: drop the connection

# the request types a hold may name (Kafka's api keys)
API_KEYS = {"Produce": 0, "FindCoordinator": 10, "InitProducerId": 22, "AddPartitionsToTxn": 24,
            "AddOffsetsToTxn": 25, "EndTxn": 26, "WriteTxnMarkers": 27, "TxnOffsetCommit": 28}
END_TXN = API_KEYS["EndTxn"]
END_TXN_FIRST_FLEXIBLE = 3          # EndTxn v3+: request header v2 (tagged fields) and compact strings


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header(frame: bytes) -> RequestHeader:
    """The request header at the start of a frame (the bytes after the size); ValueError when too short."""
    if len(frame) < 10:
        raise ValueError(f"a request header needs 10 bytes, got {len(frame)}")
    api_key, api_version, correlation_id, length = struct.unpack(">hhih", frame[:10])
    if length < 0:
        return RequestHeader(api_key, api_version, correlation_id, None)
    if len(frame) < 10 + length:
        raise ValueError("the client id runs past the frame")
    return RequestHeader(api_key, api_version, correlation_id, frame[10:10 + length].decode("utf-8", "replace"))


@dataclass(frozen=True)
class EndTxnFields:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


def _uvarint(frame: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(frame) or shift > 28:
            raise ValueError("a varint runs past the frame")
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def parse_end_txn(frame: bytes) -> EndTxnFields:
    """An EndTxn request's fields (the frame after its size); ValueError when it is none or cut short."""
    api_key, api_version, _, id_length = struct.unpack(">hhih", frame[:10]) if len(frame) >= 10 else (None,) * 4
    if api_key != END_TXN:
        raise ValueError("not an EndTxn request")
    pos = 10 + max(id_length, 0)
    flexible = api_version >= END_TXN_FIRST_FLEXIBLE
    if flexible:                                 # the header's tagged fields
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
        length, pos = _uvarint(frame, pos)
        length -= 1
    else:
        if len(frame) < pos + 2:
            raise ValueError("EndTxn cut short")
        length = struct.unpack(">h", frame[pos:pos + 2])[0]
        pos += 2
    if length < 0 or len(frame) < pos + length + 11:
        raise ValueError("EndTxn cut short")
    txn_id = frame[pos:pos + length].decode("utf-8", "replace")
    producer_id, epoch, committed = struct.unpack(">qhb", frame[pos + length:pos + length + 11])
    return EndTxnFields(txn_id, producer_id, epoch, bool(committed))


@dataclass
class HoldPolicy:
    """Which requests to hold and when: the pure part of the relay (time passed in)."""
    apis: frozenset[int]
    clients: tuple[str, ...]
    hold_s: float
    every_s: float
    min_epoch: int | None = None        # hold only EndTxn requests at this producer epoch or above
    last_hold: float | None = None
    held: list[dict] = field(default_factory=list)

    def decide(self, header: RequestHeader, now: float, frame: bytes = b"") -> float:
        """Seconds to hold this request (0: forward now); a hold is recorded."""
        if header.api_key not in self.apis or header.client_id is None:
            return 0.0
        if not any(fnmatch.fnmatchcase(header.client_id, pattern) for pattern in self.clients):
            return 0.0
        fields: dict = {}
        if self.min_epoch is not None:
            try:
                end = parse_end_txn(frame)
            except ValueError:
                return 0.0
            if end.producer_epoch < self.min_epoch:
                return 0.0
            fields = {"producer_id": end.producer_id, "producer_epoch": end.producer_epoch,
                      "result": "commit" if end.committed else "abort"}
        if self.last_hold is not None and now - self.last_hold < self.every_s:
            return 0.0
        self.last_hold = now
        self.held.append({"api_key": header.api_key, "client_id": header.client_id,
                          "correlation_id": header.correlation_id, "at": now, **fields})
        return self.hold_s


class RequestHold:
    """The relay: listen on 127.0.0.1:port, forward to upstream (a broker's own listener)."""

    def __init__(self, port: int, upstream: str, policy: HoldPolicy):
        host, _, up_port = upstream.rpartition(":")
        if host not in (LOOPBACK, "localhost"):
            raise ValueError(f"the hold relays to loopback addresses only, not {upstream}")
        self.upstream = (host, int(up_port))
        self.policy = policy
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._server = socket.create_server((LOOPBACK, port), reuse_port=False)
        self._server.settimeout(0.2)
        self.delivered_late: list[dict] = []
        self._acceptor = threading.Thread(target=self._accept, name=f"request-hold-{port}", daemon=True)
        self._acceptor.start()

    # ---- lifecycle ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Release every held request now, stop accepting, close every connection once relayed."""
        self._released.set()
        self._acceptor.join(5)
        self._server.close()
        time.sleep(0.5)                          # held requests released just now reach the broker
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _close(sock)

    def report(self) -> dict:
        with self._lock:
            return {"held": list(self.policy.held), "delivered_after_client_closed": list(self.delivered_late)}

    # ---- relay ----------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._released.is_set():
            try:
                client, _ = self._server.accept()
            except (socket.timeout, OSError):
                continue
            try:
                broker = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            broker.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._sockets.update((client, broker))
            closed = threading.Event()           # the client side is gone
            threading.Thread(target=self._requests, args=(client, broker, closed), daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client, closed), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket, closed: threading.Event) -> None:
        try:
            while True:
                size_bytes = _read(client, 4)
                if size_bytes is None:
                    break
                size = struct.unpack(">i", size_bytes)[0]
                if not 0 <= size <= MAX_FRAME:
                    break
                frame = _read(client, size)
                if frame is None:
                    break
                try:
                    header = parse_header(frame)
                except ValueError:
                    break
                with self._lock:
                    hold = self.policy.decide(header, time.monotonic(), frame)
                    entry = self.policy.held[-1] if hold else None
                if entry is not None:
                    full = not self._released.wait(hold)     # False: released early, when the fault healed
                    with self._lock:                          # how long it was held: what the fault amounted to
                        entry["held_s"] = round(time.monotonic() - entry["at"], 2)
                    if full and self._client_gone(client, closed):
                        with self._lock:
                            self.delivered_late.append({"api_key": header.api_key, "client_id": header.client_id,
                                                        "correlation_id": header.correlation_id})
                broker.sendall(size_bytes + frame)
        except OSError:
            pass
        finally:
            try:
                broker.shutdown(socket.SHUT_WR)  # the broker answers what it got, then the relay closes
            except OSError:
                pass

    @staticmethod
    def _client_gone(client: socket.socket, closed: threading.Event) -> bool:
        if closed.is_set():
            return True
        try:
            client.setblocking(False)
            try:
                return client.recv(1, socket.MSG_PEEK) == b""
            except BlockingIOError:
                return False
            finally:
                client.setblocking(True)
        except OSError:
            return True

    def _responses(self, broker: socket.socket, client: socket.socket, closed: threading.Event) -> None:
        try:
            while data := broker.recv(65536):
                try:
                    client.sendall(data)
                except OSError:
                    closed.set()                 # keep draining the broker: a held request may still go out
        except OSError:
            pass
        finally:
            closed.set()
            for sock in (client, broker):
                _close(sock)
                with self._lock:
                    self._sockets.discard(sock)


def _read(sock: socket.socket, n: int) -> bytes | None:
    """Exactly n bytes, or None at the end of the stream."""
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
