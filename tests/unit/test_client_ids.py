"""Every client's workloads name their records as the Python reference does (chaos/record/ids.py: record and attempt
ids, the padded JSON value, the headers, a keyed record's key number): vectors made here by the reference are
checked by each client's own code (franz-go: records_test.go under `go test`; KafkaJS: records.test.js under
`node --test`; the Java client: its Main --check-ids)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from chaos.record.ids import INCARNATION_STRIDE, attempt_id, encode_value, headers, record_id
from chaos.workloads.confluent.txn_producer import key_number
from cluster.lab.clients import CLIENTS


def vectors() -> list[dict]:
    cases = []
    for run, process, attempt_no, index, input_id, size, keys in [
            ("r7f3a1", "txp-0", 0, 0, None, 100, 16), ("r7f3a1", "txp-1", 41, 5, None, 0, 3),
            ("rabc", "eos-1", 7, 12, "rabc.feeder.3.2", 100, 16), ("rabc", "eos-0", 2 * INCARNATION_STRIDE + 9, 49,
                                                                  "rabc.feeder.1000000004.0", 1000, 7),
            ("r0", "txp-0-zombie", 123456, 3, None, 45, 1), ("r0", "keyed-feeder", 5, 1, None, 20, 64)]:
        rid, attempt = record_id(run, process, attempt_no, index), attempt_id(run, process, attempt_no)
        extra = {"input": input_id} if input_id else None
        cases.append({"run": run, "process": process, "attempt_no": attempt_no, "index": index, "input": input_id or "",
                      "size": size, "keys": keys, "record_id": rid,
                      "value": encode_value(rid, attempt, process, size, extra=extra).decode(),
                      "key_number": key_number(rid, keys),
                      "headers": {k: v.decode() for k, v in headers(rid, attempt, process, input_id)}})
    return cases


def checked(tmp_path, command: list[str], cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A client's own check of the reference's vectors: `command` run with them in $TXNLAB_ID_VECTORS (and, for
    a command that takes the file as its last argument, there too)."""
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(vectors()))
    argv = [str(path) if arg == "{vectors}" else arg for arg in command]
    return subprocess.run(argv, cwd=cwd, env={**os.environ, "TXNLAB_ID_VECTORS": str(path)}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain (scripts/setup.sh requires one)")
def test_franz_go_names_records_as_the_reference_does(tmp_path):
    proc = checked(tmp_path, ["go", "test", "-count=1", "-run", "TestIdsMatchPython", "."],
                   cwd=CLIENTS["franz-go"].source, timeout=600)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js (scripts/setup.sh installs it)")
def test_kafkajs_names_records_as_the_reference_does(tmp_path):
    proc = checked(tmp_path, ["node", "--test", "records.test.js"], cwd=CLIENTS["kafkajs"].source)
    assert proc.returncode == 0 and "# pass 1" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.skipif(shutil.which("java") is None, reason="no JDK (scripts/setup.sh installs one)")
def test_the_java_client_names_records_as_the_reference_does(tmp_path):
    client = CLIENTS["java"]
    client.install()                                   # built at set-up; a no-op unless its sources changed
    proc = checked(tmp_path, ["java", "-cp", str(client.product()), client.main, "--check-ids", "{vectors}"])
    assert proc.returncode == 0 and f"ok: {len(vectors())} vectors" in proc.stdout + proc.stderr, \
        proc.stdout[-3000:] + proc.stderr[-3000:]
