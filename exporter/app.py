"""Wiring of the exporter process: config -> access layer -> service -> collectors -> HTTP server.

Owns: building the pieces from one ExporterConfig, and running until SIGINT/SIGTERM.
Must not: hold logic of its own beyond wiring.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version as package_version

from prometheus_client import CollectorRegistry, generate_latest

from cluster.access.connection import install_log_redaction
from exporter.arguments import FLAGS, add_arguments
from exporter.collectors import TxnCollector
from exporter.config import ConfigError, ExporterConfig, load_config
from exporter.kafka_access import KafkaAccess
from exporter.service import ExporterService
from exporter.web import MetricsServer

log = logging.getLogger("txnlab.exporter")


def txnlab_version() -> str:
    try:
        return package_version("txnlab")
    except PackageNotFoundError:
        return "dev"


def config_from_args(args: argparse.Namespace) -> ExporterConfig:
    return load_config(args.config, flags={key: getattr(args, flag) for flag, key in FLAGS.items()})


@dataclass
class Exporter:
    """A running exporter: its service (background loop) and HTTP server. /metrics: the registry's metrics
    (the service's error counters), then the collector's `kafkatxn_*` families (not in the registry)."""
    config: ExporterConfig
    service: ExporterService
    server: MetricsServer
    registry: CollectorRegistry
    collector: TxnCollector

    @classmethod
    def build(cls, config: ExporterConfig) -> "Exporter":
        access = KafkaAccess(config.kafka, request_timeout_s=config.kafka.request_timeout_seconds,
                             producers_batch=config.collection.producers_batch_size,
                             metadata_max_age_s=config.collection.metadata_max_age_seconds,
                             metadata_min_refresh_s=config.collection.metadata_min_refresh_seconds,
                             topic_filter=config.filters.topic_allowed)
        registry = CollectorRegistry(auto_describe=False)
        service = ExporterService(access, config, registry)
        collector = TxnCollector(service, txnlab_version())
        service.after_cycle.append(collector.prerender)
        server = MetricsServer(lambda: generate_latest(registry) + collector.exposition(), lambda: service.ready,
                               config.web)
        return cls(config, service, server, registry, collector)

    def start(self) -> "Exporter":
        self.service.start()
        self.server.start()
        return self

    def close(self) -> None:
        self.server.close()
        self.service.stop()


M_ARENA_MAX = -8          # glibc mallopt parameter


@functools.cache
def _glibc():
    """glibc, loaded once (a CDLL made after every background cycle kept a little of each: the soak's tracemalloc,
    2026-12-01), or None on another C library."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


def limit_malloc_arenas(arenas: int = 2) -> None:
    """glibc gives every thread that allocates its own malloc arena and each keeps what was freed in it: with
    the HTTP, background and request threads the process held more than it used. A few arenas, set before
    any thread starts. A no-op on other C libraries."""
    if (libc := _glibc()) is not None:
        libc.mallopt(M_ARENA_MAX, arenas)


def release_free_memory() -> None:
    """Hand memory freed after a background cycle (the producer scan's transient objects) back to the OS."""
    if (libc := _glibc()) is not None:
        libc.malloc_trim(0)


def run(args: argparse.Namespace) -> int:
    limit_malloc_arenas()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_redaction()  # kafka-python logs its configuration, passwords included, at DEBUG
    if args.log_level != "DEBUG":
        logging.getLogger("kafka").setLevel(logging.WARNING)   # kafka-python logs every connection at INFO
    config = config_from_args(args)
    exporter = Exporter.build(config)
    exporter.service.after_cycle.append(release_free_memory)
    exporter.start()
    scheme = "https" if config.web.tls else "http"
    log.info("serving %s://%s:%d/metrics for %s (interval %.1fs)", scheme, config.web.listen_address,
             exporter.server.port, config.kafka.describe(), config.collection.interval_seconds)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("stopping")
    exporter.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exporter", description="txnlab Prometheus exporter")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except (ConfigError, OSError) as exc:  # bad settings, port taken, unreadable cert
        print(f"python -m exporter: {exc}", file=sys.stderr)
        return 2
