"""`txnlab verify`: the thin wrapper that runs the verification job through spark-submit.

Owns: locating PySpark's spark-submit and the Kafka connector jars (setup puts them in
<TXNLAB_HOME>/dist/spark-kafka-<version>/; only those PySpark does not ship are passed), the command line
(master, driver memory, loopback-only driver, quiet logging with the console progress bar), and the
environment (the repo on PYTHONPATH, this Python for the driver and workers, the Kafka connection as
TXNLAB_KAFKA_* variables so no secret is on a command line); a cluster the job could not use (unreachable,
TLS, authentication) fails before Spark starts.
Must not: verify anything itself (job.py does, inside Spark).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from cluster.access.connection import ConnectionSettings, run_bootstrap
from cluster.access.diagnose import require_reachable
from cluster.lab.java import java_binary
from cluster.lab.versions import REPO_ROOT, pinned, txnlab_home
from cluster.access.errors import TxnlabError

HERE = Path(__file__).resolve().parent


class SetupError(TxnlabError, RuntimeError):
    """Something `make setup` installs is missing."""


def connector_dir() -> Path:
    return txnlab_home() / "dist" / f"spark-kafka-{pinned()['SPARK_KAFKA_VERSION']}"


def pyspark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def connector_jars() -> list[Path]:
    """The connector's jars that PySpark does not already ship (by artifact name)."""
    folder = connector_dir()
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise SetupError(f"Spark's Kafka connector is not in {folder}: run `make setup` (scripts/setup.sh)")
    shipped = {_artifact(j) for j in (pyspark_home() / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def _artifact(jar: Path) -> str:
    """commons-pool2-2.13.1.jar -> commons-pool2"""
    name = jar.stem
    parts = name.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts) or name


SMALL_RUNS_RECORDS = 200_000       # below this many recorded records in all, the driver's JIT is C1 only
# C1 only, with the code cache tiered compilation would have: C1 alone gets 48 MB, which a Connect server filled
# after a few verifications ("CodeCache is full. Compiler has been disabled": every method compiled later
# stayed interpreted, and a warm server's 4.4-5.3 s verifications became 6.5-8.6 s)
C1_ONLY = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")


def hwm_records(ends: dict) -> int:
    """The records an end_offsets.json content records: the sum of its high watermarks."""
    return sum(int(o["hwm"]) for parts in ends.values() for o in parts.values())


def small_run(records: int) -> bool:
    """Whether a run of `records` is small (< SMALL_RUNS_RECORDS): C1 for its driver, no code generation, lazy
    checkpoints on Spark Connect."""
    return records < SMALL_RUNS_RECORDS


def recorded_records(run_dirs: Path | list[Path]) -> int | None:
    """The records the runs' end_offsets.json files record (their high watermarks), None when one cannot be
    read (the job itself reports that as missing evidence)."""
    total = 0
    for run in [run_dirs] if isinstance(run_dirs, Path) else run_dirs:
        try:
            ends = json.loads((Path(run) / "end_offsets.json").read_text())
            total += hwm_records(ends)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
    return total


def driver_java_options(run_dirs: Path | list[Path]) -> str:
    """Quiet logging; for small runs (< SMALL_RUNS_RECORDS) also -XX:TieredStopAtLevel=1: a few thousand
    records spend their time compiling and scheduling dozens of tiny stages, where C1 alone was faster (a
    5,000-record run 40.5/42.1 -> 34.3/32.4 s wall), while 10^6 records ran 9% slower with it (107.7 s
    against 96.8-99.0 s: the work itself wants C2). In local mode the executors share the driver's JVM."""
    options = [f"-Dlog4j2.configurationFile=file:{HERE / 'log4j2.properties'}"]
    records = recorded_records(run_dirs)
    if records is not None and small_run(records):
        options += C1_ONLY
    return " ".join(options)


CLASS_SET = "2: the history's Parquet twins"   # what the job loads; changed when it loads other classes, so that
                                              # an archive made without them is not mapped (and a new one written)


def class_archive(kind: str = "verify") -> Path:
    """The driver JVM's class archive (AppCDS, Java's dynamic archive of the classes a verification loads),
    named by what it was made from (the JDK, PySpark's jars, the connector's): a JVM that maps it instead of
    loading and verifying ~20,000 classes from the jars starts the job and plans its first queries faster (a
    5,000-record run: 24-29 s -> 19.5-21 s wall). Its name also carries CLASS_SET. The first verification
    writes it on exit (~20 s more, once);
    a stale or foreign archive is never used (its name would differ, and Java checks it and ignores it).
    `kind`: whose archive: "verify" (spark-submit's driver) or "connect" (a Connect server's JVM, written when
    the first server stops: standalone.py)."""
    java = Path(java_binary()).resolve()
    made_of = [str(java), CLASS_SET, *(f"{j.name}:{j.stat().st_size}" for j in sorted((pyspark_home() / "jars").glob("*.jar"))),
               *(j.name for j in connector_jars())]
    key = hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:16]
    return txnlab_home() / "spark" / f"{kind}-classes-{key}.jsa"


