"""A demo whose shared Spark Connect server is gone records its verification as not run (exit 2, an error said),
never a crash: the refusal of submit.require_connect_server reaches the suite as unknown."""
from __future__ import annotations

import socket
from pathlib import Path

from report.demo import verify_runs


class _Gone:
    def __init__(self, port: int):
        self.port = port

    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def test_a_dead_connect_server_leaves_the_verification_unknown_and_said(tmp_path, monkeypatch):
    from spark_analysis import submit
    monkeypatch.setattr(submit, "check_reachable", lambda runs, conn: None)
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    with socket.socket() as nobody:                      # a port nothing listens on
        nobody.bind(("127.0.0.1", 0))
        port = nobody.getsockname()[1]
    suite = {"errors": [], "verify_exit": {}}
    said = []
    verify_runs(suite, "tv1", "tv1", [Path(run)], "local[*]", said.append, spark=_Gone(port))
    assert suite["verify_exit"]["tv1"] == 2
    assert len(suite["errors"]) == 1 and "does not answer" in suite["errors"][0]
