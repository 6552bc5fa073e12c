"""The faults: one class per kind of the catalog (chaos/nemesis/fault_kinds.py), each with its heal.

Owns: what each fault does to a cluster or a run, resolving its target at run time (`{tag}` becomes
the run tag), and undoing it. `start(env)` and `heal(env)` return what they did, with the targets
resolved (e.g. {"node": 2, "target": "coordinator:r1a2b3.eos-0"}), for the runner to record as the
fault's operations in the history. Every heal is idempotent and safe after a start that failed
half-way (or never ran): it undoes what may have been done and nothing else. Heals that bring a
broker back wait until it serves requests and is registered (env.heal_timeout). The network heal
removes every toxic of the cluster and points every proxy back at its node, so network, isolate and
hold-requests faults should not overlap in a schedule.
rolling-restart's start blocks until every node has been restarted.
For the fault journal (chaos/nemesis/journal.py), `undo_steps(env)` says what a heal needs without this object:
before the start (after `prepare(env)`, which fixes the names a start will use) the steps that might be
needed, after it the precise ones (resolved node, toxic names, pids with create times, the injected
transaction's producer id and epoch). It never raises and never talks to the cluster.
Must not: record in the history or schedule (the runner does both), talk to nodes other than through
a Backend (chaos/nemesis/backends.py), import exporter/, or write an abort marker other than through
cluster.access.abort (the one re-validated abort, which `txnlab txn abort` uses too).

The zombie producer. `zombie-producer` pauses process P, then starts a second process of P's workload
with P's options and P's transactional.id (`--txn-id`, by default `<run tag>.<P>`), named `P-zombie`:
its init_transactions bumps the epoch and fences P (and aborts the transaction P left open). Heal
resumes P, whose next produce or commit is refused as fenced. P must be started with
`--on-fenced exit` (see `Fault.workload_args()`, which the runner adds to P's options when it plans the
run), or it would init again and fence the second process back; the fault refuses to start otherwise.
The second process keeps running after the heal: it is P's successor, stopped when the run finishes.
With `await_expiry` (KAFKA-18019's returning zombie) the heal stops the successor first and waits until the
coordinator has forgotten the transactional id (transactional.id.expiration.ms), then resumes P; the heal's
result names the stopped successor (`stopped`, so recovery does not wait for it) and whether the id expired.
"""
from __future__ import annotations

import random
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, Callable, ClassVar

import kafka.errors as Errors
from kafka.structs import TopicPartition

from chaos.nemesis.backends import HEAL_TIMEOUT_S, ISOLATE_TOXIC, Backend
from chaos.nemesis.fault_kinds import TARGET_FORMS, TARGET_RE, Params, parse_params, with_tag
from chaos.nemesis.epoch_climb import climb_epoch
from chaos.nemesis.recreate_topic import Recreation, RecreateError, create_again, recreate
from chaos.nemesis.inject_hanging import InjectedHanging, inject_hanging, transaction_timeout_ms
from chaos.workloads import TRANSACTIONAL_WORKLOADS
from chaos.workloads.plans import group_of, option_value, without_option
from chaos.nemesis.request_hold import API_KEYS, HoldPolicy, RequestHold
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import Run
from cluster.access.abort import abort_transaction, open_transaction
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.reads import topic_partitions
from cluster.lab.features import finalized_level, set_level
from cluster.lab.layout import LOOPBACK
from cluster.access.waiting import WaitTimeout, wait_until
from cluster.access.errors import TxnlabError

ZOMBIE_VICTIM_ARGS = ("--on-fenced", "exit")
ZOMBIE_SUFFIX = "-zombie"
RESOLVE_TIMEOUT_S = 15.0


class FaultError(TxnlabError, RuntimeError):
    """A fault cannot start (bad target, missing process, ...); the message says why."""


@dataclass
class FaultEnv:
    """What a fault acts on: the cluster's backend, the run (for workload faults), how to reach Kafka,
    the run's seeded generator (random targets) and the run tag. `admin` opens an admin view."""
    backend: Backend
    run: Run | None
    conn: ConnectionSettings
    rng: random.Random
    tag: str
    heal_timeout: float = HEAL_TIMEOUT_S
    admin: Callable[[ConnectionSettings], Any] = ClusterAdmin

    @classmethod
    def for_run(cls, backend: Backend, run: Run) -> "FaultEnv":
        return cls(backend, run, run.conn, random.Random(f"faults/{run.info.seed}"), run.info.run_tag)

    def require_run(self) -> Run:
        if self.run is None:
            raise FaultError("this fault acts on workload processes: it needs a run")
        return self.run


