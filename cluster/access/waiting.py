"""Polling with a deadline: the one way txnlab waits for state (never a bare sleep).

Owns: `wait_until` (ask until an answer is truthy, or raise `WaitTimeout`, or the caller's error, when
the time is up; chosen exceptions count as "not yet", a `NotYet` answer says why) and `Deadline` (for the
loops that must do work between looks: read a topic, reap processes, let workloads run). Waits for
state go through these two. Not through them: timeouts handed to a client library (a socket, a Kafka
request, a subprocess), and the clocks that are not waits for state: exporter/access/lanes.py's deadline
shared by the futures of one gather (asyncio, cannot block), chaos/nemesis/producer_flood.py's no-progress timer,
the exporter service's loop interval.
Must not: know what is waited for.
"""
from __future__ import annotations

import socket
import time
from typing import Callable, TypeVar

from cluster.access.errors import TxnlabError

T = TypeVar("T")


class WaitTimeout(TxnlabError, TimeoutError):
    """What was waited for did not happen in time (wait_until's default error)."""


class NotYet(str):
    """A falsy answer of a check that says why not yet; wait_until's timeout message shows it."""

    def __bool__(self) -> bool:
        return False


class Deadline:
    """A moment `seconds` from now on the monotonic clock."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds until the deadline, never below zero."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def sleep(self, interval: float) -> None:
        """Sleep `interval`, or less when the deadline comes first."""
        time.sleep(min(interval, self.left()))


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.5,
               error: type[Exception] = WaitTimeout, ignore: tuple[type[BaseException], ...] = (),
               ignore_if: Callable[[BaseException], bool] | None = None, reraise: bool = False) -> T:
    """Call check() until it returns something truthy and return that; raise error after timeout.

    Exceptions of the `ignore` types count as "not yet" (e.g. a request to a broker that is down), those
    only for which `ignore_if` is true when it is given (e.g. a retriable error code); any other exception
    propagates at once. With `reraise`, a check still raising an ignored exception when the time is up
    raises that exception rather than `error`."""
    deadline = Deadline(timeout)
    last: object = None
    while True:
        try:
            last = check()
        except ignore as exc:
            if ignore_if is not None and not ignore_if(exc):
                raise
            last = exc
        if last and not isinstance(last, BaseException):
            return last
        if deadline.expired:
            if reraise and isinstance(last, BaseException):
                raise last
            raise error(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port now (a started server's listening socket)."""
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0
