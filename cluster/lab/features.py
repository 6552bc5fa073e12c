"""A cluster's finalized feature levels (transaction.version, group.version, ...), read and changed with Kafka's own
FeatureCommand (`kafka-features.sh`): the `set-feature` fault flips transaction.version while transactions run, and
tests read the level a cluster was formatted with.

Its connection's security settings go to the tool as a `--command-config` file (mode 0600, removed afterwards):
never a password on a command line. Must not: change a feature it was not asked to, or guess a level it could not
read (a FeatureError says what the tool answered).
"""
from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from typing import Iterator

from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError
from cluster.lab import java
from cluster.lab.layout import render_properties

FEATURE_TOOL = "org.apache.kafka.tools.FeatureCommand"
TOOL_TIMEOUT_S = 60.0


class FeatureError(TxnlabError, RuntimeError):
    """A feature level that could not be read or set."""


@contextmanager
def _tool_args(conn: ConnectionSettings) -> Iterator[list[str]]:
    """--bootstrap-server, and --command-config with the connection's other client settings when it has any."""
    settings = {k: v for k, v in conn.java_properties().items() if k not in ("bootstrap.servers", "client.id")}
    if settings == {"security.protocol": "PLAINTEXT"}:
        yield ["--bootstrap-server", conn.bootstrap]
        return
    fd, path = tempfile.mkstemp(prefix="txnlab-features-", suffix=".properties")       # 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(render_properties(settings))
        yield ["--bootstrap-server", conn.bootstrap, "--command-config", path]
    finally:
        os.unlink(path)


def _run(conn: ConnectionSettings, args: list[str]) -> str:
    with _tool_args(conn) as base:
        try:
            return java.run_tool(FEATURE_TOOL, [*base, *args], timeout=TOOL_TIMEOUT_S).stdout
        except (RuntimeError, OSError) as exc:
            raise FeatureError(f"kafka-features {' '.join(args)}: {exc}") from None


def finalized_level(conn: ConnectionSettings, feature: str) -> int:
    """The cluster's finalized level of `feature` (0 when the cluster lists it without one)."""
    described = _run(conn, ["describe"])
    found = re.search(rf"Feature: {re.escape(feature)}\s.*?FinalizedVersionLevel: (\d+)", described)
    if found is None:
        raise FeatureError(f"the cluster lists no feature {feature!r}: {described.strip()[:400]}")
    return int(found.group(1))


def set_level(conn: ConnectionSettings, feature: str, level: int, expected: int | None = None) -> int:
    """Upgrade or downgrade `feature` to `level` (nothing when it is there already); the level it had. The level is
    read again right before the change: when `expected` is given and the cluster is at neither `expected` nor `level`,
    someone changed it meanwhile, and a FeatureError refuses to change it (nothing written)."""
    before = finalized_level(conn, feature)
    if before == level:
        return before
    if expected is not None and before != expected:
        raise FeatureError(f"{feature} is at level {before}, not the {expected} this change expects: it was changed "
                           f"meanwhile; not setting it to {level}")
    _run(conn, ["upgrade" if level > before else "downgrade", "--feature", f"{feature}={level}"])
    return before