# ---- targets -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A parsed target: kind is node, random, controller, not-controller, coordinator, not-coordinator,
    group-coordinator or leader."""
    kind: str
    node: int | None = None
    txn_id: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None


def parse_target(target: str) -> Target:
    if not TARGET_RE.match(target):
        raise FaultError(f"bad target {target!r}: {TARGET_FORMS}")
    kind, _, rest = target.partition(":")
    if kind == "node":
        return Target(kind, node=int(rest))
    if kind in ("coordinator", "not-coordinator"):
        return Target(kind, txn_id=rest)
    if kind == "group-coordinator":
        return Target(kind, group=rest)
    if kind == "leader":
        topic, _, partition = rest.rpartition(":")
        return Target(kind, topic=topic, partition=int(partition))
    return Target(kind)


def resolve_target(env: FaultEnv, target: str) -> int:
    """The node id `target` names now ({tag} substituted); admin questions only when needed."""
    parsed = parse_target(with_tag(target, env.tag))
    nodes = sorted(env.backend.node_ids())
    if parsed.kind == "node":
        if parsed.node not in nodes:
            raise FaultError(f"target {target}: no node {parsed.node} (nodes {nodes})")
        return parsed.node
    if parsed.kind == "random":
        return env.rng.choice(nodes)
    with env.admin(env.conn) as admin:            # retried: metadata may lag just after a restart
        return wait_until(lambda: (ask_admin(admin, parsed, nodes, env.rng),), RESOLVE_TIMEOUT_S,
                          f"target {target}", interval=0.3, error=FaultError,
                          ignore=(Errors.RetriableError,))[0]


def ask_admin(admin: Any, target: Target, nodes: list[int], rng: random.Random) -> int:
    """Resolve a controller, not-controller, (not-)coordinator, group-coordinator or leader target with a ClusterAdmin."""
    if target.kind == "controller":
        return admin.active_controller()
    if target.kind == "group-coordinator":
        group = first_group(admin, target.group[:-1]) if target.group.endswith("*") else target.group
        return admin.group_coordinator_of(group)
    txn_id, group = target.txn_id, None
    if txn_id and txn_id.endswith("*"):             # coordinator:<prefix>*: a client that names its own ids
        txn_id, group = first_open_transaction(admin, txn_id[:-1]), txn_id[:-1].rstrip("-") or None
    if target.kind == "not-controller":
        return choose_other(nodes, {admin.active_controller()}, "the active controller", rng)
    if target.kind == "not-coordinator":
        # with a prefix, Kafka Streams' case (its transactional ids start with its application.id, also its
        # consumer group): the group's coordinator too, so the node's slowness holds its produce requests,
        # not the offsets it commits in its transactions
        avoid = {admin.coordinator_of(txn_id)} | ({admin.group_coordinator_of(group)} if group else set())
        return choose_other(nodes, avoid, f"the coordinator of {txn_id}" + (f" and of group {group}" if group else ""),
                            rng)
    if target.kind == "coordinator":
        return admin.coordinator_of(txn_id)
    leader = admin.leader_of(target.topic, target.partition)
    if leader is None:
        raise FaultError(f"{target.topic}-{target.partition} has no leader (missing partition, or leader offline)")
    return leader


def choose_other(nodes: list[int], avoid: set[int], what: str, rng: random.Random) -> int:
    others = [n for n in nodes if n not in avoid]
    if not others:
        raise FaultError(f"no node but {', '.join(map(str, sorted(avoid)))}, {what}, to choose")
    return rng.choice(others)


def first_open_transaction(admin: Any, prefix: str) -> str:
    """The first (sorted) transactional id starting with prefix that a coordinator lists (ListTransactions on
    every registered broker); a retriable error while there is none yet (the client has not begun one)."""
    listed = admin.client.list_transactions(broker_ids=admin.registered_brokers())
    ids = sorted(t.transactional_id for listing in listed.values() for t in listing
                 if t.transactional_id.startswith(prefix))
    if not ids:
        raise NoTransactionYet(f"no transaction listed whose transactional id starts with {prefix!r}")
    return ids[0]


def first_group(admin: Any, prefix: str) -> str:
    """The first (sorted) consumer group whose id starts with prefix (ListGroups); a retriable error while there
    is none yet (its consumers have not joined)."""
    groups = sorted(g["group_id"] for g in admin.client.list_groups() if g["group_id"].startswith(prefix))
    if not groups:
        raise NoTransactionYet(f"no consumer group whose id starts with {prefix!r} yet")
    return groups[0]


class NoTransactionYet(Errors.RetriableError):
    """No transactional id (or group) of a prefix listed yet: resolve_target asks again until its timeout."""


# ---- the fault interface --------------------------------------------------------------------------
class Fault(ABC):
    """One fault of one kind, with its parameters. start, then heal (any number of times)."""
    kind: ClassVar[str]

    def __init__(self, params: Params):
        self.params = params

    @abstractmethod
    def start(self, env: FaultEnv) -> dict:
        """Inject the fault; what was done, with targets resolved."""

    @abstractmethod
    def heal(self, env: FaultEnv) -> dict:
        """Undo it (idempotent, safe after a failed start); what was done."""

    def prepare(self, env: FaultEnv) -> None:  # noqa: B027 - a default most faults keep
        """Fix what start will name (ids, process names) before the journal entry is written."""

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        """The journal's heal steps for this fault as it stands now (see the module docstring)."""
        return []

    def workload_args(self) -> dict[str, tuple[str, ...]]:
        """Options the runner must give workload processes this fault acts on, by process name."""
        return {}


