"""The fault catalog: every fault kind an experiment may schedule and the parameters it takes.

Owns: the parameter models (validated, unknown keys rejected) and the target syntax. Experiment specs
validate against this; chaos/nemesis/faults.py implements each kind with its heal. Pure data, no side effects.

Targets (resolved when the fault starts, against the live cluster; `{tag}` becomes the run tag):
    node:2                    a node id
    random                    a node chosen by the run's seeded generator
    controller                the active KRaft controller
    coordinator:<txn id>      the transaction coordinator of a transactional.id (e.g. coordinator:{tag}.eos-0)
    coordinator:<prefix>*     the coordinator of the first (sorted) open transaction whose transactional.id
                              starts with prefix, for clients that choose their ids (Kafka Streams:
                              coordinator:{tag}.streams-*)
    group-coordinator:<group> the coordinator of a consumer group (e.g. group-coordinator:{tag}.eos: the broker
                              an exactly-once processor's TxnOffsetCommit goes to); <prefix>*: of the first
                              (sorted) group whose id starts with prefix (group-coordinator:{tag}.*: the run's
                              first group, whichever workload it belongs to)
    leader:<topic>:<part>     the leader of a partition (e.g. leader:{tag}-a:0)
    not-controller            a node that is not the active controller (seeded choice)
    not-coordinator:<txn id>  a node that is not that transactional.id's coordinator (seeded choice): e.g. to
                              slow a producer's partition leaders but not its EndTxn; with <prefix>*, not the
                              coordinator of the group <prefix without its trailing '-'> either when it has
                              one (Kafka Streams: its application.id is its ids' prefix and its group)
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TARGET_RE = re.compile(r"^(node:\d+|random|controller|not-controller|coordinator:.+|not-coordinator:.+|"
                       r"group-coordinator:.+|leader:.+:\d+)$")
TARGET_FORMS = ("node:N, random, controller, not-controller, coordinator:<transactional id>, "
                "not-coordinator:<transactional id>, group-coordinator:<group> or leader:<topic>:<partition>")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetParams(Params):
    target: str = "random"

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        if not TARGET_RE.match(value):
            raise ValueError(f"a target is {TARGET_FORMS}")
        return value


class KillBrokerParams(TargetParams):
    """SIGKILL the node; heal: start it again."""


class StopBrokerParams(TargetParams):
    """Clean stop (SIGTERM, controlled shutdown); heal: start it again."""


class PauseBrokerParams(TargetParams):
    """SIGSTOP the node (a long GC pause); heal: SIGCONT."""


class RollingRestartParams(Params):
    """Restart every node in turn (clean, or SIGKILL with clean: false), waiting for it to register."""
    clean: bool = True
    pause_between_s: float = Field(5.0, ge=0, le=600)


class PauseWorkloadParams(Params):
    """SIGSTOP a workload process (e.g. past its transaction timeout); heal: SIGCONT. It resumes as a
    zombie if its transaction was aborted meanwhile."""
    process: str


class KillWorkloadParams(Params):
    """SIGKILL a workload process with every process it started (a Kafka Streams instance's JVM); heal:
    start it again with the same options (a restarted instance, its state restored from the changelog)."""
    process: str


class ZombieProducerParams(Params):
    """Pause `process`, start a second process with its transactional.id (fencing it), resume the first
    at heal: it must be fenced (its commit fails) and exit. With `await_expiry` the heal first stops the
    successor (cleanly) and waits until the coordinator has forgotten the transactional id (DescribeTransactions
    answers TRANSACTIONAL_ID_NOT_FOUND; needs a short transactional.id.expiration.ms in the cluster's broker_config),
    at most `expiry_timeout_s`, then resumes the first: KAFKA-18019's zombie returning after expiry."""
    process: str
    await_expiry: bool = False
    expiry_timeout_s: float = Field(60.0, gt=0, le=600)


class NetworkParams(TargetParams):
    """A Toxiproxy toxic on the node's links; heal: remove it."""
    scope: Literal["client", "inter", "all"] = "all"
    toxic: Literal["latency", "blackhole", "reset", "bandwidth"] = "latency"
    latency_ms: int = Field(200, ge=0, le=60000)
    jitter_ms: int = Field(0, ge=0, le=60000)
    rate_kb: int = Field(64, ge=1, description="bandwidth toxic: KB/s")
    stream: Literal["both", "upstream", "downstream"] = Field(
        "both", description="which direction: upstream = what clients (or the peer broker) send to the node")
    toxicity: float = Field(1.0, gt=0, le=1, description=(
        "the share of connections the toxic applies to (Toxiproxy draws once per connection and direction when "
        "the connection opens or the toxic is added): below 1 a client's retry on a new connection may take a "
        "fast path while its first attempt is still held, as with a flow-hashed route through one bad link"))


MARKER_SENDERS = "broker-*-txn-marker-sender"      # the client id a transaction coordinator sends its markers with


class HoldRequestsParams(TargetParams):
    """Hold requests of the named types from the named clients on the wire (a Kafka-aware relay,
    chaos/nemesis/request_hold.py); heal: release what is held, the relay out of the path. `link: client` (the
    default): in front of the node's client listener; starting and healing close its client connections (their
    clients reconnect). `link: markers`: on every link from the node to the other nodes' inter-broker listeners,
    where the node's transaction coordinator sends WriteTxnMarkers to the partitions' leaders (its own partitions'
    markers are written locally, never held); starting and healing close those links (the brokers reconnect)."""
    link: Literal["client", "markers"] = "client"
    apis: list[Literal["Produce", "FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn",
                       "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit"]] = Field(["EndTxn"], min_length=1)
    clients: list[str] = Field(min_length=1, description="client.id patterns (fnmatch, {tag} substituted), "
                                                          "e.g. '{tag}.streams-*-producer', or "
                                                          f"'{MARKER_SENDERS}' for the markers")
    hold_ms: int = Field(6000, ge=1, le=60000)
    every_ms: int = Field(10000, ge=0, le=600000, description="at most one hold per this long, across connections: "
                                                               "the client's retry of a held request goes through")
    min_epoch: int | None = Field(None, ge=0, le=32767, description=(
        "hold only EndTxn requests whose producer epoch is at least this (apis: [EndTxn]): the transactions at the "
        "edge of epoch exhaustion (32766, 32767), the earlier ones go through"))

    @model_validator(mode="after")
    def _apis_of_the_link(self) -> "HoldRequestsParams":
        if self.min_epoch is not None and self.apis != ["EndTxn"]:
            raise ValueError("min_epoch reads the producer epoch of EndTxn requests: apis: [EndTxn]")
        markers = set(self.apis) == {"WriteTxnMarkers"}
        if self.link == "markers" and not markers:
            raise ValueError("link markers holds WriteTxnMarkers only (apis: [WriteTxnMarkers]): the other requests "
                             "between brokers are replication's")
        if self.link == "client" and "WriteTxnMarkers" in self.apis:
            raise ValueError("WriteTxnMarkers travels between brokers, never on a client link: link: markers")
        return self


class IsolateBrokerParams(TargetParams):
    """Cut the node off (client links, inter-broker links, or all); heal: remove the toxics."""
    scope: Literal["client", "inter", "all"] = "all"


class HangingTransactionParams(Params):
    """Inject a real hanging transaction (needs a drill cluster: verification off); heal: abort it."""
    topic: str
    partition: int = Field(0, ge=0)


class StormParams(Params):
    """Start a producer-state storm (short-lived idempotent producers) for the fault's duration."""
    topic: str
    rate: float = Field(20.0, gt=0, le=1000)


class SetFeatureParams(Params):
    """Change a finalized feature level of the whole cluster with Kafka's feature tool (transaction.version 2 -> 1
    while transactions run: the coordinators' and the clients' next transactions meet the other protocol); heal: the
    level it had before, set back."""
    feature: Literal["transaction.version"] = "transaction.version"
    level: int = Field(ge=0, le=2)


class ClimbEpochParams(Params):
    """Drive a transactional id's producer epoch up to `to_epoch` with InitProducerId, one at a time (as a
    crash-looping instance of its application would; chaos/nemesis/epoch_climb.py), `process` (the id's own producer,
    optional) paused meanwhile; its next request after the climb is fenced and it initialises again, one epoch above:
    the edge of epoch exhaustion (32766) without 32,767 transactions. The start returns once the epoch is reached (at
    most `limit_s`); heal: the process resumed if the climb failed half-way. The epochs cannot be given back."""
    txn_id: str = Field(min_length=1, description="the transactional id, {tag} substituted (e.g. '{tag}.txp-0')")
    to_epoch: int = Field(32765, ge=1, le=32765)
    process: str | None = None
    limit_s: float = Field(300.0, gt=0, le=1800)


class MigrateGroupProtocolParams(Params):
    """Move the processor processes' group to the other group protocol by a rolling restart, one process at a time
    (each stopped cleanly: it ends its transaction and leaves the group; started again with `--group-protocol`
    `to`), `pause_between_s` apart: KIP-848's online migration of a live group, mixed between the restarts; `to`
    default: the other protocol than the first process's. The start returns when every process was restarted and
    the group's type was read (at most `settle_s` after the last). heal: the same roll back to each process's
    protocol before the fault (`back`: true), or nothing."""
    processes: list[str] = Field(min_length=1)
    to: Literal["classic", "consumer"] | None = None
    pause_between_s: float = Field(10.0, ge=0, le=600)
    settle_s: float = Field(30.0, ge=0, le=600)
    back: bool = True


class RecreateTopicParams(Params):
    """Delete an input topic and create it again under its name (a new topic id, offsets from 0) while the processor
    group consumes it (chaos/nemesis/recreate_topic.py): `writer` paused between two transactions meanwhile, the
    group's offsets awaited at the topic's end (at most catch_up_s), the incarnation archived for the verification,
    the topic deleted, created again after gap_s, the writer resumed (and `hold`'s processes hold_s later). heal: the
    writer and the held processes resumed, the topic there."""
    topic: str = Field(min_length=1, description="{tag} substituted, e.g. '{tag}-in-b'")
    writer: str = "feeder"
    group: str = "{tag}.eos"
    catch_up_s: float = Field(30.0, ge=0, le=600)
    gap_s: float = Field(0.0, ge=0, le=600)
    hold: list[str] = Field([], description="processes (the group's consumers) paused from just before the deletion "
                                           "until hold_s after the writer resumed: they meet the new topic only once "
                                           "it holds records, as consumers down during an operator's reset do")
    hold_s: float = Field(3.0, ge=0, le=60)


FAULT_KINDS: dict[str, type[Params]] = {
    "kill-broker": KillBrokerParams,
    "stop-broker": StopBrokerParams,
    "pause-broker": PauseBrokerParams,
    "rolling-restart": RollingRestartParams,
    "pause-workload": PauseWorkloadParams,
    "kill-workload": KillWorkloadParams,
    "zombie-producer": ZombieProducerParams,
    "network": NetworkParams,
    "isolate-broker": IsolateBrokerParams,
    "hold-requests": HoldRequestsParams,
    "hanging-transaction": HangingTransactionParams,
    "storm": StormParams,
    "set-feature": SetFeatureParams,
    "climb-epoch": ClimbEpochParams,
    "migrate-group-protocol": MigrateGroupProtocolParams,
    "recreate-topic": RecreateTopicParams,
}


def parse_params(kind: str, params: dict | None) -> Params:
    """Validated parameters of a fault kind (pydantic ValidationError or KeyError on bad input)."""
    if kind not in FAULT_KINDS:
        raise KeyError(f"unknown fault kind {kind!r}; one of {', '.join(FAULT_KINDS)}")
    return FAULT_KINDS[kind].model_validate(params or {})


def with_tag(text: str, tag: str) -> str:
    return text.replace("{tag}", tag)
