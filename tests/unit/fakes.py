"""Fakes the unit tests share."""
from __future__ import annotations

import socket
from types import SimpleNamespace


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class FakeBackend:
    """A chaos backend (chaos/nemesis/backends.py) that records every call instead of acting: the node operations
    as (name, *args), toxics on n<node>-<scope>; with toxiproxy_up False, removing toxics fails as it does when
    Toxiproxy is down (the journal's heal)."""

    def __init__(self, nodes=(1, 2, 3), toxiproxy_up=True):
        self.nodes, self.calls, self.toxiproxy_up = list(nodes), [], toxiproxy_up

    def node_ids(self):
        return list(self.nodes)

    def __getattr__(self, name):
        if name not in ("kill", "stop", "start", "pause", "resume", "wait_registered", "heal_network", "heal"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, *args))

    @property
    def layout(self):
        """The ports a hold-requests fault binds (free ones) and relays to (nothing listens: no client), the nodes'
        peers."""
        port = free_port()
        return SimpleNamespace(request_hold_port=lambda node: port, client_port=lambda node: 9,
                               marker_hold_port=lambda node, src: free_port(), repl_port=lambda node, src: 9,
                               peers=lambda node: [n for n in self.nodes if n != node])

    def reroute_client(self, node, upstream):
        self.calls.append(("reroute_client", node, upstream and upstream.startswith("127.0.0.1:")))

    def reroute_link(self, node, src, upstream):
        self.calls.append(("reroute_link", node, src, upstream and upstream.startswith("127.0.0.1:")))

    def connection(self):
        """The cluster's connection settings (a feature's journal step asks for them): a loopback bootstrap."""
        from cluster.access.connection import ConnectionSettings
        return ConnectionSettings("127.0.0.1:9")

    def isolate(self, node, scope):
        self.calls.append(("isolate", node, scope))
        return [f"n{node}-{scope}"]

    def add_toxic(self, node, scope, toxic):
        self.calls.append(("add_toxic", node, scope, toxic))
        return [f"n{node}-{scope}"]

    def remove_toxics(self, toxics):
        if not self.toxiproxy_up:
            raise ConnectionError("toxiproxy down")
        self.calls.append(("remove", toxics))
