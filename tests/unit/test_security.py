"""The secured cluster's pure parts: ACLs as data and as a script, broker settings, format arguments,
the secrets folder (modes, idempotence) and its certificates (valid for what clients dial)."""
from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509

from cluster.lab import security
from cluster.lab.layout import ClusterLayout
from cluster.lab.versions import REPO_ROOT


def test_the_docs_print_exactly_the_acls_cluster_up_creates():
    assert security.acl_script() in (REPO_ROOT / "docs" / "security.md").read_text()


def test_roles_least_privilege():
    ops = {(a.role, a.resource, a.operation) for a in security.ACLS}
    writes = {"Write", "Create", "Alter", "IdempotentWrite"}
    assert not [o for o in ops if o[0] in ("exporter", "verify") and o[2] in writes]   # read-only roles
    assert [o for o in ops if o[2] == "Alter"] == [("operator", "cluster", "Alter")]   # only operator aborts
    assert ("exporter", "transactional-id", "Describe") in ops                       # else ids are hidden
    assert {a.role for a in security.ACLS} == set(security.ROLES) - {security.ADMIN}
    assert len(security.acl_bindings()) == len(security.ACLS)


def test_secrets_folder_is_private_idempotent_and_certificates_fit(tmp_path: Path):
    secrets = security.Secrets(tmp_path / "secrets")
    secrets.ensure()
    first = {p.name: p.read_bytes() for p in secrets.folder.iterdir()}
    secrets.ensure()
    assert {p.name: p.read_bytes() for p in secrets.folder.iterdir()} == first          # kept, not regenerated
    assert stat.S_IMODE(secrets.folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in secrets.folder.iterdir())
    cert = x509.load_pem_x509_certificate(secrets.server_cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    ca = x509.load_pem_x509_certificate(secrets.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)
    keystore = secrets.broker_keystore.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----") and keystore.count("BEGIN CERTIFICATE") == 2


def test_broker_settings_and_format_arguments_of_a_secured_node(tmp_path: Path):
    layout = ClusterLayout(tmp_path, security="sasl_ssl")
    secrets = security.Secrets(layout.secrets_dir)
    secrets.ensure()
    props = {**layout.server_properties(1), **security.broker_properties(secrets, layout.sasl_listeners())}
    assert props["listener.security.protocol.map"].count("SASL_SSL") == 5
    assert "PLAINTEXT" not in props["listener.security.protocol.map"]
    assert props["super.users"] == "User:admin" and props["allow.everyone.if.no.acl.found"] == "false"
    admin = secrets.password("admin")
    jaas = [k for k, v in props.items() if admin in v]
    assert len(jaas) == 5 and all(k.startswith("listener.name.") for k in jaas)        # 4 SCRAM + controller
    args = security.format_arguments(secrets)
    assert args.count("--add-scram") == len(security.ROLES)
    assert all(f"name={r}," in " ".join(args) for r in security.ROLES)


def test_plaintext_layout_is_unchanged(tmp_path: Path):
    props = ClusterLayout(tmp_path).server_properties(1)
    assert set(props["listener.security.protocol.map"].split(",")) == {
        "CLIENT:PLAINTEXT", "CONTROLLER:PLAINTEXT", "REPL_FROM_1:PLAINTEXT", "REPL_FROM_2:PLAINTEXT", "REPL_FROM_3:PLAINTEXT"}