def writes_class_archives() -> bool:
    """Whether a JVM with no class archive yet writes one at its exit: not when $TXNLAB_CLASS_ARCHIVES is "map"
    (an archive that exists is still mapped). The test suite says "map": on a clean clone each first JVM
    spent 40-75 s writing its archive at exit (the spark-submit driver's, the shared Connect server's) for
    nothing after it to map."""
    value = os.environ.get("TXNLAB_CLASS_ARCHIVES", "write")
    if value not in ("write", "map"):
        raise SetupError(f"TXNLAB_CLASS_ARCHIVES is {value!r}: write (the default) or map")
    return value == "write"


def archive_to_write(archive: Path) -> bool:
    """Whether a JVM started now writes `archive` at its exit: none exists yet and writes_class_archives."""
    return not archive.exists() and writes_class_archives()


CLASS_ARCHIVE_QUIET = "-Xlog:cds*=off"         # Java's notes on classes it cannot archive are not the user's concern


def archive_options(archive: Path, writing: Path | None) -> list[str]:
    """Map the archive when it exists; otherwise write it (to `writing`, renamed once the job ended well), or
    neither (`writing` None: writes_class_archives said no)."""
    if writing is None:
        return [f"-XX:SharedArchiveFile={archive}", CLASS_ARCHIVE_QUIET] if archive.exists() else []
    return [f"-XX:ArchiveClassesAtExit={writing}", CLASS_ARCHIVE_QUIET]


def command(run_dirs: Path | list[Path], master: str = "local[*]", driver_memory: str = "4g", out: Path | None = None,
            examples: int = 10, conf: tuple[str, ...] = (), java_options: tuple[str, ...] = (),
            offline: bool = False) -> list[str]:
    """spark-submit of the verification job (job.py) over the runs."""
    runs = [run_dirs] if isinstance(run_dirs, Path) else list(run_dirs)
    return spark_submit(HERE / "job.py", [*map(str, runs), *job_options(examples, out, offline)],
                        runs, master, driver_memory, conf, java_options)


def job_options(examples: int, out: Path | None, offline: bool) -> list[str]:
    return ["--examples", str(examples), *(["--out", str(out)] if out else []), *(["--offline"] if offline else [])]


def spark_submit(script: Path, args: list[str], run_dirs: Path | list[Path], master: str = "local[*]",
                 driver_memory: str = "4g", conf: tuple[str, ...] = (), java_options: tuple[str, ...] = ()) -> list[str]:
    """spark-submit of a PySpark script over runs, as the verification job runs (the connector's jars, the
    driver's options, a loopback-only driver, quiet logging): the job, and the benchmark's read of both views
    (bench/spark_read_floor.py)."""
    # spark.sql.shuffle.partitions: sized per run by the job to its records, unless given here
    return [*_submit(master, driver_memory, " ".join([driver_java_options(run_dirs), *java_options]),
                     (f"spark.ui.showConsoleProgress={str(sys.stderr.isatty()).lower()}", *conf)),
            str(script), *args]