class NodeFault(Fault):
    """A fault on one node chosen by params.target; subclasses act on it and undo it."""

    def __init__(self, params: Params):
        super().__init__(params)
        self.node: int | None = None

    def start(self, env: FaultEnv) -> dict:
        target = with_tag(self.params.target, env.tag)
        self.node = resolve_target(env, target)
        return {"node": self.node, "target": target, **self.act(env, self.node)}

    def heal(self, env: FaultEnv) -> dict:
        if self.node is None:
            return {"node": None, **self.heal_unstarted(env)}
        return {"node": self.node, **self.undo(env, self.node)}

    @abstractmethod
    def act(self, env: FaultEnv, node: int) -> dict: ...

    @abstractmethod
    def undo(self, env: FaultEnv, node: int) -> dict: ...

    def heal_unstarted(self, env: FaultEnv) -> dict:
        """Heal when no node was chosen: nothing was done."""
        return {"skipped": "not started"}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return self.node_steps(env, self.node)

    def node_steps(self, env: FaultEnv, node: int | None) -> list[dict]:
        """Journal steps undoing act on node (None: the target is not resolved yet, so on every node)."""
        return []


def node_step(step: str, node: int | None) -> list[dict]:
    """[{"step": step + "-node", "node": node}], or on every node (step + "-nodes") when node is None."""
    return [{"step": f"{step}-nodes"}] if node is None else [{"step": f"{step}-node", "node": node}]


def process_step(step: str, run: Run | None, process: str | None) -> list[dict]:
    """A journal step on a workload process: its name, pid, create time and start ticks (pid None: not started
    yet)."""
    if run is None or process is None:
        return []
    record = run.supervisor.record(process)
    return [{"step": step, "name": process, "run_dir": str(run.dir), "pid": record.pid if record else None,
             "create_time": record.create_time if record else None,
             "start_ticks": record.start_ticks if record else None}]


def start_registered(env: FaultEnv, node: int) -> dict:
    env.backend.start(node)
    env.backend.wait_registered(node, env.heal_timeout)
    return {"registered": True}


class KillBroker(NodeFault):
    kind = "kill-broker"

    def act(self, env: FaultEnv, node: int) -> dict:
        env.backend.kill(node)
        return {"signal": "SIGKILL"}

    def undo(self, env: FaultEnv, node: int) -> dict:
        return start_registered(env, node)

    def node_steps(self, env: FaultEnv, node: int | None) -> list[dict]:
        return node_step("start", node)


class StopBroker(KillBroker):
    kind = "stop-broker"

    def act(self, env: FaultEnv, node: int) -> dict:
        env.backend.stop(node)
        return {"signal": "SIGTERM"}


class PauseBroker(NodeFault):
    kind = "pause-broker"

    def act(self, env: FaultEnv, node: int) -> dict:
        env.backend.pause(node)
        return {"signal": "SIGSTOP"}

    def undo(self, env: FaultEnv, node: int) -> dict:
        env.backend.resume(node)
        env.backend.wait_registered(node, env.heal_timeout)
        return {"signal": "SIGCONT", "registered": True}

    def node_steps(self, env: FaultEnv, node: int | None) -> list[dict]:
        return node_step("resume", node)


class Network(NodeFault):
    """A toxic on every link of the node in scope, both streams (latency_ms is added each way) or the one
    `stream` names, on the share `toxicity` of the connections."""
    kind = "network"

    def act(self, env: FaultEnv, node: int) -> dict:
        toxic = self.toxic()
        proxies = env.backend.add_toxic(node, self.params.scope, toxic)
        return {"scope": self.params.scope, "toxic": self.params.toxic, "toxiproxy": toxic, "proxies": proxies}

    def undo(self, env: FaultEnv, node: int) -> dict:
        return self.heal_unstarted(env)

    def heal_unstarted(self, env: FaultEnv) -> dict:
        env.backend.heal_network()           # a half-done start may have added some toxics
        return {"toxics_removed": "all"}

    def toxic(self) -> dict:
        return network_toxic(self.params)

    def node_steps(self, env: FaultEnv, node: int | None) -> list[dict]:
        names = getattr(env.backend, "toxic_names", None)
        if node is None or names is None:
            return [{"step": "remove-all-toxics"}]
        return [{"step": "remove-toxics", "toxics": [list(pair) for pair in names(node, self.params.scope, self.toxic())]}]


