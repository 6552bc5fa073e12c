"""The exporter's own rendering of /metrics: the same text as prometheus_client's generate_latest over the
same families, and each cached part rendered again once its results were replaced."""
from __future__ import annotations

import dataclasses
import math
import random

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from exporter.collectors import TxnCollector
from exporter.exposition import Family, render, value_text
from exporter.hanging_verdicts import PARTITION_NOT_IN_TRANSACTION, Evidence, OpenTransaction, Verdict
from exporter.kafka_access import (ConfigsResult, FeaturesResult, GroupOffsetsResult, OffsetsResult, ProducersResult,
                                   TransactionDescription, TransactionListing, TransactionsResult)
from exporter.service import Background, CollectorHealth, OffsetsView
from tests.unit.test_exporter_collectors import NOW, FakeService, entry, readable_lag_result

AWKWARD = ['quo"te', "back\\slash", "new\nline", "ünïcødé-主题", 'all\\"\n', ""]


def awkward_view(shift: int = 0) -> OffsetsView:
    partitions = [(topic, p) for topic in AWKWARD + ["orders"] for p in range(3)]
    hwm = {tp: 2_000_000 + 7 * i + shift for i, tp in enumerate(partitions)}
    lso = {tp: v - (i % 3) for i, (tp, v) in enumerate(hwm.items())}
    advance = {tp: NOW - i / 3 for i, tp in enumerate(partitions)}
    advance[("orders", 0)], advance[("orders", 1)], advance[("orders", 2)] = math.nan, math.inf, -math.inf
    return OffsetsView(OffsetsResult(lso, hwm, {tp: 1 + i % 2 for i, tp in enumerate(partitions)}), advance,
                       reachable=True, broker_last_good={1: NOW, 2: None})


def awkward_background() -> Background:
    producers = {("orders", 0): [entry(1), entry(2, start=95, last_s=NOW - 50)],
                 (AWKWARD[0], 1): [entry(3, start=2_000_001, last_s=NOW - 0.125)], (AWKWARD[2], 0): []}
    txn = OpenTransaction(AWKWARD[1], 0, 77, 3, 9, 95, int((NOW - 40) * 1000))
    verdict = Verdict(txn, None, PARTITION_NOT_IN_TRANSACTION)
    listings = [TransactionListing('id "a"\n', 1, "Ongoing", 1), TransactionListing("b", 2, "Empty", 2)]
    descriptions = {'id "a"\n': TransactionDescription('id "a"\n', 1, "Ongoing", 1, 0, 10_000,
                                                         int((NOW - 60) * 1000), frozenset())}
    return Background(producers=ProducersResult(producers, {tp: 1 for tp in producers}, requested=4),
                      transactions=TransactionsResult(listings=listings, descriptions=descriptions),
                      configs=ConfigsResult({1: {"transaction.max.timeout.ms": "900000"}, 2: {}}),
                      groups=GroupOffsetsResult({'gr\\oup "x"': {(AWKWARD[3], 1): 5, ("orders", 2): 1}}),
                      verdicts=[verdict], hanging=[verdict], late=[txn], evidence=Evidence(3, {}, frozenset()),
                      features=FeaturesResult({"transaction.version": 2}), readable_lag=readable_lag_result(),
                      collected_at=NOW - 2)


def awkward_service(granularity: str = "partition") -> FakeService:
    service = FakeService(awkward_view(), awkward_background(), granularity)
    service.health["producers"] = CollectorHealth(up=False, duration_seconds=math.nan, last_success=math.inf)
    return service


