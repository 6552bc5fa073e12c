"""Probe evaluation logic: confirmation of held transactions, polling until a probe holds."""
from types import SimpleNamespace

from chaos.runner import probes


def looks(monkeypatch, *answers):
    seen = iter(answers)
    monkeypatch.setattr(probes, "open_transactions", lambda conn, topics: next(seen))


def txn(partition="t-0", producer=1, start=5):
    return {"partition": partition, "producer_id": producer, "start_offset": start}


def test_a_transaction_open_at_both_looks_is_held(monkeypatch):
    looks(monkeypatch, [txn(), txn("t-1", 2, 9)], [txn(), txn("t-1", 2, 12)])
    slept = []
    assert probes.held_transactions(None, ["t"], confirm_s=3, sleep=slept.append) == [txn()]
    assert slept == [3]


def test_transactions_that_moved_on_are_not_held(monkeypatch):
    looks(monkeypatch, [txn(start=5)], [txn(start=8)])
    assert probes.held_transactions(None, ["t"], sleep=lambda s: None) == []


def test_nothing_open_needs_no_second_look(monkeypatch):
    looks(monkeypatch, [])
    assert probes.held_transactions(None, ["t"], sleep=lambda s: 1 / 0) == []


def test_a_probe_that_holds_only_later_passes_within_its_window(monkeypatch):
    answers = iter([(False, 1), (True, 0), (True, 0)])
    monkeypatch.setattr(probes, "_checker", lambda *a: lambda: next(answers))
    monkeypatch.setattr(probes.time, "sleep", lambda s: None)
    result = probes.evaluate(SimpleNamespace(name="p", for_s=0, within_s=30), None, [], [], None)
    assert result.ok and result.observed == 0


def test_a_probe_that_never_holds_fails_with_what_it_saw(monkeypatch):
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(probes, "_checker", lambda *a: lambda: (False, "open"))
    monkeypatch.setattr(probes.time, "sleep", lambda s: None)
    monkeypatch.setattr(probes.time, "monotonic", lambda: next(clock))
    result = probes.evaluate(SimpleNamespace(name="p", for_s=0, within_s=10), None, [], [], None)
    assert not result.ok and result.observed == "open" and "within 10s" in result.detail