def network_toxic(params: Params) -> dict:
    """The Toxiproxy toxic of a network fault's parameters."""
    toxics = {
        "latency": {"type": "latency", "attributes": {"latency": params.latency_ms, "jitter": params.jitter_ms}},
        "blackhole": {"name": "blackhole", "type": "timeout", "attributes": {"timeout": 0}},
        "reset": {"type": "reset_peer", "attributes": {"timeout": 0}},
        "bandwidth": {"type": "bandwidth", "attributes": {"rate": params.rate_kb}},
    }
    toxic = toxics[params.toxic]
    if params.stream != "both":
        toxic["streams"] = (params.stream,)
    if params.toxicity < 1:
        toxic["toxicity"] = params.toxicity
    return toxic


class IsolateBroker(Network):
    kind = "isolate-broker"

    def act(self, env: FaultEnv, node: int) -> dict:
        proxies = env.backend.isolate(node, self.params.scope)
        return {"scope": self.params.scope, "toxiproxy": ISOLATE_TOXIC, "proxies": proxies}

    def toxic(self) -> dict:
        return ISOLATE_TOXIC

    def undo(self, env: FaultEnv, node: int) -> dict:
        healed = self.heal_unstarted(env)
        env.backend.wait_registered(node, env.heal_timeout)
        return {**healed, "registered": True}


class HoldRequests(NodeFault):
    """Relays that hold the named requests of the named clients (chaos/nemesis/request_hold.py): the node's client
    proxy pointed at one (link client), or each link from the node to another node's inter-broker listener (link
    markers: where the node's transaction coordinator sends its markers); heal: every proxy back on its node, then
    every held request released."""
    kind = "hold-requests"

    def __init__(self, params: Params):
        super().__init__(params)
        self.relays: dict[tuple[int, int | None], RequestHold] = {}     # (node, src: None for the client link)
        self.report: dict = {}                   # what the relays held, once they are stopped

    def _links(self, layout: Any, node: int) -> list[tuple[int, int | None, int, int]]:
        """(to, src, the relay's port, the listener's port) of each link a relay sits on: src None for the node's
        client link, else the links from the node (its coordinator's markers) to the others' inter-broker listeners."""
        if self.params.link == "client":
            return [(node, None, layout.request_hold_port(node), layout.client_port(node))]
        return [(peer, node, layout.marker_hold_port(peer, node), layout.repl_port(peer, node))
                for peer in layout.peers(node)]

    @staticmethod
    def _reroute(env: FaultEnv, to: int, src: int | None, upstream: str | None) -> None:
        if src is None:
            env.backend.reroute_client(to, upstream)
        else:
            env.backend.reroute_link(to, src, upstream)

    def act(self, env: FaultEnv, node: int) -> dict:
        policy = HoldPolicy(frozenset(API_KEYS[name] for name in self.params.apis),   # shared: one hold per every_ms
                            tuple(with_tag(c, env.tag) for c in self.params.clients),
                            self.params.hold_ms / 1000, self.params.every_ms / 1000, self.params.min_epoch)
        links = self._links(env.backend.layout, node)
        try:
            for to, src, port, listener in links:
                self.relays[(to, src)] = RequestHold(port, f"{LOOPBACK}:{listener}", policy)
                self._reroute(env, to, src, f"{LOOPBACK}:{port}")
        except Exception:
            try:
                self.undo(env, node)         # what was pointed at a relay pointed back, every relay stopped
            finally:
                self._stop_relays()
            raise
        relays = {f"{LOOPBACK}:{port}": (f"n{to}-client" if src is None else f"n{to}-repl-from-{src}")
                  for to, src, port, _ in links}
        return {"relay": next(iter(relays)) if self.params.link == "client" else None, "relays": relays,
                "apis": list(self.params.apis), "clients": list(policy.clients),
                **({"min_epoch": policy.min_epoch} if policy.min_epoch is not None else {})}

    def undo(self, env: FaultEnv, node: int) -> dict:
        for to, src, _, _ in self._links(env.backend.layout, node):
            self._reroute(env, to, src, None)
        self._stop_relays()                      # only once every proxy is back on its node
        return {"rerouted_back": True, **self.report}

    def _stop_relays(self) -> None:
        if self.relays:
            reports = [relay.stop() or relay.report() for relay in self.relays.values()]
            self.relays = {}
            self.report = {"held": reports[0]["held"],          # the shared policy's
                           "delivered_after_client_closed": [d for r in reports
                                                             for d in r["delivered_after_client_closed"]]}

    def heal_unstarted(self, env: FaultEnv) -> dict:
        env.backend.heal_network()
        return {"proxies_restored": "all"}

    def node_steps(self, env: FaultEnv, node: int | None) -> list[dict]:
        return [{"step": "remove-all-toxics"}]       # the network heal also puts every proxy back on its node


