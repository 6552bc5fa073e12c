"""The reference workloads, on confluent-kafka (librdkafka): the transactional producer, the exactly-once
processor, what those two share (transactional.py), the observers and the producer-id storm."""
from __future__ import annotations

import os

from chaos.workloads import CLIENT_LOG_VARIABLE

LIBRDKAFKA_LEVELS = {"error": 3, "warn": 4, "info": 6, "debug": 7}     # syslog levels, librdkafka's log_level


def librdkafka_log(contexts: str) -> dict[str, object]:
    """librdkafka's own log settings from TXNLAB_CLIENT_LOG: errors only by default; at `debug` also its debug
    `contexts` (e.g. "eos,msg,protocol": the idempotent and transactional state machine, each message, each
    request), written to the process's stderr, so into RUN/logs/<process>.log."""
    level = os.environ.get(CLIENT_LOG_VARIABLE, "").lower()
    settings: dict[str, object] = {"log_level": LIBRDKAFKA_LEVELS.get(level, 3)}
    if level == "debug":
        settings["debug"] = contexts
    return settings
