"""Requests to the transaction coordinators: which transactions are open, and what each one is.

Owns: ListTransactions on every broker between two reads of the __transaction_state leaders, the ACL probe
(may this principal describe any transactional id?), DescribeTransactions sent to the coordinator that
listed each id, and every broker's and id's error kept as an ItemError (kafka-python's own helpers raise on
the first bad item).
Must not: decide whether a transaction hangs (exporter/hanging_verdicts.py does) or abort one (the one write
is cluster.access.abort's).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import kafka.errors as Errors
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest

from cluster.access.admin import IN_PROGRESS_STATES, acl_probe_id
from exporter.access.lanes import AdminLanes
from exporter.access.metadata import MetadataCache
from exporter.access.results import (ItemError, TransactionDescription, TransactionListing, TransactionsResult,
                                     error_name, item_error)

DESCRIBED_STATES = IN_PROGRESS_STATES


class TransactionRequests:
    """What the coordinators say about every transactional id they hold."""

    def __init__(self, lanes: AdminLanes, cache: MetadataCache):
        self.lanes = lanes
        self.cache = cache

    def transactions(self, describe_states: Iterable[str] | None = DESCRIBED_STATES) -> TransactionsResult:
        """ListTransactions on every broker, between two reads of the __transaction_state leaders; an ACL
        probe; DescribeTransactions (sent to the same broker, which is the coordinator of what it listed)
        for the ids in describe_states (None: every listed id)."""
        meta = self.cache.metadata()
        result = TransactionsResult(before=self.cache.coordinator_map())
        self.lanes.run(self._list_transactions, list(meta.brokers), result)
        result.after = self.cache.coordinator_map()
        result.may_describe_any_id = self.lanes.run(self._probe_describe_acl)
        wanted = None if describe_states is None else set(describe_states)
        ids_by_coordinator: dict[int, list[str]] = defaultdict(list)
        for listing in result.listings:
            if wanted is None or listing.state in wanted:
                ids_by_coordinator[listing.coordinator].append(listing.transactional_id)
        self.lanes.run(self._describe_transactions, dict(ids_by_coordinator), result)
        return result

    async def _list_transactions(self, m, brokers: list[int], result: TransactionsResult) -> None:
        sends = [(b, self.lanes.send(m, ListTransactionsRequest(state_filters=[], producer_id_filters=[]), b))
                 for b in brokers]
        for broker, response, exc in await self.lanes.gather(m, sends):
            err = error_name(exc) if exc is not None else item_error(response.error_code)
            if err:
                result.coordinators_failed.add(broker)
                result.errors.append(ItemError(err, broker=broker, whole_request=exc is not None))
                continue
            result.answered.add(broker)
            result.listings.extend(TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, broker)
                                   for t in response.transaction_states)

    async def _describe_transactions(self, m, ids_by_coordinator: dict[int, list[str]],
                                     result: TransactionsResult) -> None:
        sends = [((b, ids), self.lanes.send(m, DescribeTransactionsRequest(transactional_ids=ids), b))
                 for b, ids in ids_by_coordinator.items() if ids]
        for (broker, ids), response, exc in await self.lanes.gather(m, sends):
            if exc is not None:
                result.coordinators_failed.add(broker)
                result.errors.extend(ItemError(error_name(exc), broker=broker, item=i, whole_request=True) for i in ids)
                continue
            for txn in response.transaction_states:
                self._parse_description(broker, txn, result)

    async def _probe_describe_acl(self, m) -> bool | None:
        """May this principal DESCRIBE any transactional id? Brokers check that ACL before asking whether they
        coordinate the id, so DescribeTransactions of a random id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        exactly when a principal without a wildcard grant would also miss ids in ListTransactions.
        (A DENY on some ids beside a wildcard ALLOW is not seen by this probe: docs/exporter.md.)"""
        [(_, response, exc)] = await self.lanes.gather(m, [(None, self.lanes.send(
            m, DescribeTransactionsRequest(transactional_ids=[acl_probe_id()])))])
        if exc is not None or not response.transaction_states:
            return None
        denied = error_name(Errors.TransactionalIdAuthorizationFailedError)
        return item_error(response.transaction_states[0].error_code) != denied

    @staticmethod
    def _parse_description(broker: int, txn: Any, result: TransactionsResult) -> None:
        err = item_error(txn.error_code)
        if err:
            if err == error_name(Errors.TransactionalIdNotFoundError):
                result.unknown_ids.add(txn.transactional_id)    # ended and expired since the listing: nothing missed
            else:
                result.coordinators_failed.add(broker)     # an id it listed went undescribed: its counts incomplete
            result.errors.append(ItemError(err, broker=broker, item=txn.transactional_id))
            return
        partitions = frozenset((t.topic, p) for t in txn.topics for p in t.partitions)
        result.descriptions[txn.transactional_id] = TransactionDescription(
            txn.transactional_id, broker, txn.transaction_state, txn.producer_id, txn.producer_epoch,
            txn.transaction_timeout_ms, txn.transaction_start_time_ms, partitions)
