"""Drive a transactional id's producer epoch up to the edge of exhaustion with InitProducerId.

Why: a transactional producer id has 32,767 epochs. Under transaction.version 2 each transaction's end takes one,
so a busy producer meets the rotation to a new producer id (at epoch 32766, TransactionMetadata.isEpochExhausted)
within days; a test should not wait for it. Each InitProducerId of a known transactional id bumps its epoch by one
(fencing whoever held it, as a crash-looping instance of the application does), so about 32,700 of them, one at a
time (the coordinator answers CONCURRENT_TRANSACTIONS to overlapping ones), bring the id to a chosen epoch in a
minute or two on this machine (~360 per second measured on a local 4.2.2 cluster). No setting starts a producer
near the edge: this is the only way a release allows.

Owns: the loop, its retries (a retriable error: the coordinator loading, moving or finishing an abort; a moved
coordinator is found again) and its progress. Must not: go past `to_epoch` (at most EPOCH_CLIMB_MAX: the next
InitProducerId would rotate the producer id, which is what the experiment wants the real producer to meet), or
write anything but InitProducerId.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kafka.errors as Errors

from chaos.nemesis import _raw_produce as raw
from cluster.access.errors import TxnlabError

EPOCH_CLIMB_MAX = 32765              # Short.MAX_VALUE - 2: one InitProducerId below the rotation
PROGRESS_EVERY_S = 10.0
RETRY_PAUSE_S = 0.1


class EpochClimbError(TxnlabError, RuntimeError):
    """The climb could not reach its epoch (what stopped it is in the message)."""


def climb_epoch(admin: Any, txn_id: str, to_epoch: int, timeout_ms: int, limit_s: float,
                progress: Callable[[str], None] | None = None) -> dict:
    """InitProducerId on txn_id until its epoch is at least to_epoch; what it did: the producer id, the first and
    last epochs, how many InitProducerIds and retries, how long. EpochClimbError when the limit passes first, the
    producer id changes under it (someone rotated it) or the coordinator refuses for good."""
    if not 0 < to_epoch <= EPOCH_CLIMB_MAX:
        raise ValueError(f"to_epoch {to_epoch}: 1..{EPOCH_CLIMB_MAX} (the next epoch rotates the producer id)")
    began = last_report = time.monotonic()
    coordinator = admin.coordinator_of(txn_id)
    request = raw.init_producer_id_request(txn_id, timeout_ms)
    first: raw.ProducerIdAndEpoch | None = None
    now: raw.ProducerIdAndEpoch | None = None
    inits = retries = 0
    while now is None or now.epoch < to_epoch:
        if time.monotonic() - began > limit_s:
            raise EpochClimbError(f"transactional id {txn_id} reached epoch {now.epoch if now else None} of "
                                  f"{to_epoch} in {limit_s:.0f} s ({inits} InitProducerId)")
        try:
            got = raw.producer_id_of(raw.send(admin.client, request, coordinator))
        except (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError):
            retries += 1
            time.sleep(RETRY_PAUSE_S)
            coordinator = admin.coordinator_of(txn_id)
            continue
        except Errors.RetriableError:
            retries += 1
            time.sleep(RETRY_PAUSE_S)
            continue
        except Errors.KafkaError as exc:
            raise EpochClimbError(f"InitProducerId for {txn_id} refused: {type(exc).__name__}") from exc
        inits += 1
        if now is not None and got.producer_id != now.producer_id:
            raise EpochClimbError(f"the producer id of {txn_id} changed under the climb ({now.producer_id} epoch "
                                  f"{now.epoch} -> {got.producer_id} epoch {got.epoch}): it was rotated")
        first, now = first or got, got
        if progress is not None and time.monotonic() - last_report >= PROGRESS_EVERY_S:
            last_report = time.monotonic()
            progress(f"epoch climb: {txn_id} at epoch {now.epoch} of {to_epoch} ({inits} InitProducerId)")
    assert first is not None
    return {"txn_id": txn_id, "producer_id": now.producer_id, "from_epoch": first.epoch, "epoch": now.epoch,
            "inits": inits, "retries": retries, "seconds": round(time.monotonic() - began, 1)}
