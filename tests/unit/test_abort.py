"""cluster.access.abort: the pure decision on tiny inputs, and the thin I/O around it with a scripted admin client."""
from __future__ import annotations

import kafka.errors as Errors
import pytest
from kafka.admin import ProducerState, TransactionDescription, TransactionListing
from kafka.structs import TopicPartition

from cluster.access import abort as ab
from cluster.access.abort import Allowed, CoordinatorView, ExpectedTransaction, Refused, decide
from exporter import txn_commands
from exporter.txn_commands import HangingReport

EXPECTED = ExpectedTransaction("t", 0, producer_id=7, producer_epoch=3, start_offset=100, coordinator_epoch=1)
NOBODY = CoordinatorView({})                       # every coordinator answered; none lists producer 7


def producer(pid=7, epoch=3, start=100, coordinator_epoch=2) -> ProducerState:
    return ProducerState(pid, epoch, last_sequence=5, last_timestamp=0, coordinator_epoch=coordinator_epoch,
                         current_transaction_start_offset=start)


def tracked(state="Ongoing", partitions=(("t", 0),), pid=7) -> CoordinatorView:
    desc = TransactionDescription(coordinator_id=2, state=state, producer_id=pid, producer_epoch=3,
                                  transaction_timeout_ms=60000, transaction_start_time_ms=0,
                                  topic_partitions={TopicPartition(t, p) for t, p in partitions})
    return CoordinatorView({"app-1": desc})


# ---- decide ------------------------------------------------------------------------------------------
def test_the_same_transaction_untracked_is_allowed_with_the_epochs_re_read():
    assert decide(EXPECTED, [producer(pid=9), producer(coordinator_epoch=4)], NOBODY) == Allowed(3, 4)


@pytest.mark.parametrize("current, says", [
    ([], "has no open transaction"),
    ([producer(pid=8)], "has no open transaction"),
    ([producer(start=-1)], "has no open transaction"),
    ([producer(epoch=4)], "producer epoch 3 -> 4"),
    ([producer(start=140)], "start offset 100 -> 140"),
])
def test_a_changed_transaction_is_refused_even_with_force(current, says):
    for force in (False, True):
        decision = decide(EXPECTED, current, NOBODY, force=force)
        assert isinstance(decision, Refused) and "changed since the verdict" in decision.reason
        assert says in decision.reason


@pytest.mark.parametrize("state", ["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"])
def test_a_transaction_its_coordinator_tracks_on_this_partition_is_refused(state):
    decision = decide(EXPECTED, [producer()], tracked(state))
    assert isinstance(decision, Refused)
    assert f"coordinator 2 still tracks transactional id app-1 as {state} with t-0" in decision.reason
    assert "this partition's records are lost while its other partitions commit" in decision.reason


def test_tracked_on_other_partitions_only_or_no_longer_in_progress_is_allowed():
    assert decide(EXPECTED, [producer()], tracked(partitions=[("t", 1), ("u", 0)])) == Allowed(3, 2)
    assert decide(EXPECTED, [producer()], tracked(state="CompleteCommit")) == Allowed(3, 2)
    assert decide(EXPECTED, [producer()], tracked(state="Empty", partitions=[])) == Allowed(3, 2)
    assert decide(EXPECTED, [producer()], tracked(pid=8)) == Allowed(3, 2)   # the id moved on to another producer


def test_a_coordinator_side_not_established_is_refused():
    decision = decide(EXPECTED, [producer()], CoordinatorView(unknown="broker 3: NodeNotReadyError"))
    assert isinstance(decision, Refused) and "could not be established (broker 3: NodeNotReadyError)" in decision.reason


def test_force_overrides_the_coordinator_and_says_what_it_overrode():
    forced = decide(EXPECTED, [producer()], tracked(), force=True)
    assert isinstance(forced, Allowed) and (forced.producer_epoch, forced.coordinator_epoch) == (3, 2)
    assert "still tracks transactional id app-1 as Ongoing" in forced.forced
    unknown = decide(EXPECTED, [producer()], CoordinatorView(unknown="timeout"), force=True)
    assert isinstance(unknown, Allowed) and "could not be established" in unknown.forced
    assert decide(EXPECTED, [producer()], NOBODY, force=True).forced is None


# ---- the I/O around it -------------------------------------------------------------------------------
class ScriptedClient:
    """kafka-python's admin client as far as cluster.access.abort uses it; records every call. `leaders`: the
    __transaction_state leaders each describe_topics answers in turn (partition -> (leader, epoch))."""

    def __init__(self, listed=None, described=None, producers=(), list_error=None, leaders=None, acl_denied=False):
        self.listed, self.described, self.producers = listed or {}, described or {}, list(producers)
        self.list_error, self.acl_denied, self.calls = list_error, acl_denied, []
        self.leaders = list(leaders or [{0: (1, 4), 1: (2, 4)}] * 2)

    def describe_topics(self, topics):
        self.calls.append(("topics",))
        leaders = self.leaders.pop(0)
        return [{"error_code": 0, "partitions": [{"partition_index": p, "leader_id": leader, "leader_epoch": epoch}
                                                 for p, (leader, epoch) in leaders.items()]}]

    def list_transactions(self, broker_ids, producer_id_filters):
        self.calls.append(("list", tuple(broker_ids), tuple(producer_id_filters)))
        if self.list_error:
            raise self.list_error
        return {b: self.listed.get(b, []) for b in broker_ids}

    def describe_transactions(self, ids):
        self.calls.append(("describe", tuple(ids)))
        if self.acl_denied:
            raise Errors.TransactionalIdAuthorizationFailedError(ids[0])
        if ids[0] not in self.described:
            raise Errors.TransactionalIdNotFoundError(ids[0])
        return {i: self.described[i] for i in ids}

    def describe_producers(self, tps):
        self.calls.append(("producers",))
        return {tps[0]: type("State", (), {"active_producers": self.producers})()}

    def abort_transaction(self, spec):
        self.calls.append(("abort", spec))


