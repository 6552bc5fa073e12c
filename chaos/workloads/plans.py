"""The default plan of each workload: its topics, its processes, and what feeds it (the processor gets
a transactional producer writing its input; a transactional producer gets both observers).

Owns: `plan()`, used by `txnlab chaos workload` (chaos/runner/solo.py) and by experiment specs (chaos/runner/spec.py)
for the processes and topics of each workload they name. Pure data, no side effects.
Must not: start processes or create topics (chaos/workloads/run.py does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from chaos.workloads import WORKLOADS, streams
from chaos.workloads.native import CLIENT_OPTION, REFERENCE, ClientError, check_client
from cluster.access.errors import TxnlabError


STREAMS_KEYS = 16             # the Streams feeder's keys (txn-producer --keys)


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload process: which workload, its name in the history, its options."""
    workload: str
    process: str
    args: tuple[str, ...] = ()


class PlanError(TxnlabError, ValueError):
    """A workload that cannot be planned as asked (unknown name, missing options)."""


@dataclass(frozen=True)
class Plan:
    topics: dict[str, int]            # created before the processes start
    specs: list[WorkloadSpec]
    tracked: tuple[str, ...] = ()     # topics the processes create themselves (Kafka Streams' changelog),
                                      # recorded with the run's topics (end offsets, group offsets)
    outputs: tuple[str, ...] = ()     # of `topics`, those written from the others (a consume-transform-produce)
    ready: tuple[str, ...] = ()       # processes the method waits for (each records an ok `ready`, READY_F) before
                                      # its clock starts: a Flink job's first checkpoint, not a guess in seconds

    def leader_shifts(self, placement: str) -> dict[str, int]:
        """Where `topics`' partitions are led (cluster/access/smoke.py ensure_topic's leader_shift): "kafka" leaves it
        to Kafka's default assignment; "apart" leads partition p of every input by one broker and partition p
        of every output by another, so a fault on one broker's links holds a task's writes while its reads
        still flow (and the other way round)."""
        if placement == "kafka":
            return {}
        if placement != "apart" or not self.outputs:
            raise PlanError(f"placement {placement!r}: one of kafka, apart (apart for a workload with outputs: "
                            "processor, java-copier, streams, flink)")
        return {topic: int(topic in self.outputs) for topic in self.topics}


