"""How fast the alerts caught each fault: pure functions over fault windows and ALERTS series.

Owns: the alerts each fault kind is meant to raise (EXPECTED), when each alert first went pending and
firing in a run, and per fault the detection latency (first firing, else first pending, at or after
the fault's start) of its expected alerts and when they cleared; alerts that fired for no expected reason are listed with the
fault they followed.
Must not: query Prometheus (series.py captured it) or read files.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

# What dashboards/alerts/txnlab.rules.yml is meant to catch, by fault kind (chaos/nemesis/fault_kinds.py).
EXPECTED: dict[str, tuple[str, ...]] = {
    "hanging-transaction": ("HangingTransaction", "LSOStuck"),
    "storm": ("ProducerStateGrowth",),
    "pause-workload": ("OpenTransactionTooOld",),
}
EARLY_S = 1.0             # an alert evaluated up to this long before the recorded start still counts
STILL_S = 10.0            # active this close to the captured window's end (two rule evaluations): not cleared yet


@dataclass(frozen=True)
class AlertSpan:
    alert: str
    labels: dict
    first_pending: float | None
    first_firing: float | None
    last_active: float


@dataclass(frozen=True)
class Detection:
    fault: str             # the fault's label, e.g. "hanging-transaction partition=0, topic=r1-a"
    kind: str
    fault_start: float
    alert: str
    expected: bool
    first_pending_s: float | None     # seconds after the fault's start
    first_firing_s: float | None
    cleared_s: float | None = None    # seconds after the fault's start it was last active, once it no longer is

    @property
    def detected(self) -> bool:
        return self.first_firing_s is not None or self.first_pending_s is not None


def alert_spans(alerts: list[dict]) -> list[AlertSpan]:
    """ALERTS series (series.alert_series) -> one span per alert and label set."""
    grouped: dict[tuple, dict] = {}
    for s in alerts:
        if not s["points"]:
            continue
        key = (s["alert"], tuple(sorted(s["labels"].items())))
        entry = grouped.setdefault(key, {"pending": None, "firing": None, "last": 0.0})
        first, last = s["points"][0][0], s["points"][-1][0]
        if s["state"] in ("pending", "firing"):
            entry[s["state"]] = first if entry[s["state"]] is None else min(entry[s["state"]], first)
        entry["last"] = max(entry["last"], last)
    return sorted((AlertSpan(name, dict(labels), e["pending"], e["firing"], e["last"])
                   for (name, labels), e in grouped.items()), key=lambda a: (a.first_pending or a.first_firing or 0))


def _first_after(spans: list[AlertSpan], alert: str, start: float, attr: str) -> float | None:
    times = [getattr(s, attr) for s in spans if s.alert == alert and getattr(s, attr) is not None
             and getattr(s, attr) >= start - EARLY_S]
    return min(times) if times else None


def _cleared(spans: list[AlertSpan], alert: str, start: float, end: float | None) -> float | None:
    """When the alert, raised at or after `start`, was last active, if it was no longer active at `end`."""
    last = max((s.last_active for s in spans if s.alert == alert
                and (s.first_pending or s.first_firing or 0) >= start - EARLY_S), default=None)
    return None if last is None or end is None or last > end - STILL_S else last


def detections(windows: list[dict], alerts: list[dict], also: tuple[str, ...] = (),
               end: float | None = None) -> list[Detection]:
    """Per fault window ({kind, start, end, label}), its expected alerts (detected or not: its kind's, and
    `also` for every window) and any other alert that went pending or firing during it or before the next
    fault started; with `end` (where the captured alerts end), when each raised alert cleared."""
    spans = alert_spans(alerts)
    windows = sorted(windows, key=lambda w: w["start"])
    out: list[Detection] = []
    claimed: set[str] = set()
    for i, w in enumerate(windows):
        expected = EXPECTED.get(w["kind"], ()) + tuple(a for a in also if a not in EXPECTED.get(w["kind"], ()))
        horizon = windows[i + 1]["start"] if i + 1 < len(windows) else float("inf")
        names = list(expected) + sorted({s.alert for s in spans if s.alert not in expected and s.alert not in claimed
                                         and w["start"] - EARLY_S <= (s.first_pending or s.first_firing or horizon) < horizon})
        for name in names:
            pending = _first_after(spans, name, w["start"], "first_pending")
            firing = _first_after(spans, name, w["start"], "first_firing")
            cleared = _cleared(spans, name, w["start"], end) if pending is not None or firing is not None else None
            out.append(Detection(w["label"], w["kind"], w["start"], name, name in expected,
                                 None if pending is None else round(pending - w["start"], 1),
                                 None if firing is None else round(firing - w["start"], 1),
                                 None if cleared is None else round(cleared - w["start"], 1)))
            if name not in expected:
                claimed.add(name)
    return out


def as_rows(found: list[Detection]) -> list[dict]:
    return [{**asdict(d), "detected": d.detected} for d in found]