class ScriptedAdmin:
    def __init__(self, client):
        self.client = client

    def registered_brokers(self):
        return [1, 2]


def kinds(client: ScriptedClient) -> list[str]:
    return [c[0] for c in client.calls]


def test_a_refusal_writes_nothing_and_a_permitted_abort_writes_the_re_read_epochs():
    desc = tracked().descriptions["app-1"]
    live = ScriptedClient({2: [TransactionListing("app-1", 7, "Ongoing")]}, {"app-1": desc}, [producer()])
    with pytest.raises(ab.AbortRefused, match="t-0 producer 7 epoch 3 start offset 100 refused: coordinator 2"):
        ab.abort_transaction(ScriptedAdmin(live), EXPECTED)
    assert kinds(live) == ["topics", "list", "topics", "describe", "describe", "producers"]  # partition re-read last
    assert live.calls[1] == ("list", (1, 2), (7,))

    hanging = ScriptedClient(producers=[producer(epoch=3, coordinator_epoch=5)])
    assert ab.abort_transaction(ScriptedAdmin(hanging), EXPECTED) == Allowed(3, 5)
    (_, spec), = [c for c in hanging.calls if c[0] == "abort"]
    assert (spec.topic_partition, spec.producer_id, spec.producer_epoch, spec.coordinator_epoch) == \
        (TopicPartition("t", 0), 7, 3, 5)


def test_a_dry_run_decides_but_writes_nothing():
    client = ScriptedClient(producers=[producer()])
    assert ab.abort_transaction(ScriptedAdmin(client), EXPECTED, dry_run=True) == Allowed(3, 2)
    assert "abort" not in kinds(client)


@pytest.mark.parametrize("client, says", [
    (ScriptedClient(list_error=Errors.NodeNotReadyError("broker 2")), "NodeNotReadyError"),
    (ScriptedClient({1: [TransactionListing("app-1", 7, "Ongoing")]}, {"app-1": tracked().descriptions["app-1"]}),
     "transactional id app-1 was listed by broker 1 but described by broker 2"),
    (ScriptedClient(leaders=[{0: (1, 4)}, {0: (2, 5)}]), "partition 0 changed leader during the listing"),
    (ScriptedClient(acl_denied=True), "may not describe every transactional id"),
])
def test_the_coordinator_view_is_unknown_when_it_cannot_be_established(client, says):
    assert says in ab.coordinator_view(ScriptedAdmin(client), 7).unknown
    assert ab.coordinator_view(ScriptedAdmin(ScriptedClient()), 7) == CoordinatorView({})


@pytest.mark.parametrize("before, after, answered, gap", [
    ({0: (1, 4), 1: (2, 4)}, {0: (1, 4), 1: (2, 4)}, {1, 2}, None),
    ({}, {}, set(), None),                                        # no __transaction_state: nothing tracked
    ({0: (1, 4)}, {0: (-1, 5)}, {1}, "partition 0 has no leader"),
    ({0: (1, 4)}, {}, {1}, "partition 0 has no leader"),
    ({0: (1, 4)}, {0: (1, 5)}, {1}, "partition 0 changed leader during the listing"),
    ({0: (1, 4), 1: (3, 4)}, {0: (1, 4), 1: (3, 4)}, {1, 2}, "partition 1 is led by broker 3, which was not asked"),
])
def test_listing_gap(before, after, answered, gap):
    found = ab.listing_gap(before, after, answered)
    assert found == gap if gap is None else gap in found


# ---- the operator's use of it ------------------------------------------------------------------------
def report(unresolved=0, failed=0) -> HangingReport:
    return HangingReport(hanging=[], late=[], open_transactions=1, unresolved=unresolved, partitions_failed=failed)


@pytest.mark.parametrize("unresolved, failed", [(1, 0), (0, 2)])
def test_abort_hanging_refuses_an_incomplete_report(unresolved, failed):
    with pytest.raises(ab.AbortRefused, match=f"{unresolved} unresolved verdicts, {failed} partitions not scanned"):
        txn_commands.hanging_to_abort(report(unresolved, failed))
    assert txn_commands.hanging_to_abort(report()) == []


def test_the_operator_aborts_the_others_then_reports_every_refusal(monkeypatch):
    other = ExpectedTransaction("t", 1, 8, 0, 5)
    written = []

    def one_path(admin, txn, force, dry_run):
        if txn is EXPECTED:
            raise ab.AbortRefused("abort of t-0 refused: changed since the verdict")
        written.append((txn, force, dry_run))
        return Allowed(0, 0)
    monkeypatch.setattr(txn_commands, "abort_transaction", one_path)
    said = []
    with pytest.raises(ab.AbortRefused, match="t-0 refused: changed"):
        txn_commands.abort(None, [EXPECTED, other], yes=True, force=False, say=said.append)
    assert written == [(other, False, False)] and said == [f"aborted {other.describe()}"]