def slow_path(collector: TxnCollector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def parsed(text: bytes) -> list:
    return [(f.name, f.documentation, f.type,
             sorted((s.name, sorted(s.labels.items()), repr(s.value)) for s in f.samples))
            for f in text_string_to_metric_families(text.decode())]


def test_the_rendering_is_generate_latest_to_the_byte_awkward_labels_nan_inf_and_empty_families_included():
    for granularity in ("partition", "topic"):
        collector = TxnCollector(awkward_service(granularity), "1.0\\dev\n")
        fast = collector.exposition()
        assert fast == slow_path(collector)
        families = parsed(fast)
        assert families == parsed(slow_path(collector))
        assert len(families) == len({name for name, *_ in families}) >= 35           # each family once
    empty = [name for name, _, _, samples in families if not samples]
    assert "kafkatxn_hanging_unresolved_transactions" in empty
    assert 'kafkatxn_partition_lso_last_advance_timestamp_seconds{partition="0",topic="orders"} NaN' \
           in TxnCollector(awkward_service(), "x").exposition().decode()


def test_a_family_renders_as_its_prometheus_client_metric_does():
    info = Family("kafkatxn_build", "build\\info\nsecond line", ["version", "python"], type="info")
    info.add_metric(['1"2', "3.11"], 1.0)
    gauge = Family("kafkatxn_g", "doc", ["z", "a", "m"])
    for i, value in enumerate([0, -0.0, 1e-7, 123456789, 2**53 + 1, -5, True, 1.5e300, math.nan, math.inf]):
        gauge.add_metric([f"z{i}", AWKWARD[i % len(AWKWARD)], "m"], value)
    unlabelled = Family("kafkatxn_u", "u")
    unlabelled.add_metric([], 3)
    families = [info, gauge, unlabelled, Family("kafkatxn_empty", "nothing", ["a"])]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(type("C", (), {"collect": lambda self: [f.to_metric() for f in families]})())
    assert render(families) == generate_latest(registry)


def test_values_are_formatted_as_float_to_go_string():
    rng = random.Random(13)
    values = [0, 1, 999_999, 1_000_000, 1_000_037, 10**7, 2**53 - 1, 2**53, 2**60, -1, -1_234_567, True, False,
              0.0, -0.0, 0.1, 1_799_999_700.123, 1e16, math.nan, math.inf, -math.inf]
    values += [rng.randrange(10**k) for k in range(1, 17) for _ in range(200)]
    values += [rng.randrange(1, 10**6) * 10**rng.randrange(10) for _ in range(500)]
    assert [value_text(v) for v in values] == [floatToGoString(v) for v in values]


def test_cached_parts_are_rendered_again_only_when_their_results_are_replaced():
    service = awkward_service()
    collector = TxnCollector(service, "x")
    first = collector.exposition()
    service.view.result.high_watermark[("orders", 0)] = 1          # the service never changes a result in place:
    service.background.producers.producers[("orders", 0)] = []     # a cached part does not see it
    service.health["offsets"].duration_seconds = 42.0               # health: rendered every scrape
    second = collector.exposition()
    assert second.replace(b'collector="offsets"} 42.0', b'collector="offsets"} 0.1') == first
    service.view = awkward_view(shift=5)                           # a new offsets collection
    third = collector.exposition().decode()
    assert 'kafkatxn_partition_high_watermark{partition="1",topic="orders"} 2.000138e+06' in third
    assert 'kafkatxn_partition_active_producers{partition="0",topic="orders"} 2.0' in third   # background: cached
    service.background = dataclasses.replace(service.background,   # a new background collection
                                             producers=dataclasses.replace(service.background.producers))
    fourth = collector.exposition()
    assert b'kafkatxn_partition_active_producers{partition="0",topic="orders"} 0.0' in fourth
    assert fourth == slow_path(collector)


def test_a_new_background_is_rendered_after_its_cycle_so_the_next_scrape_renders_only_the_offsets(monkeypatch):
    """prerender (the service's after_cycle) renders the parts built from the background alone, asking for no
    offsets; the scrape after it builds only the parts of what changed since (the offsets view, the groups that
    join it, health and the clock), and serves what a scrape rendering everything itself would."""
    import exporter.collectors as collectors
    service = awkward_service()
    collector = TxnCollector(service, "x")
    collector.exposition()
    service.background = dataclasses.replace(service.background,
                                             producers=dataclasses.replace(service.background.producers))
    service.view = awkward_view(shift=5)
    built: list[str] = []
    for name in ("producer_families", "hanging_families", "partition_and_topic_offsets", "group_families"):
        real = getattr(collectors, name)
        monkeypatch.setattr(collectors, name, lambda *a, _real=real, _name=name, **k: (built.append(_name), _real(*a, **k))[1])
    asked = []
    monkeypatch.setattr(service, "offsets", lambda _real=service.offsets: (asked.append(1), _real())[1])
    collector.prerender()
    assert sorted(built) == ["hanging_families", "producer_families"] and not asked
    built.clear()
    scraped = collector.exposition()
    assert sorted(built) == ["group_families", "partition_and_topic_offsets"]
    assert scraped == slow_path(collector)


def test_a_failed_prerender_is_logged_and_the_scrape_renders_the_part(monkeypatch, caplog):
    import exporter.collectors as collectors
    service = awkward_service()
    collector = TxnCollector(service, "x")
    monkeypatch.setattr(collectors, "producer_families", lambda *a, **k: 1 / 0)
    collector.prerender()                                           # the background loop goes on
    assert "pre-rendering the background families failed" in caplog.text
    monkeypatch.undo()
    assert collector.exposition() == slow_path(collector)
