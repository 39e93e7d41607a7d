#!/usr/bin/env python3
"""Enclave benchmark: tessalloc and the fixed-heap peers in a model enclave.

Runs bench/enclave/enclave_bench (one process = one fresh enclave) for every
allocator plugin: tessalloc (libfixed_tessalloc.so from the build) and the
peers listed in build/enclave-peers/peers.json (dlmalloc, snmalloc,
mimalloc3, built by bench/enclave/peers/build_peers.py).

Workload A, Open Enclave's pluggable_allocator sample: for every thread
count 1..--max-threads, every allocator in turn (interleaved: round r runs
all thread counts for all allocators before round r+1), --repeat times after
--warmup-rounds untimed rounds, and then more runs of the allocators whose
runs at a count are short (--fill-seconds); the medians are printed as the
sample's table and plotted; then, at --max-threads, --repeat runs per allocator
with every ECALL waiting for all the others at its midpoint (enclave_bench
--overlap), whose peak footprint is that of all the calls at once, as on a
machine with a core per thread. Workload B, the fragmentation soak: one run of
--duration seconds per allocator and host variant (pooled, new-thread),
whose 0.5 s time series is written and plotted.

Output directory (default docs/results/enclave/):
  a_runs.csv, a_table.txt, a_time_vs_threads.png     workload A
                        (a_runs.csv: overlap=True marks the --overlap runs)
  b_runs.csv, b_<allocator>_<host>.csv/.png,
  b_<host>_footprint.png                             workload B
  summary.md    tables, peak footprint, OS calls, NULLs, the targets
  meta.json     command line, date, machine, allocator versions, settings
All are written to OUT/.partial-* first and moved in at the end, so that a
run cut short leaves the earlier results whole.

Example: python3 bench/enclave/run_enclave.py --build build --workloads a,b
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

try:
    import rich  # noqa: F401  (benchlib.Progress draws the bar with it)
except ImportError as _exc:
    raise SystemExit("run_enclave: needs the Python package rich "
                     "(pip install rich matplotlib; scripts/bench.sh "
                     "installs them into .cache/venv)") from _exc

# the tessbench package (shared helpers) is at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tessbench.benchlib import (  # noqa: E402
    REPO_ROOT, BenchError, CommonMeta, Progress, child_env, command_line,
    common_meta, header_lines, machine_info, make_log, median,
    names_list, parse_kv, run_measured, skipped_lines, verdict)

log = make_log("run_enclave")
TESSALLOC = "tessalloc"
#: Column order of the tables and plots (others follow in the given order).
PREFERRED_ORDER: tuple[str, ...] = ("dlmalloc", "snmalloc", TESSALLOC,
                                    "mimalloc3")
HOSTS: tuple[str, ...] = ("pooled", "new-thread")
WORKLOADS: tuple[str, ...] = ("a", "b")
VERIFY_MODES: tuple[str, ...] = ("none", "head", "sig", "full")
VERIFY_TEXT: dict[str, str] = {
    "none": "none (the sample's own loop; no corruption check)",
    "head": "the first word",
    "sig": "the first and last word and one word per 4 KiB",
    "full": "every word",
}
MIB = 1024 * 1024

# Targets of the issue (workload A and B), checked in summary.md.
A_FOOTPRINT_VS_DLMALLOC = 2.0
A_SPEEDUP_VS_DLMALLOC = 20.0  # on >= 8 cores
B_FOOTPRINT_RATIO = 1.2
B_FOOTPRINT_AIM = 1.15
B_FOOTPRINT_LIMITS = (B_FOOTPRINT_RATIO, B_FOOTPRINT_AIM)  # a peak ratio is told against both
B_ECALLS_VS_DLMALLOC = 2.5


# ------------------------------------------------------------------ data


@dataclasses.dataclass(frozen=True)
class Plugin:
    """An allocator plugin (a libfixed_<name>.so)."""

    name: str
    path: str
    version: str
    source: str


@dataclasses.dataclass
class ARun:
    """One run of workload A."""

    allocator: str
    host: str
    threads: int
    repetition: int
    elapsed_ms: float
    nulls: int
    first_null_s: float
    violations: int
    os_calls_load: int
    os_calls_init: int
    os_calls_after_init: int
    os_calls_after_init_outside: int
    os_mmap_bytes_load: int
    os_mmap_bytes_init: int
    os_mmap_bytes_after_init: int
    footprint_peak: int
    footprint_end: int
    touched_bytes: int
    status: str
    overlap: bool = False  # every ECALL waited for all at its midpoint


@dataclasses.dataclass
class BRun:
    """One run of workload B."""

    allocator: str
    host: str
    repetition: int
    duration_s: float
    ecalls: int
    worker_ecalls: int
    ecalls_per_s: float
    mallocs: int
    nulls: int
    first_null_s: float
    violations: int
    peak_live_bytes: int
    peak_footprint_bytes: int
    peak_touched_bytes: int
    footprint_end: int
    os_calls_load: int
    os_calls_init: int
    os_calls_after_init: int
    os_calls_after_init_outside: int
    os_mmap_bytes_load: int
    os_mmap_bytes_init: int
    os_mmap_bytes_after_init: int
    samples: int
    series_csv: str
    status: str
    # mean footprint / mean live requested bytes over the samples
    # (mean_footprint_ratio below); None without a series
    mean_footprint_ratio: Optional[float] = None
    # allocation calls of the worker threads alone (-1: not reported)
    worker_mallocs: int = -1
    # the peaks of live bytes and footprint read every --peak-interval
    # between the samples too (-1: not reported)
    fine_peak_live_bytes: int = -1
    fine_peak_footprint_bytes: int = -1
    # CPU seconds of the host threads of each role (nan: not reported)
    worker_cpu_s: float = math.nan
    other_cpu_s: float = math.nan

    @property
    def judged_live(self) -> int:
        """The peak live bytes the ratios divide by: the fine one if any."""
        return (self.fine_peak_live_bytes if self.fine_peak_live_bytes > 0
                else self.peak_live_bytes)

    @property
    def judged_footprint(self) -> int:
        """The peak footprint the ratio takes: the fine one with the fine
        live peak, else the samples' (-1: unknown)."""
        return (self.fine_peak_footprint_bytes if self.fine_peak_live_bytes > 0
                else self.peak_footprint_bytes)

    @property
    def footprint_ratio(self) -> Optional[float]:
        """Peak footprint (own report) / peak live requested bytes, both
        from the fine reads where the harness made them (maxima over the
        0.5-s samples alone miss more of the live bytes' swings than of
        the footprint, which lags them)."""
        footprint = self.judged_footprint
        if footprint < 0 or self.judged_live <= 0:
            return None
        return footprint / self.judged_live

    @property
    def touched_ratio(self) -> Optional[float]:
        """Peak touched pages of the region / peak live requested bytes."""
        if self.judged_live <= 0:
            return None
        return self.peak_touched_bytes / self.judged_live


A_FIELDS = [f.name for f in dataclasses.fields(ARun)]
B_FIELDS = [f.name for f in dataclasses.fields(BRun)]


class EnclaveMeta(CommonMeta):
    """The contents of meta.json."""

    enclave_bench: str
    allocators: list[dict[str, str]]  # the Plugin fields
    skipped: list[str]
    failures: list[str]
    findings: list[str]
    settings: dict[str, object]


# ------------------------------------------------------------- locating