class RollingRestart(Fault):
    """Each node in turn: stop (or kill), start, wait until registered, pause_between_s. start blocks
    until every node is back; heal starts whatever is not running."""
    kind = "rolling-restart"

    def __init__(self, params: Params):
        super().__init__(params)
        self.restarted: list[int] = []

    def start(self, env: FaultEnv) -> dict:
        nodes = sorted(env.backend.node_ids())
        for i, node in enumerate(nodes):
            if i:
                time.sleep(self.params.pause_between_s)      # the schedule's gap, not a wait for state
            (env.backend.stop if self.params.clean else env.backend.kill)(node)
            start_registered(env, node)
            self.restarted.append(node)
        return {"nodes": self.restarted, "clean": self.params.clean}

    def heal(self, env: FaultEnv) -> dict:
        nodes = sorted(env.backend.node_ids())
        for node in nodes:
            env.backend.start(node)
        for node in nodes:
            env.backend.wait_registered(node, env.heal_timeout)
        return {"nodes": nodes, "restarted": list(self.restarted), "registered": True}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return node_step("start", None)


# ---- workload faults ------------------------------------------------------------------------------
class PauseWorkload(Fault):
    kind = "pause-workload"

    def __init__(self, params: Params):
        super().__init__(params)
        self.started = False

    def start(self, env: FaultEnv) -> dict:
        run = env.require_run()
        self.started = True
        if not run.pause(self.params.process):
            raise FaultError(f"workload process {self.params.process} is not running")
        return {"process": self.params.process, "signal": "SIGSTOP"}

    def heal(self, env: FaultEnv) -> dict:
        if not self.started:
            return {"process": self.params.process, "skipped": "not started"}
        resumed = env.require_run().resume(self.params.process)
        return {"process": self.params.process, "signal": "SIGCONT", "resumed": resumed}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return process_step("resume-process", env.run, self.params.process)


class KillWorkload(Fault):
    """SIGKILL a workload process and its children (its JVM: cluster/lab/supervisor.py signals the group); heal:
    start it again with its last options."""
    kind = "kill-workload"

    def __init__(self, params: Params):
        super().__init__(params)
        self.killed = self.restarted = False

    def start(self, env: FaultEnv) -> dict:
        run = env.require_run()
        spec_of(run, self.params.process)           # a FaultError for a process the run never started
        self.killed = True
        if not run.kill(self.params.process):
            raise FaultError(f"workload process {self.params.process} is not running")
        return {"process": self.params.process, "signal": "SIGKILL"}

    def heal(self, env: FaultEnv) -> dict:
        if not self.killed:
            return {"process": self.params.process, "skipped": "not started"}
        if not self.restarted:                      # started once: a later heal does not start a second one
            spec_of(env.require_run(), self.params.process)
            env.require_run().restart(self.params.process)
            self.restarted = True
        return {"process": self.params.process, "restarted": True}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return []                                   # nothing of the cluster to undo: a dead client


def spec_of(run: Run, process: str) -> dict:
    """The last spec the run started under `process` (as recorded: a dict)."""
    spec = run.last_spec(process)
    if spec is None:
        raise FaultError(f"the run started no workload process {process!r}")
    return asdict(spec)


def zombie_successor(spec: dict, tag: str) -> WorkloadSpec:
    """P's workload and options under P's transactional id, as process P-zombie; FaultError when P
    is not a transactional workload started with --on-fenced exit."""
    process, args = spec["process"], tuple(spec["args"])
    if spec["workload"] not in TRANSACTIONAL_WORKLOADS:
        raise FaultError(f"{process} runs {spec['workload']}: a zombie producer needs one of {TRANSACTIONAL_WORKLOADS}")
    if option_value(args, ZOMBIE_VICTIM_ARGS[0]) != ZOMBIE_VICTIM_ARGS[1]:
        raise FaultError(f"{process} must be started with {' '.join(ZOMBIE_VICTIM_ARGS)} to be fenced as a zombie "
                         "(otherwise it inits again and fences its successor back)")
    txn_id = option_value(args, "--txn-id") or f"{tag}.{process}"
    return WorkloadSpec(spec["workload"], process + ZOMBIE_SUFFIX, (*without_option(args, "--txn-id"), "--txn-id", txn_id))


