"""The fault schedule of a run: the spec's explicit faults merged with its seeded random ones.

Owns: turning an ExperimentSpec and a seed into the list of faults to inject (when, how long, which
kind, validated parameters with their defaults), and its one-line-per-fault description (`--dry-run`).
Pure and deterministic: random.Random(seed) is the only source of randomness, so the same spec and
seed give the same schedule, which the run records. Targets stay as written (`random`, `{tag}`): the
runner resolves them against the live cluster when each fault starts.
Must not: sleep, read the clock or reach a cluster.

The random generator: the first fault starts at `start_s`; each picks a kind by the mix's weights and
a duration in `duration_s`; the next starts when the previous healed plus a gap in `interval_s`, so
random faults never overlap. A fault is only scheduled if it starts before the experiment's
duration_s and heals by it (its duration is cut to the time left, never below the minimum).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from chaos.runner.spec import ExperimentSpec, RandomSchedule, fits


@dataclass(frozen=True)
class ScheduledFault:
    at_s: float
    duration_s: float
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    origin: str = "explicit"          # "explicit" (schedule.faults[i]) or "random"

    @property
    def heal_at_s(self) -> float:
        return self.at_s + self.duration_s

    def __hash__(self) -> int:          # frozen, but params is a dict
        return hash((self.at_s, self.duration_s, self.kind, json.dumps(self.params, sort_keys=True), self.origin))


def build_schedule(spec: ExperimentSpec, seed: int) -> list[ScheduledFault]:
    """Explicit and random faults sorted by start (explicit first at equal times)."""
    explicit = [ScheduledFault(f.at_s, f.duration_s, f.kind, f.parsed().model_dump(mode="json"))
                for f in spec.schedule.faults]
    drawn = random_faults(spec.schedule.random, spec.duration_s, seed) if spec.schedule.random else []
    return sorted(explicit + drawn, key=lambda fault: fault.at_s)


def random_faults(rand: RandomSchedule, end_s: float, seed: int) -> list[ScheduledFault]:
    rng = random.Random(seed)
    kinds, weights = list(rand.mix), list(rand.mix.values())
    faults: list[ScheduledFault] = []
    at_s = rand.start_s
    while fits(at_s, rand.duration_s[0], end_s):
        kind = rng.choices(kinds, weights)[0]
        duration_s = min(_draw(rng, rand.duration_s), end_s - at_s)
        faults.append(ScheduledFault(at_s, duration_s, kind, rand.parsed(kind).model_dump(mode="json"), "random"))
        at_s = round(at_s + duration_s + _draw(rng, rand.interval_s), 1)
    return faults


def _draw(rng: random.Random, bounds: tuple[float, float]) -> float:
    """Seconds in [low, high], to a tenth."""
    low, high = bounds
    return min(max(round(rng.uniform(low, high), 1), low), high)


def describe(schedule: list[ScheduledFault]) -> list[str]:
    """One line per fault: start, heal, kind, origin, parameters."""
    if not schedule:
        return ["no faults"]
    return [f"{f.at_s:7.1f}s -> {f.heal_at_s:7.1f}s  {f.kind:<19} {f.origin:<8} {_params_text(f.params)}"
            for f in schedule]


def _params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{key}={json.dumps(value) if not isinstance(value, str) else value}"
                    for key, value in params.items())
