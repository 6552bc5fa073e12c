"""Benchmark: time from `txnlab cluster up` to ready, and the brokers' peak RSS.

Ready = all brokers registered and a transactional produce + commit round-trips (what `up` waits
for). Each trial starts from stopped processes and fresh data (down --purge) with warm caches
(jars, page cache). RSS is sampled every 100 ms from start-up through a 20-transaction smoke
workload. Usage: .venv/bin/python bench/cluster_startup.py [--trials 5] [--base-port 23000]
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import psutil

from cluster.lab.local import LocalCluster
from report.stack import local_stack
from cluster.access.reads import committed_and_aborted
from cluster.lab.versions import txnlab_home


class RssSampler(threading.Thread):
    def __init__(self, cluster: LocalCluster):
        super().__init__(daemon=True)
        self.cluster, self.peak, self.stop = cluster, {}, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for node in self.cluster.layout.node_ids:
                pid = self.cluster.node_pid(node)
                try:
                    rss = psutil.Process(pid).memory_info().rss if pid else 0
                except psutil.Error:
                    rss = 0
                self.peak[node] = max(self.peak.get(node, 0), rss)
            time.sleep(0.1)


def trial(cluster: LocalCluster) -> tuple[float, dict[int, int]]:
    cluster.down(purge=True, progress=lambda _m: None)
    sampler = RssSampler(cluster)
    sampler.start()
    started = time.monotonic()
    cluster.up(progress=lambda _m: None)
    elapsed = time.monotonic() - started
    committed_and_aborted(cluster.connection(), transactions=20)
    sampler.stop.set()
    sampler.join()
    return elapsed, sampler.peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--base-port", type=int, default=23000)
    args = parser.parse_args()
    cluster = LocalCluster.load(txnlab_home() / "bench-cluster", base_port=args.base_port, **local_stack())
    times, peaks = [], []
    try:
        for i in range(args.trials):
            elapsed, peak = trial(cluster)
            times.append(elapsed)
            peaks.append(max(peak.values()))
            print(f"trial {i + 1}: ready in {elapsed:.1f}s, peak broker RSS {max(peak.values()) / 2**20:.0f} MiB")
    finally:
        cluster.down(purge=True, progress=lambda _m: None)
    result = {"trials": args.trials, "ready_seconds_median": round(statistics.median(times), 1),
              "ready_seconds_all": [round(t, 1) for t in times],
              "peak_broker_rss_mib_max": round(max(peaks) / 2**20), "heap": cluster.layout.heap,
              "goal_ready_seconds": 30, "ratio_to_goal": round(statistics.median(times) / 30, 2)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
