"""What txnlab's local stack runs beside the Kafka nodes, given to cluster/lab/local.py by the layers above it.

Owns: the default alert rules file (dashboards/alerts/txnlab.rules.yml, the one the compose stack loads)
and the command that starts txnlab's exporter (`python -m exporter`), as keyword arguments of
`LocalCluster.load` / `LocalCluster(...)`. Used by the CLI, report/demo.py, chaos experiments (through
the CLI and the demo) and the tests. Must not: start anything.
"""
from __future__ import annotations

import sys
from typing import Any

from cluster.lab.versions import REPO_ROOT

ALERT_RULES = REPO_ROOT / "dashboards" / "alerts" / "txnlab.rules.yml"


def exporter_command() -> tuple[str, ...]:
    """argv that starts txnlab's exporter with this Python (the cluster adds its address options)."""
    return (sys.executable, "-m", "exporter")


def local_stack() -> dict[str, Any]:
    """Keyword arguments of LocalCluster.load / LocalCluster: txnlab's alert rules and exporter."""
    return {"alert_rules": ALERT_RULES, "exporter_command": exporter_command()}
