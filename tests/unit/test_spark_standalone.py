"""The standalone Spark cluster's plan: ports from one base, loopback-only command lines, bad sizes refused;
the master's view read as data. (Starting one is tests/integration/test_verify.py.)"""
from __future__ import annotations

import pytest

from cluster.spark_layout import SparkClusterError, StandalonePlan
from spark_analysis.standalone import alive_workers
from txnlab.cli import build_parser


def test_the_plan_puts_every_port_on_loopback_from_one_base():
    plan = StandalonePlan(base_port=31400, workers=3, worker_cores=2, worker_memory="3g")
    assert plan.master_url == "spark://127.0.0.1:31400" and plan.master_ui == "http://127.0.0.1:31401"
    master = plan.master_argv("spark-class")
    assert master[1].endswith("deploy.master.Master")
    assert master[master.index("--host") + 1] == "127.0.0.1" and master[master.index("--port") + 1] == "31400"
    workers = [plan.worker_argv("spark-class", i, f"/w{i}") for i in range(3)]
    ports = {w[w.index("--port") + 1] for w in workers} | {w[w.index("--webui-port") + 1] for w in workers}
    assert ports == {"31410", "31411", "31412", "31420", "31421", "31422"}
    assert all(w[-1] == plan.master_url and w[w.index("--cores") + 1] == "2" and w[w.index("--memory") + 1] == "3g"
               and w[w.index("--host") + 1] == "127.0.0.1" for w in workers)


@pytest.mark.parametrize("bad", [{"workers": 0}, {"workers": 9}, {"worker_cores": 0}, {"base_port": 80},
                                 {"base_port": 65530}])
def test_a_plan_that_cannot_run_is_refused_with_what_is_wrong(bad):
    with pytest.raises(SparkClusterError):
        StandalonePlan(**bad)


def test_only_alive_workers_count():
    state = {"status": "ALIVE", "workers": [{"id": "a", "state": "ALIVE"}, {"id": "b", "state": "DEAD"}]}
    assert [w["id"] for w in alive_workers(state)] == ["a"] and alive_workers(None) == []


def test_the_spark_commands_parse():
    args = build_parser().parse_args(["spark", "up", "--workers", "3", "--base-port", "31500"])
    assert (args.workers, args.base_port, args.worker_cores, args.worker_memory) == (3, 31500, 1, "2g")
    assert build_parser().parse_args(["spark", "status", "--json"]).json
