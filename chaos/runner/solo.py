"""`txnlab chaos workload NAME`: one workload alone against any cluster, in a run of its own.

Owns: running one workload alone as chaos/workloads/plans.py plans it, for a duration with progress, and always
finishing the run (Ctrl-C included); a cluster it cannot use (unreachable, TLS, authentication) fails it
before anything starts.
Must not: inject faults (experiments do, issue 5).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from chaos.workloads.plans import plan
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from chaos.workloads.native import REFERENCE, prepare_client
from chaos.runner.spec import RestartSpec
from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import require_reachable
from cluster.access.progress import Progress


@dataclass
class SoloResult:
    run_dir: Path
    summary: dict


def run_solo(conn: ConnectionSettings, workload: str, duration: float, runs_dir: Path, seed: int = 0,
             instances: int = 1, extra: list[str] | None = None, client: str = REFERENCE,
             progress: Progress = print) -> SoloResult:
    tag = new_run_tag()
    the_plan = plan(workload, tag, instances, list(extra or []), client=client)
    prepare_client(client, progress)
    require_reachable(conn)          # bad credentials or trust fail here, in a second, with why (no run left)
    run_dir = new_run_dir(runs_dir, workload, tag)
    progress(f"run {run_dir}")
    with Run(conn, run_dir, tag, seed, workload, progress) as run:
        run.info.params = {"workload": workload, "duration": duration, "instances": instances, "extra": extra,
                           "client": client}
        run.create_topics(the_plan.topics)
        run.use_topics(list(the_plan.tracked))
        if workload == "observer":
            run.use_topics(_topics_of(extra or []))
        for spec in the_plan.specs:
            run.start(spec)
        run.restart_stalled(RestartSpec().delay_s)       # as an experiment does by default
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
