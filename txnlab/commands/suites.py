"""The suites and their reports: `txnlab demo`, `txnlab campaign`, `txnlab bugs list|run|judge`, `txnlab report`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from cluster.access.errors import TxnlabError
from txnlab.commands.common import err


def _print_summary(report: dict) -> None:
    from rich.table import Table
    table = Table(title=f"txnlab report: {report['suite']}  overall {report['valid']}")
    rows = report["summary"]
    for column in (rows[0] if rows else {"experiment": ""}):
        table.add_column(column)
    colours = {"True": "green", "False": "red"}
    for row in rows:
        table.add_row(*[f"[{colours.get(str(v), 'yellow')}]{v}[/]" if k in ("verdict", "recovered") else str(v)
                        for k, v in row.items()])
    Console(width=None if sys.stdout.isatty() else 140).print(table)
    for error in report["errors"]:
        err.print(f"[red]error[/]: {error}")


FLINK_DEMO = "flink-taskmanager-kill"        # `txnlab demo --with-flink` (make demo FLINK=1)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: the demo suite on local clusters, each run verified, then the report."""
    from report.demo import Demo, DemoOptions, exit_code
    experiments = tuple(args.experiments or DemoOptions.experiments)
    if getattr(args, "with_flink", False) and FLINK_DEMO not in experiments:
        experiments += (FLINK_DEMO,)
    options = DemoOptions(experiments=experiments, clients=tuple(args.clients),
                          transaction_versions=tuple(args.transaction_versions), runs_dir=args.runs_dir,
                          keep=args.keep, seed=args.seed, verify=not args.no_verify,
                          group_protocol=args.group_protocol)
    try:
        options.check()
    except TxnlabError as exc:
        err.print(f"[red]txnlab demo[/]: {exc}")
        return 2
    report = Demo(options, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    _print_summary(report)
    print(Path(report["directory"]) / "report.html")
    return exit_code(report)


def cmd_campaign(args: argparse.Namespace) -> int:
    """The whole matrix (report/campaign.py): 0 every cell holds (valid, named or not applicable), 1 not so, 2 a
    cell could not run or the options are wrong."""
    from report import campaign as c
    options = c.CampaignOptions(args.dir, tuple(args.parts), tuple(args.clients), tuple(args.experiments),
                                tuple(args.versions), tuple(args.bugs), tuple(args.tests), args.tries, args.seed,
                                args.again, args.regrade, args.minutes, tuple(args.transaction_versions),
                                tuple(args.group_protocols), args.experiment_tries)
    try:
        resolved = options.resolved()
        state = c.load_state(resolved.directory) if (args.list or args.markdown) else None
    except TxnlabError as exc:
        err.print(f"[red]txnlab campaign[/]: {exc}")
        return 2
    if args.markdown:
        assert state is not None
        print(c.markdown(state), end="")
        return 0
    if args.list:
        assert state is not None
        for cell in c.plan(resolved):
            done = state["cells"].get(cell["id"], {})
            print(f"{cell['id']:60} {done.get('grade') or ('n/a' if cell.get('not_applicable') else 'pending'):8} "
                  f"{done.get('detail', cell.get('not_applicable', ''))}")
        return 0
    state = c.Campaign(resolved, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    print(c.markdown(state), end="")
    print(resolved.directory.resolve() / c.PAGE_FILE)
    grades = state["summary"]["by_grade"]
    return 0 if state["summary"]["holds"] else 2 if grades.get("error") or grades.get("pending") else 1


def cmd_bugs_list(args: argparse.Namespace) -> int:
    from rich.table import Table
    from chaos.catalog.bugs import bug_files, load_bug
    table = Table(title="catalogued bugs of Kafka and its clients (txnlab bugs run ID [--tries N] [--full])")
    from report.bugs import expectation
    for column in ("id", "title", "affected", "fixed", "shows as"):
        table.add_column(column)
    for bug_id in bug_files():
        bug = load_bug(bug_id)
        table.add_row(bug.id, bug.title, bug.affected.label, bug.fixed.label, expectation(bug))
        for name in bug.variants:
            variant = load_bug(bug_id, name)
            table.add_row(f"  --variant {name}", bug.variants[name].description, variant.affected.label,
                          variant.fixed.label, "")
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    return 0


def cmd_bugs_run(args: argparse.Namespace) -> int:
    """A catalogued bug on its affected and its fixed side: 0 reproduced on every affected try and absent on
    every fixed one, 1 not so, 2 a try or a verification did not run."""
    from report.bugs import TRIES_FILE, BugOptions, BugRun, exit_code
    options = BugOptions(tries=args.tries, short=not args.full, seed=args.seed, runs_dir=args.runs_dir,
                         base_port=args.base_port, variant=args.variant, sides=tuple(args.sides))
    outcome = BugRun(args.bug, options, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    _print_summary(outcome["report"])
    print(Path(outcome["report"]["directory"]) / TRIES_FILE)
    print(Path(outcome["report"]["directory"]) / "report.html")
    return exit_code(outcome)


def cmd_bugs_judge(args: argparse.Namespace) -> int:
    """A stored bug suite judged again by the catalog as it is now; the exit code as `bugs run`'s."""
    from report.bugs import TRIES_FILE, exit_code, rejudge
    outcome = rejudge(args.suite, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    _print_summary(outcome["report"])
    print(Path(args.suite) / TRIES_FILE)
    print(Path(args.suite) / "report.html")
    return exit_code(outcome)


def cmd_bugs_export(args: argparse.Namespace) -> int:
    """A catalogued bug's bundle for its maintainers, from a judged suite (no cluster needed)."""
    from report.bug_export import export
    bundle = export(args.bug, args.suite, args.out, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(bundle / "README.md")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild report.html and report.json from a stored suite or run (no cluster needed)."""
    from report import build
    report = build.write(args.run_dir)
    if args.json:
        print((Path(args.run_dir) / "report.json").read_text(), end="")
    else:
        _print_summary(report)
        print(Path(args.run_dir) / "report.html")
    return 0


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _versions(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"transaction versions are numbers like 1,2, not {text!r}") from None


def add_commands(sub) -> None:
    from chaos.workloads import GROUP_PROTOCOLS
    demo = sub.add_parser("demo", help="the main job: a chaos suite on local clusters (coordinator kill, zombie, "
                          "hanging-transaction drill, producer-state storm), verified with Spark, then a report")
    demo.add_argument("--transaction-versions", type=_versions, default=[2], metavar="N[,N]",
                      help="run the suite under these transaction.version levels (1,2 puts them side by side)")
    demo.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default="classic",
                      help="the groups on this protocol: consumer, the processors' (KIP-848; not KafkaJS); streams, "
                      "Kafka Streams' (KIP-1071)")
    demo.add_argument("--experiments", type=lambda t: [e for e in t.split(",") if e], default=None,
                      metavar="NAME[,NAME]", help="built-in experiments to run (default: the demo suite)")
    demo.add_argument("--with-flink", action="store_true",
                      help=f"add {FLINK_DEMO} (Flink's exactly-once pipeline on a real Flink cluster; its "
                           "checkpoints and restarts on the timeline)")
    demo.add_argument("--clients", type=_names, default=["confluent"], metavar="NAME[,NAME]",
                      help="run each experiment once per Kafka client (confluent, franz-go, kafkajs, java: their "
                           "transactional producers and processors; docs/clients.md)")
    demo.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the suite directory goes")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--keep", action="store_true", help="leave the (last level's) clusters running afterwards")
    demo.add_argument("--no-verify", action="store_true", help="skip the Spark verification (verdicts unknown)")
    demo.set_defaults(func=cmd_demo)
    bugs = sub.add_parser("bugs", help="real bugs of Kafka and its clients reproduced by faults: each on the release, "
                          "settings or client it affects beside those that fix it, verified, in one report")
    bsub = bugs.add_subparsers(dest="action", required=True)
    bsub.add_parser("list", help="the catalog (chaos/bugs/)").set_defaults(func=cmd_bugs_list)
    brun = bsub.add_parser("run", help="run a bug's experiment on its affected and its fixed side")
    brun.add_argument("bug", help="a catalogued bug id (e.g. KAFKA-14402, librdkafka-5456) or a bug file")
    brun.add_argument("--tries", type=int, default=1, help="runs per side (each verified)")
    brun.add_argument("--full", action="store_true", help="the experiment's full mode (default: short)")
    brun.add_argument("--sides", type=_names, default=["affected", "fixed"], metavar="SIDE[,SIDE]",
                      help="the sides to run (default both; one alone runs its tries again, the other left unrun)")
    brun.add_argument("--variant", help="another pair of sides the bug's file names (`txnlab bugs list`; default: "
                                        "its natural sides, the releases before and after its fix)")
    brun.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the suite directory goes")
    brun.add_argument("--seed", type=int, default=1)
    brun.add_argument("--base-port", type=int, default=25000, help="the sides' clusters' first port (one at a time)")
    brun.set_defaults(func=cmd_bugs_run)
    bjudge = bsub.add_parser("judge", help="judge a stored bug suite again by the catalog as it is now (its runs' "
                                           "verify reports and histories; nothing runs against a cluster)")
    bjudge.add_argument("suite", type=Path, help="the suite directory (runs/<stamp>-<bug>)")
    bjudge.set_defaults(func=cmd_bugs_judge)
    bexport = bsub.add_parser("export", help="a bug's self-contained bundle for its maintainers: a README in their "
                                             "terms with the numbers of the runs bundled, an affected and a clean try "
                                             "(history, archived views, verification, page and timeline), the "
                                             "standalone reproduction, and a tarball of it all")
    bexport.add_argument("bug", help="a catalogued bug id with an `upstream` section")
    bexport.add_argument("--suite", type=Path, required=True, help="a judged suite of that bug (`txnlab bugs run`, "
                         "the campaign's runs/campaign/bugs/<stamp>-<bug>, or a corpus suite unpacked)")
    bexport.add_argument("--out", type=Path, default=Path("runs/bundles"), help="where <bug>/ and <bug>.tar.gz go")
    bexport.set_defaults(func=cmd_bugs_export)
    camp = sub.add_parser("campaign", help="the whole matrix beside the gate: every built-in experiment on every "
                          "client, the core tests on every Kafka release, every catalogued bug's sides, the tests that "
                          "left the gate; resumable (a cell done is not run again), one page (docs/campaign.md)")
    camp.add_argument("--dir", type=Path, default=Path("runs/campaign"), help="the campaign's directory (default "
                      "runs/campaign: run again, it resumes)")
    camp.add_argument("--parts", type=_names, default=[], metavar="PART[,PART]",
                      help="experiments, releases, bugs, tests (default: all)")
    camp.add_argument("--clients", type=_names, default=[], metavar="NAME[,NAME]", help="default: every client")
    camp.add_argument("--experiments", type=_names, default=[], metavar="NAME[,NAME]",
                      help="built-in experiments (default: every one)")
    camp.add_argument("--versions", type=_names, default=[], metavar="V[,V]",
                      help="Kafka releases (default: every one of KAFKA_VERSIONS)")
    camp.add_argument("--transaction-versions", type=_versions, default=[2], metavar="N[,N]",
                      help="the experiments at these transaction.version levels (default 2; a cell at 1 is "
                      "EXPERIMENT/CLIENT@tv1)")
    camp.add_argument("--group-protocols", type=_names, default=["classic"], metavar="P[,P]",
                      help="the experiments with their groups on these protocols: classic, consumer (a processor's, "
                      "KIP-848), streams (Kafka Streams', KIP-1071) (default classic; a cell on consumer is "
                      "EXPERIMENT/CLIENT@consumer)")
    camp.add_argument("--bugs", type=_names, default=[], metavar="ID[,ID]", help="catalogued bugs (default: all)")
    camp.add_argument("--tests", type=_names, default=[], metavar="MODULE[,MODULE]",
                      help="test modules of the tests that left the gate (default: every one, e.g. test_flink)")
    camp.add_argument("--tries", type=int, default=3, help="tries per side of each bug (default 3)")
    camp.add_argument("--experiment-tries", type=int, default=1, metavar="N",
                      help="runs of each experiment cell, each with its own seed (--seed, +1, ...): the cells of try "
                           "K >= 2 end in #K, the grid counts each cell's tries by grade (default 1)")
    camp.add_argument("--seed", type=int, default=1)
    camp.add_argument("--again", action="store_true", help="run the selected cells again, even those done")
    camp.add_argument("--minutes", type=float, default=None, help="start no cell after this many minutes (the "
                      "rest stay pending for the next slice: a nightly window)")
    camp.add_argument("--regrade", action="store_true", help="run nothing: grade the selected bug and experiment "
                      "cells done again from their stored suites by the catalog as it is now")
    camp.add_argument("--list", action="store_true", help="the selected cells and their state; run nothing")
    camp.add_argument("--markdown", action="store_true", help="print the campaign in Markdown (docs/campaign.md); "
                      "run nothing")
    camp.set_defaults(func=cmd_campaign)
    report = sub.add_parser("report", help="rebuild report.html and report.json from a stored suite or run")
    report.add_argument("run_dir", type=Path, help="a suite directory (runs/<id>-demo) or a run directory")
    report.add_argument("--json", action="store_true", help="print report.json")
    report.set_defaults(func=cmd_report)
