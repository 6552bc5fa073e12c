"""Standalone reproductions (chaos/bugs/repro/<bug>/): a program in the client's own language for each finding not
reported upstream, needing only a Kafka cluster and the client (no txnlab, no Spark), which brings the symptom
about itself and says whether it saw it (exit 1: seen, 0: not seen, 2: the run itself failed). The campaign's
(`-m campaign`): each run against the session's cluster (Kafka 4.4.0, transaction.version 2, its release's
default), its output kept in the test's report."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.integration.conftest import CAMPAIGN

REPRO = Path(__file__).resolve().parents[2] / "chaos" / "bugs" / "repro"


def go_build(folder: Path, into: Path) -> Path:
    go = shutil.which("go")
    assert go, "go not found on PATH: `make setup` installs the toolchain the client workloads build with"
    binary = into / folder.name
    proc = subprocess.run([go, "build", "-buildvcs=false", "-o", str(binary), "."], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return binary


@CAMPAIGN
def test_franz_go_s_wait_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """franz-go-tv2-wait's reproduction (a Go program on franz-go alone): two transactional producers back to back
    for 20 s at transaction.version 2 see transactions that took 4 s or more, each printed with its time."""
    binary = go_build(REPRO / "franz-go-tv2-wait", tmp_path)
    proc = subprocess.run([str(binary), "-brokers", cluster.connection().bootstrap, "-duration", "20s",
                           "-replicas", "3"], capture_output=True, text=True, timeout=180)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    slow = re.findall(r"transaction \d+ took (\d+(?:\.\d+)?)s", proc.stdout)
    assert slow and all(float(s) >= 4 for s in slow), proc.stdout[-3000:]
    assert "SYMPTOM: transactions waited with no fault" in proc.stdout