def _submit(master: str, driver_memory: str, driver_java: str, conf: tuple[str, ...]) -> list[str]:
    """spark-submit with the connector's jars, a loopback-only driver without a web UI, and `conf`."""
    cmd = [str(pyspark_home() / "bin" / "spark-submit"), "--master", master, "--driver-memory", driver_memory,
           "--jars", ",".join(str(j) for j in connector_jars()), "--driver-java-options", driver_java,
           "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1"]
    for item in conf:
        cmd += ["--conf", item]
    return cmd


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"   # in PySpark's own jars


def connect_server_command(master: str, port: int, driver_memory: str = "4g",
                           java_options: tuple[str, ...] = ()) -> list[str]:
    """A Spark Connect server (the job's engine for `txnlab verify --remote`): the verification job's Spark
    (connector jars, quiet logging, loopback driver) listening on 127.0.0.1:port, no console progress bar;
    `java_options` for its JVM (its class archive, its JIT)."""
    return [*_submit(master, driver_memory, " ".join([f"-Dlog4j2.configurationFile=file:{HERE / 'log4j2.properties'}",
                                                      *java_options]),
                     ("spark.ui.showConsoleProgress=false", "spark.connect.grpc.binding.address=127.0.0.1",
                      f"spark.connect.grpc.binding.port={port}")),
            "--class", CONNECT_SERVER_CLASS, "--name", "txnlab-verify-connect"]


REMOTE_ENV = "TXNLAB_SPARK_REMOTE"
CONNECT_MODE_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")   # PySpark's own marks


def environment(conn: ConnectionSettings | None) -> dict[str, str]:
    env = dict(os.environ)
    if conn is not None:                     # these settings replace any TXNLAB_KAFKA_* we were given
        env = {k: v for k, v in env.items() if not k.startswith("TXNLAB_KAFKA_")} | conn.to_env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    for key in CONNECT_MODE_ENV:             # spark-submit's job is a classic session, whatever ran before here
        env.pop(key, None)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The job drives Spark from one Python thread, so it needs no thread pinning; Py4J's plain gateway answers
    # its ~7,000 calls of plan building faster (a 5,000-record run: 37-38 s -> 33-35 s wall)
    env.setdefault("PYSPARK_PIN_THREAD", "false")
    return env


def check_reachable(runs: list[Path], conn: ConnectionSettings | None) -> None:
    """ClusterUnreachable, saying why (unreachable, TLS, authentication), before Spark starts: its Kafka
    connector would retry bad credentials until its own timeouts. The connection is the job's: conn, else
    TXNLAB_KAFKA_* with the bootstrap of $TXNLAB_KAFKA_BOOTSTRAP or the run's cluster.json (a run with none
    is left to the job, which says so)."""
    checked = set()
    for run_dir in runs:
        bootstrap = run_bootstrap(run_dir)
        settings = conn or (ConnectionSettings.from_env(bootstrap=bootstrap) if bootstrap else None)
        if settings is not None and settings not in checked:
            require_reachable(settings)
            checked.add(settings)




def remote_from_env() -> str | None:
    """The Spark Connect server verify uses when none is given: $TXNLAB_SPARK_REMOTE, None when unset or empty."""
    return os.environ.get(REMOTE_ENV) or None


