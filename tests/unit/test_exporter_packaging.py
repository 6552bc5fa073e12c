"""The exporter ships alone: the core dependencies of pyproject.toml carry `python -m exporter`,
`txnlab exporter` and `txnlab txn ...`; a command that needs an extra says which, in one line.

The imports run in a child Python whose every extra's module is blocked (None in sys.modules), so a
top-level import of one on the exporter's path fails here as it would in a core-only install
(tests/integration/test_exporter_install.py installs one for real).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from cluster.lab.versions import REPO_ROOT
from txnlab import cli

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
EXTRA_MODULES = ("confluent_kafka", "psutil", "requests", "pyspark", "matplotlib", "grafana_foundation_sdk")
WITHOUT_EXTRAS = ("import sys\nsys.modules.update(dict.fromkeys({modules}))\n"
                  "from txnlab.cli import main\nsys.exit(main(sys.argv[1:]))\n").format(modules=EXTRA_MODULES)


def txnlab_without_extras(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *argv], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=60)


def test_core_dependencies_are_only_what_the_exporter_and_txn_need():
    core = {dep.split("==")[0].lower() for dep in PYPROJECT["project"]["dependencies"]}
    assert core == {"kafka-python", "prometheus-client", "rich", "pydantic", "pyyaml"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["all"] == ["txnlab[lab,verify,report,dashboards,docker]"]
    assert set(cli.EXTRAS) | {"dashboards", "all", "test"} == set(extras)
    assert any(d.startswith("pyspark[connect]==") for d in extras["verify"])      # the job as a Connect client too
    assert any(d.startswith("matplotlib==") for d in extras["report"])


def test_txn_and_the_exporter_run_without_any_extra():
    assert txnlab_without_extras("exporter", "--help").returncode == 0
    env = {**os.environ, "TXNLAB_EXPORTER__KAFKA__REQUEST_TIMEOUT_SECONDS": "1"}
    listed = txnlab_without_extras("txn", "list", "--bootstrap", "127.0.0.1:9", env=env)
    assert listed.returncode == 2, listed.stderr
    assert "127.0.0.1:9" in listed.stderr and "Traceback" not in listed.stderr


def test_a_command_without_its_extra_names_the_extra_in_one_line():
    verify = txnlab_without_extras("verify", "runs/none")
    assert verify.returncode == 2
    assert verify.stderr == ("error: txnlab verify needs the optional verify dependencies: "
                             "pip install 'txnlab[verify]'\n")
    demo = txnlab_without_extras("demo", "--no-verify")
    assert demo.returncode == 2 and "pip install 'txnlab[lab,report]'" in demo.stderr
    cluster = txnlab_without_extras("cluster", "status")
    assert cluster.returncode == 2 and "pip install 'txnlab[lab]'" in cluster.stderr


def test_dashboards_build_without_the_sdk_names_the_extra():
    code = ("import runpy, sys\nsys.modules['grafana_foundation_sdk'] = None\n"
            "runpy.run_module('dashboards.build', run_name='__main__')")
    built = subprocess.run([sys.executable, "-c", code, "--check"], capture_output=True, text=True, cwd=REPO_ROOT,
                           timeout=60)
    assert built.returncode == 1 and built.stderr == ("python -m dashboards.build needs the optional dashboards "
                                                      "dependencies: pip install 'txnlab[dashboards]'\n")


def test_with_every_extra_no_command_is_refused():
    args = cli.build_parser().parse_args(["demo"])
    assert cli.missing_extras(args) == []
