"""cluster/lab/companions.py's require_ports_free: a port a process just killed still holds is waited for a moment;
one held for good is named."""
from __future__ import annotations

import socket
import threading

import pytest

from cluster.lab.companions import ClusterError, require_ports_free


def listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_port_released_within_the_wait_is_free_and_one_held_is_named():
    held, released = listening(), listening()
    port_held, port_released = held.getsockname()[1], released.getsockname()[1]
    threading.Timer(0.4, released.close).start()
    require_ports_free([port_released], "a cluster", release_s=5.0)          # closed 0.4 s in: free
    with pytest.raises(ClusterError, match=rf"ports \[{port_held}\] needed by a cluster are in use"):
        require_ports_free([port_held, port_released], "a cluster", release_s=0.5)
    held.close()
