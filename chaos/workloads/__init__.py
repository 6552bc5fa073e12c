"""Workloads: processes that drive a cluster and record every operation in the run history.

Each module has `add_arguments(parser)` and `run(ctx, args)`; `python -m chaos.workloads NAME ...`
runs one (see base.py). WORKLOADS names them for the runner and the CLI.
"""
WORKLOADS = {
    "txn-producer": "chaos.workloads.txn_producer",
    "processor": "chaos.workloads.processor",
    "java-copier": "chaos.workloads.java_copier",
    "storm": "chaos.workloads.storm",
    "observer": "chaos.workloads.observer",
    "streams": "chaos.workloads.streams",
    "flink": "chaos.workloads.flink",
}
# The transactional roles: every client runs them (chaos/workloads/native.py), a zombie producer is one of them.
TRANSACTIONAL_WORKLOADS = ("txn-producer", "processor")
