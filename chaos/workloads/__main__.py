"""`python -m chaos.workloads NAME [options]`: one workload process of a run (the runner starts these)."""
from __future__ import annotations

import argparse
import importlib
import sys

from chaos.workloads import WORKLOADS
from chaos.workloads.base import WorkloadContext, add_common_arguments
from chaos.workloads.native import REFERENCE, exec_client, split_client
from cluster.access.errors import TxnlabError


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in WORKLOADS:
        print(f"usage: python -m chaos.workloads {{{','.join(WORKLOADS)}}} [options]", file=sys.stderr)
        return 2
    try:
        client, rest = split_client(argv[0], argv[1:])
        if client != REFERENCE:
            exec_client(client, argv[0], rest)       # the client's own program, in this process
    except TxnlabError as exc:
        print(f"python -m chaos.workloads {argv[0]}: error: {exc}", file=sys.stderr)
        return 2
    argv = [argv[0], *rest]
    module = importlib.import_module(WORKLOADS[argv[0]])
    parser = argparse.ArgumentParser(prog=f"python -m chaos.workloads {argv[0]}")
    add_common_arguments(parser)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    if hasattr(module, "check_args"):
        try:
            module.check_args(args)
        except TxnlabError as exc:
            parser.error(str(exc))
    ctx = WorkloadContext.from_args(args)
    try:
        module.run(ctx, args)
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
