"""The one cluster heal: independent steps, each retried, their failures collected.

Owns: running named steps so that one that fails skips none of the others (each retried a few times,
every failure kept with its step's name), and the heal of a cluster made of such steps: toxics removed,
every node resumed and started, each waited for until it serves and is registered (one deadline for
all), preferred leaders elected; raising HealError, which names every step that failed, at the end.
Must not: know how a node is signalled or where Toxiproxy runs (the caller passes the actions in:
cluster/lab/local.py's LocalCluster, chaos/nemesis/backends.py's DockerBackend).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from cluster.access.errors import TxnlabError
from cluster.access.waiting import Deadline

ATTEMPTS = 3
RETRY_PAUSE_S = 1.0

Step = tuple[str, Callable[[], object]]


class HealError(TxnlabError, RuntimeError):
    """Some heal steps failed (the others ran); failures maps each step's name to its error."""

    def __init__(self, failures: dict[str, str]):
        self.failures = dict(failures)
        super().__init__("heal incomplete: " + "; ".join(f"{name}: {error}" for name, error in self.failures.items()))


def run_steps(steps: Iterable[Step], attempts: int = ATTEMPTS, pause: float = RETRY_PAUSE_S) -> dict[str, str]:
    """Run every step, each up to `attempts` times until it does not raise; {step name: last error} of
    those that never succeeded. A failing step never skips the ones after it."""
    failures: dict[str, str] = {}
    for name, action in steps:
        for attempt in range(attempts):
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - every failure is reported by name, the rest still run
                failures[name] = f"{type(exc).__name__}: {exc}"
                if attempt + 1 < attempts:
                    time.sleep(pause)
            else:
                failures.pop(name, None)
                break
    return failures


def heal_cluster(node_ids: Sequence[int], *, reset_toxics: Callable[[], object], resume: Callable[[int], object],
                 start: Callable[[int], object], wait_serving: Callable[[int, float], object],
                 elect: Callable[[], object], timeout: float) -> None:
    """No toxics, every node resumed and running, each serving and registered, leadership back on the
    preferred replicas (faults leave it piled on the survivors). HealError when any step failed."""
    steps: list[Step] = [("remove toxics", reset_toxics)]
    for node in node_ids:
        steps += [(f"resume node {node}", partial(resume, node)), (f"start node {node}", partial(start, node))]
    failures = run_steps(steps)
    deadline = Deadline(timeout)

    def serving(node: int) -> None:
        wait_serving(node, max(1.0, deadline.left()))
    failures.update(run_steps([(f"node {node} serving and registered", partial(serving, node)) for node in node_ids],
                              attempts=1))
    failures.update(run_steps([("elect preferred leaders", elect)]))
    if failures:
        raise HealError(failures)
