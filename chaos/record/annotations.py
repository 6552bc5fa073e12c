"""Fault windows of a run, from its history: for shading timelines and for Grafana annotations.

Owns: pairing each nemesis process's `fault` invoke with its `heal` completion into a window
(wall-clock start and end, kind, target), a window left open by a run cut short ending at the last
operation; and posting the windows to Grafana's annotation API tagged `txnlab-fault` (what the Chaos run
dashboard shows). The API token comes from TXNLAB_GRAFANA_TOKEN and is never printed.
Must not: change the cluster or the history.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from chaos.record.history import read_history

TAG = "txnlab-fault"


@dataclass(frozen=True)
class FaultWindow:
    process: str
    kind: str
    start: float          # unix seconds
    end: float
    detail: str

    @property
    def label(self) -> str:
        return f"{self.kind} {self.detail}".strip()


def fault_windows(run_dir: Path) -> list[FaultWindow]:
    return windows_of(read_history(Path(run_dir)).ops)


def windows_of(ops: list[dict]) -> list[FaultWindow]:
    """Each fault's window (wall clock) from its invoke to its heal's end; one never healed lasts to the history's
    last operation."""
    last = max((op["wall"] for op in ops), default=0.0)
    opened: dict[str, dict] = {}
    windows = []
    for op in ops:
        if not op["process"].startswith("nemesis-"):
            continue
        if op["f"] == "fault" and op["type"] == "invoke":
            opened[op["process"]] = op
        elif op["f"] == "heal" and op["type"] in ("ok", "fail") and op["process"] in opened:
            windows.append(_window(opened.pop(op["process"]), op["wall"]))
    windows += [_window(op, last) for op in opened.values()]
    return sorted(windows, key=lambda w: w.start)


def _window(invoke: dict, end: float) -> FaultWindow:
    params = invoke["value"].get("params") or {}
    detail = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return FaultWindow(invoke["process"], invoke["value"].get("kind", "fault"), invoke["wall"], end, detail)


def post_to_grafana(windows: list[FaultWindow], grafana_url: str, run_name: str, timeout: float = 10.0) -> int:
    """One region annotation per window; returns how many Grafana accepted."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get("TXNLAB_GRAFANA_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    posted = 0
    for w in windows:
        body: dict[str, Any] = {"time": int(w.start * 1000), "timeEnd": int(w.end * 1000), "tags": [TAG, w.kind, run_name],
                "text": f"{run_name}: {w.label}"}
        response = requests.post(f"{grafana_url.rstrip('/')}/api/annotations", json=body, headers=headers,
                                 timeout=timeout)
        response.raise_for_status()
        posted += 1
    return posted
