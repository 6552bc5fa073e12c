"""Regenerate what dashboards/ commits: `python -m dashboards.build [--check]`.

Owns: writing alerts/txnlab.rules.yml from rules.py (the knobs as options) and grafana/*.json from
boards.py, and --check, which fails
when a committed file differs from what the code renders (tests run it).
Must not: import anything of txnlab's outside dashboards/.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dashboards import rules

try:
    from dashboards import boards
except ModuleNotFoundError as missing:  # the SDK is an optional extra of pyproject.toml
    if (missing.name or "").split(".")[0] != "grafana_foundation_sdk":
        raise
    raise SystemExit("python -m dashboards.build needs the optional dashboards dependencies: "
                     "pip install 'txnlab[dashboards]'") from None

HERE = Path(__file__).resolve().parent


def rendered(knobs: rules.Knobs) -> dict[Path, str]:
    files = {HERE / "alerts" / "txnlab.rules.yml": rules.render(knobs)}
    files.update({HERE / "grafana" / f"{name}.json": boards.render(name) for name in boards.BOARDS})
    return files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.build")
    p.add_argument("--producer-budget", type=int, default=rules.Knobs.producer_budget,
                   help="producer ids per broker before ProducerStateGrowth warns")
    p.add_argument("--exporter-interval", type=float, default=rules.Knobs.exporter_interval_s,
                   help="the exporter's collection interval (ExporterStale)")
    p.add_argument("--check", action="store_true", help="fail if a committed file differs from the rendering")
    args = p.parse_args(argv)
    stale = []
    for path, text in rendered(rules.Knobs(args.producer_budget, args.exporter_interval)).items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python -m dashboards.build): {', '.join(stale)}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