def plan(workload: str, tag: str, instances: int, extra: list[str], partitions: int = 6,
         client: str = REFERENCE) -> Plan:
    """Topics and processes of one workload run alone; `extra` options go to the workload's processes, and
    `client` is the Kafka client they run on (chaos/workloads/native.py: a transactional workload's own
    processes; its feeder and observers stay on the reference client, so that what they see is judged apart)."""
    if workload not in WORKLOADS:
        raise PlanError(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
    try:
        check_client(workload, client)
    except ClientError as exc:
        raise PlanError(str(exc)) from None
    if client != REFERENCE:
        extra = [*extra, CLIENT_OPTION, client]
    planners: dict[str, Callable[[], Plan]] = {
        "txn-producer": lambda: _txn_producer(tag, instances, extra, partitions),
        "processor": lambda: _processor(tag, instances, extra, partitions),
        "java-copier": lambda: Plan({f"{tag}-jin": partitions, f"{tag}-jout": partitions},
                                    [WorkloadSpec("java-copier", "java-copier", (
                                        "--input", f"{tag}-jin", "--output", f"{tag}-jout", *extra))],
                                    outputs=(f"{tag}-jout",)),
        "storm": lambda: Plan({f"{tag}-storm": 3}, [WorkloadSpec("storm", f"storm-{i}", ("--topic", f"{tag}-storm",
                                                                                          *extra))
                                                   for i in range(instances)]),
        "observer": lambda: _observer(extra),
        "streams": lambda: _streams(tag, instances, extra, partitions),
        "flink": lambda: _flink(tag, instances, extra, partitions),
    }
    return planners[workload]()


def _txn_producer(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    topics = [f"{tag}-a", f"{tag}-b"]
    specs = [WorkloadSpec("txn-producer", f"txp-{i}", ("--topics", *topics, *extra)) for i in range(instances)]
    return Plan({t: partitions for t in topics}, specs + observers(topics))


def _processor(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    inputs, output = [f"{tag}-in-a", f"{tag}-in-b"], f"{tag}-out"
    feeder = WorkloadSpec("txn-producer", "feeder", ("--topics", *inputs, "--rate", "10"))
    specs = [WorkloadSpec("processor", f"eos-{i}", ("--inputs", *inputs, "--output", output, *extra))
             for i in range(instances)]
    return Plan({**{t: partitions for t in inputs}, output: partitions}, [feeder, *specs], outputs=(output,))


def _streams(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    """A keyed feeder (both input topics, one partition number per key) and the Streams instances."""
    inputs, output, counts = [f"{tag}-sin-a", f"{tag}-sin-b"], f"{tag}-sout", f"{tag}-scounts"
    feeder = WorkloadSpec("txn-producer", "keyed-feeder", ("--topics", *inputs, "--rate", "10", "--keys",
                                                         str(STREAMS_KEYS)))      # beside a processor's "feeder"
    specs = [WorkloadSpec("streams", f"streams-{i}", ("--inputs", *inputs, "--output", output, "--counts", counts,
                                                      *extra)) for i in range(instances)]
    app = option_value(extra, "--application-id") or streams.application_id(tag, None)
    return Plan({**{t: partitions for t in inputs}, output: partitions, counts: partitions}, [feeder, *specs],
                tracked=(streams.changelog(app),), outputs=(output, counts))


def _flink(tag: str, instances: int, extra: list[str], partitions: int) -> Plan:
    """A keyed feeder and a Flink session cluster: its JobManager, `instances` TaskManagers and the job's
    client (chaos/workloads/flink.py); `extra` options go to every role (the cluster's settings are the
    JobManager's, the job's the client's)."""
    inputs, output, counts = [f"{tag}-fin-a", f"{tag}-fin-b"], f"{tag}-fout", f"{tag}-fcounts"
    keys = option_value(extra, "--keys") or str(STREAMS_KEYS)
    feeder = WorkloadSpec("txn-producer", "flink-feeder", ("--topics", *inputs, "--rate", "10", "--keys", keys))
    roles = [("flink-jm", ("--role", "jobmanager")),
             *((f"flink-tm-{i}", ("--role", "taskmanager")) for i in range(instances)),
             ("flink-job", ("--role", "job", "--inputs", *inputs, "--output", output, "--counts", counts))]
    specs = [WorkloadSpec("flink", name, (*role, *extra)) for name, role in roles]
    return Plan({**{t: partitions for t in inputs}, output: partitions, counts: partitions}, [feeder, *specs],
                outputs=(output, counts), ready=("flink-job",))


def _observer(extra: list[str]) -> Plan:
    if "--topics" not in extra:
        raise PlanError("observer alone needs the topics to watch: txnlab chaos workload observer --topics T ...")
    return Plan({}, [WorkloadSpec("observer", "obs-rc", (*extra, "--isolation", "read_committed")),
                     WorkloadSpec("observer", "obs-ru", (*extra, "--isolation", "read_uncommitted"))])


def option_value(args: tuple[str, ...] | list[str], name: str) -> str | None:
    """The value of the last `name VALUE` pair in args (argparse's last-one-wins), or None."""
    values = [args[i + 1] for i in range(len(args) - 1) if args[i] == name]
    return values[-1] if values else None


# the consumer group of each workload that has one: its option, else its default (the workload's module says)
GROUP_OPTIONS = {"processor": ("--group", "{tag}.eos"), "java-copier": ("--group", "{tag}.{process}"),
                 "streams": ("--application-id", "{tag}.streams"), "flink": ("--group", "{tag}.flink")}


def group_of(process: WorkloadSpec) -> str | None:
    """The consumer group of a workload process ("{tag}" not substituted), None for a workload without one."""
    if process.workload not in GROUP_OPTIONS:
        return None
    option, default = GROUP_OPTIONS[process.workload]
    return option_value(process.args, option) or default.replace("{process}", process.process)


def without_option(args: tuple[str, ...] | list[str], name: str) -> tuple[str, ...]:
    out, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == name and i + 1 < len(args):
            skip = True
        else:
            out.append(arg)
    return tuple(out)


def observers(topics: list[str]) -> list[WorkloadSpec]:
    """A read_committed and a read_uncommitted observer of the topics."""
    return [WorkloadSpec("observer", f"obs-{short}", ("--topics", *topics, "--isolation", level))
            for short, level in (("rc", "read_committed"), ("ru", "read_uncommitted"))]
