"""Standalone reproductions (chaos/bugs/repro/<bug>/): a program in the client's own language for each finding not
reported upstream, needing only a Kafka cluster and the client (no txnlab, no Spark), which brings the symptom
about itself and says whether it saw it (exit 1: seen, 0: not seen, 2: the run itself failed). The campaign's
(`-m campaign`): each run against the session's cluster (Kafka 4.4.0, transaction.version 2, its release's
default), its output kept in the test's report."""
from __future__ import annotations

import re
import subprocess

from chaos.catalog.bugs import BUGS_DIR
from cluster.lab.clients import go_build
from tests.integration.conftest import CAMPAIGN

REPRO = BUGS_DIR / "repro"


@CAMPAIGN
def test_franz_go_s_wait_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """franz-go-tv2-wait's reproduction (a Go program on franz-go alone): two transactional producers back to back
    for 20 s at transaction.version 2 see transactions that took 4 s or more, each printed with its time."""
    binary = tmp_path / "franz-go-tv2-wait"
    go_build(REPRO / "franz-go-tv2-wait", binary, "franz-go-tv2-wait's reproduction")
    proc = subprocess.run([str(binary), "-brokers", cluster.connection().bootstrap, "-duration", "20s",
                           "-replicas", "3"], capture_output=True, text=True, timeout=180)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    slow = re.findall(r"transaction \d+ took (\d+(?:\.\d+)?)s", proc.stdout)
    assert slow and all(float(s) >= 4 for s in slow), proc.stdout[-3000:]
    assert "SYMPTOM: transactions waited with no fault" in proc.stdout
