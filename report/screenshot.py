"""A report page rendered to PNG by headless Chromium (Debian's chromium package; `make setup-test`).

    python -m report.screenshot runs/<id>-demo/report.html out.png [--width 1400] [--height 5000]

Owns: the one Chromium command line (headless, no network of its own: a fresh profile, background
networking, sync and component updates off, as this machine's closed network needs) and the check that
a rendered picture is not blank.
Must not: fetch anything: the page is a local file with its pictures embedded.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cluster.access.errors import TxnlabError

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


class ChromiumMissing(TxnlabError, RuntimeError):
    """Debian's chromium is not installed."""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise ChromiumMissing("chromium not found: run `make setup-test` (Debian package chromium)")
    return found


def render_png(page: Path, png: Path, width: int = 1400, height: int = 5000, timeout: float = 120.0) -> Path:
    page, png = Path(page).resolve(), Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="txnlab-chromium-") as profile:
        cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
               f"--screenshot={png}", page.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return png


def ink(png: Path) -> dict:
    """How much of the picture is not background: distinct colours and the share of non-white pixels."""
    from matplotlib import image
    pixels = image.imread(str(png))[:, :, :3].reshape(-1, 3)
    non_white = float((pixels.min(axis=1) < 0.94).mean())
    colours = len({tuple(p) for p in (pixels[:: max(1, len(pixels) // 200_000)] * 255).astype(int).tolist()})
    return {"non_white": non_white, "colours": colours, "height": int(image.imread(str(png)).shape[0])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m report.screenshot")
    p.add_argument("page", type=Path)
    p.add_argument("png", type=Path)
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=5000)
    args = p.parse_args(argv)
    render_png(args.page, args.png, args.width, args.height)
    print(f"{args.png}: {ink(args.png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
