"""The exporter installed alone: a fresh virtualenv, `pip install <txnlab>` with no extra, then
`python -m exporter` from it against the shared test cluster (docs/exporter.md, "Installing only the
exporter").

The sources are copied first (no .venv, .txnlab, runs, tests): pip builds a local directory in place,
and a build/ left in the working tree could carry stale modules into a later wheel.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from cluster.lab.versions import REPO_ROOT
from cluster.access.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

NOT_IN_THE_CORE = ("pyspark", "matplotlib", "grafana_foundation_sdk", "confluent_kafka", "psutil")
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".txnlab", "runs", "build", "dist", "*.egg-info",
                                     "__pycache__", ".pytest_cache", "tests", "bench")


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory) -> Path:
    """A virtualenv with txnlab and its core dependencies only (pip's cache makes the second time quick)."""
    root = tmp_path_factory.mktemp("exporter-install")
    source, venv = root / "txnlab", root / "venv"
    shutil.copytree(REPO_ROOT, source, ignore=COPY_IGNORE)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(source)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_core_install_has_no_extra_and_stays_small(core_venv):
    probe = "import importlib.util as u; print(' '.join(m for m in %r if u.find_spec(m)))" % (NOT_IN_THE_CORE,)
    found = subprocess.run([str(core_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                           check=True, cwd=core_venv, timeout=60)
    assert found.stdout.split() == []
    size_mb = sum(f.lstat().st_size for f in core_venv.rglob("*") if f.is_file()) / 2**20
    assert size_mb < 100, f"{size_mb:.0f} MB (docs/exporter.md measured 61 MB; the full lab is about 750 MB)"
    refused = subprocess.run([str(core_venv / "bin" / "txnlab"), "verify", "runs/none"], capture_output=True,
                             text=True, cwd=core_venv, timeout=60)
    assert refused.returncode == 2 and "pip install 'txnlab[verify]'" in refused.stderr


def test_the_core_install_serves_metrics_of_the_cluster(core_venv, cluster, tmp_path):
    password = f"web-{uuid.uuid4().hex}"
    log = tmp_path / "exporter.log"
    env = {"PATH": "/usr/bin:/bin", "TXNLAB_EXPORTER__WEB__BASIC_AUTH_USERNAME": "prom",
           "TXNLAB_EXPORTER__WEB__BASIC_AUTH_PASSWORD": password}
    with log.open("w") as out:
        proc = subprocess.Popen([str(core_venv / "bin" / "python"), "-m", "exporter", "--bootstrap",
                                 cluster.connection().bootstrap, "--port", "0", "--interval", "1",
                                 "--log-level", "DEBUG"], stdout=out, stderr=subprocess.STDOUT, cwd=core_venv, env=env)
    try:
        url = wait_until(lambda: _served_url(log), 60, "the exporter's 'serving' line")
        wait_until(lambda: "kafkatxn_up 1.0" in _metrics(url, password).splitlines(), 60, "kafkatxn_up 1",
                   ignore=(requests.RequestException,))
        assert requests.get(f"{url}/metrics", timeout=10).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    output = log.read_text()
    assert proc.returncode == 0, output
    assert "basic auth over plain HTTP" in output and "Starting KafkaAdminClient" in output
    assert password not in output


def _served_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if " serving http://" in line:
            return line.split(" serving ")[1].split("/metrics")[0]
    return None


def _metrics(url: str, password: str) -> str:
    response = requests.get(f"{url}/metrics", auth=("prom", password), timeout=20)
    response.raise_for_status()
    return response.text
