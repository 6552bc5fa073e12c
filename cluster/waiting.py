"""Polling with a deadline: the one way txnlab waits for state (never a bare sleep)."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.5,
               error: type[Exception] = TimeoutError, ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Call check() until it returns something truthy and return that; raise error after timeout.

    Exceptions of the `ignore` types count as "not yet" (e.g. a request to a broker that is down)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = check()
        except ignore as exc:
            last = exc
        if last and not isinstance(last, BaseException):
            return last
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
