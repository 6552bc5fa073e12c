"""The gate's lint and type check (issue 46): ruff with the curated rule set of pyproject.toml ([tool.ruff.lint]) over
the whole tree, and mypy over every package (strict on the modules [tool.mypy] lists, gradual elsewhere, the baseline
ignored). Each must pass on the tree, and each must fail on a violation planted in a copy of a module."""
from __future__ import annotations

import shutil
import subprocess
import sys

from cluster.lab.versions import REPO_ROOT

PYPROJECT = REPO_ROOT / "pyproject.toml"


def tool(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_in_the_tree():
    found = tool("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert found.returncode == 0, found.stdout[-4000:] + found.stderr[-2000:]


def test_mypy_finds_nothing_in_the_packages():
    found = tool("mypy", "--cache-dir", "/dev/null")
    assert found.returncode == 0 and "Success" in found.stdout, found.stdout[-4000:] + found.stderr[-2000:]


def planted_copy(tmp_path, module: str, planted: str):
    """A copy of `module` (a path under the repository) with `planted` appended, as the same module name."""
    copy = tmp_path / module
    copy.parent.mkdir(parents=True)
    for package in copy.relative_to(tmp_path).parents[:-1]:
        (tmp_path / package / "__init__.py").write_text("")
    shutil.copy(REPO_ROOT / module, copy)
    copy.write_text(copy.read_text() + "\n\n" + planted)
    return copy


def test_a_planted_unused_import_and_an_untyped_function_in_a_strict_module_fail_the_checks(tmp_path):
    copy = planted_copy(tmp_path, "cluster/access/waiting.py", "def planted(value):\n    import os\n    return value\n")
    ruff = tool("ruff", "check", "--no-cache", "--config", str(PYPROJECT), "--output-format", "concise", str(copy),
                cwd=tmp_path)
    assert ruff.returncode == 1 and "F401" in ruff.stdout and "`os` imported but unused" in ruff.stdout, ruff.stdout
    mypy = tool("mypy", "--config-file", str(PYPROJECT), "--cache-dir", "/dev/null", "cluster", cwd=tmp_path)
    assert mypy.returncode == 1 and 'Function is missing a type annotation  [no-untyped-def]' in mypy.stdout, \
        mypy.stdout
    assert "cluster/access/waiting.py" in mypy.stdout


def test_a_planted_type_error_in_a_gradual_module_fails_the_type_check(tmp_path):
    copy = planted_copy(tmp_path, "report/plots.py", "PLANTED: int = 'not a number'\n")
    mypy = tool("mypy", "--config-file", str(PYPROJECT), "--cache-dir", "/dev/null", "report", cwd=tmp_path)
    assert mypy.returncode == 1 and "[assignment]" in mypy.stdout and "report/plots.py" in mypy.stdout, mypy.stdout
    assert copy.read_text().endswith("PLANTED: int = 'not a number'\n")
