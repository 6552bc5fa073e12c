"""The epoch climb (chaos/nemesis/epoch_climb.py): the InitProducerId loop, its retries and what stops it, against a
coordinator whose answers a test scripts (the real climb: test_fault_kinds.py on the local cluster)."""
from __future__ import annotations

import pytest
import kafka.errors as Errors

from chaos.nemesis import epoch_climb
from chaos.nemesis._raw_produce import ProducerIdAndEpoch
from chaos.nemesis.epoch_climb import EPOCH_CLIMB_MAX, EpochClimbError, climb_epoch


class ScriptedCoordinator:
    """Answers each InitProducerId with the next of `answers` (an exception is raised), then bumps on its own."""
    def __init__(self, answers=(), producer_id=9, epoch=0):
        self.answers, self.producer_id, self.epoch = list(answers), producer_id, epoch
        self.client, self.sent, self.found = object(), [], 0

    def coordinator_of(self, txn_id):
        self.found += 1
        return 3

    def answer(self, client, request, node):
        self.sent.append((request.transactional_id, node))
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            self.producer_id, self.epoch = answer
        else:
            self.epoch += 1
        return ProducerIdAndEpoch(self.producer_id, self.epoch)


@pytest.fixture
def coordinator(monkeypatch):
    made = {}

    def make(**kwargs):
        made["c"] = c = ScriptedCoordinator(**kwargs)
        monkeypatch.setattr(epoch_climb.raw, "send", c.answer)
        monkeypatch.setattr(epoch_climb.raw, "producer_id_of", lambda response: response)
        monkeypatch.setattr(epoch_climb.time, "sleep", lambda s: None)
        return c
    return make


def test_the_climb_stops_at_its_epoch_and_says_what_it_did(coordinator):
    c = coordinator(epoch=40)
    done = climb_epoch(c, "r1.txp-0", 50, 60000, 10)
    assert (done["producer_id"], done["from_epoch"], done["epoch"], done["inits"]) == (9, 41, 50, 10)
    assert len(c.sent) == 10 and {s[0] for s in c.sent} == {"r1.txp-0"}


def test_retriable_answers_are_asked_again_and_a_moved_coordinator_is_found_again(coordinator):
    c = coordinator(answers=[Errors.CoordinatorLoadInProgressError(), Errors.ConcurrentTransactionsError(),
                             Errors.NotCoordinatorError()])
    done = climb_epoch(c, "r1.txp-0", 3, 60000, 10)
    assert done["epoch"] == 3 and done["retries"] == 3 and c.found == 2


def test_a_refusal_a_rotation_under_the_climb_and_the_limit_stop_it_with_the_reason(coordinator):
    c = coordinator(answers=[Errors.TransactionalIdAuthorizationFailedError()])
    with pytest.raises(EpochClimbError, match="refused: TransactionalIdAuthorizationFailedError"):
        climb_epoch(c, "r1.txp-0", 3, 60000, 10)
    c = coordinator(answers=[(9, 5), (12, 0)])
    with pytest.raises(EpochClimbError, match="9 epoch 5 -> 12 epoch 0"):
        climb_epoch(c, "r1.txp-0", 30, 60000, 10)
    c = coordinator()
    with pytest.raises(EpochClimbError, match="reached epoch"):
        climb_epoch(c, "r1.txp-0", EPOCH_CLIMB_MAX, 60000, 0.0)
    with pytest.raises(ValueError, match="rotates"):
        climb_epoch(c, "r1.txp-0", EPOCH_CLIMB_MAX + 1, 60000, 10)
