"""The default plan of each workload: its topics, its processes, and what feeds it (the processor gets
a transactional producer writing its input; a transactional producer gets both observers).

Owns: `plan()`, used by `txnlab chaos workload` (chaos/solo.py) and by experiment specs (chaos/spec.py)
for the processes and topics of each workload they name. Pure data, no side effects.
Must not: start processes or create topics (chaos/run.py does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from chaos.run import WorkloadSpec
from chaos.workloads import WORKLOADS
from cluster.errors import TxnlabError


class PlanError(TxnlabError, ValueError):
    """A workload that cannot be planned as asked (unknown name, missing options)."""


@dataclass(frozen=True)
class Plan:
    topics: dict[str, int]
    specs: list[WorkloadSpec]


def plan(workload: str, tag: str, instances: int, extra: list[str], partitions: int = 6) -> Plan:
    """Topics and processes of one workload run alone; `extra` options go to the workload's processes."""
    if workload not in WORKLOADS:
        raise PlanError(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
    planners: dict[str, Callable[[], Plan]] = {
        "txn-producer": lambda: _txn_producer(tag, instances, extra, partitions),
        "processor": lambda: _processor(tag, instances, extra, partitions),
        "java-copier": lambda: Plan({f"{tag}-jin": partitions, f"{tag}-jout": partitions},
                                    [WorkloadSpec("java-copier", "java-copier", (
                                        "--input", f"{tag}-jin", "--output", f"{tag}-jout", *extra))]),
        "storm": lambda: Plan({f"{tag}-storm": 3}, [WorkloadSpec("storm", f"storm-{i}", ("--topic", f"{tag}-storm",
                                                                                          *extra))
                                                   for i in range(instances)]),
        "observer": lambda: _observer(extra),
    }
    return planners[workload]()


def _txn_producer(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    topics = [f"{tag}-a", f"{tag}-b"]
    specs = [WorkloadSpec("txn-producer", f"txp-{i}", ("--topics", *topics, *extra)) for i in range(instances)]
    return Plan({t: partitions for t in topics}, specs + observers(topics))


def _processor(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    inputs, output = [f"{tag}-in-a", f"{tag}-in-b"], f"{tag}-out"
    feeder = WorkloadSpec("txn-producer", "feeder", ("--topics", *inputs, "--rate", "10"))
    specs = [WorkloadSpec("processor", f"eos-{i}", ("--inputs", *inputs, "--output", output, *extra))
             for i in range(instances)]
    return Plan({**{t: partitions for t in inputs}, output: partitions}, [feeder, *specs])


def _observer(extra: list[str]) -> Plan:
    if "--topics" not in extra:
        raise PlanError("observer alone needs the topics to watch: txnlab chaos workload observer --topics T ...")
    return Plan({}, [WorkloadSpec("observer", "obs-rc", (*extra, "--isolation", "read_committed")),
                     WorkloadSpec("observer", "obs-ru", (*extra, "--isolation", "read_uncommitted"))])


def observers(topics: list[str]) -> list[WorkloadSpec]:
    """A read_committed and a read_uncommitted observer of the topics."""
    return [WorkloadSpec("observer", f"obs-{short}", ("--topics", *topics, "--isolation", level))
            for short, level in (("rc", "read_committed"), ("ru", "read_uncommitted"))]
