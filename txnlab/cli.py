"""`txnlab` command line: one parser assembled from the command groups of txnlab/commands/ (one module each:
cluster, txn, chaos, verify, docker, suites), and the dispatch.

What lives in the groups besides parsing: turning options into the arguments of one call (e.g. `--hanging-drill`
into broker overrides, `--broker-config k=v` pairs), printing results (tables, JSON, summaries) and the exit code.
What lives here: the extras check (before dispatching it checks that the command's optional extras, pyproject.toml,
are installed and names the missing ones in one line; the exporter and `txnlab txn` need none), and the error
edge: a `TxnlabError` (cluster/access/errors.py) is printed on one line with exit 2, Ctrl-C exits 130 (SIGTERM
and SIGHUP during `chaos run`: 128 + the signal's number, after the heal), any other exception is a bug and
keeps its traceback.

Must not: talk to Kafka or manage processes itself; every subcommand calls one function of
cluster/, exporter/, chaos/, spark_analysis/ or report/.
"""
from __future__ import annotations

import argparse
import logging
import sys

from cluster.access.errors import TxnlabError
from txnlab.commands import chaos, cluster, docker, suites, txn, verify
from txnlab.commands.chaos import cmd_chaos_workload
from txnlab.commands.common import err

GROUPS = (cluster, txn, chaos, verify, docker, suites)     # the order of `txnlab --help`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txnlab", description="Observe, break and verify transactional Kafka")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_commands(sub)
    return parser


EXTRAS = {  # optional extra of pyproject.toml -> modules that show it installed (with the extras it includes)
    "lab": ("confluent_kafka", "psutil", "requests"),
    "verify": ("pyspark", "confluent_kafka"),
    "report": ("matplotlib", "requests"),
    "docker": ("docker", "psutil", "requests"),
}


COMMAND_EXTRAS = {"cluster": ("lab",), "smoke": ("lab",), "chaos": ("lab",), "verify": ("verify",), "archive": ("verify",),
                  "spark": ("lab", "verify"),
                  "report": ("report",), "demo": ("lab", "verify", "report"), "docker": ("lab", "docker")}


def missing_extras(args: argparse.Namespace) -> list[str]:
    """The extras the command needs and this installation lacks (the exporter and `txn` need none)."""
    import importlib.util
    skipped = {"verify"} if getattr(args, "no_verify", False) else set()   # `txnlab demo --no-verify`
    needed = [e for e in COMMAND_EXTRAS.get(args.command, ()) if e not in skipped]
    return [e for e in needed if not all(importlib.util.find_spec(m) for m in EXTRAS[e])]


def main(argv: list[str] | None = None) -> int:
    from cluster.access.connection import install_log_redaction
    install_log_redaction(logging.lastResort)  # no handler is set up here: Python's last resort prints warnings
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if getattr(args, "func", None) is cmd_chaos_workload:
        args.workload_options = unknown
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if missing := ",".join(missing_extras(args)):
        print(f"error: txnlab {args.command} needs the optional {missing} dependencies: "
              f"pip install 'txnlab[{missing}]'", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:      # Ctrl-C, or SIGTERM/SIGHUP in chaos run (after it healed)
        err.print(f"[yellow]interrupted[/] {exc}".rstrip())
        return 128 + getattr(exc, "signum", 2)
    except TxnlabError as exc:  # the user's to fix: one clear message; anything else keeps its traceback
        err.print(f"[red]error[/]: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
