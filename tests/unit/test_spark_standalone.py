"""The standalone Spark cluster's plan: ports from one base, loopback-only command lines, bad sizes refused;
the master's view read as data. (Starting one is tests/integration/test_verify.py.)"""
from __future__ import annotations

import os

import pytest

from cluster.lab.spark_layout import SparkClusterError, StandalonePlan
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


def test_a_connect_server_listens_on_loopback_at_base_plus_30_on_the_cluster_or_on_local(monkeypatch):
    from pathlib import Path
    from spark_analysis import submit
    from spark_analysis.standalone import StandaloneCluster
    monkeypatch.setattr(submit, "connector_jars", lambda: [Path("/j/kafka.jar")])
    on_cluster = StandalonePlan(base_port=31400, connect=True)
    alone = StandalonePlan(base_port=31400, connect=True, local=True)
    assert on_cluster.connect_url == alone.connect_url == "sc://127.0.0.1:31430"
    assert on_cluster.connect_master == "spark://127.0.0.1:31400" and alone.connect_master == "local[*]"
    assert StandalonePlan().connect_url is None
    cmd = submit.connect_server_command(alone.connect_master, alone.connect_port, "3g")
    assert cmd[cmd.index("--class") + 1].endswith("connect.service.SparkConnectServer")
    assert "spark.connect.grpc.binding.address=127.0.0.1" in cmd and "spark.connect.grpc.binding.port=31430" in cmd
    assert "spark.driver.bindAddress=127.0.0.1" in cmd and cmd[cmd.index("--driver-memory") + 1] == "3g"
    assert cmd[cmd.index("--jars") + 1] == "/j/kafka.jar" and cmd[cmd.index("--master") + 1] == "local[*]"
    assert StandaloneCluster("/tmp/x", alone).names() == ["connect"]
    assert StandaloneCluster("/tmp/x", on_cluster).names() == ["master", "worker-0", "worker-1", "connect"]
    with pytest.raises(SparkClusterError, match="needs connect"):
        StandalonePlan(local=True)
    java = submit.connect_server_command("local[*]", 31430, "4g", ("-XX:TieredStopAtLevel=1",))
    assert "-XX:TieredStopAtLevel=1" in java[java.index("--driver-java-options") + 1].split()


def test_a_connect_server_maps_its_class_archive_or_writes_it_when_it_stops(monkeypatch, tmp_path):
    """The first server writes the archive at its exit (to a name of its own); down() puts it in place only when
    the server exited by itself; a later server maps it; C1 unless the plan asks for C2."""
    from spark_analysis import standalone, submit
    from spark_analysis.standalone import StandaloneCluster
    archive = tmp_path / "connect-classes-k.jsa"
    monkeypatch.setattr(submit, "class_archive", lambda kind="verify": archive if kind == "connect" else None)
    monkeypatch.setattr(submit, "connect_server_command", lambda master, port, memory, java: ["java", *java])
    monkeypatch.setenv("TXNLAB_CLASS_ARCHIVES", "write")          # the suite's own JVMs only map (tests/conftest.py)
    started = []
    cluster = StandaloneCluster(tmp_path / "a", StandalonePlan(base_port=31400, connect=True, local=True))
    envs = []
    monkeypatch.setattr(cluster.supervisor, "start", lambda name, argv, log, env: started.append(argv) or envs.append(env))
    monkeypatch.setattr(standalone, "port_open", lambda port, host: True)
    monkeypatch.setattr(cluster.supervisor, "is_running", lambda name: True)
    cluster._start_connect(cluster.plan, {"SPARK_DAEMON_MEMORY": "512m"}, tmp_path, lambda line: None)
    assert envs[-1]["SPARK_DAEMON_MEMORY"] == "4g"          # the launcher's heap for a Connect server: its own
    writing = cluster.archive_writing(archive)
    assert f"-XX:ArchiveClassesAtExit={writing}" in started[-1] and "-XX:TieredStopAtLevel=1" in started[-1] \
        and "-XX:ReservedCodeCacheSize=240m" in started[-1]
    assert writing.name.startswith("connect-classes-k.") and writing != \
        StandaloneCluster(tmp_path / "b").archive_writing(archive)          # two servers never write one file

    writing.write_bytes(b"cut")
    standalone._put_in_place(writing, keep=False)           # killed while writing, or it verified nothing
    assert not writing.exists() and not archive.exists()
    writing.write_bytes(b"archive")
    standalone._put_in_place(writing, keep=True)
    assert archive.read_bytes() == b"archive" and not writing.exists()

    # kept only from a server through which a verification ran its checks since it started
    import psutil
    monkeypatch.setattr(submit, "txnlab_home", lambda: tmp_path / "home")
    server = psutil.Process()                                  # started before the marks below
    assert not cluster._verified_since(server)
    submit.mark_served("sc://10.0.0.1:31430")                 # not ours: no mark
    submit.mark_served("sc://127.0.0.1:31999")                # another server's port
    assert not cluster._verified_since(server)
    submit.mark_served("sc://127.0.0.1:31430")
    assert cluster._verified_since(server) and submit.served_mark(31430).exists()

    on_cluster = StandaloneCluster(tmp_path / "d", StandalonePlan(base_port=31400, connect=True))
    monkeypatch.setattr(on_cluster.supervisor, "start", lambda name, argv, log, env: started.append(argv))
    monkeypatch.setattr(on_cluster.supervisor, "is_running", lambda name: True)
    archive.unlink()
    on_cluster._start_connect(on_cluster.plan, {}, tmp_path, lambda line: None)   # a driver only: it writes none
    assert not [o for o in started[-1] if "Archive" in o] and "-XX:TieredStopAtLevel=1" in started[-1]
    monkeypatch.setenv("TXNLAB_CLASS_ARCHIVES", "map")
    cluster._start_connect(cluster.plan, {}, tmp_path, lambda line: None)      # told to write none
    assert not [o for o in started[-1] if "Archive" in o]
    archive.write_bytes(b"archive")

    c2 = StandaloneCluster(tmp_path / "c", StandalonePlan(base_port=31400, connect=True, local=True, connect_c2=True))
    monkeypatch.setattr(c2.supervisor, "start", lambda name, argv, log, env: started.append(argv))
    monkeypatch.setattr(c2.supervisor, "is_running", lambda name: True)
    c2._start_connect(c2.plan, {}, tmp_path, lambda line: None)
    assert f"-XX:SharedArchiveFile={archive}" in started[-1] and "-XX:TieredStopAtLevel=1" not in started[-1]
    assert build_parser().parse_args(["spark", "up", "--local", "--c2"]).c2


