"""Is the evidence complete? Checked on the driver before any record is read.

Owns: what makes a verdict `unknown` rather than true or false: the run never finished (no
end_offsets.json: the history may be cut short), a torn or damaged history line, a topic the run
recorded that the cluster no longer has (or has with other partitions), a partition whose log no longer
starts at 0 (records deleted) or whose HWM is now below the recorded one (truncated, or re-created), so
the topics cannot be read to the recorded end offsets.
Must not: read records (load.py) or judge them (checks.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from cluster.connection import ConnectionSettings
from cluster.reads import log_start_offsets, partition_offsets, topic_partitions


@dataclass
class Evidence:
    end_offsets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    group_offsets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)      # why the evidence is incomplete; empty: complete

    @property
    def complete(self) -> bool:
        return not self.gaps


def load_run_files(run_dir: Path) -> Evidence:
    evidence = Evidence()
    ends = Path(run_dir) / "end_offsets.json"
    if not ends.exists():
        evidence.gaps.append("the run did not finish: no end_offsets.json (the history may be cut short)")
    else:
        evidence.end_offsets = json.loads(ends.read_text())
    groups = Path(run_dir) / "group_offsets.json"
    evidence.group_offsets = json.loads(groups.read_text()) if groups.exists() else {}
    if not list((Path(run_dir) / "history").glob("part-*.jsonl")):
        evidence.gaps.append("no history under history/")
    return evidence


def check_topics(conn: ConnectionSettings, evidence: Evidence) -> None:
    """Can every recorded partition still be read from offset 0 to its recorded end offsets?"""
    for topic, parts in sorted(evidence.end_offsets.items()):
        recorded = sorted(int(p) for p in parts)
        present = topic_partitions(conn, topic)
        if present is None:
            evidence.gaps.append(f"topic {topic} no longer exists")
            continue
        if present != recorded:
            evidence.gaps.append(f"topic {topic} has partitions {present}, the run recorded {recorded}")
            continue
        starts = log_start_offsets(conn, topic, recorded)
        hwms = partition_offsets(conn, topic, recorded, committed=False)
        for p in recorded:
            want = parts[str(p)]
            if starts[p] > 0:
                evidence.gaps.append(f"{topic}-{p}: the log starts at {starts[p]}: records were deleted")
            if hwms[p] < want["hwm"]:
                evidence.gaps.append(f"{topic}-{p}: HWM {hwms[p]} is below the recorded end offset {want['hwm']}")
