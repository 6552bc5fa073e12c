"""Every panel query of a dashboard (its grafana/*.json), as PromQL ready to run.

Owns: walking a dashboard's panels (a collapsed row's panels too) and their visible targets, with the
template variables ($name, ${name}) replaced by the values given. Tests hand these to promtool and to a
live Prometheus (every panel must return data).
Must not: import anything of txnlab's outside dashboards/, or draw panels: what a dashboard looks like is
what Grafana shows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    title: str        # the panel's
    expr: str         # variables substituted; one left unknown stays as written
    instant: bool     # Grafana runs it at the end of the window (tables), else over the range


def _panels(dashboard: dict) -> Iterator[dict]:
    for panel in dashboard.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []


def substitute(text: str, variables: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def panel_queries(dashboard: dict, variables: dict[str, str]) -> list[PanelQuery]:
    """The PromQL of every visible target of every panel, in the dashboard's order."""
    return [PanelQuery(panel.get("title") or "", substitute(target["expr"], variables), bool(target.get("instant")))
            for panel in _panels(dashboard) for target in panel.get("targets") or []
            if (target.get("expr") or "").strip() and not target.get("hide")]
