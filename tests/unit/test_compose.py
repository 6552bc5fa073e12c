"""docker-compose.yml: generated from the same layout as the local launcher, and valid compose.

Debian's docker-compose validates the files against its schema (`config -q` needs no engine); the stack runs on a
real engine in tests/integration/test_docker.py.
"""
from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from cluster.lab import compose, security
from cluster.lab.versions import REPO_ROOT

SECURED = REPO_ROOT / compose.SECURED_FILE


def test_committed_files_are_what_the_layout_renders():
    for path, text in compose.rendered().items():
        assert path.read_text() == text, f"{path.name} is stale: run `python -m cluster.lab.compose`"


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


def properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def test_every_broker_link_crosses_toxiproxy():
    layout = compose.compose_layout()
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert {"kafka-1", "kafka-2", "kafka-3", "toxiproxy", "prometheus"} <= set(doc["services"])
    for node in layout.node_ids:
        service = doc["services"][f"kafka-{node}"]
        assert f"./compose/kafka-{node}.properties:{compose.KAFKA_PROPERTIES}:ro" in service["volumes"]
        props = properties(REPO_ROOT / "compose" / f"kafka-{node}.properties")
        assert props["min.insync.replicas"] == "2" and props["transaction.state.log.replication.factor"] == "3"
        advertised = dict(e.split("://") for e in props["advertised.listeners"].split(","))
        assert advertised["CLIENT"] == f"127.0.0.1:{layout.client_proxy_port(node)}"       # through the proxy
        for peer in layout.peers(node):
            assert advertised[f"REPL_FROM_{peer}"] == f"127.0.0.1:{layout.repl_proxy_port(node, peer)}"
        voters = dict(v.split("@") for v in props["controller.quorum.voters"].split(","))
        for voter in layout.peers(node):
            assert voters[str(voter)] == f"127.0.0.1:{layout.controller_proxy_port(voter, node)}"
        assert props["log.dirs"] == compose.KAFKA_DATA
    proxies = compose.toxiproxy_config(layout)
    assert [p["name"] for p in proxies] == [p.name for p in layout.proxies()]
    assert all(p["listen"].startswith("127.0.0.1:") and p["upstream"].startswith("127.0.0.1:") for p in proxies)


@pytest.mark.parametrize("name", ["docker-compose.yml", compose.SECURED_FILE])
def test_every_service_is_on_the_host_network_or_none_and_publishes_nothing(name):
    """No bridge with addresses outside 127.0.0.0/8: every service shares the host's network and binds 127.0.0.1
    (the one-shot ones that need no network have none); no port is published."""
    doc = yaml.safe_load((REPO_ROOT / name).read_text())
    assert {s["network_mode"] for s in doc["services"].values()} <= {"host", "none"}
    assert not [n for n, s in doc["services"].items() if "ports" in s or "networks" in s]
    assert "networks" not in doc
    text = (REPO_ROOT / name).read_text() + (REPO_ROOT / "compose" / "toxiproxy.json").read_text()
    assert "0.0.0.0" not in text


def test_every_image_is_built_from_a_debian_base_by_a_dockerfile_of_its_own():
    doc = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    built = {s["image"]: s["build"] for s in doc["services"].values() if "build" in s}
    assert set(built) == set(compose.images(compose.compose_layout()).values())
    for build in built.values():
        dockerfile = (REPO_ROOT / build["dockerfile"]).read_text()
        assert build["network"] == "host"
        froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
        assert froms and set(froms) == {compose.BASE_IMAGE}, build["dockerfile"]
    kafka = doc["services"]["kafka-1"]
    assert kafka["build"]["args"] == {"KAFKA_VERSION": compose.compose_layout().kafka_version}
    assert compose.layout_of_label(kafka["labels"][compose.LAYOUT_LABEL]) == compose.compose_layout()
    assert doc["services"]["grafana"]["profiles"] == ["grafana"]      # the one public image: opt in


def test_a_stack_of_its_own_renders_every_file_into_its_folder_with_its_ports(tmp_path):
    layout = compose.compose_layout(base_port=17000)
    files = compose.stack_files(layout, tmp_path)
    assert all(path.parent in (tmp_path, tmp_path / "grafana") for path in files)
    doc = yaml.safe_load(files[tmp_path / "docker-compose.yml"])
    assert doc["services"]["kafka-1"]["build"]["context"] == str(REPO_ROOT)
    assert f"{tmp_path}/kafka-2.properties:{compose.KAFKA_PROPERTIES}:ro" in doc["services"]["kafka-2"]["volumes"]
    assert "--port" in doc["services"]["exporter"]["command"] and "17800" in doc["services"]["exporter"]["command"]
    assert json.loads(files[tmp_path / "toxiproxy.json"])[0]["listen"] == "127.0.0.1:17001"
    assert compose.layout_of_label(doc["services"]["kafka-3"]["labels"][compose.LAYOUT_LABEL]) == layout
    assert "CLIENT://127.0.0.1:17001" in files[tmp_path / "kafka-1.properties"]


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
    assert 'pip install --no-cache-dir -e ".[verify,report]"' in dockerfile
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
    assert names == {"localhost"}                         # every container dials 127.0.0.1 (host network)
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
        voters = dict(v.split("@") for v in props["controller.quorum.voters"].split(","))
        assert all(voters[str(v)] == f"127.0.0.1:{layout.controller_proxy_port(v, node)}"   # every link proxied
                   for v in layout.peers(node))
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
