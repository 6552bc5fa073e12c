"""The exporter's command-line flags, shared by `txnlab exporter` and `python -m exporter` (exporter/app.py).

Owns: the flags and which config key each sets. Kept apart from app.py so that building txnlab's command line
(every `txnlab` command) does not import the exporter's machinery.
Must not: import anything beyond the standard library.
"""
from __future__ import annotations

import argparse

FLAGS = {  # flag -> config key
    "bootstrap": "kafka.bootstrap", "listen_address": "web.listen_address", "port": "web.port",
    "interval": "collection.interval_seconds", "granularity": "metrics.granularity",
    "topic_allow": "filters.topic_allow", "topic_deny": "filters.topic_deny",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file (reference: exporter/txnlab-exporter.yaml; "
                   "also $TXNLAB_EXPORTER_CONFIG)")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers host:port[,...]")
    p.add_argument("--listen-address", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to serve on (default 19800; 0 picks a free one)")
    p.add_argument("--interval", type=float, help="background collection interval in seconds (default 15)")
    p.add_argument("--granularity", choices=("partition", "topic"))
    p.add_argument("--topic-allow", help="regex of topics to watch (default .*)")
    p.add_argument("--topic-deny", help="regex of topics to skip (default ^__transaction_state$)")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