def test_verify_takes_a_remote_from_its_option_or_the_environment(monkeypatch, tmp_path):
    from spark_analysis import job, submit
    run = tmp_path / "run"
    (run / "history").mkdir(parents=True)
    called = []
    def as_a_client(argv, conn=None):                  # PySpark marks the process when it makes a remote session
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        called.append(argv)
        return 0
    monkeypatch.setattr(job, "main", as_a_client)
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    monkeypatch.setattr(submit, "check_reachable", lambda runs, conn: None)
    monkeypatch.setattr(submit, "txnlab_home", lambda: tmp_path / "home")
    import socket
    with socket.socket() as nobody:                     # a port nothing listens on: refused at once, no retries
        nobody.bind(("127.0.0.1", 0))
        free = nobody.getsockname()[1]
    with pytest.raises(submit.ConnectServerUnreachable, match=f"does not answer.*127.0.0.1:{free}"):
        submit.run([run], None, remote=f"sc://127.0.0.1:{free}")
    assert not called
    monkeypatch.setattr(submit, "require_connect_server", lambda remote: None)
    monkeypatch.setenv("TXNLAB_SPARK_REMOTE", "sc://127.0.0.1:31430")
    assert submit.run([run], None, conf=("spark.sql.shuffle.partitions=3",)) == 0
    assert submit.served_mark(31430).exists()          # the server's class archive is worth keeping now
    assert called[-1][called[-1].index("--remote") + 1] == "sc://127.0.0.1:31430"
    assert "--conf=spark.sql.shuffle.partitions=3" in called[-1]
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ          # undone: later classic sessions stay classic
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    assert "SPARK_CONNECT_MODE_ENABLED" not in submit.environment(None)    # spark-submit's job is classic
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    submit.run([run], None, remote="sc://127.0.0.1:1")
    assert called[-1][called[-1].index("--remote") + 1] == "sc://127.0.0.1:1"
    monkeypatch.setattr(submit.subprocess, "run", lambda *a, **k: called.append("spark-submit") or
                        type("P", (), {"returncode": 0})())
    monkeypatch.setattr(submit, "class_archive", lambda: tmp_path / "a.jsa")
    monkeypatch.setattr(submit, "command", lambda *a, **k: ["spark-submit"])
    (tmp_path / "a.jsa").write_text("x")
    submit.run([run], None, remote="")                                 # '' : no remote, spark-submit as before
    assert called[-1] == "spark-submit" and len(called) == 3
    assert build_parser().parse_args(["verify", "r", "--remote", "sc://h:1"]).remote == "sc://h:1"
    assert job.given_conf(job.parse_args(["r", "--conf", "a.b=1", "--conf=c=d=e"])) == {"a.b": "1", "c": "d=e"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        job.given_conf(job.parse_args(["r", "--conf", "nothing"]))


def test_a_shared_server_that_cannot_start_says_so_and_verify_falls_back_to_spark_submit(monkeypatch, tmp_path):
    from spark_analysis.standalone import SharedConnect
    monkeypatch.delenv("TXNLAB_SPARK_REMOTE", raising=False)
    said = []
    shared = SharedConnect(tmp_path / "s", 31900, said.append)

    def refuse(progress=None):
        raise SparkClusterError("port 31930 is taken")
    monkeypatch.setattr(shared.cluster, "up", refuse)
    assert shared.start().remote() == "" and "port 31930 is taken" in said[0] and "spark-submit" in said[0]
    monkeypatch.setenv("TXNLAB_SPARK_REMOTE", "sc://127.0.0.1:31830")
    given = SharedConnect(tmp_path / "t", 31900, said.append).start()
    assert given.remote() == "sc://127.0.0.1:31830" and given._thread is None      # that server, none started
    given.stop()


def test_up_refuses_a_port_plan_in_the_ephemeral_range_before_anything_starts(tmp_path, monkeypatch):
    """The same rule as a Kafka cluster's and the compose stack's: a client's outgoing connection could hold the
    master's, a worker's or the Connect server's port (the CI of 9754f39 lost a broker's bind that way)."""
    from spark_analysis.standalone import StandaloneCluster
    monkeypatch.setattr("cluster.lab.ports.ephemeral_range", lambda: (32768, 60999))
    cluster = StandaloneCluster(tmp_path / "s", StandalonePlan(base_port=32750, connect=True, local=True))
    monkeypatch.setattr(cluster.supervisor, "start", lambda *a, **k: pytest.fail("a daemon was started"))
    with pytest.raises(SparkClusterError, match=r"ports 32750-32780 overlap this machine's ephemeral range "
                                                r"32768-60999 .* a base port of at most 32737"):
        cluster.up(progress=lambda line: None)
    assert not (tmp_path / "s" / "spark.json").exists()
    assert StandalonePlan(base_port=32737, connect=True).ephemeral_clash() is None