class ZombieProducer(Fault):
    """See the module docstring."""
    kind = "zombie-producer"

    def __init__(self, params: Params):
        super().__init__(params)
        self.paused = False

    def workload_args(self) -> dict[str, tuple[str, ...]]:
        return {self.params.process: ZOMBIE_VICTIM_ARGS}

    def start(self, env: FaultEnv) -> dict:
        run, process = env.require_run(), self.params.process
        successor = zombie_successor(spec_of(run, process), env.tag)
        self.paused = True
        if not run.pause(process):
            raise FaultError(f"workload process {process} is not running")
        run.start(successor)
        return {"process": process, "signal": "SIGSTOP", "txn_id": option_value(successor.args, "--txn-id"),
                "successor": successor.process, "successor_args": list(successor.args)}

    def heal(self, env: FaultEnv) -> dict:
        if not self.paused:
            return {"process": self.params.process, "skipped": "not started"}
        successor = self.params.process + ZOMBIE_SUFFIX
        expiry = self._await_expiry(env, successor) if self.params.await_expiry else {}
        resumed = env.require_run().resume(self.params.process)
        return {"process": self.params.process, "signal": "SIGCONT", "resumed": resumed, "successor": successor,
                **expiry}

    def _await_expiry(self, env: FaultEnv, successor: str) -> dict:
        """Stop the successor, then wait until the coordinator forgot the transactional id (at most
        expiry_timeout_s). What it saw is the result: `txn_id_expired` false (or the question's error) says the
        zombie came back to an id that had not expired, and the run is then not KAFKA-18019's scenario."""
        run = env.require_run()
        txn_id = option_value(tuple(spec_of(run, successor)["args"]), "--txn-id")
        run.stop(successor)
        began = time.monotonic()
        out: dict[str, Any] = {"stopped": [successor], "txn_id": txn_id}
        try:
            with env.admin(env.conn) as admin:
                wait_until(lambda: not admin.transactional_id_known(txn_id), self.params.expiry_timeout_s,
                           f"the expiry of transactional id {txn_id}", 1.0)
            out["txn_id_expired"] = True
        except WaitTimeout:
            out["txn_id_expired"] = False
        except (TxnlabError, Errors.KafkaError) as exc:
            out.update(txn_id_expired=None, expiry_error=f"{type(exc).__name__}: {exc}")
        out["expiry_waited_s"] = round(time.monotonic() - began, 1)
        return out

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return process_step("resume-process", env.run, self.params.process)


class Storm(Fault):
    """A `storm` workload process (short-lived idempotent producers) on the topic, until the heal."""
    kind = "storm"

    def __init__(self, params: Params):
        super().__init__(params)
        self.process: str | None = None

    def prepare(self, env: FaultEnv) -> None:
        if env.run is not None and self.process is None:
            self.process = f"storm-fault-{len(env.run.info.specs)}"

    def start(self, env: FaultEnv) -> dict:
        run = env.require_run()
        topic = with_tag(self.params.topic, env.tag)
        self.prepare(env)
        run.start(WorkloadSpec("storm", self.process, ("--topic", topic, "--rate", str(self.params.rate))))
        return {"process": self.process, "topic": topic, "rate": self.params.rate}

    def heal(self, env: FaultEnv) -> dict:
        if self.process is None:
            return {"process": None, "skipped": "not started"}
        run = env.require_run()
        run.stop(self.process)
        return {"process": self.process, "stopped": self.process not in run.alive()}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return process_step("stop-process", env.run, self.process)


# ---- hanging transactions ---------------------------------------------------------------------------
class HangingTransaction(Fault):
    """chaos.nemesis.inject_hanging.inject_hanging on topic-partition under a fresh transactional id; heal aborts the
    open transaction through cluster.access.abort (re-validated; the epochs DescribeProducers reports, KIP-664)."""
    kind = "hanging-transaction"

    def __init__(self, params: Params):
        super().__init__(params)
        self.tp: TopicPartition | None = None
        self.txn_id: str | None = None
        self.injected: InjectedHanging | None = None

    def prepare(self, env: FaultEnv) -> None:
        if self.tp is None:
            self.tp = TopicPartition(with_tag(self.params.topic, env.tag), self.params.partition)
            self.txn_id = f"txnlab-hanging-{env.tag}-{uuid.uuid4().hex[:8]}"

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        if self.tp is None:
            return []
        injected = self.injected
        return [{"step": "abort-hanging", "topic": self.tp.topic, "partition": self.tp.partition,
                 "transactional_id": self.txn_id, "producer_id": injected.producer_id if injected else None,
                 "producer_epoch": injected.producer_epoch if injected else None}]

    def start(self, env: FaultEnv) -> dict:
        self.prepare(env)
        self.injected = inject_hanging(env.conn, self.tp.topic, self.tp.partition, transactional_id=self.txn_id)
        return asdict(self.injected)

    def heal(self, env: FaultEnv) -> dict:
        if self.tp is None:
            return {"skipped": "not started"}
        producer_id = self.injected.producer_id if self.injected else None
        aborted = abort_hanging(env.conn, self.tp, self.txn_id, producer_id)
        return {"topic": self.tp.topic, "partition": self.tp.partition, "transactional_id": self.txn_id, **aborted}


def abort_hanging(conn: ConnectionSettings, tp: TopicPartition, txn_id: str, producer_id: int | None) -> dict:
    """Abort the open transaction of producer_id (or of txn_id's producer) on tp, if it is still open.
    cluster.access.abort raises AbortRefused (nothing written) if a coordinator tracks it after all."""
    with ClusterAdmin(conn) as admin:
        if producer_id is None:
            try:
                producer_id = admin.client.describe_transactions([txn_id])[txn_id].producer_id
            except Errors.KafkaError as exc:        # never got a producer id: nothing was written
                return {"aborted": False, "reason": f"no producer for {txn_id}: {exc}"}
        txn = open_transaction(admin, tp.topic, tp.partition, producer_id)
        if txn is None:
            return {"producer_id": producer_id, "aborted": False, "reason": "no open transaction"}
        allowed = abort_transaction(admin, txn)
    return {"producer_id": producer_id, "aborted": True, "producer_epoch": allowed.producer_epoch,
            "coordinator_epoch": allowed.coordinator_epoch, "start_offset": txn.start_offset}