def find_bench(build: Path) -> Path:
    """enclave_bench in the build tree."""
    for cand in (build / "bench" / "enclave" / "enclave_bench",
                 build / "enclave" / "enclave_bench",
                 build / "enclave_bench"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    raise SystemExit(f"run_enclave: enclave_bench not found in {build}; "
                     f"build first: cmake -S . -B {build} && "
                     f"cmake --build {build} -j --target enclave_bench "
                     f"fixed_tessalloc")


def find_tessalloc_plugin(build: Path) -> Optional[Path]:
    """libfixed_tessalloc.so in the build tree, if it was built."""
    for cand in (build / "bench" / "enclave" / "libfixed_tessalloc.so",
                 build / "enclave" / "libfixed_tessalloc.so"):
        if cand.is_file():
            return cand
    hits = sorted(build.rglob("libfixed_tessalloc.so"),
                  key=lambda p: len(str(p)))
    return hits[0] if hits else None


def read_peers(peers_json: Path) -> tuple[list[Plugin], list[str]]:
    """The peers that build_peers.py built, and those it could not."""
    if not peers_json.is_file():
        return [], [f"peers: {peers_json} not found (build them with "
                    f"bench/enclave/peers/build_peers.py)"]
    try:
        data = json.loads(peers_json.read_text())
    except (OSError, ValueError) as exc:
        return [], [f"peers: cannot read {peers_json}: {exc}"]
    entries = data.get("peers", []) if isinstance(data, dict) else data
    found: list[Plugin] = []
    skipped: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or "name" not in entry:
            continue
        name = str(entry["name"])
        raw = entry.get("path") or entry.get("plugin") or ""
        path = Path(str(raw))
        if raw and not path.is_absolute():
            path = peers_json.parent / path
        status = str(entry.get("status", "ok"))
        if status != "ok" or not raw or not path.is_file():
            why = entry.get("reason") or (f"status {status}" if status != "ok"
                                          else f"{path} missing")
            skipped.append(f"{name}: {why}")
            continue
        found.append(Plugin(name, str(path), str(entry.get("version", "?")),
                            str(entry.get("source", str(peers_json)))))
    return found, skipped


def plugin_info(bench: Path, path: Path) -> tuple[str, str]:
    """(name, version) that a plugin reports (enclave_bench --info)."""
    status, out, err = run_measured([str(bench), "--allocator", str(path),
                                     "--info"], child_env(None), 60)
    if status != 0:
        raise BenchError(f"{path}: {err.strip() or out.strip()}")
    info = dict(line.partition("=")[::2] for line in out.splitlines())
    return info.get("name", path.stem), info.get("version", "?")


def order_plugins(plugins: list[Plugin]) -> list[Plugin]:
    """dlmalloc, snmalloc, tessalloc, mimalloc3 first, then the rest."""
    def key(p: Plugin) -> tuple[int, int]:
        pos = (PREFERRED_ORDER.index(p.name) if p.name in PREFERRED_ORDER
               else len(PREFERRED_ORDER))
        return pos, plugins.index(p)
    return sorted(plugins, key=key)


def collect_plugins(args: argparse.Namespace,
                    bench: Path) -> tuple[list[Plugin], list[str]]:
    """The allocators to measure (--allocators or the default set)."""
    skipped: list[str] = []
    peers, peer_skips = read_peers(args.peers_json)
    by_name = {p.name: p for p in peers}
    tess = find_tessalloc_plugin(args.build)
    if tess is not None:
        by_name[TESSALLOC] = Plugin(TESSALLOC, str(tess.resolve()), "?",
                                    f"build: {tess}")
    wanted = names_list(args.allocators) if args.allocators else []
    plugins: list[Plugin] = []
    if not wanted:
        if TESSALLOC in by_name:
            plugins.append(by_name[TESSALLOC])
        else:
            skipped.append(f"{TESSALLOC}: libfixed_tessalloc.so not found "
                           f"in {args.build}")
        plugins += [p for p in peers]
        skipped += peer_skips
    for item in wanted:
        if "/" in item or item.endswith(".so"):
            path = Path(item)
            if not path.is_file():
                skipped.append(f"{item}: no such file")
                continue
            plugins.append(Plugin(path.stem, str(path.resolve()), "?",
                                  f"path: {item}"))
        elif item in by_name:
            plugins.append(by_name[item])
        else:
            why = next((s for s in peer_skips if s.startswith(item + ":")),
                       f"{item}: not built (neither {args.build} nor "
                       f"{args.peers_json} has it)")
            skipped.append(why)
    # The names and versions the plugins give themselves.
    named: list[Plugin] = []
    for p in plugins:
        try:
            name, version = plugin_info(bench, Path(p.path))
        except BenchError as exc:
            skipped.append(f"{p.name}: does not load: {exc}")
            continue
        if p.version != "?" and version in ("", "?"):
            version = p.version
        named.append(dataclasses.replace(p, name=name, version=version))
    seen: set[str] = set()
    unique: list[Plugin] = []
    for p in named:
        if p.name in seen:
            skipped.append(f"{p.name}: given twice ({p.path})")
            continue
        seen.add(p.name)
        unique.append(p)
    return (unique if wanted else order_plugins(unique)), skipped


# ------------------------------------------------------- running programs


def parse_result(out: str) -> dict[str, str]:
    """The key=value tokens of the "result ..." line."""
    return parse_kv(next((ln for ln in reversed(out.splitlines())
                          if ln.startswith("result ")), ""))


def run_bench(cmd: Sequence[str], what: str,
              timeout: float) -> tuple[dict[str, str], str]:
    """Run enclave_bench; its result and the reason it failed ('' if not).

    A run whose checks failed (exit 1 with a result line) still returns its
    numbers; a crash, a timeout or corruption (no result line) raises."""
    status, out, err = run_measured(cmd, child_env(None), timeout)
    kv = parse_result(out)
    fails = [ln.split("FAIL:", 1)[1].strip() for ln in err.splitlines()
             if "FAIL:" in ln]
    if status == -1:
        raise BenchError(f"{what}: timed out after {timeout:g} s")
    if not kv:
        detail = "; ".join(fails) or (err or out).strip()[-400:]
        raise BenchError(f"{what}: exit {status}: {detail}")
    if status != 0:
        return kv, "; ".join(fails) or f"exit {status}"
    return kv, ""


def kv_int(kv: dict[str, str], key: str) -> int:
    return int(kv.get(key, "-1"))


def kv_float(kv: dict[str, str], key: str) -> float:
    return float(kv.get(key, "nan"))


def os_fields(kv: dict[str, str]) -> dict[str, int]:
    keys = ("os_calls_load", "os_calls_init", "os_calls_after_init",
            "os_calls_after_init_outside", "os_mmap_bytes_load",
            "os_mmap_bytes_init", "os_mmap_bytes_after_init")
    return {k: kv_int(kv, k) for k in keys}


def run_a(bench: Path, plugin: Plugin, threads: int, repetition: int,
          args: argparse.Namespace, overlap: bool = False) -> tuple[ARun, str]:
    """One run of A; overlap: every ECALL waits for all the others at its
    midpoint, so the peak footprint is that of all of them at once."""
    cmd = [str(bench), "--allocator", plugin.path, "--workload", "a",
           "--host", args.host_a, "--threads", str(threads),
           "--num-allocations", str(args.num_allocations),
           "--max-allocation-size", str(args.max_allocation_size),
           "--heap-pages", str(args.heap_pages_a), "--tcs", str(args.tcs_a),
           "--verify", args.verify_a_once if overlap else args.verify_a,
           "--seed", str(args.seed + repetition)]
    if overlap:
        # The runs at once judge the footprint and the touched pages, not
        # the time: their blocks are written on every page they span, as an
        # application writes its blocks. With "head" only a block's first
        # page is written, and the touched pages miss the later pages of
        # blocks an allocator places on pages of their own (tessalloc,
        # snmalloc), not those of dlmalloc, whose boundary tags touch both
        # ends of each chunk.
        cmd.append("--overlap")
    what = f"A {plugin.name} {threads} threads" + (" overlapping" if overlap
                                                   else "")
    kv, why = run_bench(cmd, what, args.timeout)
    try:
        run = ARun(allocator=plugin.name, host=args.host_a, threads=threads,
                   repetition=repetition,
                   elapsed_ms=kv_float(kv, "elapsed_ms"),
                   nulls=kv_int(kv, "nulls"),
                   first_null_s=kv_float(kv, "first_null_s"),
                   violations=kv_int(kv, "violations"),
                   footprint_peak=kv_int(kv, "footprint_peak"),
                   footprint_end=kv_int(kv, "footprint_end"),
                   touched_bytes=kv_int(kv, "touched_bytes"),
                   status="ok" if not why else f"fail: {why}",
                   overlap=overlap, **os_fields(kv))
    except ValueError as exc:
        raise BenchError(f"{what}: unexpected output {kv!r}") from exc
    return run, why


def stats_series(series: Path) -> Path:
    """The allocator's own statistics beside a B series (tessalloc only)."""
    return series.with_name(series.stem + "_stats.jsonl")


def plot_stats_series(path: Path) -> Optional[str]:
    """Plots of an allocator's statistics series by tools/tess_stats_view.py
    (<stem>_footprint.png, <stem>_fragmentation.png); why not, or None."""
    viewer = REPO_ROOT / "tools" / "tess_stats_view.py"
    proc = subprocess.run([sys.executable, str(viewer), str(path)], capture_output=True,
                          text=True, check=False)
    return None if proc.returncode == 0 else proc.stderr.strip()[-300:]


def run_b(bench: Path, plugin: Plugin, host: str, repetition: int,
          series: Path, args: argparse.Namespace,
          stats: bool = False) -> tuple[BRun, str]:
    """One run of B; stats: with the allocator's own statistics at each
    sample (--stats-jsonl). A statistics read walks tessalloc's slabs with
    its partitions locked (a median 100 ms, up to 1.7 s, with 20 threads on
    2 CPUs), so the runs the targets judge are made without it, and the
    statistics come from a run of their own (repetition 0)."""
    cmd = [str(bench), "--allocator", plugin.path, "--workload", "b",
           "--host", host, "--duration", f"{args.duration:g}",
           "--workers", str(args.workers), "--others", str(args.others),
           "--heap-pages", str(args.heap_pages_b),
           "--pool-bytes", str(args.pool_bytes),
           "--sample-interval", f"{args.sample_interval:g}",
           "--verify", args.verify_b, "--seed", str(args.seed + repetition),
           "--csv", str(series)]
    if stats:
        cmd += ["--stats-jsonl", str(stats_series(series))]
    if args.tcs_b:
        cmd += ["--tcs", str(args.tcs_b)]
    kv, why = run_bench(cmd, f"B {plugin.name} {host}",
                        args.duration * 3 + args.timeout)
    try:
        mean_ratio = (mean_footprint_ratio(read_series(series))
                      if series.is_file() else None)
    except ValueError:  # a series cut short mid-line
        mean_ratio = None
    try:
        run = BRun(allocator=plugin.name, host=host, repetition=repetition,
                   duration_s=kv_float(kv, "elapsed_ms") / 1e3,
                   ecalls=kv_int(kv, "ecalls"),
                   worker_ecalls=kv_int(kv, "worker_ecalls"),
                   ecalls_per_s=kv_float(kv, "ecalls_per_s"),
                   mallocs=kv_int(kv, "mallocs"), nulls=kv_int(kv, "nulls"),
                   first_null_s=kv_float(kv, "first_null_s"),
                   violations=kv_int(kv, "violations"),
                   peak_live_bytes=kv_int(kv, "peak_live_bytes"),
                   peak_footprint_bytes=kv_int(kv, "peak_footprint_bytes"),
                   peak_touched_bytes=kv_int(kv, "peak_touched_bytes"),
                   footprint_end=kv_int(kv, "footprint_end"),
                   samples=kv_int(kv, "samples"), series_csv=series.name,
                   status="ok" if not why else f"fail: {why}",
                   mean_footprint_ratio=mean_ratio,
                   worker_mallocs=kv_int(kv, "worker_mallocs"),
                   fine_peak_live_bytes=kv_int(kv, "fine_peak_live_bytes"),
                   fine_peak_footprint_bytes=kv_int(kv, "fine_peak_footprint_bytes"),
                   worker_cpu_s=kv_float(kv, "worker_cpu_s"),
                   other_cpu_s=kv_float(kv, "other_cpu_s"),
                   **os_fields(kv))
    except ValueError as exc:
        raise BenchError(f"B {plugin.name}: unexpected output {kv!r}") from exc
    return run, why


# ------------------------------------------------------------ reporting


def fmt_ms(v: float) -> str:
    return f"{v:.1f}"


def fmt_mib(v: float) -> str:
    return "n/a" if v < 0 else f"{v / MIB:.2f}"


def fmt_judged(v: Optional[float], *limits: float, digits: int = 3) -> str:
    """A figure judged against limits (targets, or the figure it is
    compared with): `digits` decimals, three for a ratio, so that a value
    just past a target (1.203 against 1.2) does not print as the target
    itself; more where those would still show it at a limit or on the
    other side of one (1.2004 against 1.2 printed 1.200 beside a FAIL, and
    0.9996 against 1 printed 1.00 in an interval told to lie below 1)."""
    if v is None:
        return "n/a"
    for places in range(digits, 16):
        text = f"{v:.{places}f}"
        shown = float(text)
        if all((shown < limit) == (v < limit) and (shown > limit) == (v > limit)
               for limit in limits):
            return text
    return repr(v)  # reads back as v itself


def plan_fill_runs(run_seconds: dict[tuple[str, int], list[float]],
                   fill_seconds: float, repeat_max: int,
                   lost_seconds: Optional[dict[tuple[str, int], float]] = None
                   ) -> dict[tuple[str, int], int]:
    """More timed runs per (allocator, thread count): none where its runs
    (wall time, process start included) took fill_seconds or more in all;
    else as many as their mean length fits into what is left, up to
    repeat_max runs in all. run_seconds has the runs kept (a median has
    them); lost_seconds the time of the others (crashes, timeouts), which
    is spent but makes no run and no mean: a count with no run kept gets
    none, and a run that hung uses up the time. Decided by how long the
    runs take, not by what they measure: a short run is the one a
    machine's noise moves most (on 2 shared CPUs one run of 1 thread took
    3.7 ms or 5.8 ms, by chance, for either allocator), and costs little;
    so the allocators compared at every count (tessalloc, snmalloc) get
    many runs, dlmalloc at high counts, seconds each, keeps its few."""
    extra: dict[tuple[str, int], int] = {}
    for key, seconds in run_seconds.items():
        if not seconds:
            continue
        spent = sum(seconds) + (lost_seconds or {}).get(key, 0.0)
        mean = sum(seconds) / len(seconds)
        # (a hair over: 2.8 s left of runs of 0.4 s are 7, not 6.999...);
        # capped before floor(), which an infinite fill_seconds overflows
        room = (fill_seconds - spent) / mean if mean > 0 else 0.0
        more = math.floor(min(room, repeat_max) + 1e-9)
        more = min(more, repeat_max - len(seconds))
        if more > 0:
            extra[key] = more
    return extra


def thread_ranges(counts: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5 threads'; [1] -> '1 thread'."""
    parts: list[str] = []
    start = prev = counts[0]
    for n in counts[1:] + [-1]:
        if n != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = n
        prev = n
    return ", ".join(parts) + (" thread" if counts == [1] else " threads")


def runs_text(runs: list[ARun]) -> str:
    """How many runs each median has: '25 run(s)', or '25 run(s) (dlmalloc
    5 at 7-16 threads, 9 at 6 threads)': the count most (allocator,
    thread count) pairs got, then the others by allocator."""
    counts = {key: len(times) for key, times in a_times(runs).items()}
    if not counts:
        return "no runs"
    values = list(counts.values())
    common = max(set(values), key=lambda c: (values.count(c), -c))
    names = list(dict.fromkeys(name for name, _ in counts))
    others: list[str] = []
    for name in names:
        by_count: dict[int, list[int]] = {}
        for (who, n), c in sorted(counts.items(), key=lambda kv: kv[0][1]):
            if who == name and c != common:
                by_count.setdefault(c, []).append(n)
        if by_count:
            others.append(name + " " + ", ".join(
                f"{c} at {thread_ranges(ns)}"
                for c, ns in sorted(by_count.items(), key=lambda kv: kv[1][0])))
    return f"{common} run(s)" + (f" ({'; '.join(others)})" if others else "")


def a_times(runs: list[ARun]) -> dict[tuple[str, int], list[float]]:
    """Elapsed ms of the runs per (allocator, threads)."""
    groups: dict[tuple[str, int], list[float]] = {}
    for r in runs:
        groups.setdefault((r.allocator, r.threads), []).append(r.elapsed_ms)
    return groups


def a_medians(runs: list[ARun]) -> dict[tuple[str, int], float]:
    """Median elapsed ms per (allocator, threads)."""
    return {k: median(v) for k, v in a_times(runs).items()}


# The interval of snmalloc's median ÷ tessalloc's at a thread count: a
# paired bootstrap over the rounds (each round ran both, one after the
# other, so a slow spell of the host weighs on both alike).
INTERVAL_LEVEL = 0.95
INTERVAL_RESAMPLES = 2000


def ratio_interval(runs: list[ARun], peer: str, threads: int,
                   seed: int = 1) -> Optional[tuple[float, float]]:
    """The INTERVAL_LEVEL percentile interval of peer's median ÷
    tessalloc's at `threads`, resampling the rounds both ran (runs paired
    by repetition); None with fewer than 5 such rounds."""
    times: dict[str, dict[int, float]] = {peer: {}, TESSALLOC: {}}
    for r in runs:
        if r.threads == threads and r.allocator in times:
            times[r.allocator][r.repetition] = r.elapsed_ms
    rounds = sorted(set(times[peer]) & set(times[TESSALLOC]))
    if len(rounds) < 5:
        return None
    rng = random.Random(seed)  # the same report from the same runs
    ratios = []
    for _ in range(INTERVAL_RESAMPLES):
        picked = [rng.choice(rounds) for _ in rounds]
        tess = median([times[TESSALLOC][k] for k in picked])
        if tess > 0:
            ratios.append(median([times[peer][k] for k in picked]) / tess)
    if not ratios:
        return None
    ratios.sort()
    tail = (1 - INTERVAL_LEVEL) / 2
    return (ratios[int(tail * (len(ratios) - 1))],
            ratios[int((1 - tail) * (len(ratios) - 1))])


def a_table(runs: list[ARun], names: list[str], threads: list[int],
            args: argparse.Namespace) -> list[str]:
    """The sample's table: one line of medians per thread count."""
    med = a_medians(runs)
    nulls: dict[tuple[str, int], int] = {}  # summed over the runs
    null_runs: dict[tuple[str, int], int] = {}  # runs with any
    run_count = {key: len(times) for key, times in a_times(runs).items()}
    for r in runs:
        key = (r.allocator, r.threads)
        nulls[key] = nulls.get(key, 0) + max(r.nulls, 0)
        null_runs[key] = null_runs.get(key, 0) + (r.nulls > 0)
    host = ("a new host thread per ECALL" if args.host_a == "new-thread"
            else "a pool of host threads made before init")
    lines = [
        "Configuration:",
        f"{'host threads':>36} = {host}",
        f"{'heap':>36} = {args.heap_pages_a} pages, NumTCS = {args.tcs_a}",
        f"{'num-allocations (per-thread)':>36} = {args.num_allocations}",
        f"{'max-allocation-size':>36} = {args.max_allocation_size} bytes",
        f"{'statistic':>36} = median of {runs_text(runs)}",
    ]
    for n in threads:
        parts = []
        for name in names:
            if (name, n) not in med:
                parts.append(f"{name} = n/a")
                continue
            text = f"{name} = {fmt_ms(med[(name, n)])} ms"
            if nulls.get((name, n)):
                text += (f" ({nulls[(name, n)]} NULL in {null_runs[(name, n)]}"
                         f" of {run_count[(name, n)]} runs)")
            parts.append(text)
        lines += [f"num-threads = {n}:", "      " + ", ".join(parts), ""]
    return lines


def plot_a(runs: list[ARun], names: list[str], threads: list[int],
           path: Path, log_y: bool, nproc: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for name in names:
        xs, ys, lo, hi = [], [], [], []
        for n in threads:
            el = [r.elapsed_ms for r in runs
                  if r.allocator == name and r.threads == n]
            if el:
                xs.append(n)
                ys.append(median(el))
                lo.append(min(el))
                hi.append(max(el))
        if not xs:
            continue
        line, = ax.plot(xs, ys, marker="o", markersize=3,
                        linewidth=2.2 if name == TESSALLOC else 1.4,
                        label=name)
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15,
                        linewidth=0)
    if threads and max(threads) > nproc:
        ax.axvspan(nproc + 0.5, max(threads) + 0.5, color="grey", alpha=0.08)
        ax.text(nproc + 0.7, 0.97, f"more threads than the {nproc} CPUs",
                transform=ax.get_xaxis_transform(), va="top", fontsize=8,
                color="dimgrey")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("threads (one ECALL each)")
    ax.set_ylabel("elapsed ms (median; band: min-max)")
    ax.set_title("Workload A: Open Enclave pluggable_allocator sample")
    ax.set_xticks(threads)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def read_series(path: Path) -> dict[str, list[float]]:
    """A workload-B time series (enclave_bench --csv) by column."""
    cols: dict[str, list[float]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            for k, v in row.items():
                cols.setdefault(k, []).append(float(v))
    return cols


def mean_footprint_ratio(series: dict[str, list[float]]) -> Optional[float]:
    """Footprint per live byte over a workload-B run: the mean footprint
    over the mean live requested bytes of its samples, less the first two
    (start-up) and the last (after the threads stopped, before the
    teardown). The peak ratio the target judges compares two maxima taken
    at different moments; this one says
    how much footprint each live byte costs while the run goes on, which
    differs where an allocator gives memory back (dlmalloc's footprint never
    falls, so its peak ratio is its high-water mark over the most that was
    live). None where the allocator reports no footprint."""
    footprint = series.get("footprint_bytes", [])[2:-1]
    live = series.get("live_bytes", [])[2:-1]
    if (not footprint or len(footprint) != len(live) or min(footprint) < 0
            or sum(live) <= 0):
        return None
    return sum(footprint) / sum(live)


#: The parts of tessalloc's footprint in B (footprint_budget), as shown.
BUDGET_PARTS: tuple[tuple[str, str], ...] = (
    ("live", "asked for (live requested bytes)"),
    ("rounding", "rounding up to size classes and to pages"),
    ("current", "free in heaps' current slabs (one per class a call uses)"),
    ("held", "free in the other slabs heaps hold"),
    ("orphaned", "free in orphaned slabs (no heap holds them; every heap takes from them)"),
    ("pending", "freed by other threads, waiting for the slab's holder to collect them"),
    ("kept", "kept by heaps for reuse: freed large spans and empty slabs"),
    ("rest", "the rest: page descriptors, region header, heap structs, and the skew "
             "between a sample's reads"),
)


def read_stats_series(path: Path) -> list[dict[str, Any]]:
    """An allocator's statistics series (enclave_bench --stats-jsonl)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def footprint_budget(series: dict[str, list[float]],
                     stats: list[dict[str, Any]]) -> Optional[dict[str, float]]:
    """Where an allocator's footprint goes over a workload-B run, in mean
    bytes per sample (the samples mean_footprint_ratio takes), from its own
    statistics at each sample (tessalloc's format version 2: slab_free):
    the live requested bytes, then what the allocator adds to them. The
    parts add up to its mean footprint. (Spans freed while their partition
    was locked, deferred_span_bytes, are free and not in the footprint.)
    None when a sample has no such line."""
    by_ms = {int(line["time_ms"]): line for line in stats if "time_ms" in line}
    rows = []
    for t_s, live in list(zip(series.get("t_s", []), series.get("live_bytes", [])))[2:-1]:
        # the CSV rounds its time to 1 ms and the JSON cuts it: within 1 ms
        ms = int(round(t_s * 1000.0))
        line = by_ms.get(ms, by_ms.get(ms - 1, by_ms.get(ms + 1)))
        if line is None or "slab_free" not in line:
            return None
        rows.append((live, line))
    if not rows:
        return None

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(rows)

    parts = {
        "live": mean([live for live, _ in rows]),
        "rounding": mean([line["live_bytes"] - live for live, line in rows]),
        "current": mean([line["slab_free"]["current"] for _, line in rows]),
        "held": mean([line["slab_free"]["held"] for _, line in rows]),
        "orphaned": mean([line["slab_free"]["orphaned"] for _, line in rows]),
        "pending": mean([line["slab_free"]["pending"] for _, line in rows]),
        "kept": mean([line["kept_span_bytes"] + line["empty_slab_bytes"] for _, line in rows]),
    }
    parts["rest"] = mean([line["footprint"] for _, line in rows]) - sum(parts.values())
    return parts


def budget_rows(name: str, host: str, parts: dict[str, float]) -> list[str]:
    """footprint_budget's parts as the rows of a markdown table."""
    live = parts["live"]
    rows = [f"| {name} {host}: {text} | {fmt_mib(parts[key])} | {parts[key] / live:.3f} |"
            for key, text in BUDGET_PARTS]
    total = sum(parts.values())
    rows.append(f"| {name} {host}: **footprint** | {fmt_mib(total)} | {total / live:.3f} |")
    return rows


def plot_b_run(series: dict[str, list[float]], run: BRun, heap_bytes: int,
               path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = series.get("t_s", [])
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot(t, [v / MIB for v in series.get("live_bytes", [])],
            label="live requested bytes", linewidth=1.6)
    fp = series.get("footprint_bytes", [])
    if fp and any(v >= 0 for v in fp):
        ax.plot(t, [v / MIB if v >= 0 else float("nan") for v in fp],
                label="footprint (allocator's own report)", linewidth=1.6)
    ax.plot(t, [v / MIB for v in series.get("touched_bytes", [])],
            label="touched pages of the region", linewidth=1.2,
            linestyle="--")
    ax.axhline(heap_bytes / MIB, color="grey", linewidth=0.8)
    ax.text(0, heap_bytes / MIB, " region", va="bottom", fontsize=8,
            color="dimgrey")
    nulls = series.get("nulls", [])
    first = next((t[i] for i, n in enumerate(nulls) if n > 0), None)
    if first is not None:
        ax.axvline(first, color="red", linewidth=0.8)
        ax.text(first, 0.02, " first NULL", color="red", fontsize=8,
                transform=ax.get_xaxis_transform())
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB")
    ax.set_title(f"Workload B: {run.allocator}, host {run.host} "
                 f"({run.ecalls_per_s:,.0f} ECALLs/s, {run.nulls} NULL)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_b_host(all_series: list[tuple[str, dict[str, list[float]]]],
                host: str, heap_bytes: int, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for name, series in all_series:
        t = series.get("t_s", [])
        fp = series.get("footprint_bytes", [])
        known = bool(fp) and all(v >= 0 for v in fp)
        ys = fp if known else series.get("touched_bytes", [])
        ax.plot(t, [v / MIB for v in ys],
                label=name + ("" if known else " (touched pages)"),
                linewidth=2.2 if name == TESSALLOC else 1.4)
    ax.axhline(heap_bytes / MIB, color="grey", linewidth=0.8)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds")
    ax.set_ylabel("footprint MiB")
    ax.set_title(f"Workload B, host {host}: footprint in the "
                 f"{heap_bytes / MIB:.0f} MiB region")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def a_section(runs: list[ARun], overlap: list[ARun], names: list[str],
              threads: list[int], args: argparse.Namespace,
              nproc: int) -> list[str]:
    med = a_medians(runs)
    with_nulls = {(r.allocator, r.threads) for r in runs if r.nulls > 0}
    top = max(threads)
    md = [
        "## Workload A: the Open Enclave pluggable_allocator sample",
        "",
        f"Per ECALL a FIFO of 15 live blocks and {args.num_allocations:,} "
        f"iterations of malloc(rand() % {args.max_allocation_size}) + free of "
        f"the oldest; one ECALL on each of N threads ({args.host_a} host "
        f"threads), heap {args.heap_pages_a} pages, NumTCS {args.tcs_a}; "
        f"blocks written and checked: {VERIFY_TEXT[args.verify_a]} "
        f"(the runs with every call at once: "
        f"{VERIFY_TEXT[args.verify_a_once]}). "
        f"Elapsed = wall time from before the threads start until all are "
        f"joined; median of {runs_text(runs)}, interleaved "
        f"(+{args.warmup_rounds} warm-up round(s))"
        # fill runs only where plan_fill_runs could add some (not with
        # --quick, --fill-seconds 0 or --repeat at --repeat-max)
        + (f": after {args.repeat} rounds, an allocator whose runs at a "
           f"thread count took under {args.fill_seconds:g} s of wall time in "
           f"all got more there, as many as fit, up to {args.repeat_max} "
           f"(the short runs, which noise moves most; decided by their "
           f"length, not their results)."
           if args.fill_seconds > 0 and args.repeat_max > args.repeat
           else "."),
        "",
    ]
    if top > nproc:
        md += [f"**This machine has {nproc} CPUs: the runs with more than "
               f"{nproc} threads are oversubscribed** (times above {nproc} "
               f"threads grow with the thread count for every allocator, and "
               f"dlmalloc's spin lock, OE's, loses time slices to threads "
               f"spinning while its holder waits for a CPU).", ""]
    md += ["```"] + a_table(runs, names, threads, args) + ["```", ""]
    ratio_cols = [n for n in names if n != TESSALLOC]
    # ratio columns only with a peer beside tessalloc: an empty one in the
    # header alone would leave markdown with no table
    with_ratios = TESSALLOC in names and bool(ratio_cols)
    head = "| threads | " + " | ".join(f"{n} ms" for n in names)
    sep = "|---:|" + "---:|" * len(names)
    with_interval = with_ratios and "snmalloc" in ratio_cols
    if with_ratios:
        head += " | " + " | ".join(f"{n} ÷ tessalloc" for n in ratio_cols)
        sep += "---:|" * len(ratio_cols)
    if with_interval:
        head += f" | snmalloc ÷ tessalloc, {INTERVAL_LEVEL:.0%} interval"
        sep += "---:|"
    md += [head + " |", sep]
    for n in threads:
        row = [str(n)] + [fmt_ms(med[(a, n)]) if (a, n) in med else "n/a"
                          for a in names]
        if with_ratios:
            tess = med.get((TESSALLOC, n))
            # two decimals, more where they would show a ratio at 1 or past it
            # ("behind at" below counts the ratios under 1)
            row += [fmt_judged(med[(a, n)] / tess, 1.0, digits=2)
                    + ("*" if (a, n) in with_nulls else "")
                    if tess and (a, n) in med else "n/a" for a in ratio_cols]
        if with_interval:
            interval = ratio_interval(runs, "snmalloc", n)
            row.append("n/a" if interval is None
                       else f"{fmt_judged(interval[0], 1.0, digits=2)}–"
                            f"{fmt_judged(interval[1], 1.0, digits=2)}")
        md.append("| " + " | ".join(row) + " |")
    md += ["", "(ratio > 1: tessalloc is faster; * : some of that allocator's runs at "
           "that count returned NULL, so they did less work."
           + (" The interval: a paired bootstrap over the rounds, "
              f"{INTERVAL_RESAMPLES} resamples; one that lies wholly below 1 "
              "is a lag beyond the run-to-run noise." if with_interval else "")
           + ")", ""]

    # Footprint, OS calls, NULLs.
    md += [
        f"### Footprint at {thread_ranges([top])}, OS memory calls, NULLs",
        "",
        "Footprint = the allocator's own peak where it keeps one (tessalloc, "
        "whose peak may count pages being freed at a new high; dlmalloc, "
        "snmalloc), else the largest value seen at the "
        "middle and end of each ECALL's loop; touched = pages of the region "
        "that no longer hold the fill pattern at the end (a high-water mark "
        "of the region's use, the same measure for every allocator). "
        f"Medians over the runs at {thread_ranges([top])}; 'at once' = the runs in "
        "which every ECALL waits for all the others at its midpoint "
        "(enclave_bench --overlap), so that all of them hold their memory "
        "together, as on a machine with a core per thread (on fewer "
        "CPUs the calls of a plain run overlap only partly, and by "
        "chance). OS calls = mmap, munmap, "
        "mremap, madvise, brk, sbrk made by allocator code (load = dlopen "
        "and constructors, init = init(), after init = the rest of the run; "
        "maximum over all runs); 'mmap'd outside' = bytes the allocator "
        "asked of mmap/mremap at load and init (memory outside the region).",
        "",
        "| allocator | footprint MiB | footprint MiB, at once | touched MiB | "
        "touched MiB, at once | OS calls load / init | mmap'd outside MiB | "
        "OS calls after init | NULLs, all runs summed (thread counts) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in names:
        at_top = [r for r in runs if r.allocator == name and r.threads == top]
        mine = [r for r in runs if r.allocator == name]
        if not mine:
            continue
        fp = (median(r.footprint_peak for r in at_top)
              if at_top and all(r.footprint_peak >= 0 for r in at_top)
              else -1.0)
        touched = median(r.touched_bytes for r in at_top) if at_top else -1.0
        fp_once = overlap_footprint(overlap, name)
        touched_once = [r.touched_bytes for r in overlap if r.allocator == name]
        mine = mine + [r for r in overlap if r.allocator == name]
        null_counts = sorted({r.threads for r in mine if r.nulls > 0})
        nulls = sum(max(r.nulls, 0) for r in mine)
        null_text = (f"{nulls} ({compress(null_counts)})" if nulls else "0")
        outside = max(r.os_mmap_bytes_load + r.os_mmap_bytes_init
                      for r in mine)
        md.append(
            f"| {name} | {fmt_mib(fp)} | {fmt_mib(fp_once)} | "
            f"{fmt_mib(touched)} | "
            f"{fmt_mib(median(touched_once) if touched_once else -1.0)} | "
            f"{max(r.os_calls_load for r in mine)} / "
            f"{max(r.os_calls_init for r in mine)} | "
            f"{fmt_mib(outside)} | "
            f"{max(r.os_calls_after_init for r in mine)}"
            + (f" (+{max(r.os_calls_after_init_outside for r in mine)} "
               f"outside)" if any(r.os_calls_after_init_outside
                                  for r in mine) else "")
            + f" | {null_text} |")
    md.append("")
    md += a_targets(runs, overlap, threads, nproc)
    return md


def overlap_footprint(overlap: list[ARun], name: str) -> float:
    """Median peak footprint of name's --overlap runs; -1 if none or any
    has no footprint."""
    fps = [r.footprint_peak for r in overlap if r.allocator == name]
    return median(fps) if fps and min(fps) >= 0 else -1.0


def compress(values: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def a_targets(runs: list[ARun], overlap: list[ARun], threads: list[int],
              nproc: int) -> list[str]:
    med = a_medians(runs)
    names = {r.allocator for r in runs}
    md = ["### Targets (workload A, tessalloc)", ""]
    if TESSALLOC not in names:
        return md + ["tessalloc was not measured.", ""]
    md += ["| target | measured | verdict |", "|---|---|---|"]
    tess = {n: med[(TESSALLOC, n)] for n in threads if (TESSALLOC, n) in med}
    if "snmalloc" in names:
        worst = max(((tess[n] / med[("snmalloc", n)], n) for n in tess
                     if ("snmalloc", n) in med), default=None)
        # every count needs a result of both: PASS over the counts that
        # have them would pass counts where either crashed
        missing = [n for n in threads if n not in tess or ("snmalloc", n) not in med]
        ok: Optional[bool] = (None if worst is None else False if worst[0] > 1
                              else None if missing else True)
        # which of the counts behind lag beyond the noise (their interval
        # of snmalloc ÷ tessalloc wholly below 1): told, not judged
        behind = [n for n in tess if ("snmalloc", n) in med
                  and tess[n] > med[("snmalloc", n)]]
        beyond = [n for n in behind
                  if (iv := ratio_interval(runs, "snmalloc", n)) is not None and iv[1] < 1]
        md.append("| no slower than snmalloc at every thread count | "
                  + ("n/a" if worst is None else
                     f"worst tessalloc ÷ snmalloc {fmt_judged(worst[0], 1.0)} at "
                     f"{thread_ranges([worst[1]])}")
                  + (f" (no result of both at {thread_ranges(missing)})"
                     if missing else "")
                  + (f"; behind at {thread_ranges(behind)}, beyond the noise at "
                     + (thread_ranges(beyond) if beyond else "none")
                     + f" ({INTERVAL_LEVEL:.0%} interval, above)" if behind else "")
                  + f" | {verdict(ok)} |")
    if 1 in tess:
        peers1 = {a: med.get((a, 1)) for a in ("dlmalloc", "snmalloc")}
        # FAIL as soon as a measured peer is as fast; PASS only with both
        # measured (a peer not built, or without runs at 1 thread: n/a)
        ok = (
            False if any(v is not None and tess[1] >= v
                         for v in peers1.values())
            else None if None in peers1.values() else True)
        # one decimal, more where it would show two different times as equal
        known = [v for v in peers1.values() if v is not None]
        shown = ", ".join(f"{a} n/a" if v is None
                          else f"{a} {fmt_judged(v, tess[1], digits=1)} ms"
                          for a, v in peers1.items())
        md.append(f"| 1 thread: faster than both peers | tessalloc "
                  f"{fmt_judged(tess[1], *known, digits=1)} ms vs {shown} | {verdict(ok)} |")
    top = max(threads)
    if top in tess and ("dlmalloc", top) in med:
        speed = med[("dlmalloc", top)] / tess[top]
        cond = ("(target on >= 8 cores; here "
                f"{nproc} CPUs: recorded, not judged)" if nproc < 8 else "")
        judged = (verdict(speed >= A_SPEEDUP_VS_DLMALLOC) if nproc >= 8
                  else "n/a")
        md.append(f"| {thread_ranges([top])}: >= {A_SPEEDUP_VS_DLMALLOC:.0f}x faster "
                  f"than dlmalloc {cond} | {fmt_judged(speed, A_SPEEDUP_VS_DLMALLOC)}x | "
                  f"{judged} |")
    # The speed of the calls all at once, the target's setting too, is
    # recorded (timings on fewer CPUs than calls are the scheduler's).
    at_once = {a: [r.elapsed_ms for r in overlap if r.allocator == a]
               for a in (TESSALLOC, "snmalloc")}
    if at_once[TESSALLOC] and at_once["snmalloc"]:
        ratio = median(at_once[TESSALLOC]) / median(at_once["snmalloc"])
        md.append(f"| {thread_ranges([top])}, every call at once: time against "
                  f"snmalloc's (recorded, not judged; here {nproc} CPUs) | "
                  f"tessalloc ÷ snmalloc {fmt_judged(ratio)} | n/a |")
    # The footprint target is judged on the calls all at once where they
    # were measured: that is the target's setting (a core per thread).
    once = {a: overlap_footprint(overlap, a) for a in (TESSALLOC, "dlmalloc")}
    judge_once = once[TESSALLOC] >= 0 and once["dlmalloc"] > 0
    if judge_once:
        ratio = once[TESSALLOC] / once["dlmalloc"]
        md.append(f"| {thread_ranges([top])}, every call at once: peak footprint <= "
                  f"{A_FOOTPRINT_VS_DLMALLOC:.0f}x dlmalloc's | "
                  f"{fmt_judged(ratio, A_FOOTPRINT_VS_DLMALLOC)}x | "
                  f"{verdict(ratio <= A_FOOTPRINT_VS_DLMALLOC)} |")
    fp = {a: [r.footprint_peak for r in runs
              if r.allocator == a and r.threads == top]
          for a in (TESSALLOC, "dlmalloc")}
    if fp[TESSALLOC] and fp["dlmalloc"] and min(fp["dlmalloc"]) > 0 \
            and min(fp[TESSALLOC]) >= 0:
        ratio = median(fp[TESSALLOC]) / median(fp["dlmalloc"])
        ok = ratio <= A_FOOTPRINT_VS_DLMALLOC
        md.append(f"| {thread_ranges([top])} as scheduled here: peak footprint <= "
                  f"{A_FOOTPRINT_VS_DLMALLOC:.0f}x dlmalloc's"
                  + (" (recorded; judged at once, above)" if judge_once
                     else "") + f" | {fmt_judged(ratio, A_FOOTPRINT_VS_DLMALLOC)}x | "
                  + ("n/a" if judge_once else verdict(ok)) + " |")
    touched = {a: [r.touched_bytes for r in (overlap if judge_once else runs)
                   if r.allocator == a and r.threads == top]
               for a in (TESSALLOC, "dlmalloc")}
    if touched[TESSALLOC] and touched["dlmalloc"] \
            and min(touched["dlmalloc"]) > 0:
        ratio = median(touched[TESSALLOC]) / median(touched["dlmalloc"])
        md.append(f"| {thread_ranges([top])}"
                  + (", every call at once" if judge_once else "")
                  + ": the same for touched pages | "
                  f"{fmt_judged(ratio, A_FOOTPRINT_VS_DLMALLOC)}x | "
                  f"{verdict(ratio <= A_FOOTPRINT_VS_DLMALLOC)} |")
    mine = [r for r in runs + overlap if r.allocator == TESSALLOC]
    nulls = sum(max(r.nulls, 0) for r in mine)
    os_after = max(r.os_calls_after_init + r.os_calls_after_init_outside
                   for r in mine)
    md.append(f"| no NULL | {nulls} | {verdict(nulls == 0)} |")
    md.append(f"| no OS memory call after init | {os_after} | "
              f"{verdict(os_after == 0)} |")
    md.append("")
    return md


def b_section(runs: list[BRun], names: list[str], hosts: list[str],
              args: argparse.Namespace, folder: Path) -> list[str]:
    """B's tables; folder: where the run's series and plots are."""
    md = [
        "## Workload B: the fragmentation soak",
        "",
        f"{args.heap_pages_b * 4096 / MIB:.0f} MiB region, {args.workers} "
        f"worker + {args.others} other threads doing ECALLs back to back for "
        f"{args.duration:g} s; worker ECALLs: bursts of 200-2000 mallocs "
        f"(85 % 16-512 B, 12 % 1-4 KiB, 3 % 8-32 KiB; 3 % of them calloc, "
        f"3 % realloc), half freed as they go, the rest freed at the end "
        f"except 2 % moved into a shared pool of long-lived blocks "
        f"(<= {args.pool_bytes / MIB:g} MiB requested) that other threads' "
        f"ECALLs free later. Sampled every {args.sample_interval:g} s; "
        f"blocks written and checked: {VERIFY_TEXT[args.verify_b]}. "
        "Footprint = the allocator's own report: tessalloc counts the pages it "
        "has handed out (blocks, slabs, kept spans, metadata) and not the free "
        "spans of its partitions; dlmalloc's is its top, free chunks below it "
        "included; snmalloc's its usage counter and page map. Touched = region "
        "pages no longer holding the fill pattern, the one measure taken the "
        "same way for every allocator (n/a footprint: the allocator "
        "cannot tell). Allocation calls/s = the mallocs, callocs and reallocs "
        "of all ECALLs per second: the work done, which the speed targets "
        "judge (an other thread's ECALL is about a tenth of a worker's, so "
        "ECALLs/s weighs the per-ECALL cost and the mix of the two). An "
        "allocator with NULLs did less work than asked: its rates are not "
        "comparable. snmalloc's plugin flushes its allocator at every "
        "thread_cleanup (snmalloc's own thread teardown, which OE's "
        "0.6-era integration calls; its 0.5-era one did not flush): "
        "without it snmalloc is faster per ECALL but fills this region; "
        "its locks spin, as built for an enclave (peers/snmalloc_plugin.cc). "
        "Peaks (live, footprint) = the maxima of reads of both at once "
        "every few ms between the samples too (the samples alone miss more "
        "of the live bytes' swings than of the footprint, which lags them). "
        "Ratios = peak ÷ peak live requested bytes; 'over "
        "time' = mean footprint ÷ mean live bytes over the samples (less the "
        "first two and the last), which counts what each live byte costs "
        "while the run goes on (an allocator that keeps free memory below "
        "its high-water mark, like dlmalloc below its top, counts it there).",
        "",
        "| allocator | host | ECALLs/s | worker ECALLs/s | allocation calls/s | "
        "peak live MiB | "
        "peak footprint MiB | footprint ÷ live | footprint ÷ live over time | "
        "peak touched MiB | touched ÷ live | NULLs | first NULL s | "
        "OS calls after init | plot |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for host in hosts:
        for name in names:
            for r in [x for x in runs if x.allocator == name
                      and x.host == host and x.repetition > 0]:
                outside = (f" (+{r.os_calls_after_init_outside} outside)"
                           if r.os_calls_after_init_outside else "")
                md.append(
                    f"| {name} | {host} | {r.ecalls_per_s:,.0f} | "
                    f"{r.worker_ecalls / r.duration_s:,.0f} | "
                    f"{calls_per_s(r):,.0f} | "
                    f"{fmt_mib(r.judged_live)} | "
                    f"{fmt_mib(r.judged_footprint)} | "
                    f"{fmt_judged(r.footprint_ratio, *B_FOOTPRINT_LIMITS)} | "
                    f"{fmt_judged(r.mean_footprint_ratio)} | "
                    f"{fmt_mib(r.peak_touched_bytes)} | "
                    f"{fmt_judged(r.touched_ratio, B_FOOTPRINT_RATIO)} | {r.nulls:,} | "
                    + (f"{r.first_null_s:.2f}" if r.nulls > 0 else "")
                    + f" | {r.os_calls_after_init}{outside} | "
                    f"[png]({Path(r.series_csv).with_suffix('.png').name}) |")
    md.append("")
    plots = []
    for r in runs:
        stem = stats_series(Path(r.series_csv)).stem
        if (folder / f"{stem}_fragmentation.png").is_file():
            plots.append(f"{r.allocator} {r.host}: [footprint, slab and live bytes]"
                         f"({stem}_footprint.png), [fragmentation by size class at the end]"
                         f"({stem}_fragmentation.png)")
    if plots:
        md += ["Where the bytes go, by the allocator's own statistics (tess_stats_json at "
               "each sample, drawn by tools/tess_stats_view.py): " + "; ".join(plots) + ".",
               ""]
    budget = []
    for r in runs:
        csv_path = folder / r.series_csv
        stats_path = folder / stats_series(Path(r.series_csv)).name
        if not (csv_path.is_file() and stats_path.is_file()):
            continue
        try:
            parts = footprint_budget(read_series(csv_path), read_stats_series(stats_path))
        except (ValueError, KeyError, TypeError):  # a series cut short, an old format
            parts = None
        if parts is not None and parts["live"] > 0:
            budget += budget_rows(r.allocator, r.host, parts)
    if budget:
        md += ["Where the footprint goes over time, by the allocator's own statistics, "
               "from a run of its own with them (a statistics read locks tessalloc's "
               "partitions while it walks the slabs, so the runs above are made without "
               "it) (means over the samples of that run's 'over time' ratio; ÷ live = "
               "per live requested byte). Free in slabs is what the slabs hold beyond their live "
               "blocks, by who holds them:",
               "",
               "| part | mean MiB | ÷ live |",
               "|---|---:|---:|",
               *budget,
               ""]
    md += b_targets(runs, hosts)
    return md


def calls_per_s(run: BRun) -> float:
    """B's work rate: allocation calls (malloc, calloc, realloc) per second."""
    return run.mallocs / run.duration_s if run.duration_s > 0 else 0.0


def worker_calls_per_s(run: BRun) -> float:
    """The worker threads' allocation calls per second (0: not reported)."""
    return (run.worker_mallocs / run.duration_s
            if run.duration_s > 0 and run.worker_mallocs >= 0 else 0.0)


def worker_calls_per_cpu_s(run: BRun) -> float:
    """The worker threads' allocation calls per second of their CPU time
    (0: not reported): the cost of their calls, whatever share of the
    CPUs the workers got (enclave_bench.c, slot_t.cpu_ns)."""
    return (run.worker_mallocs / run.worker_cpu_s
            if run.worker_cpu_s > 0 and run.worker_mallocs >= 0 else 0.0)


def unkept_lapses(run: Any) -> str:
    """What a run of tessalloc that is not kept (a warm-up of A) found
    against the targets that every run must meet: NULLs and OS memory calls
    after init ("" when none)."""
    lapses = []
    if run.nulls > 0:
        lapses.append(f"{run.nulls} NULL returns")
    os_after = run.os_calls_after_init + run.os_calls_after_init_outside
    if os_after > 0:
        lapses.append(f"{os_after} OS memory calls after init")
    return "; ".join(lapses)


def b_targets(runs: list[BRun], hosts: list[str]) -> list[str]:
    every_run = runs  # the statistics runs (repetition 0) count for NULLs, OS calls
    runs = [r for r in runs if r.repetition > 0]
    md = ["### Targets (workload B, tessalloc)", ""]
    if not any(r.allocator == TESSALLOC for r in runs):
        return md + ["tessalloc was not measured.", ""]
    md += ["| host | target | measured | verdict |", "|---|---|---|---|"]

    def rate(name: str, host: str, of: Callable[[BRun], float]) -> Optional[float]:
        """The median of of(run) over name's runs with host."""
        rates = [of(r) for r in runs if r.allocator == name and r.host == host]
        return median(rates) if rates else None

    def speed(host: str, peer: str, limit: float) -> Optional[tuple[float, str]]:
        """tessalloc's allocation calls/s ÷ peer's, the lower of all
        threads' and the workers' alone, and the ratios as words (None
        without both). Each host thread loops on its own for the run's
        duration, so the share of the other threads' short ECALLs, whose
        cost is mostly the ECALL's own (thread_init, thread_cleanup),
        differs between allocators: the calls of all threads alone can
        pass on the other threads' short calls while the workers' bursts
        are slower. The two judged ratios print on their side of `limit`,
        the target. The workers' calls per CPU-second are shown, not
        judged: where threads outnumber CPUs, they say what the calls
        cost apart from how the CPUs were shared."""
        ratios: list[Optional[float]] = []
        for of in (calls_per_s, worker_calls_per_s, lambda r: r.ecalls_per_s,
                   lambda r: r.worker_ecalls / r.duration_s, worker_calls_per_cpu_s):
            tess, other = rate(TESSALLOC, host, of), rate(peer, host, of)
            if tess is None or not other:
                ratios.append(None)
                continue
            ratios.append(tess / other)
        if ratios[0] is None:
            return None
        judged = min(r for r in ratios[:2] if r is not None)
        workers = "n/a" if ratios[1] is None else f"{fmt_judged(ratios[1], limit)}x"
        per_cpu = "" if ratios[4] is None else f", workers' calls per CPU-second {ratios[4]:.2f}x"
        return judged, (f"{fmt_judged(ratios[0], limit)}x, workers' calls {workers} "
                        f"(ECALLs/s {ratios[2]:.2f}x, "
                        f"worker ECALLs/s {ratios[3]:.2f}x{per_cpu})")

    # tessalloc first, then the peers in the order they ran
    names = [TESSALLOC] + [n for n in dict.fromkeys(r.allocator for r in runs)
                           if n != TESSALLOC]
    for host in hosts:
        mine = [r for r in runs if r.allocator == TESSALLOC and r.host == host]
        if not mine:
            continue
        all_mine = [r for r in every_run if r.allocator == TESSALLOC and r.host == host]
        nulls = sum(r.nulls for r in all_mine)
        md.append(f"| {host} | zero NULLs (every run, the statistics run too) | {nulls} | "
                  f"{verdict(nulls == 0)} |")
        ratios = [r.footprint_ratio for r in mine
                  if r.footprint_ratio is not None]
        worst = max(ratios) if ratios else None
        fits = None if worst is None else worst <= B_FOOTPRINT_RATIO
        aim = (" (aim met)" if worst is not None and worst <= B_FOOTPRINT_AIM
               else "")
        md.append(f"| {host} | peak footprint <= {B_FOOTPRINT_RATIO} x peak "
                  f"live (aim {B_FOOTPRINT_AIM}) | {fmt_judged(worst, *B_FOOTPRINT_LIMITS)} | "
                  f"{verdict(fits)}{aim} |")
        touched = [r.touched_ratio for r in mine
                   if r.touched_ratio is not None]
        worst_t = max(touched) if touched else None
        fits = None if worst_t is None else worst_t <= B_FOOTPRINT_RATIO
        md.append(f"| {host} | the same for touched pages of the region | "
                  f"{fmt_judged(worst_t, B_FOOTPRINT_RATIO)} | {verdict(fits)} |")
        over_time = []
        for name in names:
            means = [r.mean_footprint_ratio for r in runs
                     if r.allocator == name and r.host == host
                     and r.mean_footprint_ratio is not None]
            if means:
                over_time.append(f"{name} {fmt_judged(median(means))}")
        if over_time:
            md.append(f"| {host} | footprint ÷ live over time (recorded, "
                      f"not a target; each allocator's own measure) | "
                      f"{', '.join(over_time)} | n/a |")
        vs_dl = speed(host, "dlmalloc", B_ECALLS_VS_DLMALLOC)
        vs_sn = speed(host, "snmalloc", 1.0)
        calls = "allocation calls/s, all threads and workers alone,"
        if vs_dl is not None:
            md.append(f"| {host} | {calls} >= {B_ECALLS_VS_DLMALLOC} x "
                      f"dlmalloc's | {vs_dl[1]} | "
                      f"{verdict(vs_dl[0] >= B_ECALLS_VS_DLMALLOC)} |")
        if vs_sn is not None:
            md.append(f"| {host} | {calls} >= snmalloc's | "
                      f"{vs_sn[1]} | {verdict(vs_sn[0] >= 1)} |")
        os_after = max(r.os_calls_after_init + r.os_calls_after_init_outside
                       for r in all_mine)
        md.append(f"| {host} | no OS memory call after init | {os_after} | "
                  f"{verdict(os_after == 0)} |")
    md.append("")
    return md


# ------------------------------------------------------------------ main


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="tessalloc vs fixed-heap peers in a model enclave "
                    "(workload A: OE's pluggable_allocator sample; B: the "
                    "fragmentation soak).")
    p.add_argument("--build", type=Path, default=REPO_ROOT / "build",
                   help="build directory (default: <repo>/build)")
    p.add_argument("--bench", type=Path, default=None,
                   help="enclave_bench (default: found in --build)")
    p.add_argument("--peers-json", type=Path, default=None,
                   help="the peers' list (default: "
                        "<build>/enclave-peers/peers.json)")
    p.add_argument("--out", type=Path,
                   default=REPO_ROOT / "docs" / "results" / "enclave",
                   help="output directory (default: docs/results/enclave)")
    p.add_argument("--allocators", default=None,
                   help="comma-separated names (tessalloc, or a name in "
                        "peers.json) or paths of plugins (default: "
                        "tessalloc + every built peer)")
    p.add_argument("--workloads", default="a,b",
                   help="comma-separated subset of a,b (default: a,b)")
    g = p.add_argument_group("workload A")
    g.add_argument("--repeat", type=int, default=5,
                   help="timed runs per thread count and allocator "
                        "(median; default: 5)")
    g.add_argument("--warmup-rounds", type=int, default=1,
                   help="untimed rounds first (default: 1)")
    g.add_argument("--fill-seconds", type=float, default=10.0,
                   help="after the --repeat rounds, an allocator whose "
                        "timed runs at a thread count took less wall time "
                        "than this in all gets more runs there, "
                        "interleaved, until they would (0: none; "
                        "default: 10)")
    g.add_argument("--repeat-max", type=int, default=25,
                   help="timed runs per allocator and thread count at most, "
                        "with --fill-seconds (default: 25)")
    g.add_argument("--max-threads", type=int, default=16)
    g.add_argument("--num-allocations", type=int, default=100000)
    g.add_argument("--max-allocation-size", type=int, default=16384)
    g.add_argument("--host-a", choices=HOSTS, default="new-thread",
                   help="host threads for A (default: new-thread, as in the "
                        "sample, which starts its threads per run)")
    g.add_argument("--heap-pages-a", type=int, default=8192)
    g.add_argument("--tcs-a", type=int, default=16)
    g.add_argument("--verify-a", choices=VERIFY_MODES, default="head",
                   help="what of each block enclave_bench writes and checks "
                        "(default: head, its first word; see README.md)")
    g.add_argument("--verify-a-once", choices=VERIFY_MODES, default="sig",
                   help="the same for the runs with every call at once "
                        "(--overlap), which judge footprint and touched "
                        "pages, not time (default: sig, a word on every "
                        "page of each block)")
    g.add_argument("--log-y", action="store_true",
                   help="logarithmic time axis in the plot")
    g = p.add_argument_group("workload B")
    g.add_argument("--duration", type=float, default=60.0,
                   help="seconds per run (default: 60)")
    g.add_argument("--hosts", default=",".join(HOSTS),
                   help="host variants (default: pooled,new-thread)")
    g.add_argument("--repeat-b", type=int, default=1,
                   help="runs per allocator and host (default: 1)")
    g.add_argument("--workers", type=int, default=16)
    g.add_argument("--others", type=int, default=4)
    g.add_argument("--heap-pages-b", type=int, default=16384)
    g.add_argument("--tcs-b", type=int, default=0,
                   help="thread slots (default: workers + others)")
    g.add_argument("--pool-bytes", type=int, default=16 * MIB)
    g.add_argument("--sample-interval", type=float, default=0.5)
    g.add_argument("--verify-b", choices=VERIFY_MODES, default="sig",
                   help="what of each block is written and checked "
                        "(default: sig, first/last word + one per 4 KiB)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300,
                   help="seconds before a run of A is killed; B gets "
                        "3 x duration + this (default: 300)")
    p.add_argument("--quick", action="store_true",
                   help="seconds-long check of the tooling: A with 2000 "
                        "allocations, 1-3 threads, 1 run; B 1.5 s "
                        "(overrides those options; numbers meaningless)")
    args = p.parse_args(argv)
    if args.quick:
        args.num_allocations, args.max_threads = 2000, 3
        args.repeat, args.warmup_rounds, args.repeat_b = 1, 0, 1
        args.fill_seconds = 0.0
        args.duration, args.sample_interval = 1.5, 0.25
    args.workloads = names_list(args.workloads)
    args.hosts = names_list(args.hosts)
    if not args.workloads or any(w not in WORKLOADS for w in args.workloads):
        p.error("--workloads takes a, b or a,b")
    if not args.hosts or any(h not in HOSTS for h in args.hosts):
        p.error("--hosts takes pooled, new-thread or both")
    lowest = {"repeat": 1, "repeat_max": 1, "repeat_b": 1, "max_threads": 1, "warmup_rounds": 0,
              "num_allocations": 1, "max_allocation_size": 1, "heap_pages_a": 1,
              "heap_pages_b": 1, "tcs_a": 1, "tcs_b": 0, "workers": 1, "others": 0,
              "pool_bytes": 0}
    for name, least in lowest.items():
        if getattr(args, name) < least:
            p.error(f"--{name.replace('_', '-')} must be >= {least}")
    for name in ("duration", "sample_interval", "timeout"):
        if not getattr(args, name) > 0:  # also NaN
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if not args.fill_seconds >= 0:  # also NaN
        p.error("--fill-seconds must be >= 0")
    if args.peers_json is None:
        args.peers_json = args.build / "enclave-peers" / "peers.json"
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    command = command_line(argv, "run_enclave.py")
    bench = args.bench or find_bench(args.build)
    plugins, skipped = collect_plugins(args, bench)
    for s in skipped:
        log(f"SKIPPED {s}")
    if not plugins:
        log("no allocator to measure")
        return 1
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    # Every file is written into a folder of its own inside `out` and moved
    # in at the end, so that a run cut short (Ctrl-C, a crash of this
    # script) leaves the previous results whole rather than half replaced.
    stage = Path(tempfile.mkdtemp(prefix=".partial-", dir=out))
    try:
        return run_staged(args, plugins, skipped, bench, command, started, stage)
    except KeyboardInterrupt:
        log(f"interrupted: the results in {out}/ are unchanged")
        return 130
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def move_results(stage: Path, out: Path, workloads: list[str]) -> None:
    """Replace the results of the workloads measured (a_*, b_* files, and
    summary.md, meta.json) in `out` by the run's own, from `stage`."""
    for old in out.iterdir():
        if old.is_file() and old.name[:2] in {f"{w}_" for w in workloads}:
            old.unlink()
    for new in stage.iterdir():
        os.replace(new, out / new.name)


def run_staged(args: argparse.Namespace, plugins: list[Plugin], skipped: list[str],
               bench: Path, command: str, started: datetime.datetime,
               stage: Path) -> int:
    """main's measuring and writing: every file into `stage`, moved into
    --out once all are written."""
    names = [p.name for p in plugins]
    machine = machine_info()
    nproc = machine["nproc"]
    threads = list(range(1, args.max_threads + 1))
    out: Path = args.out

    failures: list[str] = []  # tool errors and tessalloc's failed checks
    findings: list[str] = []  # peers' failed checks: results, not errors

    def note(name: str, text: str) -> None:
        (failures if name == TESSALLOC or not name else findings).append(text)

    a_runs: list[ARun] = []
    a_overlap: list[ARun] = []  # --overlap runs at the top thread count
    b_runs: list[BRun] = []
    rounds = args.warmup_rounds + args.repeat
    top = max(threads)
    overlap = top > 1 and args.tcs_a >= top
    total = ((rounds * len(threads) * len(plugins)
              + (args.repeat * len(plugins) if overlap else 0)
              if "a" in args.workloads else 0)
             + ((args.repeat_b * len(plugins)
                 + sum(p.name == TESSALLOC for p in plugins)) * len(args.hosts)
                if "b" in args.workloads else 0))
    with Progress(total, width=44) as progress:

        def measure(plug: Plugin, label: str, what: str,
                    call: Callable[[], tuple[Any, str]],
                    keep: Optional[list[Any]]) -> None:
            """One run: kept in `keep` (None: a warm-up of A, neither timed
            nor judged; tessalloc's statistics runs of B are kept with
            repetition 0, which only the NULL and OS-call targets count), a
            failed check noted as `what: why`, a tool error noted and
            logged. What a warm-up found still counts: its failed checks,
            and for tessalloc its NULLs and OS memory calls after init (the
            targets' "no NULL" and "no OS call")."""
            progress.describe(label)
            try:
                run, why = call()
                if keep is not None:
                    keep.append(run)
                elif plug.name == TESSALLOC:
                    why = "; ".join(w for w in (why, unkept_lapses(run)) if w)
                if why:
                    note(plug.name, f"{what}: {why}")
            except BenchError as exc:
                note(plug.name, str(exc))
                progress.log(f"FAILED: {exc}")
            progress.advance()

        def run_a_timed(plug: Plugin, n: int, rep: int,
                        label: str) -> tuple[float, bool]:
            """One run of A at n threads (rep 0 or less: a warm-up); the
            wall time it took, process start included, and whether it was
            kept (not a warm-up, nor a crash or timeout, which give no
            result)."""
            warm = rep <= 0
            kept = len(a_runs)
            started = time.monotonic()
            measure(plug, f"A {plug.name} {n} thr ({label})",
                    f"A {plug.name} {n} threads "
                    + ("warm-up" if warm else f"run {rep}"),
                    lambda: run_a(bench, plug, n, max(rep, 0), args),
                    None if warm else a_runs)
            return time.monotonic() - started, len(a_runs) > kept

        if "a" in args.workloads:
            run_seconds: dict[tuple[str, int], list[float]] = {}
            # the timed runs that gave no result: their time is spent, but
            # no median has them (see plan_fill_runs)
            lost_seconds: dict[tuple[str, int], float] = {}
            for rnd in range(rounds):
                rep = rnd - args.warmup_rounds + 1
                label = "warm-up" if rep <= 0 else f"{rep}/{args.repeat}"
                for n in threads:
                    for plug in plugins:
                        took, kept = run_a_timed(plug, n, rep, label)
                        if kept:
                            run_seconds.setdefault((plug.name, n), []).append(took)
                        elif rep > 0:
                            key = (plug.name, n)
                            lost_seconds[key] = lost_seconds.get(key, 0.0) + took
            fill = (plan_fill_runs(run_seconds, args.fill_seconds,
                                   args.repeat_max, lost_seconds)
                    if args.fill_seconds > 0 else {})
            progress.add_steps(sum(fill.values()))
            # still in rounds: each round runs every count, every allocator
            # that has runs left at it
            for k in range(max(fill.values(), default=0)):
                for n in threads:
                    for plug in plugins:
                        more = fill.get((plug.name, n), 0)
                        if more > k:
                            rep = args.repeat + k + 1
                            run_a_timed(plug, n, rep, f"{rep}/{args.repeat + more}")
            for rep in range(1, args.repeat + 1) if overlap else ():
                for plug in plugins:
                    measure(plug, f"A {plug.name} {top} thr at once "
                                  f"({rep}/{args.repeat})",
                            f"A {plug.name} {top} threads overlapping, "
                            f"run {rep}",
                            lambda: run_a(bench, plug, top, rep, args,
                                          overlap=True),
                            a_overlap)
        if "b" in args.workloads:
            for rep in range(1, args.repeat_b + 1):
                for host in args.hosts:
                    for plug in plugins:
                        suffix = f"_r{rep}" if args.repeat_b > 1 else ""
                        series_csv = stage / f"b_{plug.name}_{host}{suffix}.csv"
                        measure(plug, f"B {plug.name} {host} "
                                      f"({args.duration:g} s)",
                                f"B {plug.name} {host}",
                                lambda: run_b(bench, plug, host, rep,
                                              series_csv, args),
                                b_runs)
            # the statistics series: a run of its own, not judged
            for host in args.hosts:
                for plug in [p for p in plugins if p.name == TESSALLOC]:
                    series_csv = stage / f"b_{plug.name}_{host}_stats-run.csv"
                    measure(plug, f"B {plug.name} {host} with statistics",
                            f"B {plug.name} {host} with statistics",
                            lambda: run_b(bench, plug, host, 0, series_csv,
                                          args, stats=True),
                            b_runs)
    finished = datetime.datetime.now(datetime.timezone.utc)

    # ---- files
    plots_ok = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plots_ok = False
        skipped.append("plots: matplotlib not installed")
        log("SKIPPED plots: matplotlib not installed")
    table: list[str] = []
    if a_runs:
        with (stage / "a_runs.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=A_FIELDS)
            w.writeheader()
            for r in a_runs + a_overlap:
                w.writerow(dataclasses.asdict(r))
        table = a_table(a_runs, names, threads, args)
        (stage / "a_table.txt").write_text("\n".join(table) + "\n")
        if plots_ok:
            plot_a(a_runs, names, threads, stage / "a_time_vs_threads.png",
                   args.log_y, nproc)
    heap_b = args.heap_pages_b * 4096
    if b_runs:
        with (stage / "b_runs.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=B_FIELDS + [
                "footprint_ratio", "touched_ratio"])
            w.writeheader()
            for br in b_runs:
                row: dict[str, Any] = dataclasses.asdict(br)
                row["footprint_ratio"] = fmt_judged(br.footprint_ratio, *B_FOOTPRINT_LIMITS)
                row["mean_footprint_ratio"] = fmt_judged(br.mean_footprint_ratio)
                row["touched_ratio"] = fmt_judged(br.touched_ratio, B_FOOTPRINT_RATIO)
                w.writerow(row)
        if plots_ok:
            for host in args.hosts:
                per_host: list[tuple[str, dict[str, list[float]]]] = []
                for br in [x for x in b_runs if x.host == host]:
                    path = stage / br.series_csv
                    if not path.is_file():
                        continue
                    series = read_series(path)
                    plot_b_run(series, br, heap_b, path.with_suffix(".png"))
                    stats = stats_series(path)
                    if stats.is_file() and stats.stat().st_size > 0:
                        failed = plot_stats_series(stats)
                        if failed:
                            log(f"stats plots of {stats.name} failed: {failed}")
                    if br.repetition == 1:
                        per_host.append((br.allocator, series))
                if per_host:
                    plot_b_host(per_host, host, heap_b,
                                stage / f"b_{host}_footprint.png")

    meta: EnclaveMeta = {
        **common_meta(command, started, finished, machine, args.build, out),
        "enclave_bench": str(bench),
        "allocators": [dataclasses.asdict(p) for p in plugins],
        "skipped": skipped,
        "failures": failures,
        "findings": findings,
        "settings": {
            "workloads": args.workloads, "quick": args.quick,
            "seed": args.seed,
            "a": {"repeat": args.repeat, "warmup_rounds": args.warmup_rounds,
                  "fill_seconds": args.fill_seconds, "repeat_max": args.repeat_max,
                  "threads": threads, "host": args.host_a,
                  "num_allocations": args.num_allocations,
                  "max_allocation_size": args.max_allocation_size,
                  "heap_pages": args.heap_pages_a, "tcs": args.tcs_a,
                  "verify": args.verify_a, "verify_once": args.verify_a_once,
                  "order": "interleaved: for each round, for each thread "
                           "count, every allocator in turn"},
            "b": {"duration_s": args.duration, "hosts": args.hosts,
                  "repeat": args.repeat_b, "workers": args.workers,
                  "others": args.others, "heap_pages": args.heap_pages_b,
                  "tcs": args.tcs_b or args.workers + args.others,
                  "pool_bytes": args.pool_bytes,
                  "sample_interval_s": args.sample_interval,
                  "verify": args.verify_b,
                  "order": "for each host variant, every allocator in turn"},
        },
    }
    (stage / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    md = summary_markdown(meta, plugins, a_runs, a_overlap, b_runs, threads,
                          args, nproc, stage)
    (stage / "summary.md").write_text("\n".join(md) + "\n")
    move_results(stage, out, args.workloads)
    if table:
        print("\n".join(table))
    for host in args.hosts if b_runs else []:
        for br in [x for x in b_runs if x.host == host]:
            fp = ("n/a" if br.footprint_ratio is None else
                  f"{fmt_mib(br.judged_footprint)} MiB "
                  f"({fmt_judged(br.footprint_ratio, *B_FOOTPRINT_LIMITS)}x, over time "
                  f"{fmt_judged(br.mean_footprint_ratio)}x)")
            print(f"B {br.allocator:>10} {host:>10}: "
                  f"{br.ecalls_per_s:9,.0f} ECALLs/s, peak live "
                  f"{fmt_mib(br.judged_live)} MiB, footprint {fp}, "
                  f"touched "
                  f"{fmt_mib(br.peak_touched_bytes)} MiB "
                  f"({fmt_judged(br.touched_ratio, B_FOOTPRINT_RATIO)}x), {br.nulls} NULL")
    log(f"results in {out}/ (summary.md, meta.json, CSV and PNG files)")
    for f in findings:
        log(f"finding: {f}")
    if failures:
        log(f"{len(failures)} FAILURE(S); see summary.md")
        return 1
    return 0


def summary_markdown(meta: EnclaveMeta, plugins: list[Plugin],
                     a_runs: list[ARun], a_overlap: list[ARun],
                     b_runs: list[BRun], threads: list[int],
                     args: argparse.Namespace, nproc: int, folder: Path) -> list[str]:
    names = [p.name for p in plugins]
    md = header_lines("tessalloc enclave benchmark", meta) + [""]
    if args.quick:
        md += ["**QUICK RUN (--quick): a check of the tooling; the numbers "
               "below mean nothing.**", ""]
    md += ["## Allocators", "",
           "| allocator | version | plugin | source |", "|---|---|---|---|"]
    for p in plugins:
        md.append(f"| {p.name} | {p.version} | {p.path} | {p.source} |")
    md.append("")
    md += skipped_lines(meta["skipped"])
    md += ["Every allocator runs in a fresh process (one enclave per run), "
           "in the same pattern-filled region, under the same checks: "
           "pointers inside the region, block contents, the bytes around "
           "the region, OS memory calls after init (interposed), NULL "
           "returns. See bench/enclave/README.md.", ""]
    if a_runs:
        md += a_section(a_runs, a_overlap, names, threads, args, nproc)
    if b_runs:
        md += b_section(b_runs, names, args.hosts, args, folder)
    if meta["findings"]:
        md += ["## Findings (peers whose checks failed)", ""]
        md += [f"- {f}" for f in meta["findings"]] + [""]
    if meta["failures"]:
        md += ["## Failures", ""] + [f"- {f}" for f in meta["failures"]]
        md.append("")
    return md


if __name__ == "__main__":
    sys.exit(main())
