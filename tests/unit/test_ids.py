"""The record id scheme."""
from __future__ import annotations

import pytest

from chaos.record.ids import (HEADER_ATTEMPT, HEADER_ID, IdError, attempt_id, attempt_of, process_of, decode_value, encode_value,
                       headers, parse_record_id, record_id)


def test_record_id_round_trip():
    rid = record_id("r7f3", "txp-2", 41, 3)
    assert rid == "r7f3.txp-2.41.3"
    parsed = parse_record_id(rid)
    assert (parsed.run, parsed.process, parsed.attempt_no, parsed.index) == ("r7f3", "txp-2", 41, 3)
    assert parsed.attempt == attempt_of(rid) == attempt_id("r7f3", "txp-2", 41) == "r7f3.txp-2.41"
    assert str(parsed) == rid


def test_ids_of_different_attempts_and_processes_differ():
    ids = {record_id("r", p, a, i) for p in ("txp-1", "txp-11") for a in (1, 11) for i in (1, 11)}
    assert len(ids) == 8


@pytest.mark.parametrize("text", ["", "r.txp.1", "r.txp.x.1", "r.txp.1.-1", "no-dots", "r..1.2"])
def test_malformed_ids_are_refused(text):
    with pytest.raises(IdError):
        parse_record_id(text)


def test_the_process_of_a_record_or_an_attempt_id():
    assert process_of("r1a.txp-0.186.0") == process_of("r1a.txp-0.186") == "txp-0"
    for text in ("r1a.txp-0", "not an id", "r1a.txp-0.x.0"):
        with pytest.raises(IdError):
            process_of(text)


def test_names_with_dots_are_refused():
    with pytest.raises(IdError):
        attempt_id("r.1", "p", 0)


def test_value_carries_the_ids_and_is_padded():
    value = encode_value("r.p.0.1", "r.p.0", "p", size=200, extra={"input": "r.q.3.0"})
    assert 190 <= len(value) <= 210
    body = decode_value(value)
    assert (body["id"], body["attempt"], body["producer"], body["input"]) == ("r.p.0.1", "r.p.0", "p", "r.q.3.0")
    assert decode_value(encode_value("r.p.0.2", "r.p.0", "p")) == {"id": "r.p.0.2", "attempt": "r.p.0",
                                                                    "producer": "p"}


@pytest.mark.parametrize("value", [None, b"not json", b"[1,2]", b'{"no": "id"}'])
def test_foreign_values_are_refused(value):
    with pytest.raises(IdError):
        decode_value(value)


def test_headers():
    assert dict(headers("r.p.0.1", "r.p.0", "p"))[HEADER_ID] == b"r.p.0.1"
    assert dict(headers("r.p.0.1", "r.p.0", "p"))[HEADER_ATTEMPT] == b"r.p.0"


def test_a_restarted_incarnation_numbers_its_attempts_apart_and_after_the_earlier_ones():
    from chaos.record.ids import INCARNATION_STRIDE, first_attempt
    assert first_attempt(0) == 0 and first_attempt(2) == 2 * INCARNATION_STRIDE
    later = parse_record_id(record_id("r1", "eos-0", first_attempt(1), 0))
    assert later.attempt_no > 10 ** 6 and record_id("r1", "eos-0", first_attempt(1), 0) != record_id("r1", "eos-0", 0, 0)