class SetFeature(Fault):
    """A finalized feature of the whole cluster set to params.level (cluster/lab/features.py); heal: the level read
    before the start, set back. The level before is read in prepare, so the journal can set it back after a crash.
    Each change reads the level again as it writes and refuses when it is not the one this fault left (the start: the
    level read before; the heal: params.level): a level someone else changed meanwhile is theirs."""
    kind = "set-feature"

    def __init__(self, params: Params):
        super().__init__(params)
        self.before: int | None = None

    def prepare(self, env: FaultEnv) -> None:
        self.before = finalized_level(env.conn, self.params.feature)

    def start(self, env: FaultEnv) -> dict:
        if self.before is None:
            self.prepare(env)
        set_level(env.conn, self.params.feature, self.params.level, expected=self.before)
        return {"feature": self.params.feature, "from": self.before, "to": self.params.level}

    def heal(self, env: FaultEnv) -> dict:
        if self.before is None:
            return {"skipped": "not started"}
        set_level(env.conn, self.params.feature, self.before, expected=self.params.level)
        return {"feature": self.params.feature, "level": self.before}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return [] if self.before is None else [{"step": "set-feature", "feature": self.params.feature,
                                                "level": self.before, "expected": self.params.level}]


class ClimbEpoch(Fault):
    """chaos.nemesis.epoch_climb.climb_epoch on the transactional id, its process paused meanwhile (resumed once the
    epoch is reached, or at the heal when the climb failed)."""
    kind = "climb-epoch"

    def __init__(self, params: Params):
        super().__init__(params)
        self.paused = False

    def start(self, env: FaultEnv) -> dict:
        txn_id, process = with_tag(self.params.txn_id, env.tag), self.params.process
        if process is not None:
            self.paused = True
            if not env.require_run().pause(process):
                raise FaultError(f"workload process {process} is not running")
        progress = env.run.progress if env.run is not None else None
        with env.admin(env.conn) as admin:
            climbed = climb_epoch(admin, txn_id, self.params.to_epoch, transaction_timeout_ms(None),
                                  self.params.limit_s, progress)
        if process is not None:
            self.paused = not env.require_run().resume(process)
        return {**climbed, "process": process}

    def heal(self, env: FaultEnv) -> dict:
        if not self.paused:
            return {"process": self.params.process, "resumed": False}
        self.paused = False
        return {"process": self.params.process, "signal": "SIGCONT", "resumed": env.require_run().resume(
            self.params.process)}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return process_step("resume-process", env.run, self.params.process)


# ---- group protocols -----------------------------------------------------------------------------------
class MigrateGroupProtocol(Fault):
    """fault_kinds.MigrateGroupProtocolParams: KIP-848's online migration, as an operator does it (a rolling restart
    onto the other group.protocol), while the processors' transactions carry the group's offsets. The result names
    each restart and the group's type ListGroups told after the last one (`converted`: it became the protocol the
    processes moved to; null when it could not be read)."""
    kind = "migrate-group-protocol"

    def __init__(self, params: Params):
        super().__init__(params)
        self.origin: dict[str, str] = {}      # process -> the protocol it ran on before the start moved it
        self.healed: dict | None = None       # the heal's result: a later heal does not roll them again

    def start(self, env: FaultEnv) -> dict:
        run = env.require_run()
        protocols = {p: group_protocol_of(spec_of(run, p)) for p in self.params.processes}
        to = self.params.to or ("classic" if protocols[self.params.processes[0]] == "consumer" else "consumer")
        movers = [p for p in self.params.processes if protocols[p] != to]
        if not movers:
            raise FaultError(f"{', '.join(self.params.processes)} already run on the {to} protocol: nothing to move")
        self.origin = {p: protocols[p] for p in movers}
        return {"to": to, **self._roll(env, {p: to for p in movers})}

    def heal(self, env: FaultEnv) -> dict:
        if not self.origin:
            return {"skipped": "not started"}
        if self.healed is None:
            self.healed = {"back": True, **self._roll(env, self.origin)} if self.params.back else {"back": False}
        return self.healed

    def _roll(self, env: FaultEnv, targets: dict[str, str]) -> dict:
        run = env.require_run()
        group = groups_of(run, list(targets), env.tag)
        steps = []
        for i, (process, protocol) in enumerate(targets.items()):
            if i:
                time.sleep(self.params.pause_between_s)        # the operator's gap between two instances
            clean = run.stop(process)
            run.history.complete_outstanding(process, "stopped")
            run.restart(process, {"--group-protocol": protocol})
            steps.append({"process": process, "to": protocol, "stopped_cleanly": clean})
        wanted = "consumer" if "consumer" in targets.values() else "classic"
        return {"group": group, "steps": steps, **self._group_became(env, group, wanted)}

    def _group_became(self, env: FaultEnv, group: str, wanted: str) -> dict:
        """The group's type once it is `wanted` (at most settle_s): the coordinator converted it."""
        seen: list[str | None] = []
        try:
            with env.admin(env.conn) as admin:
                wait_until(lambda: seen.append(admin.group_type(group)) or seen[-1] == wanted,
                           max(self.params.settle_s, 0.1), f"group {group} of type {wanted}", 1.0)
        except WaitTimeout:
            pass
        except (TxnlabError, Errors.KafkaError) as exc:
            return {"group_type": None, "converted": None, "group_type_error": f"{type(exc).__name__}: {exc}"}
        last = seen[-1] if seen else None
        return {"group_type": last, "converted": None if last is None else last == wanted}

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        return []                   # nothing of the cluster to undo: processes restarted on a client setting


