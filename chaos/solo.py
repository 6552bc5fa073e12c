"""`txnlab chaos workload NAME`: one workload alone against any cluster, in a run of its own.

Owns: the default plan of each workload when run alone (its topics, its processes, and what feeds it:
the processor gets a transactional producer writing its input), running it for a duration with
progress, and always finishing the run (Ctrl-C included).
Must not: inject faults (experiments do, issue 5).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chaos.run import Progress, Run, WorkloadSpec, new_run_dir, new_run_tag
from chaos.workloads import WORKLOADS
from cluster.connection import ConnectionSettings


@dataclass(frozen=True)
class Plan:
    topics: dict[str, int]
    specs: list[WorkloadSpec]


def plan(workload: str, tag: str, instances: int, extra: list[str], partitions: int = 6) -> Plan:
    """Topics and processes of one workload run alone; `extra` options go to the workload's processes."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
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
        raise ValueError("observer alone needs the topics to watch: txnlab chaos workload observer --topics T ...")
    return Plan({}, [WorkloadSpec("observer", "obs-rc", (*extra, "--isolation", "read_committed")),
                     WorkloadSpec("observer", "obs-ru", (*extra, "--isolation", "read_uncommitted"))])


def observers(topics: list[str]) -> list[WorkloadSpec]:
    """A read_committed and a read_uncommitted observer of the topics."""
    return [WorkloadSpec("observer", f"obs-{short}", ("--topics", *topics, "--isolation", level))
            for short, level in (("rc", "read_committed"), ("ru", "read_uncommitted"))]


@dataclass
class SoloResult:
    run_dir: Path
    summary: dict


def run_solo(conn: ConnectionSettings, workload: str, duration: float, runs_dir: Path, seed: int = 0,
             instances: int = 1, extra: list[str] | None = None, progress: Progress = print) -> SoloResult:
    tag = new_run_tag()
    the_plan = plan(workload, tag, instances, list(extra or []))
    run_dir = new_run_dir(runs_dir, workload, tag)
    progress(f"run {run_dir}")
    with Run(conn, run_dir, tag, seed, workload, progress) as run:
        run.info.params = {"workload": workload, "duration": duration, "instances": instances, "extra": extra}
        run.create_topics(the_plan.topics)
        if workload == "observer":
            run.use_topics(_topics_of(extra or []))
        for spec in the_plan.specs:
            run.start(spec)
        progress(f"started {', '.join(s.process for s in the_plan.specs)} for {duration:.0f}s")
        started = time.monotonic()
        run.wait(duration, tick=lambda left: _tick(progress, run, started, left))
        summary = run.finish()
    return SoloResult(run_dir, summary)


def _tick(progress: Progress, run: Run, started: float, left: float) -> None:
    elapsed = time.monotonic() - started
    if int(elapsed) % 10 == 0:
        progress(f"{elapsed:.0f}s: {run.history.count} operations, {len(run.alive())} processes alive, "
                 f"{max(0.0, left):.0f}s left")


def _topics_of(extra: list[str]) -> list[str]:
    start = extra.index("--topics") + 1
    topics = []
    for item in extra[start:]:
        if item.startswith("--"):
            break
        topics.append(item)
    return topics
