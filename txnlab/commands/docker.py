"""`txnlab docker up|down|status`: the compose stack on a Docker engine."""
from __future__ import annotations

import argparse


from txnlab.commands.common import err


def _docker_stack(args: argparse.Namespace):
    from cluster.lab import compose
    from cluster.lab.docker import Stack
    layout = compose.compose_layout(getattr(args, "security", "plaintext"), getattr(args, "base_port", 19000),
                                    getattr(args, "kafka_version", None) or "")
    return Stack.named(args.project, layout)


def cmd_docker_up(args: argparse.Namespace) -> int:
    from cluster.lab.docker import bring_up
    done = bring_up(_docker_stack(args), progress=lambda line: err.print(f"[docker] {line}"), build=not args.no_build)
    print(done["bootstrap"])
    return 0


def cmd_docker_down(args: argparse.Namespace) -> int:
    from cluster.lab.docker import Stack, bring_down
    done = bring_down(Stack.named(args.project), progress=lambda line: err.print(f"[docker] {line}"), keep_engine=args.keep_engine)
    return 1 if any(done["left"].values()) else 0


def cmd_docker_status(args: argparse.Namespace) -> int:
    from cluster.lab.docker import Engine, Stack, engine_answers
    if not engine_answers():
        print("no Docker engine answers")
        return 1
    rows = Stack.named(args.project).status()
    engine = "started by txnlab" if Engine().started_here else "not txnlab's"
    print(f"engine: answering ({engine})")
    for row in rows:
        print(f"  {row['service'] or '-':16} {row['status']:10} {row['image']}  {row['name']}")
    return 0 if rows and all(r["status"] == "running" for r in rows) else 1


def add_commands(sub) -> None:
    docker = sub.add_parser("docker", help="the compose stack on a Docker engine: the engine started when none "
                            "answers, txnlab's images built from Debian, the stack up on loopback ports (docs/docker.md)")
    dsub = docker.add_subparsers(dest="action", required=True)
    up = dsub.add_parser("up", help="start the engine if needed, build the images, bring the stack up and wait "
                         "until it serves; prints the bootstrap address")
    up.add_argument("--security", choices=["plaintext", "sasl_ssl"], default="plaintext",
                    help="sasl_ssl: the secured profile (SCRAM users, ACLs, the exporter on HTTPS; secrets made once "
                    "into the stack's folder)")
    up.add_argument("--base-port", type=int, default=19000, help="the stack's ports, as the local cluster's "
                    "(client proxies +1..+3, Toxiproxy +700, Prometheus +790, the exporter +800)")
    up.add_argument("--kafka-version", default=None, help="the brokers' Kafka release, one of versions.env's "
                    "KAFKA_VERSIONS "
                    "(default the pin)")
    up.add_argument("--no-build", action="store_true", help="use the images as they are")
    up.set_defaults(func=cmd_docker_up)
    down = dsub.add_parser("down", help="remove the stack's containers and volumes; stop the engine if txnlab "
                           "started it and it runs nothing else (exit 1 when something of the project is left)")
    down.add_argument("--keep-engine", action="store_true")
    down.set_defaults(func=cmd_docker_down)
    status = dsub.add_parser("status", help="the stack's containers (exit 1 when not all running)")
    status.set_defaults(func=cmd_docker_status)
    for p in (up, down, status):
        p.add_argument("--project", default=None, help="the compose project, default txnlab (its files in "
                       "<TXNLAB_HOME>/docker/<project>/)")