def group_protocol_of(spec: dict) -> str:
    """The group protocol a processor process was started on (its last --group-protocol; classic by default);
    FaultError for a workload that is not a processor."""
    if spec["workload"] != "processor":
        raise FaultError(f"{spec['process']} runs {spec['workload']}: only a processor's group moves between the "
                         "classic and consumer protocols (Kafka Streams' has its own: streams)")
    return option_value(tuple(spec["args"]), "--group-protocol") or "classic"


def groups_of(run: Run, processes: list[str], tag: str) -> str:
    """The one group the processes share; FaultError when they are in several."""
    specs = [run.last_spec(p) for p in processes]       # each started: group_protocol_of read it at the start
    groups = {with_tag(group_of(spec) or "", tag) for spec in specs if spec is not None}
    if len(groups) != 1:
        raise FaultError(f"{', '.join(processes)} are in {len(groups)} groups ({', '.join(sorted(groups))}): a "
                         "migration moves one group")
    return groups.pop()


# ---- topics ------------------------------------------------------------------------------------------------
class RecreateTopic(Fault):
    """fault_kinds.RecreateTopicParams; the procedure and what it records: chaos/nemesis/recreate_topic.py. The start
    returns once the topic exists again and its writer runs."""
    kind = "recreate-topic"

    def __init__(self, params: Params):
        super().__init__(params)
        self.state: Recreation | None = None

    def prepare(self, env: FaultEnv) -> None:
        """The topic and its partition count, for the journal's create-topic step before the start."""
        topic = with_tag(self.params.topic, env.tag)
        self.state = Recreation(topic, len(topic_partitions(env.conn, topic) or []))

    def start(self, env: FaultEnv) -> dict:
        run = env.require_run()
        if self.state is None:
            self.prepare(env)
        assert self.state is not None
        if self.state.topic not in run.info.topics:
            raise FaultError(f"{self.state.topic} is not a topic of this run: only its own topics are deleted")
        for process in (self.params.writer, *self.params.hold):
            spec_of(run, process)             # a FaultError for a process the run never started
        try:
            return recreate(run, self.state, self.params.writer, with_tag(self.params.group, env.tag),
                            self.params.catch_up_s, self.params.gap_s, run.progress, tuple(self.params.hold),
                            self.params.hold_s)
        except RecreateError as exc:
            raise FaultError(str(exc)) from None

    def heal(self, env: FaultEnv) -> dict:
        state = self.state
        if state is None or not (state.paused or state.held or state.deleted or state.result):
            return {"skipped": "not started"}
        out: dict[str, Any] = {"topic": state.topic}
        if state.deleted and not state.created:
            create_again(env.conn, state)
            out["created"] = True
        if state.paused:
            out["resumed"] = env.require_run().resume(self.params.writer)
            state.paused = False
        if state.held:
            out["released"] = {p: env.require_run().resume(p) for p in state.held}
            state.held = []
        return out

    def undo_steps(self, env: FaultEnv) -> list[dict]:
        state = self.state
        created = [] if state is None or not state.partitions else \
            [{"step": "create-topic", "topic": state.topic, "partitions": state.partitions}]
        return created + [step for p in (self.params.writer, *self.params.hold)
                          for step in process_step("resume-process", env.run, p)]


# ---- construction ---------------------------------------------------------------------------------------
FAULT_CLASSES: dict[str, type[Fault]] = {cls.kind: cls for cls in (
    KillBroker, StopBroker, PauseBroker, RollingRestart, PauseWorkload, KillWorkload, ZombieProducer, Network, IsolateBroker,
    HoldRequests, HangingTransaction, Storm, SetFeature, ClimbEpoch, MigrateGroupProtocol, RecreateTopic)}


def make_fault(kind: str, params: dict | None = None) -> Fault:
    """A fault of `kind` with validated params (KeyError: unknown kind; pydantic ValidationError: bad params)."""
    validated = parse_params(kind, params)
    return FAULT_CLASSES[kind](validated)
