"""Benchmark: transactional workload throughput, txnlab's txn-producer vs Kafka's own ProducerPerformance.

Both run against the same 3-node local cluster in one invocation: first txnlab's `txn-producer`
(confluent-kafka, K records per transaction, unbounded rate, every attempt recorded in the history),
then Kafka's `ProducerPerformance` in transactional mode (`--transaction-duration-ms` set to the mean
transaction time txnlab measured, so both commit transactions of about the same size), with the same
record size, acks=all, the same number of records. Reported: transactions/s, records/s, and the ratio
txnlab/Kafka. Usage:
    .venv/bin/python bench/workload_throughput.py [--duration 30] [--records 10] [--size 100] [--instances 1]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from chaos.record.history import read_history
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from cluster.lab.java import java_command
from cluster.lab.local import LocalCluster
from report.stack import local_stack
from cluster.lab.versions import txnlab_home

PERF_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")


def ours(conn, args, runs_dir: Path) -> dict:
    tag = new_run_tag()
    run_dir = new_run_dir(runs_dir, "bench-txn", tag)
    topics = [f"{tag}-a", f"{tag}-b"]
    with Run(conn, run_dir, tag, seed=1, name="bench-txn") as run:
        run.create_topics({t: 6 for t in topics})
        for i in range(args.instances):
            run.start(WorkloadSpec("txn-producer", f"txp-{i}", (
                "--topics", *topics, "--rate", "0", "--records", str(args.records), "--size", str(args.size),
                "--abort-share", "0")))
        run.wait(args.duration)
        run.finish()
    ops = read_history(run_dir).ops
    invokes = {(op["process"], op["value"]["attempt"]): op["time"] for op in ops if op["f"] == "txn"
               and op["type"] == "invoke"}
    done = [op for op in ops if op["f"] == "txn" and op["type"] == "ok"]
    spans = [op["time"] - invokes[(op["process"], op["value"]["attempt"])] for op in done]
    elapsed = (max(op["time"] for op in done) - min(invokes.values())) / 1e9
    return {"transactions": len(done), "records": len(done) * args.records, "elapsed_s": round(elapsed, 2),
            "transactions_per_s": round(len(done) / elapsed, 1),
            "records_per_s": round(len(done) * args.records / elapsed, 1),
            "mean_transaction_ms": round(statistics.mean(spans) / 1e6, 1), "run_dir": str(run_dir)}


def kafka_perf(cluster: LocalCluster, args, records: int, txn_ms: float) -> dict:
    topic = f"bench-perf-{new_run_tag()}"
    from cluster.access.smoke import ensure_topic
    ensure_topic(cluster.connection(), topic, partitions=6)
    props = [f"bootstrap.servers={cluster.layout.bootstrap}", "acks=all", "enable.idempotence=true", "linger.ms=5"]
    cmd = java_command("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(args.size), "--throughput", "-1",
        "--transactional-id", f"{topic}-tx", "--transaction-duration-ms", str(max(1, int(txn_ms))),
        "--producer-props", *props], heap="512m")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration * 10 + 120, check=True).stdout
    sent, rate = PERF_LINE.findall(out)[-1]
    seconds = int(sent) / float(rate)
    return {"records": int(sent), "records_per_s": float(rate), "elapsed_s": round(seconds, 2),
            "transaction_duration_ms": int(txn_ms),
            "transactions_per_s_approx": round(1000 / max(1.0, txn_ms), 1), "last_line": out.strip().splitlines()[-1]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--records", type=int, default=10, help="records per transaction")
    parser.add_argument("--size", type=int, default=100, help="record size in bytes")
    parser.add_argument("--instances", type=int, default=1, help="txnlab producer processes")
    parser.add_argument("--base-port", type=int, default=26000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    cluster = LocalCluster.load(txnlab_home() / "bench-workload-cluster", base_port=args.base_port, **local_stack())
    try:
        cluster.up(progress=lambda m: print(f"[cluster] {m}", file=sys.stderr), timeout=240)
        with tempfile.TemporaryDirectory() as runs:
            print("[bench] txnlab txn-producer ...", file=sys.stderr)
            mine = ours(cluster.connection(), args, Path(runs))
            print(f"[bench] Kafka ProducerPerformance, {mine['records']} records ...", file=sys.stderr)
            peer = kafka_perf(cluster, args, mine["records"], mine["mean_transaction_ms"])
        mine.pop("run_dir")
        result = {"command": " ".join(sys.argv), "params": vars(args), "txnlab": mine, "kafka": peer,
                  "ratio_records_per_s": round(mine["records_per_s"] / peer["records_per_s"], 3)}
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            cluster.down(purge=True, progress=lambda m: None)


if __name__ == "__main__":
    main()
