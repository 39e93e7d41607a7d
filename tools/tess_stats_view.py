#!/usr/bin/env python3
"""Plots a tessalloc statistics series (JSON lines, docs/stats.schema.json).

    tess_stats_view.py SERIES.jsonl [--out DIR] [--title TEXT] [--skip-invalid]

SERIES.jsonl holds one statistics object per line, as written with
TESS_STATS=json (and an interval for a series); blank lines are ignored.
Writes two PNG files into --out (default: the directory of SERIES.jsonl)
and prints their paths:

  <stem>_footprint.png       footprint, slab bytes and live bytes in MiB
                             over time: seconds from time_ms (lines without
                             it, like the one written at exit, left out), or
                             the sample index when no line has time_ms
  <stem>_fragmentation.png   fragmentation per size class of the last line
                             (%, left axis) beside its slab MiB (right axis)

Exit status: 0 written, 2 a bad command line or an unreadable or invalid
input (the message names the line). --skip-invalid skips the lines that
are not JSON and says how many: a process killed or replaced by exec()
while it appends a line to a TESS_STATS_FILE that several processes share
can leave that line cut short, run into the next one.

Needs matplotlib (pip install matplotlib); draws with its Agg backend.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

MIB = 1024 * 1024

#: Properties every line has (docs/stats.schema.json: "required").
REQUIRED_KEYS: tuple[str, ...] = (
    "tessalloc", "version", "mode", "footprint", "peak_footprint",
    "region_bytes", "committed", "decommitted", "heaps_in_use",
    "heaps_pooled", "allocs", "frees", "live_bytes", "slab_bytes",
    "peak_live_bytes", "requested_live_bytes", "fragmentation", "large",
    "huge", "classes")

#: Properties every entry of "classes" has.
CLASS_KEYS: tuple[str, ...] = (
    "class", "block_size", "slab_pages", "allocs", "frees", "live_blocks",
    "live_bytes", "slabs", "slab_bytes", "peak_live_bytes", "fragmentation")

#: Properties that are plotted, so must be numbers.
PLOTTED_KEYS: tuple[str, ...] = ("footprint", "live_bytes", "slab_bytes",
                                 "fragmentation")
PLOTTED_CLASS_KEYS: tuple[str, ...] = ("block_size", "slab_bytes",
                                       "fragmentation")


class SeriesError(Exception):
    """An input file that cannot be read or is not a statistics series."""


class NotJsonError(SeriesError):
    """A line that is not JSON at all (cut short, or run into the next)."""


def is_number(value: object) -> bool:
    """True for a JSON number (int or float, not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sample(sample: object) -> str | None:
    """Returns what is wrong with one parsed line, or None when it is usable."""
    if not isinstance(sample, dict):
        return f"expected a JSON object, got {type(sample).__name__}"
    missing = [k for k in REQUIRED_KEYS if k not in sample]
    if missing:
        return "missing required key(s): " + ", ".join(missing)
    for key in PLOTTED_KEYS + (("time_ms",) if "time_ms" in sample else ()):
        if not is_number(sample[key]):
            return f"'{key}' is not a number"
    classes = sample["classes"]
    if not isinstance(classes, list):
        return "'classes' is not a list"
    for i, entry in enumerate(classes):
        if not isinstance(entry, dict):
            return f"classes[{i}] is not a JSON object"
        missing = [k for k in CLASS_KEYS if k not in entry]
        if missing:
            return f"classes[{i}] is missing key(s): " + ", ".join(missing)
        for key in PLOTTED_CLASS_KEYS:
            if not is_number(entry[key]):
                return f"classes[{i}].{key} is not a number"
    return None


def parse_line(text: str, where: str) -> dict[str, Any]:
    """Parses and checks one line; where ("FILE:LINE") prefixes errors."""
    try:
        sample = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJsonError(f"{where}: not valid JSON: {exc.msg} "
                          f"(column {exc.colno})") from exc
    problem = check_sample(sample)
    if problem is not None:
        raise SeriesError(f"{where}: {problem}")
    assert isinstance(sample, dict)
    return sample


def read_series(path: Path | str, skipped: list[int] | None = None
                ) -> list[dict[str, Any]]:
    """Reads a JSON-lines statistics file: one dict per non-blank line.

    Raises SeriesError (message "FILE:LINE: why") for an unreadable file,
    a line that is not UTF-8 or JSON or lacks required keys, or no lines.
    With a list for `skipped`, a line that is not UTF-8 or not JSON is left
    out instead, and its number appended there.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SeriesError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    series: list[dict[str, Any]] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        where = f"{path}:{number}"
        try:
            text = line.decode("utf-8")
            if text.strip():
                series.append(parse_line(text, where))
        except UnicodeDecodeError as exc:
            if skipped is None:
                raise SeriesError(f"{where}: not UTF-8 text") from exc
            skipped.append(number)
        except NotJsonError:
            if skipped is None:
                raise
            skipped.append(number)
    if not series:
        raise SeriesError(f"{path}: no statistics lines")
    return series


def time_axis(series: Sequence[dict[str, Any]]
              ) -> tuple[list[float], list[dict[str, Any]], str]:
    """x values, the samples they belong to, and the axis label.

    Seconds (time_ms / 1000) of the lines that have time_ms when any has:
    lines without it (the one written at exit) are left out, and the label
    says how many. The sample index of every line when none has time_ms.
    """
    timed = [s for s in series if "time_ms" in s]
    if not timed:
        return [float(i) for i in range(len(series))], list(series), "sample"
    label = "time (s)"
    untimed = len(series) - len(timed)
    if untimed:
        label += f"; {untimed} line(s) without time_ms not shown"
    return [s["time_ms"] / 1000.0 for s in timed], timed, label


def size_label(size: int | float) -> str:
    """A block size for an axis: 48, 1K, 1.5K, 2M."""
    for unit, scale in (("M", MIB), ("K", 1024)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size:g}"


def new_figure(width: float = 9.0, height: float = 5.0) -> Figure:
    """A figure drawn by the Agg backend (no pyplot state)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_footprint(series: Sequence[dict[str, Any]], out_path: Path | str,
                   title: str) -> None:
    """Writes the footprint, slab and live MiB over time as a PNG: slab
    bytes beside the live bytes in slabs (their gap is fragmentation), and
    all live bytes (large and huge blocks included)."""
    x, shown, xlabel = time_axis(series)
    fig = new_figure()
    ax = fig.add_subplot()
    marker = "o" if len(shown) <= 60 else None

    def in_slabs(s: dict[str, Any]) -> float:
        spans = sum(s[kind]["live_bytes"] for kind in ("large", "huge")
                    if isinstance(s.get(kind), dict))
        return float(s["live_bytes"] - spans)

    for values, label, style in (
            ([s["footprint"] for s in shown], "footprint", "-"),
            ([s["live_bytes"] for s in shown], "live bytes (all blocks)", "-"),
            ([s["slab_bytes"] for s in shown], "slab bytes", "--"),
            ([in_slabs(s) for s in shown], "live bytes in slabs", ":")):
        ax.plot(x, [v / MIB for v in values], style, label=label,
                marker=marker, markersize=3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    ax.set_title(f"{title}: footprint" if title else "footprint")
    fig.savefig(out_path, dpi=100)


def plot_fragmentation(sample: dict[str, Any], out_path: Path | str,
                       title: str) -> None:
    """Writes one line's fragmentation (%) and slab MiB per size class as a PNG."""
    classes: list[dict[str, Any]] = sample["classes"]
    fig = new_figure(max(7.0, 1.0 + 0.45 * len(classes)), 5.0)
    ax = fig.add_subplot()
    total = 100.0 * sample["fragmentation"]
    heading = (f"fragmentation by size class (last sample; "
               f"all slabs {total:.1f}%)")
    ax.set_title(f"{title}: {heading}" if title else heading)
    ax.set_xlabel("block size (bytes)")
    ax.set_ylabel("fragmentation (%)")
    ax.set_ylim(0, 100)
    if not classes:
        ax.text(0.5, 0.5, "no size class in use", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_xticks([])
        fig.savefig(out_path, dpi=100)
        return
    pos = list(range(len(classes)))
    width = 0.4
    frag = ax.bar([p - width / 2 for p in pos],
                  [100.0 * c["fragmentation"] for c in classes], width,
                  label="fragmentation (%)", color="tab:red")
    overall = ax.axhline(total, color="tab:red", linestyle="--",
                         linewidth=0.8, label="all slabs (%)")
    ax.set_xticks(pos, [size_label(c["block_size"]) for c in classes],
                  rotation=45 if len(classes) > 12 else 0)
    ax.grid(True, axis="y", alpha=0.3)
    ax2 = ax.twinx()
    slab = ax2.bar([p + width / 2 for p in pos],
                   [c["slab_bytes"] / MIB for c in classes], width,
                   label="slab MiB", color="tab:blue", alpha=0.6)
    ax2.set_ylabel("slab MiB")
    ax2.set_ylim(bottom=0)
    fig.legend(handles=[frag, overall, slab], loc="outside lower center",
               ncols=3)
    fig.savefig(out_path, dpi=100)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="tess_stats_view.py",
        description="Plot a tessalloc statistics series (JSON lines).")
    parser.add_argument("series", type=Path, metavar="SERIES.jsonl",
                        help="statistics, one JSON object per line")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="directory for the PNG files "
                             "(default: the input file's directory)")
    parser.add_argument("--title", default=None, metavar="TEXT",
                        help="title of the plots (default: the file name)")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="leave out the lines that are not JSON (cut "
                             "short by a process that ended while writing "
                             "them) instead of refusing the file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the viewer; returns the exit status (0, or 2 for bad input)."""
    args = parse_args(argv)
    series_path: Path = args.series
    out_dir: Path = args.out if args.out is not None else series_path.parent
    title: str = args.title if args.title is not None else series_path.name
    skipped: list[int] | None = [] if args.skip_invalid else None
    try:
        series = read_series(series_path, skipped)
    except NotJsonError as exc:
        print(f"tess_stats_view: {exc} (--skip-invalid leaves such lines "
              "out)", file=sys.stderr)
        return 2
    except SeriesError as exc:
        print(f"tess_stats_view: {exc}", file=sys.stderr)
        return 2
    if skipped:
        shown = ", ".join(str(n) for n in skipped[:10])
        more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        print(f"tess_stats_view: {series_path}: left out {len(skipped)} "
              f"line(s) that are not JSON: {shown}{more}", file=sys.stderr)
    stem = series_path.stem
    footprint_png = out_dir / f"{stem}_footprint.png"
    fragmentation_png = out_dir / f"{stem}_fragmentation.png"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        plot_footprint(series, footprint_png, title)
        plot_fragmentation(series[-1], fragmentation_png, title)
    except OSError as exc:
        print(f"tess_stats_view: cannot write into {out_dir}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    print(footprint_png)
    print(fragmentation_png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
