"""The one wait helper: answers, "not yet" answers and exceptions, the timeout, and Deadline."""
from __future__ import annotations

import time

import pytest

from cluster.access.waiting import Deadline, NotYet, wait_until


class Retriable(Exception):
    def __init__(self, code: int):
        super().__init__(f"code {code}")
        self.code = code


def script(*answers):
    left = list(answers)

    def check():
        answer = left.pop(0) if len(left) > 1 else left[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer
    return check


def test_the_first_truthy_answer_is_returned_after_ignored_exceptions():
    assert wait_until(script(Retriable(1), None, 0, "done"), 5, "x", 0.01, ignore=(Retriable,)) == "done"


def test_a_not_yet_answer_is_falsy_and_named_in_the_timeout():
    with pytest.raises(TimeoutError, match=r"waiting for the topic \(last: 'broker 2 does not know it'\)"):
        wait_until(lambda: NotYet("broker 2 does not know it"), 0.05, "the topic", 0.01)


def test_ignore_if_narrows_which_exceptions_are_retried():
    with pytest.raises(Retriable, match="code 7"):
        wait_until(script(Retriable(1), Retriable(7), "never"), 5, "x", 0.01, ignore=(Retriable,),
                   ignore_if=lambda exc: exc.code == 1)


def test_reraise_raises_the_last_ignored_exception_when_the_time_is_up():
    with pytest.raises(Retriable, match="code 1"):
        wait_until(script(Retriable(1)), 0.05, "x", 0.01, ignore=(Retriable,), reraise=True)
    with pytest.raises(TimeoutError, match="last: False"):          # a falsy answer: the usual error
        wait_until(script(Retriable(1), False), 0.05, "x", 0.01, ignore=(Retriable,), reraise=True)


def test_the_error_type_is_the_callers():
    class ClusterError(RuntimeError):
        pass
    with pytest.raises(ClusterError, match="timed out after 0s waiting for x"):
        wait_until(lambda: False, 0, "x", error=ClusterError)


def test_a_deadline_counts_down_and_its_sleep_stops_at_it():
    deadline = Deadline(0.2)
    assert not deadline.expired and 0 < deadline.left() <= 0.2
    started = time.monotonic()
    deadline.sleep(5)
    assert deadline.expired and deadline.left() == 0 and time.monotonic() - started < 1
    assert Deadline(0).expired
