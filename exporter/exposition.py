"""The text exposition (format 0.0.4) of the exporter's own families, written without prometheus_client's
Metric and Sample objects, and cached per part until the results it was built from are replaced.

Owns: `Family` (name, HELP, label names, rows of label values and a value), its rendering byte for byte
as prometheus_client's generate_latest writes it (labels sorted by name; backslash, double quote and
newline escaped in label values; floats as floatToGoString formats them), `Family.to_metric` for
prometheus_client's registry API, and `PartCache`: the rendered bytes of each part, kept while the
objects it was built from (compared by identity) stay the same.
Must not: know any `kafkatxn_*` family (collectors.py maps results to families), or collect anything.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable, NamedTuple, Sequence

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.utils import floatToGoString

EXACT_INTS = 2 ** 53                               # every int below is a float exactly
SAMPLE_SUFFIX = {"gauge": "", "info": "_info"}     # family type -> suffix of its samples' name (both: TYPE gauge)


class Family:
    """One gauge (or info: value 1) family, filled like prometheus_client's GaugeMetricFamily."""
    __slots__ = ("name", "documentation", "type", "labels", "rows")

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = (), type: str = "gauge"):
        self.name, self.documentation, self.type = name, documentation, type
        self.labels = tuple(labels)
        self.rows: list[tuple[tuple[str, ...], float]] = []

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        self.rows.append((tuple(labels), value))

    def to_metric(self) -> Metric:
        if self.type == "info":
            info = InfoMetricFamily(self.name, self.documentation, labels=self.labels)
            for values, _ in self.rows:
                info.add_metric(values, {})
            return info
        gauge = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, value in self.rows:
            gauge.add_metric(values, value)
        return gauge


def value_text(value: float) -> str:
    """floatToGoString(value); a whole number in [0, 2**53), the usual value here, without the float's repr."""
    if type(value) is int and 0 <= value < EXACT_INTS:
        digits = str(value)                  # repr(float(value)) is digits + ".0"
        if len(digits) <= 6:
            return digits + ".0"
        rest = digits[1:].rstrip("0")        # Go's exponent form from 7 digits on: 1.000037e+06, 1e+07
        return f"{digits[0]}.{rest}e+{len(digits) - 1:02d}" if rest else f"{digits[0]}e+{len(digits) - 1:02d}"
    return floatToGoString(value)


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render(families: Iterable[Family]) -> bytes:
    """The families as generate_latest writes them. A label set is escaped once per call (the per-partition
    families of one part share their (topic, partition) sets)."""
    out: list[str] = []
    label_texts: dict[tuple[str, ...], dict[tuple[str, ...], str]] = {}    # label names -> values -> text
    for family in families:
        name = family.name + SAMPLE_SUFFIX[family.type]
        help_text = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        names = family.labels
        texts = label_texts.setdefault(names, {})
        for values, value in family.rows:
            labels = texts.get(values)
            if labels is None:
                pairs = sorted(dict(zip(names, values)).items())
                labels = texts[values] = "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}" if pairs else ""
            out.append(f"{name}{labels} {value_text(value)}\n")
    return "".join(out).encode()


class Part(NamedTuple):
    """Families built from `key` (None: built fresh every time)."""
    name: str
    key: tuple | None
    build: Callable[[], Iterable[Family]]


SeriesCounts = dict[str, int]          # family name -> its series in one scrape


class PartCache:
    """The rendered bytes of each part (and its families' series counts), rendered again only when an object of
    its key was replaced. One render at a time: a concurrent scrape waits, then finds the parts rendered."""

    def __init__(self) -> None:
        self._rendered: dict[str, tuple[tuple, bytes, SeriesCounts]] = {}
        self._lock = threading.Lock()

    def render(self, parts: Iterable[Part], tail: Callable[[SeriesCounts], Iterable[Family]] | None = None) -> bytes:
        """The parts' bytes, then `tail`'s families, built from the series counts of every family before them."""
        with self._lock:
            counts: SeriesCounts = {}
            out = []
            for part in parts:
                text, mine = self._bytes(part)
                out.append(text)
                counts.update(mine)
            if tail is not None:
                out.append(render(tail(counts)))
            return b"".join(out)

    def warm(self, parts: Iterable[Part]) -> None:
        """Render the parts whose key changed, now, so that the next render finds them cached."""
        with self._lock:
            for part in parts:
                self._bytes(part)

    def _bytes(self, part: Part) -> tuple[bytes, SeriesCounts]:
        cached = self._rendered.get(part.name) if part.key is not None else None
        if cached and len(cached[0]) == len(part.key or ()) and all(a is b for a, b in zip(cached[0], part.key or ())):
            return cached[1], cached[2]
        families = list(part.build())
        text, counts = render(families), series_counts(families)
        if part.key is not None:
            self._rendered[part.name] = (part.key, text, counts)
        return text, counts


def series_counts(families: Iterable[Family]) -> SeriesCounts:
    return {f.name + SAMPLE_SUFFIX[f.type]: len(f.rows) for f in families}
