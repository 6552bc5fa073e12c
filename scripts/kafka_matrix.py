"""The Kafka version matrix: the suite's core integration tests (`pytest -m kafka_core`) once per release.

    .venv/bin/python scripts/kafka_matrix.py                       # every release of versions.env KAFKA_VERSIONS
    .venv/bin/python scripts/kafka_matrix.py --versions 4.1.1,4.4.0

Per release, in order: its jars assembled (cluster/lab/install.py, once), then
`TXNLAB_KAFKA_VERSION=<release> pytest -m kafka_core tests/integration` with a JUnit XML report: the test
clusters run that release (tests/integration/conftest.py purges a left-over cluster of another one) and the
Java tools the tests start come from it. Progress on stderr; a Markdown table on stdout (release, passed,
failed, errors, skipped, minutes, the failing tests); the results as JSON in .txnlab/matrix/result.json,
rewritten after every release. Exit 1 when any release failed a test or did not run.
Owns: nothing beyond this command. Must not: choose the default release (versions.env KAFKA_VERSION).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cluster.lab import install, versions  # noqa: E402 - the repository on the path first
from report.campaign import junit_summary  # noqa: E402,F401 - the one reading of a JUnit report


def say(message: str) -> None:
    print(f"[matrix {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_release(release: str, out: Path, pytest_args: list[str]) -> dict:
    started = time.monotonic()
    try:
        install.install_kafka(release, progress=say)
    except Exception as exc:  # noqa: BLE001 - a release that cannot be assembled is a row of the table
        return {"release": release, "ran": False, "error": f"{type(exc).__name__}: {exc}",
                "minutes": round((time.monotonic() - started) / 60, 1)}
    report = out / f"junit-{release}.xml"
    env = {**os.environ, versions.KAFKA_VERSION_VARIABLE: release}
    cmd = [sys.executable, "-m", "pytest", "-m", "kafka_core", "tests/integration", f"--junitxml={report}",
           "-p", "no:cacheprovider", *pytest_args]
    say(f"Kafka {release}: {' '.join(cmd[2:])}")
    code = subprocess.run(cmd, cwd=REPO, env=env, stdout=sys.stderr).returncode
    row = {"release": release, "ran": report.exists(), "exit": code,
           "minutes": round((time.monotonic() - started) / 60, 1)}
    if report.exists():
        row.update(junit_summary(report))
    return row


def table(rows: list[dict]) -> str:
    lines = ["| Kafka | passed | failed | errors | skipped | minutes | failing |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["ran"]:
            lines.append(f"| {r['release']} | - | - | - | - | {r['minutes']} | did not run: {r.get('error', 'exit ' + str(r.get('exit')))} |")
            continue
        lines.append(f"| {r['release']} | {r['passed']} | {r['failed']} | {r['errors']} | {r['skipped']} | "
                     f"{r['minutes']} | {', '.join(r['failing']) or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default=",".join(versions.supported_kafka_versions()),
                   help="comma-separated releases (default: every one of KAFKA_VERSIONS)")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = p.parse_args(argv)
    releases = [v.strip() for v in args.versions.split(",") if v.strip()]
    for release in releases:
        versions.kafka_version(release)                 # an unsupported one is refused before anything runs
    out = versions.txnlab_home() / "matrix"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for release in releases:
        rows.append(run_release(release, out, args.pytest_args))
        (out / "result.json").write_text(json.dumps({"rows": rows, "source": versions.txnlab_source()}, indent=2))
    print(table(rows))
    return 0 if all(r["ran"] and r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
