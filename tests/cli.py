"""The real `txnlab` command as a user runs it, for every tier's tests: `txnlab(...)` to completion with its
output captured, `chaos_run(...)` started in the background (a test that signals or kills the runner)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from cluster.access.connection import ConnectionSettings

COMMAND = [sys.executable, "-m", "txnlab.cli"]


def txnlab(*args: str, conn: ConnectionSettings | None = None, env: dict[str, str] | None = None,
           timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    """The real `txnlab` command (python -m txnlab.cli) as a user runs it, output captured: with `conn`, that
    connection's settings in TXNLAB_KAFKA_* in place of the environment's (nothing secret on the command line);
    `env` on top of it all."""
    base = dict(os.environ)
    if conn is not None:
        base = {k: v for k, v in base.items() if not k.startswith("TXNLAB_KAFKA_")} | conn.to_env()
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=timeout,
                          env=base | (env or {}), check=check)


def chaos_run(document: dict, runs_dir: Path, *extra: str, **popen: Any) -> subprocess.Popen:
    """`txnlab chaos run` of the experiment `document` (written beside `runs_dir` as <name>.yaml) into `runs_dir`,
    started and not waited for: stdout and stderr together in its `stdout` pipe (text); `popen` on top (e.g. a
    preexec_fn)."""
    path = runs_dir.parent / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    return subprocess.Popen([*COMMAND, "chaos", "run", str(path), "--runs-dir", str(runs_dir), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
