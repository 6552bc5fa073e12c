"""The runner's signals: SIGTERM and SIGHUP interrupt it like Ctrl-C (so it heals), unless it was started
ignoring them (nohup, a shell's background job), and everything is put back afterwards."""
from __future__ import annotations

import os
import signal

import pytest

from chaos.runner.experiment import Terminated, _no_interrupts, _terminate_like_interrupt


@pytest.fixture
def restore_signals():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_sigterm_and_sighup_raise_terminated_and_are_restored(restore_signals):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    before = signal.getsignal(signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with _terminate_like_interrupt(), pytest.raises(Terminated) as caught:
            os.kill(os.getpid(), sig)                          # handled before the next statement
        assert caught.value.signum == sig and isinstance(caught.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_ignored_at_start_stays_ignored(restore_signals):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)             # as under nohup
    with _terminate_like_interrupt():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN


def test_no_signal_cuts_a_heal_short(restore_signals):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with _no_interrupts():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(os.getpid(), sig)                          # ignored: the test goes on
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