def run(run_dirs: Path | list[Path], conn: ConnectionSettings | None, remote: str | None = None, **options) -> int:
    """Run the job over one or several runs (one Spark session); its progress and Spark's warnings go to our
    stderr. Returns its exit code (for several runs the worst). With `remote` (sc://host:port; None: that of
    $TXNLAB_SPARK_REMOTE, "": none) the job runs
    here as a client of that Spark Connect server: no JVM starts; the server reads the run's files by the same
    paths, so it must see this machine's files (the servers `txnlab spark up --connect` starts do)."""
    runs = [Path(run_dirs)] if isinstance(run_dirs, (str, Path)) else [Path(r) for r in run_dirs]
    for run_dir in runs:
        if not (run_dir / "history").is_dir():
            raise SetupError(f"{run_dir} is not a run directory (no history/)")
    if not options.get("offline"):                   # offline: no cluster is asked
        check_reachable(runs, conn)
    remote = remote_from_env() if remote is None else remote
    if remote:
        require_connect_server(remote)
        return _run_remote(runs, conn, remote, **options)
    archive = class_archive()
    writing = archive.with_name(f"{archive.stem}.{os.getpid()}.tmp") if archive_to_write(archive) else None
    if writing is not None:
        archive.parent.mkdir(parents=True, exist_ok=True)
        print(f"txnlab verify: first verification with this Spark and Java: the driver's class archive is written "
              f"when it ends ({archive}), later ones start faster", file=sys.stderr)
    try:
        code = subprocess.run(command(runs, **options, java_options=tuple(archive_options(archive, writing))),
                              env=environment(conn), stdout=sys.stderr).returncode
        # exit 0 or 1: the job ran its checks, so the archive holds their classes (an exit 2 may have ended early:
        # one written then held 39 MB of classes against a full verification's 190 MB, and every later
        # spark-submit loaded the rest from the jars)
        if writing is not None and code in (0, 1) and writing.exists() and writing.stat().st_size > 0:
            os.replace(writing, archive)
        return code
    finally:
        if writing is not None:
            writing.unlink(missing_ok=True)


class ConnectServerUnreachable(TxnlabError, RuntimeError):
    """Nothing answers at the Spark Connect server's address (verify's exit 2, one line)."""


def require_connect_server(remote: str) -> None:
    """ConnectServerUnreachable unless something listens at the sc:// address: PySpark's client retries a
    refused connection for minutes (a verification through a server that had died sat 3 minutes silent)."""
    from cluster.access.waiting import port_open
    address = connect_address(remote)
    if address is None:
        raise ConnectServerUnreachable(f"{remote}: not sc://HOST:PORT")
    host, port = address
    if not port_open(port, host):
        raise ConnectServerUnreachable(f"the Spark Connect server {remote} does not answer (nothing listens on "
                                       f"{host}:{port}: `txnlab spark up --local` starts one, `--remote ''` "
                                       "verifies with spark-submit)")


def served_mark(port: int) -> Path:
    """A file a verification through a local Connect server on `port` touches once it ran its checks: the
    server's class archive, written when it stops, is kept only when the server did that since it started
    (standalone.py), else it holds the classes of its start alone and every later server would map that."""
    return txnlab_home() / "spark" / f"connect-served-{port}"


def connect_address(remote: str) -> tuple[str, int] | None:
    """(host, port) of sc://HOST:PORT[/;params], None when it names no port."""
    host, _, port = remote.removeprefix("sc://").split("/")[0].partition(":")
    return (host or "127.0.0.1", int(port)) if port.isdigit() else None


def mark_served(remote: str) -> None:
    address = connect_address(remote)
    if address is not None and address[0] in ("127.0.0.1", "localhost"):
        mark = served_mark(address[1])
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()


def _run_remote(runs: list[Path], conn: ConnectionSettings | None, remote: str, master: str | None = None,
                driver_memory: str | None = None, out: Path | None = None, examples: int = 10,
                conf: tuple[str, ...] = (), offline: bool = False) -> int:
    """The job in this process, a Connect client of `remote` (master and driver memory are the server's).
    PySpark marks the process as a Connect client in its environment (CONNECT_MODE_ENV) when a remote session
    is made; that is undone after the job, or a classic session made later in this process (a test's), and
    every spark-submit started from it, would try to be a Connect client too."""
    from spark_analysis import job
    argv = [*map(str, runs), "--remote", remote, *job_options(examples, out, offline), *(f"--conf={item}" for item in conf)]
    saved = {key: os.environ.get(key) for key in CONNECT_MODE_ENV}
    try:
        code = job.main(argv, conn)
        if code in (0, 1):
            mark_served(remote)
        return code
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
