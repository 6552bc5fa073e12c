"""The Kafka-aware request hold (chaos/nemesis/request_hold.py): header parsing, the hold policy, and the relay on
loopback sockets (an upstream that records what reaches it; the real cluster: test_fault_kinds.py)."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from kafka.protocol.producer.transaction import EndTxnRequest

from chaos.nemesis.request_hold import (API_KEYS, EndTxnFields, HoldPolicy, RequestHeader, RequestHold, parse_end_txn,
                                        parse_header)


def request(api_key: int, correlation_id: int, client_id: str | None, body: bytes = b"\x00\x01") -> bytes:
    """One framed request: size, api key, version 3, correlation id, client id, body."""
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    frame = struct.pack(">hhi", api_key, 3, correlation_id) + cid + body
    return struct.pack(">i", len(frame)) + frame


def test_parse_header_reads_the_api_key_correlation_id_and_client_id():
    assert parse_header(request(26, 7, "app-producer")[4:]) == RequestHeader(26, 3, 7, "app-producer")
    assert parse_header(request(0, 9, None)[4:]) == RequestHeader(0, 3, 9, None)
    with pytest.raises(ValueError):
        parse_header(b"\x00\x1a\x00")
    with pytest.raises(ValueError):
        parse_header(struct.pack(">hhih", 26, 3, 1, 40) + b"short")


def test_the_policy_holds_named_requests_of_named_clients_at_most_once_per_period():
    policy = HoldPolicy(frozenset({API_KEYS["EndTxn"]}), ("r1.streams-*-producer",), 6.0, 8.0)
    end_txn = RequestHeader(26, 3, 1, "r1.streams-abc-StreamThread-1-producer")
    assert policy.decide(RequestHeader(0, 9, 1, end_txn.client_id), 0.0) == 0      # a produce: not named
    assert policy.decide(RequestHeader(26, 3, 1, "r1.other-producer"), 0.0) == 0   # another client
    assert policy.decide(RequestHeader(26, 3, 1, None), 0.0) == 0
    assert policy.decide(end_txn, 1.0) == 6.0
    assert policy.decide(end_txn, 4.0) == 0                                        # the retry goes through
    assert policy.decide(end_txn, 9.0) == 6.0
    assert [h["at"] for h in policy.held] == [1.0, 9.0]


def end_txn(version: int, epoch: int, committed: bool, client_id: str = "r1.txp-0", txn_id: str = "r1.txp-0") -> bytes:
    """An EndTxn frame (after its size) as kafka-python encodes it: header v1 up to v2, v2 (tagged fields) from v3."""
    req = EndTxnRequest(transactional_id=txn_id, producer_id=4001, producer_epoch=epoch, committed=committed,
                        version=version)
    req.with_header(correlation_id=11, client_id=client_id)
    return bytes(req.encode(version=version, header=True))


@pytest.mark.parametrize("version", [0, 2, 3, 5])
def test_parse_end_txn_reads_the_producer_epoch_and_result_of_every_version(version):
    frame = end_txn(version, 32766, committed=False)
    assert parse_header(frame) == RequestHeader(26, version, 11, "r1.txp-0")
    assert parse_end_txn(frame) == EndTxnFields("r1.txp-0", 4001, 32766, False)
    assert parse_end_txn(end_txn(version, -32768, committed=True)).producer_epoch == -32768
    with pytest.raises(ValueError):
        parse_end_txn(frame[:-3])                                    # cut short
    with pytest.raises(ValueError):
        parse_end_txn(request(0, 1, "r1.txp-0")[4:])                 # a Produce


def test_a_min_epoch_policy_holds_only_the_end_txn_at_or_above_that_epoch_and_records_it():
    policy = HoldPolicy(frozenset({API_KEYS["EndTxn"]}), ("r1.txp-0",), 16.0, 0.0, min_epoch=32766)
    header = parse_header(end_txn(5, 32765, committed=True))
    assert policy.decide(header, 1.0, end_txn(5, 32765, committed=True)) == 0        # below: goes through
    assert policy.decide(header, 2.0, b"") == 0                                       # unreadable: never held
    assert policy.decide(header, 3.0, end_txn(5, 32766, committed=False)) == 16.0
    assert policy.decide(header, 4.0, end_txn(3, 32767, committed=True)) == 16.0
    assert [(h["producer_epoch"], h["result"], h["producer_id"]) for h in policy.held] == [
        (32766, "abort", 4001), (32767, "commit", 4001)]


class Upstream:
    """A loopback TCP server that records every byte it receives, with when, and answers each frame's first
    4 bytes back (so the relay's response path is exercised)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[tuple[float, bytes]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        with conn:
            while data := conn.recv(65536):
                self.received.append((time.monotonic(), data))
                try:
                    conn.sendall(data[:4])
                except OSError:
                    pass

    def data(self) -> bytes:
        return b"".join(d for _, d in self.received)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def relay():
    upstream = Upstream()
    policy = HoldPolicy(frozenset({26}), ("app-*",), 1.0, 30.0)
    hold = RequestHold(free_port(), f"127.0.0.1:{upstream.port}", policy)
    yield hold, upstream
    hold.stop()
    upstream.server.close()


def connect(hold: RequestHold) -> socket.socket:
    return socket.create_connection(("127.0.0.1", hold._server.getsockname()[1]), timeout=5)


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_the_relay_forwards_other_requests_at_once_and_holds_a_named_one(relay):
    hold, upstream = relay
    client = connect(hold)
    produce, end_txn, after = request(0, 1, "app-producer"), request(26, 2, "app-producer"), request(10, 3, "app-x")
    client.sendall(produce)
    assert wait_for(lambda: upstream.data() == produce, 2)
    assert client.recv(4) == produce[:4]                      # the broker's answer reaches the client
    sent = time.monotonic()
    client.sendall(end_txn + after)                           # what follows waits behind the held request
    assert wait_for(lambda: upstream.data() == produce + end_txn + after, 3)
    arrived = next(t for t, d in upstream.received if end_txn[:6] in d)
    assert arrived - sent >= 0.95
    client.close()
    [held] = hold.report()["held"]
    assert held["api_key"] == 26 and 0.95 <= held["held_s"] < 2.0      # the whole hold (1 s here)


def test_a_held_request_still_reaches_the_broker_after_its_client_gave_up(relay):
    hold, upstream = relay
    client = connect(hold)
    end_txn = request(26, 5, "app-producer")
    client.sendall(end_txn)
    time.sleep(0.2)
    client.close()                                            # the client's request timeout, before the hold ends
    assert not upstream.data()
    assert wait_for(lambda: upstream.data() == end_txn, 3)
    assert wait_for(lambda: hold.report()["delivered_after_client_closed"], 2)
    retry = connect(hold)                                     # the retry, on a new connection: not held
    retry.sendall(end_txn)
    assert wait_for(lambda: upstream.data() == end_txn + end_txn, 0.5)
    retry.close()


def test_stop_releases_what_is_held_at_once(relay):
    hold, upstream = relay
    hold.policy.hold_s = 30.0
    client = connect(hold)
    end_txn = request(26, 8, "app-producer")
    client.sendall(end_txn)
    assert wait_for(lambda: hold.report()["held"], 2)
    started = time.monotonic()
    hold.stop()
    assert wait_for(lambda: upstream.data() == end_txn, 2) and time.monotonic() - started < 3
    client.close()
    [held] = hold.report()["held"]
    assert held["held_s"] < 3                    # released when the fault healed: it says so, not the 30 s asked


def test_the_relay_refuses_a_non_loopback_upstream():
    with pytest.raises(ValueError):
        RequestHold(free_port(), "10.0.0.1:9092", HoldPolicy(frozenset({26}), ("*",), 1.0, 1.0))
