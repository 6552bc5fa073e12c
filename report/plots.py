"""The run timeline picture: Prometheus timelines stacked on one time axis, fault windows shaded.

Owns: drawing one run's report entry (build.run_report) with matplotlib (Agg) to PNG: a row per
timeline (series.TIMELINES), for a Flink job a row of its checkpoints and restarts (build.job_events), a row of
alert lanes (pending amber, firing red) and a row of recovery
lanes (per workload process, each fault's heal joined to its first commit after it; a red cross where it
never committed again); seconds since the run's start on the x axis; every fault window shaded and labelled in every row. A timeline with no data
says why instead of drawing an empty axis.
Must not: query anything: it draws what the report holds.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend

FAULT_COLOURS = ("#f4a6a6", "#a6c8f4", "#b9e3a8", "#f4d6a6", "#d3b5ef")
STATE_COLOURS = {"pending": "#f0b400", "firing": "#d62728"}
LINE = "#1f5fa8"


def _shade(ax, faults: list[dict], label: bool) -> None:
    for i, f in enumerate(faults):
        ax.axvspan(f["start_s"], f["end_s"], color=FAULT_COLOURS[i % len(FAULT_COLOURS)], alpha=0.45, lw=0)
        if label:
            ax.text(f["start_s"] + 0.3, 0.96, f["kind"], transform=ax.get_xaxis_transform(), fontsize=7, va="top",
                    color="#6b1d1d", zorder=5)


def _timeline(ax, timeline: dict, zero: float) -> None:
    drawn = False
    for s in timeline["series"]:
        if s["points"]:
            ax.plot([t - zero for t, _ in s["points"]], [v for _, v in s["points"]], color=LINE, lw=1.4)
            drawn = True
    if not drawn:
        why = timeline.get("error") or "no samples in the run's window"
        ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#777777")
    ax.set_ylabel(timeline["unit"], fontsize=7)
    ax.set_title(timeline["title"], fontsize=8, loc="left")
    ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1.0))


def _alert_lanes(ax, alerts: list[dict], zero: float, end: float) -> None:
    names = sorted({a["alert"] for a in alerts})
    for row, name in enumerate(names):
        for a in (a for a in alerts if a["alert"] == name):
            if a["first_pending"] is not None:
                stop = a["first_firing"] if a["first_firing"] is not None else a["last_active"]
                ax.barh(row, max(stop - a["first_pending"], 1.0), left=a["first_pending"] - zero,
                        color=STATE_COLOURS["pending"], height=0.6)
            if a["first_firing"] is not None:
                ax.barh(row, max(a["last_active"] - a["first_firing"], 1.0), left=a["first_firing"] - zero,
                        color=STATE_COLOURS["firing"], height=0.6)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_ylim(-0.7, max(len(names), 1) - 0.3)
    ax.set_title("Alerts (amber pending, red firing)", fontsize=8, loc="left")
    if not names:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no alert was pending or firing", transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="#777777")


def _recovery_lanes(ax, recovery: dict) -> None:
    names = sorted({p for f in recovery["faults"] for p in f["processes"]})
    horizon = recovery.get("horizon_s") or 0.0
    for f in recovery["faults"]:
        for name, e in f["processes"].items():
            row, heal, took = names.index(name), f["heal_s"], e["seconds_to_commit_after_heal"]
            if heal is None:
                continue
            if took is not None:
                ax.plot([heal, heal + took], [row, row], color="#2da44e", lw=2.2, solid_capstyle="butt")
                ax.plot([heal + took], [row], "o", color="#2da44e", ms=4)
                ax.text(heal + took + 0.3, row + 0.15, f"{took:g}s", fontsize=6, color="#1a7f37")
            elif e["status"] == "not recovered":
                ax.plot([heal, max(horizon, heal)], [row, row], color="#d62728", lw=1.2, ls=":")
                ax.plot([max(horizon, heal)], [row], "x", color="#d62728", ms=6)
            else:
                ax.text(heal + 0.3, row + 0.15, e["status"], fontsize=6, color="#57606a")
        _stall_marks(ax, f.get("stalls") or [], names)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_ylim(-0.7, max(len(names), 1) - 0.3)
    ax.set_title("Recovery: heal -> first commit again (green), never (red x); a stalled client call (orange "
                 "triangle) and its restart (orange bar)", fontsize=8, loc="left")
    if not names:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no faults" if not recovery["faults"] else "no workload process committed",
                transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#777777")


def _stall_marks(ax, stalls: list[dict], names: list[str]) -> None:
    """Each stall on its process's lane: a triangle where the stuck call began, a line to the stall, a bar at the
    restart."""
    for st in stalls:
        if st["process"] not in names or st.get("at_s") is None:
            continue
        row, began = names.index(st["process"]), st["at_s"] - (st.get("seconds") or 0)
        ax.plot([began, st["at_s"]], [row - 0.25, row - 0.25], color="#d97706", lw=1.2)
        ax.plot([began], [row - 0.25], "v", color="#d97706", ms=5)
        ax.text(began + 0.3, row - 0.55, f"{st['call']} stalled", fontsize=6, color="#b45309")
        if st.get("restarted_s") is not None:
            ax.plot([st["restarted_s"]], [row - 0.25], "|", color="#d97706", ms=9, mew=2)


JOB_MARKS = {   # a Flink job's events (build.job_events): row, marker, colour
    "checkpoint-completed": (0, "|", "#2ca02c"), "checkpoint-failed": (0, "x", "#d62728"),
    "restarting": (1, "v", "#d62728"), "failed": (1, "X", "#d62728"), "restored": (1, "o", "#1f5fa8"),
    "running": (1, "^", "#2ca02c"), "submitted": (1, "s", "#6b21a8")}


def _job_lanes(ax, events: list[dict]) -> None:
    """A Flink job's checkpoints (green ticks at their trigger, red crosses failed) and its restarts, restores and
    submissions (second lane)."""
    for kind, (row, marker, colour) in JOB_MARKS.items():
        xs = [e["at_s"] for e in events if e["kind"] == kind]
        if xs:
            ax.plot(xs, [row] * len(xs), marker, color=colour, ms=7 if marker == "|" else 5, mew=1.5, ls="none",
                    label=kind.replace("checkpoint-", "checkpoint "))
    ax.set_yticks([0, 1], ["checkpoints", "job"], fontsize=7)
    ax.set_ylim(-0.6, 1.6)
    ax.set_title("Flink job: checkpoints (green completed, red failed); restarts, restores, submissions",
                 fontsize=8, loc="left")
    if events:
        ax.legend(fontsize=6, loc="upper right", ncol=4, frameon=False)


def timeline_figure(run: dict):
    zero = run["started"]
    end = (run["window"].get("end") or max([f["end"] for f in run["faults"]] + [zero + 1])) - zero
    rows = list(run["timelines"].values())
    job = run.get("job_events") or []
    extra = 3 if job else 2
    fig, axes = plt.subplots(len(rows) + extra, 1, figsize=(10, 1.55 * (len(rows) + extra) + 0.6), sharex=True)
    level = run["level"]
    fig.suptitle(f"{run['experiment']}" + (f"  ({level})" if level else "") + f"  {run['run']}",
                 fontsize=10, x=0.01, ha="left")
    for i, (ax, timeline) in enumerate(zip(axes, rows)):
        _shade(ax, run["faults"], label=i == 0)
        _timeline(ax, timeline, zero)
    if job:
        _shade(axes[-3], run["faults"], label=False)
        _job_lanes(axes[-3], job)
    _shade(axes[-2], run["faults"], label=False)
    _alert_lanes(axes[-2], run["alerts"], zero, end)
    _shade(axes[-1], run["faults"], label=False)
    _recovery_lanes(axes[-1], run["recovery"])
    axes[-1].set_xlim(0, max(end, 1))
    axes[-1].set_xlabel("seconds since the run started (shaded: fault windows)", fontsize=8)
    for ax in axes:
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.25)
    fig.tight_layout()
    return fig


def save_timeline(run: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = timeline_figure(run)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
