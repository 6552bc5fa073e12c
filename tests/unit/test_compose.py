"""docker-compose.yml: generated from the same layout as the local launcher, and valid compose.

Docker has no engine here: Debian's docker-compose validates the file against its schema
(`config -q` needs no engine). `make test` installs it (scripts/setup.sh, WITH_TEST_TOOLS=1).
"""
from __future__ import annotations

import shutil
import subprocess

import yaml

from cluster import compose
from cluster.versions import REPO_ROOT


def test_committed_files_are_what_the_layout_renders():
    for path, text in compose.rendered().items():
        assert path.read_text() == text, f"{path.name} is stale: run `python -m cluster.compose`"


def test_docker_compose_validates_the_file():
    binary = shutil.which("docker-compose")
    assert binary, "docker-compose not installed: run `make setup-test`"
    proc = subprocess.run([binary, "-f", str(REPO_ROOT / "docker-compose.yml"), "config", "-q"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr


def test_a_broken_file_is_rejected(tmp_path):
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    doc["services"]["kafka-1"]["imagee"] = doc["services"]["kafka-1"].pop("image")
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(yaml.safe_dump(doc))
    proc = subprocess.run([shutil.which("docker-compose") or "docker-compose", "-f", str(bad), "config", "-q"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0 and "imagee" in proc.stderr


def test_every_broker_link_crosses_toxiproxy():
    layout = compose.compose_layout()
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert {"kafka-1", "kafka-2", "kafka-3", "toxiproxy", "prometheus"} <= set(doc["services"])
    for node in layout.node_ids:
        env = doc["services"][f"kafka-{node}"]["environment"]
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert f"CLIENT://localhost:{layout.client_proxy_port(node)}" in env["KAFKA_ADVERTISED_LISTENERS"]
        peers_advertised = [e for e in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
                            if e.startswith("REPL_FROM_") and not e.startswith(f"REPL_FROM_{node}:")]
        assert peers_advertised and all("//toxiproxy:" in e for e in peers_advertised)
        voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
        assert all("@toxiproxy:" in v for v in voters if not v.startswith(f"{node}@"))
    proxies = compose.toxiproxy_config(layout)
    assert [p["name"] for p in proxies] == [p.name for p in layout.proxies()]
    for proxy in proxies:
        target = proxy["name"].split("-")[0][1:]          # n2-repl-from-1 -> node 2
        assert proxy["upstream"].startswith(f"kafka-{target}:")


def test_exporter_service_and_prometheus_scrape_it():
    layout = compose.compose_layout()
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    exporter = doc["services"]["exporter"]
    assert exporter["build"]["dockerfile"] == "compose/exporter.Dockerfile"
    assert (REPO_ROOT / exporter["build"]["dockerfile"]).is_file()
    assert exporter["command"][exporter["command"].index("--bootstrap") + 1] == layout.bootstrap
    dockerfile = (REPO_ROOT / exporter["build"]["dockerfile"]).read_text().splitlines()
    assert [line for line in dockerfile if "pip install" in line] == [  # the core only: a slim image
        "RUN pip install --no-cache-dir . && rm -rf /root/.cache"]
    prometheus = yaml.safe_load((REPO_ROOT / "compose" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in prometheus["scrape_configs"]}
    assert jobs["txnlab-exporter"] == [f"127.0.0.1:{layout.exporter_port}"]


def test_verify_service_runs_the_spark_job_with_the_connector_setup_uses():
    layout = compose.compose_layout()
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    verify = doc["services"]["verify"]
    dockerfile = (REPO_ROOT / verify["build"]["dockerfile"]).read_text()
    assert verify["profiles"] == ["verify"] and "./runs:/runs" in verify["volumes"]
    assert f"TXNLAB_KAFKA_BOOTSTRAP={layout.bootstrap}" in verify["environment"]
    assert "spark_analysis/pom.xml" in dockerfile and 'ENTRYPOINT ["txnlab", "verify"]' in dockerfile
    assert 'pip install --no-cache-dir ".[verify]"' in dockerfile
    assert "SPARK_KAFKA_VERSION" in dockerfile and "openjdk-17-jre-headless" in dockerfile
