"""docker-compose.yml: generated from the same layout as the local launcher, and valid compose.

Docker has no engine here: Debian's docker-compose validates the file against its schema
(`config -q` needs no engine). `make test` installs it (scripts/setup.sh, WITH_TEST_TOOLS=1).
"""
from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from cluster import compose, security
from cluster.versions import REPO_ROOT

SECURED = REPO_ROOT / compose.SECURED_FILE


def test_committed_files_are_what_the_layout_renders():
    for path, text in compose.rendered().items():
        assert path.read_text() == text, f"{path.name} is stale: run `python -m cluster.compose`"


@pytest.mark.parametrize("name", ["docker-compose.yml", compose.SECURED_FILE])
def test_docker_compose_validates_the_file(name):
    binary = shutil.which("docker-compose")
    assert binary, "docker-compose not installed: run `make setup-test`"
    proc = subprocess.run([binary, "-f", str(REPO_ROOT / name), "config", "-q"],
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


# ---- the secured profile ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose_secrets(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("compose") / "secrets"
    compose.write_secrets(folder)
    return folder


def test_secrets_are_private_and_fit_the_containers(compose_secrets: Path):
    assert stat.S_IMODE(compose_secrets.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in compose_secrets.iterdir())
    copied = [name for names in compose.secrets_owners(compose.compose_layout("sasl_ssl")).values() for name in names]
    assert set(copied) <= {p.name for p in compose_secrets.iterdir()}          # what the secrets container installs
    assert not ({"ca-key.pem"} | {f"{r}.password" for r in security.ROLES}) & set(copied)  # stays on the host
    cert = x509.load_pem_x509_certificate((compose_secrets / "server.pem").read_bytes())
    names = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName))
    assert {"localhost", "toxiproxy", "kafka-1", "kafka-2", "kafka-3"} <= names   # containers dial by name
    # Every file a container is told to read is one the secrets container puts in the volume.
    mount = str(compose.SECRETS_MOUNT)
    texts = [SECURED.read_text(), (REPO_ROOT / "compose" / "prometheus.secured.yml").read_text(),
             *(p.read_text() for p in compose_secrets.iterdir() if p.name in copied and not p.name.endswith(".pem"))]
    referenced = {m for text in texts for m in re.findall(re.escape(mount) + r"/([\w.-]+)", text)}
    assert referenced and referenced <= set(copied)


def test_secured_brokers_listen_only_on_sasl_ssl_with_scram_users(compose_secrets: Path):
    layout = compose.compose_layout("sasl_ssl")
    for node in layout.node_ids:
        props = dict(line.split("=", 1) for line in
                     (compose_secrets / f"kafka-{node}.properties").read_text().splitlines() if line)
        protocols = dict(e.split(":") for e in props["listener.security.protocol.map"].split(","))
        assert set(protocols.values()) == {"SASL_SSL"} and set(protocols) == {"CLIENT", "CONTROLLER", *(
            f"REPL_FROM_{n}" for n in layout.node_ids)}
        assert props["ssl.keystore.location"] == f"{compose.SECRETS_MOUNT}/broker-keystore.pem"
        assert props["super.users"] == "User:admin" and props["allow.everyone.if.no.acl.found"] == "false"
        assert "toxiproxy:" in props["controller.quorum.voters"]                   # every link still proxied
        args = (compose_secrets / f"kafka-{node}.format.args").read_text().split()
        assert args[:2] == ["kafka.tools.StorageTool", "format"] and args.count("--add-scram") == len(security.ROLES)
        assert f"{compose.SECRETS_MOUNT}/kafka-{node}.properties" in args
    acls = (compose_secrets / "acls.sh").read_text()
    assert acls == security.acl_script(bootstrap=layout.bootstrap, admin_config=f"{compose.SECRETS_MOUNT}/admin.properties")


def test_no_secret_is_in_the_committed_secured_files(compose_secrets: Path):
    committed = SECURED.read_text() + (REPO_ROOT / "compose" / "prometheus.secured.yml").read_text()
    s = security.Secrets(compose_secrets)
    values = [s.password(r) for r in security.ROLES] + [s.web_password_file.read_text().strip()]
    assert not [v for v in values if v in committed]
    assert "BEGIN" not in committed and "jaas" not in committed.lower() and "scram-sha" not in committed.lower()
    assert not re.search(r"[0-9a-f]{32,}", committed)                              # no password-looking token
    # "password" appears only as a file name or a password_file key, never with a value
    assert all(m in ("password_file", "web.password") for m in re.findall(r"[\w.]*password[\w.]*", committed.lower()))


def test_secured_exporter_serves_https_and_prometheus_scrapes_it_with_basic_auth(compose_secrets: Path):
    layout = compose.compose_layout("sasl_ssl")
    doc = yaml.safe_load(SECURED.read_text())
    exporter = doc["services"]["exporter"]
    assert exporter["environment"] == [f"TXNLAB_EXPORTER_CONFIG={compose.SECRETS_MOUNT}/exporter.yaml"]
    assert exporter["depends_on"] == {"acls": {"condition": "service_completed_successfully"}}
    config = yaml.safe_load((compose_secrets / "exporter.yaml").read_text())
    assert config["kafka"]["security_protocol"] == "SASL_SSL" and config["kafka"]["sasl_username"] == "exporter"
    assert config["web"]["tls_cert_file"].startswith(str(compose.SECRETS_MOUNT)) and config["web"]["basic_auth_password"]
    prometheus = yaml.safe_load((REPO_ROOT / "compose" / "prometheus.secured.yml").read_text())
    job = next(j for j in prometheus["scrape_configs"] if j["job_name"] == "txnlab-exporter")
    assert job["scheme"] == "https" and job["tls_config"]["ca_file"] == f"{compose.SECRETS_MOUNT}/ca.pem"
    assert job["basic_auth"] == {"username": security.WEB_USER, "password_file": f"{compose.SECRETS_MOUNT}/web.password"}
    assert job["static_configs"][0]["targets"] == [f"127.0.0.1:{layout.exporter_port}"]
    assert "./compose/prometheus.secured.yml:/etc/prometheus/prometheus.yml:ro" in doc["services"]["prometheus"]["volumes"]
    assert doc["services"]["secrets"]["volumes"][0] == "./compose/secrets:/host-secrets:ro"
    assert "compose/secrets/" in (REPO_ROOT / ".gitignore").read_text().split()


def test_compose_secrets_regenerate_a_certificate_without_the_container_names(tmp_path: Path):
    plain = security.Secrets(tmp_path / "secrets")
    plain.ensure()
    ca, password = plain.ca_file.read_bytes(), plain.password("admin")
    compose.write_secrets(plain.folder)
    cert = x509.load_pem_x509_certificate(plain.server_cert_file.read_bytes())
    assert "kafka-1" in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert plain.ca_file.read_bytes() == ca and plain.password("admin") == password    # the rest is kept
