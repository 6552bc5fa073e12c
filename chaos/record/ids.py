"""The id scheme of records written by workloads: every record names itself, its transaction attempt
and its producer, so a duplicate, a leaked aborted record, a lost write and a torn transaction can be
told apart afterwards.

Owns: building and parsing record ids, attempt ids and the record value/headers that carry them.
    record id   = "<attempt id>.<index in the attempt>"         e.g. "r7f3.txp-2.41.3"
    attempt id  = "<run tag>.<process>.<attempt number>"         e.g. "r7f3.txp-2.41"
    producer    = the process name (the transactional.id is "<run tag>.<process>")
A process started again under the same name (a restart after a stall or a kill: incarnation k >= 1) numbers
its attempts from k * INCARNATION_STRIDE, so its ids never repeat an earlier incarnation's and its sends stay
in (attempt number, index) order after them.
The value is a JSON object {"id", "attempt", "producer", "pad"} (pad sizes the record); the same three
ids travel as headers `txnlab.id`, `txnlab.attempt`, `txnlab.producer` for readers that skip values; a
processor's output also carries its input's id (value field `input`, header `txnlab.input`).
Must not: know about Kafka clients or the history beyond these strings.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

ATTEMPT_RE = re.compile(r"^(?P<run>[A-Za-z0-9-]+)\.(?P<process>[A-Za-z0-9_-]+)\.(?P<n>\d+)$")
HEADER_ID, HEADER_ATTEMPT, HEADER_PRODUCER = "txnlab.id", "txnlab.attempt", "txnlab.producer"
HEADER_INPUT = "txnlab.input"


INCARNATION_STRIDE = 10 ** 9


def first_attempt(incarnation: int) -> int:
    """The first attempt number of a process's incarnation (0 for the first start)."""
    return incarnation * INCARNATION_STRIDE


class IdError(ValueError):
    """A string that is not a txnlab record or attempt id."""


@dataclass(frozen=True)
class RecordId:
    run: str
    process: str
    attempt_no: int
    index: int

    @property
    def attempt(self) -> str:
        return attempt_id(self.run, self.process, self.attempt_no)

    def __str__(self) -> str:
        return f"{self.attempt}.{self.index}"


def attempt_id(run: str, process: str, attempt_no: int) -> str:
    if "." in run or "." in process:
        raise IdError(f"run tag and process name may not contain '.': {run!r}, {process!r}")
    return f"{run}.{process}.{attempt_no}"


def record_id(run: str, process: str, attempt_no: int, index: int) -> str:
    return f"{attempt_id(run, process, attempt_no)}.{index}"


def parse_record_id(text: str) -> RecordId:
    attempt, sep, index = text.rpartition(".")
    match = ATTEMPT_RE.match(attempt) if sep else None
    if not match or not index.isdigit():
        raise IdError(f"not a txnlab record id: {text!r}")
    return RecordId(match["run"], match["process"], int(match["n"]), int(index))


def attempt_of(text: str) -> str:
    return parse_record_id(text).attempt


def process_of(text: str) -> str:
    """The process that wrote a record id or began an attempt id (IdError for neither)."""
    match = ATTEMPT_RE.match(text)
    return match["process"] if match else parse_record_id(text).process


def encode_value(rid: str, attempt: str, producer: str, size: int = 0, extra: dict | None = None) -> bytes:
    """The record value: the ids as JSON, padded to about `size` bytes."""
    body = {"id": rid, "attempt": attempt, "producer": producer, **(extra or {})}
    raw = json.dumps(body, separators=(",", ":"))
    pad = max(0, size - len(raw) - 9)
    if pad:
        body["pad"] = "x" * pad
        raw = json.dumps(body, separators=(",", ":"))
    return raw.encode()


def decode_value(value: bytes | None) -> dict:
    if value is None:
        raise IdError("record has no value")
    try:
        body = json.loads(value)
    except ValueError as exc:
        raise IdError(f"record value is not txnlab JSON: {value[:60]!r}") from exc
    if not isinstance(body, dict) or "id" not in body:
        raise IdError(f"record value carries no id: {value[:60]!r}")
    return body


def headers(rid: str, attempt: str, producer: str, input: str | None = None) -> list[tuple[str, str | bytes | None]]:
    found: list[tuple[str, str | bytes | None]] = [(HEADER_ID, rid.encode()), (HEADER_ATTEMPT, attempt.encode()), (HEADER_PRODUCER, producer.encode())]
    return found + [(HEADER_INPUT, input.encode())] if input is not None else found
