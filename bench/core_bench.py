#!/usr/bin/env python3
"""Core benchmark: tessalloc vs glibc, jemalloc and mimalloc, side by side.

For every allocator (tessalloc from the build directory, the peers found by
tessbench/peers.py) it runs bench_core's three mixes -- small, mixed, xthread --
``--repeat`` times, interleaved (round r runs every mix for every allocator
before round r+1 starts, so machine drift hits all alike), with the
allocator in LD_PRELOAD (glibc: no preload). Each run's elapsed time (as
bench_core measures it), maximum RSS and user/system CPU time (wait4 of the
child, taken by the small launcher bench/rusage_run so that Python's own
memory is not counted) go to a CSV; medians and ratios go to a Markdown
summary.

Then it counts instructions per malloc+free pair on the small-size fast path
with callgrind: bench/pair runs N1 and N2 pairs (each twice, to check that
the count is stable) and Ir/pair = (Ir(N2) - Ir(N1)) / (N2 - N1), which
cancels start-up, warm-up and exit.

Output directory (default docs/results/core/):
  runs.csv        one row per timed run
  callgrind.csv   the raw instruction counts
  summary.md      medians, ratios, the callgrind table, the targets
  meta.json       command line, date, machine, allocator versions, settings

Example: python3 bench/core_bench.py --build build --repeat 5
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence, TypedDict

try:
    import rich  # noqa: F401  (benchlib.Progress draws the bar with it)
except ImportError as _exc:
    raise SystemExit("core_bench: needs the Python package rich "
                     "(pip install rich; scripts/bench.sh installs it into "
                     ".cache/venv)") from _exc

# the tessbench package (peers, shared helpers) is at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tessbench import peers as peers_mod  # noqa: E402
from tessbench.benchlib import (  # noqa: E402
    REPO_ROOT, BenchError, CommonMeta, Progress, child_env, command_line,
    common_meta, first_line, fmt_ratio, header_lines, machine_info, make_log,
    median, parse_kv, run_measured, skipped_lines, verdict)

log = make_log("core_bench")
MIXES: tuple[str, ...] = ("small", "mixed", "xthread")
#: Iterations per mix at --scale 1 (about 0.3 s to 3 s each on a 2-core
#: machine). The driver always passes --iterations explicitly, so this table
#: (not bench_core's built-in defaults) defines the published runs.
DEFAULT_ITERATIONS: dict[str, int] = {
    "small": 20_000_000,
    "mixed": 8_000_000,
    "xthread": 2_000_000,
}
PAIR_SIZES: tuple[int, ...] = (32, 64, 512)
TESSALLOC = "tessalloc"
#: Time target: tessalloc's median elapsed within this factor of the reference.
TIME_TARGET = 1.10


# ------------------------------------------------------------------ data


@dataclasses.dataclass(frozen=True)
class Allocator:
    """An allocator to measure; preload=None means the default (glibc)."""

    name: str
    preload: Optional[str]
    version: str
    source: str


@dataclasses.dataclass
class RunResult:
    """One timed run of one mix under one allocator."""

    mix: str
    allocator: str
    repetition: int
    elapsed_s: float
    ops_per_s: float
    max_rss_kib: int
    user_s: float
    sys_s: float
    ops: int


CSV_FIELDS = [f.name for f in dataclasses.fields(RunResult)]


@dataclasses.dataclass
class CallgrindResult:
    """Instruction counts of bench/pair for one allocator and size."""

    allocator: str
    size: int
    n1: int
    n2: int
    ir_n1: list[int]
    ir_n2: list[int]
    lib_ir_n1: int  # instructions executed inside the allocator's object
    lib_ir_n2: int

    @property
    def stable(self) -> bool:
        """The same totals on both runs of each count."""
        return len(set(self.ir_n1)) == 1 and len(set(self.ir_n2)) == 1

    @property
    def per_pair(self) -> float:
        """Instructions per malloc+free pair, whole program."""
        return (self.ir_n2[0] - self.ir_n1[0]) / (self.n2 - self.n1)

    @property
    def lib_per_pair(self) -> float:
        """Instructions per pair spent inside the allocator's object (0 when
        callgrind attributed none to it)."""
        return (self.lib_ir_n2 - self.lib_ir_n1) / (self.n2 - self.n1)

    @property
    def lib_text(self) -> str:
        """lib_per_pair for a table: n/a when callgrind did not see it."""
        return f"{self.lib_per_pair:.1f}" if self.lib_per_pair > 0 else "n/a"


class AllocatorMeta(TypedDict):
    """One entry of meta.json "allocators": the Allocator and its runtime."""

    name: str
    preload: Optional[str]
    version: str
    source: str
    runtime: dict[str, str]  # bench_core --identify under its preload


class Settings(TypedDict):
    """meta.json "settings"."""

    repeat: int
    warmup_rounds: int
    mixes: list[str]
    iterations: dict[str, int]
    seed: int
    threads: int
    reference: Optional[str]
    callgrind_pairs: Optional[list[int]]
    pair_warmup: int
    pair_sizes: Optional[list[int]]
    order: str


class Meta(CommonMeta):
    """The contents of meta.json."""

    valgrind: Optional[str]
    allocators: list[AllocatorMeta]
    skipped: list[str]
    failures: list[str]
    settings: Settings


# ------------------------------------------------------------- locating


def find_programs(build: Path) -> dict[str, Path]:
    """bench_core, pair and rusage_run in the build tree (root or bench)."""
    found: dict[str, Path] = {}
    for name in ("bench_core", "pair", "rusage_run"):
        candidates = [build / "bench" / name, build / name]
        path = next((c for c in candidates if c.is_file()
                     and os.access(c, os.X_OK)), None)
        if path is None:
            raise SystemExit(
                f"core_bench: {name} not found in {build}/bench or {build}; "
                f"build first: cmake -S . -B {build} && "
                f"cmake --build {build} -j")
        found[name] = path
    return found


def find_tessalloc(build: Path) -> Optional[Path]:
    """libtessalloc.so in the build tree, if it was built."""
    direct = build / "libtessalloc.so"
    if direct.exists():
        return direct
    hits = sorted(build.rglob("libtessalloc.so*"), key=lambda p: len(str(p)))
    hits = [h for h in hits if h.is_file() and ".so" in h.name
            and not h.name.endswith((".a", ".o"))]
    return hits[0] if hits else None


# ------------------------------------------------------- running programs


def identify(bench_core: Path, alloc: Allocator) -> dict[str, str]:
    """Check that malloc really comes from the allocator's library."""
    status, out, err = run_measured([str(bench_core), "--identify"],
                                    child_env(alloc.preload), 60)
    if status != 0:
        raise BenchError(f"bench_core --identify failed ({status}): "
                         f"{err.strip()}")
    info: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        info[key] = value
    source = info.get("malloc_from", "")
    if alloc.preload is None:
        ok = Path(source).name.startswith("libc.so")
    else:
        ok = os.path.realpath(source) == os.path.realpath(alloc.preload)
    if not ok:
        raise BenchError(f"malloc resolves to {source!r}, not to "
                         f"{alloc.preload or 'libc'}: the preload did not "
                         f"take")
    return info


def run_mix(programs: dict[str, Path], alloc: Allocator, mix: str,
            repetition: int, iterations: int, seed: int, threads: int,
            timeout: float) -> RunResult:
    """One timed run of a mix, through rusage_run (wait4 of the child)."""
    with tempfile.NamedTemporaryFile(prefix="rusage.", mode="r") as report:
        cmd = [str(programs["rusage_run"]), "-o", report.name,
               "-p", alloc.preload or "", "--",
               str(programs["bench_core"]), mix,
               "--iterations", str(iterations), "--seed", str(seed),
               "--threads", str(threads)]
        status, out, err = run_measured(cmd, child_env(None), timeout)
        usage = parse_kv(report.read())
    if status != 0:
        why = (f"timed out after {timeout:g} s" if status == -1
               else f"exit {status}")
        raise BenchError(f"{mix} under {alloc.name}: {why}: "
                         f"{(err or out).strip()[-500:]}")
    kv = parse_kv(next((ln for ln in out.splitlines()
                        if ln.startswith("mix=")), ""))
    try:
        return RunResult(mix=mix, allocator=alloc.name, repetition=repetition,
                         elapsed_s=float(kv["elapsed_s"]),
                         ops_per_s=float(kv["ops_per_s"]),
                         max_rss_kib=int(usage["max_rss_kib"]),
                         user_s=float(usage["user_s"]),
                         sys_s=float(usage["sys_s"]),
                         ops=int(kv["ops"]))
    except (KeyError, ValueError) as exc:
        raise BenchError(f"{mix} under {alloc.name}: unexpected output "
                         f"{out!r} / {usage!r}") from exc


# ------------------------------------------------------------- callgrind


def callgrind_costs(path: Path) -> tuple[int, dict[str, int]]:
    """Total Ir and self Ir per object from a callgrind output file."""
    names: dict[str, str] = {}  # "(id)" -> object path
    per_object: dict[str, int] = {}
    total = 0
    current = "?"
    skip_next_cost = False
    id_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def object_name(spec: str) -> str:
        m = id_re.match(spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), spec)

    with path.open(errors="replace") as fh:
        for line in fh:
            if not line or line[0] in "#\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip_next_cost:  # the inclusive cost of a call
                    skip_next_cost = False
                    continue
                fields = line.split()
                if len(fields) >= 2:
                    per_object[current] = (per_object.get(current, 0)
                                           + int(fields[-1]))
                continue
            if line.startswith("ob="):
                current = object_name(line[3:].strip())
            elif line.startswith("cob="):
                object_name(line[4:].strip())  # may define a name
            elif line.startswith("calls="):
                skip_next_cost = True
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    return total, per_object


def valgrind_failure(err: str, status: int) -> str:
    """Why a program died under valgrind, in one line: its own message and
    the signal valgrind reports (not valgrind's whole stack dump)."""
    own = [ln.strip() for ln in err.splitlines()
           if ln.strip() and not ln.startswith("==")]
    sig = re.search(r"Process terminating with default action of signal "
                    r"\d+ \((\w+)\)", err)
    parts = [own[0]] if own else []
    parts.append(sig.group(1) if sig else f"exit status {status}")
    return " - ".join(parts)


def run_callgrind(pair: Path, preload: Optional[str], size: int, pairs: int,
                  warmup: int, baseline: bool, workdir: Path,
                  timeout: float) -> tuple[int, dict[str, int]]:
    """Run pair under callgrind; return (total Ir, self Ir per object)."""
    out_file = Path(tempfile.mkstemp(prefix="cg.", suffix=".out",
                                     dir=workdir)[1])
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
           str(pair), *(["--baseline"] if baseline else []),
           str(size), str(pairs), str(warmup)]
    status, out, err = run_measured(cmd, child_env(preload), timeout)
    if status != 0:
        raise BenchError(f"callgrind of pair {size} {pairs} failed: "
                         f"{valgrind_failure(err, status)}")
    total, per_object = callgrind_costs(out_file)
    out_file.unlink()
    if total <= 0:
        raise BenchError(f"no total in the callgrind output of pair {size}")
    return total, per_object


def allocator_object_ir(alloc: Allocator, per_object: dict[str, int]) -> int:
    """Self Ir in the allocator's shared object (libc for glibc)."""
    if alloc.preload is None:
        return sum(v for k, v in per_object.items()
                   if Path(k).name.startswith("libc.so"))
    want = {os.path.realpath(alloc.preload)}
    # a malloc-replacing proxy (tbbmalloc's) works in the library it wraps
    proxy = Path(alloc.preload).name
    if "_proxy" in proxy:
        sibling = Path(alloc.preload).with_name(proxy.replace("_proxy", ""))
        if sibling.exists():
            want.add(os.path.realpath(sibling))
    return sum(v for k, v in per_object.items()
               if os.path.exists(k) and os.path.realpath(k) in want)


def measure_pairs(pair: Path, alloc: Allocator, size: int, n1: int, n2: int,
                  warmup: int, workdir: Path,
                  timeout: float) -> CallgrindResult:
    """Ir(N1) and Ir(N2), twice each, for one allocator and size."""
    ir_n1: list[int] = []
    ir_n2: list[int] = []
    lib: dict[int, int] = {}  # pair count -> Ir inside the allocator
    for n, store in ((n1, ir_n1), (n2, ir_n2), (n1, ir_n1), (n2, ir_n2)):
        total, per_object = run_callgrind(pair, alloc.preload, size, n,
                                          warmup, False, workdir, timeout)
        store.append(total)
        lib.setdefault(n, allocator_object_ir(alloc, per_object))
    # bench_core --identify has checked that malloc binds to the library;
    # callgrind may still fail to attribute its functions to it (tcmalloc's
    # malloc shows up as '???'): the library column is then n/a
    return CallgrindResult(alloc.name, size, n1, n2, ir_n1, ir_n2,
                           lib[n1], lib[n2])


def measure_baseline(pair: Path, size: int, n1: int, n2: int, warmup: int,
                     workdir: Path, timeout: float) -> float:
    """Instructions per iteration of the loop itself (no malloc/free)."""
    a, _ = run_callgrind(pair, None, size, n1, warmup, True, workdir, timeout)
    b, _ = run_callgrind(pair, None, size, n2, warmup, True, workdir, timeout)
    return (b - a) / (n2 - n1)


# --------------------------------------------------------------- summary


def mix_table(mix: str, runs: list[RunResult], allocs: list[Allocator],
              reference: Optional[str]) -> list[str]:
    """Markdown table of medians for one mix."""
    med: dict[str, dict[str, float]] = {}
    for a in allocs:
        rs = [r for r in runs if r.mix == mix and r.allocator == a.name]
        if not rs:
            continue
        el = [r.elapsed_s for r in rs]
        med[a.name] = {
            "elapsed": median(el),
            "spread": ((max(el) - min(el)) / median(el) * 100
                       if median(el) else 0.0),
            "mops": median(r.ops_per_s for r in rs) / 1e6,
            "rss": median(r.max_rss_kib for r in rs) / 1024,
            "user": median(r.user_s for r in rs),
            "sys": median(r.sys_s for r in rs),
            "n": len(rs),
        }
    tess = med.get(TESSALLOC, {}).get("elapsed")
    ref = med.get(reference, {}).get("elapsed") if reference else None
    ref_label = reference or "mimalloc (not measured)"
    lines = [
        f"### {mix}",
        "",
        f"| allocator | runs | elapsed s (median) | spread % | Mops/s | "
        f"time ÷ tessalloc | time ÷ {ref_label} | max RSS MiB | user s | "
        f"sys s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in med.items():
        lines.append(
            f"| {name} | {m['n']} | {m['elapsed']:.4f} | {m['spread']:.1f} | "
            f"{m['mops']:.2f} | "
            f"{fmt_ratio(m['elapsed'] / tess if tess else None)} | "
            f"{fmt_ratio(m['elapsed'] / ref if ref else None)} | "
            f"{m['rss']:.1f} | {m['user']:.3f} | {m['sys']:.3f} |")
    lines.append("")
    return lines


def callgrind_table(results: list[CallgrindResult], baseline: dict[int, float],
                    reference: Optional[str]) -> list[str]:
    """Markdown table of instructions per pair."""
    lines = []
    for size in sorted({r.size for r in results}):
        rs = [r for r in results if r.size == size]
        by_name = {r.allocator: r for r in rs}
        tess = by_name.get(TESSALLOC)
        ref = by_name.get(reference) if reference else None
        lines += [
            f"### malloc({size}) + free",
            "",
            f"| allocator | Ir/pair | Ir/pair in allocator library | "
            f"÷ tessalloc | ÷ {reference or 'mimalloc (not measured)'} | "
            f"stable |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for r in rs:
            stable = "yes" if r.stable else (
                f"no (N1: {r.ir_n1}, N2: {r.ir_n2})")
            lines.append(
                f"| {r.allocator} | {r.per_pair:.1f} | {r.lib_text} | "
                f"{fmt_ratio(r.per_pair / tess.per_pair if tess else None)} | "
                f"{fmt_ratio(r.per_pair / ref.per_pair if ref else None)} | "
                f"{stable} |")
        if size in baseline:
            lines.append(f"| (loop alone, no malloc) | {baseline[size]:.1f} | "
                         f"| | | |")
        lines.append("")
    return lines


def targets_section(runs: list[RunResult], cg: list[CallgrindResult],
                    reference: Optional[str]) -> list[str]:
    """The issue's targets for tessalloc, each PASS / FAIL / n/a."""
    lines = ["## Targets (tessalloc)", ""]
    reference = reference or "mimalloc (not measured)"
    names = {r.allocator for r in runs} | {r.allocator for r in cg}
    if TESSALLOC not in names:
        return lines + ["tessalloc was not measured: no target can be "
                        "checked.", ""]

    def med(mix: str, name: Optional[str]) -> Optional[float]:
        el = [r.elapsed_s for r in runs
              if r.mix == mix and r.allocator == name]
        return median(el) if el else None

    lines += ["| target | measured | verdict |", "|---|---|---|"]
    for r in [r for r in cg if r.allocator == TESSALLOC]:
        ref_cg = next((x for x in cg if x.allocator == reference
                       and x.size == r.size), None)
        ok = None if ref_cg is None else r.per_pair <= ref_cg.per_pair
        shown = "" if ref_cg is None else f" vs {ref_cg.per_pair:.1f}"
        lines.append(f"| Ir/pair malloc({r.size}) ≤ {reference} | "
                     f"{r.per_pair:.1f}{shown} | {verdict(ok)} |")
    for mix in MIXES:
        t = med(mix, TESSALLOC)
        if t is None:
            continue
        ref_t = med(mix, reference)
        ok = None if ref_t is None else t <= TIME_TARGET * ref_t
        lines.append(f"| {mix}: elapsed ≤ {TIME_TARGET:.2f} × {reference} | "
                     f"{fmt_ratio(t / ref_t if ref_t else None)} × | "
                     f"{verdict(ok)} |")
        for other in ("glibc", "jemalloc"):
            o = med(mix, other)
            lines.append(f"| {mix}: elapsed < {other} | "
                         f"{fmt_ratio(t / o if o else None)} × | "
                         f"{verdict(None if o is None else t < o)} |")
    lines.append("")
    return lines


# ------------------------------------------------------------------ main


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Compare tessalloc with glibc, jemalloc and mimalloc "
                    "(bench_core mixes + callgrind Ir per malloc/free pair).")
    p.add_argument("--build", type=Path, default=REPO_ROOT / "build",
                   help="build directory holding libtessalloc.so and "
                        "bench/bench_core, bench/pair (default: <repo>/build)")
    p.add_argument("--out", type=Path,
                   default=REPO_ROOT / "docs" / "results" / "core",
                   help="output directory (default: docs/results/core)")
    p.add_argument("--repeat", type=int, default=5,
                   help="timed runs per mix and allocator (default: 5)")
    p.add_argument("--warmup-rounds", type=int, default=1,
                   help="untimed rounds before the timed ones (default: 1)")
    p.add_argument("--mixes", default=",".join(MIXES),
                   help="comma-separated subset of " + ",".join(MIXES))
    p.add_argument("--allocators", default=None,
                   help="comma-separated subset of tessalloc,"
                        + ",".join(peers_mod.PEER_NAMES) + " (default: all)")
    p.add_argument("--reference", default="mimalloc3",
                   help="allocator the targets compare with "
                        "(default: mimalloc3, else mimalloc2)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply the iteration counts (default: 1)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=1,
                   help="bench_core --threads (default: 1)")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds before a run is killed (default: 600)")
    p.add_argument("--peers-cache", type=Path,
                   default=peers_mod.DEFAULT_CACHE,
                   help="where scripts/fetch_peers.sh put the peers")
    p.add_argument("--no-callgrind", action="store_true",
                   help="skip the instruction counts")
    p.add_argument("--pairs", default="100000,200000",
                   help="N1,N2 pair counts for callgrind (default: "
                        "100000,200000)")
    p.add_argument("--pair-warmup", type=int, default=10000)
    p.add_argument("--pair-sizes", default=",".join(map(str, PAIR_SIZES)))
    p.add_argument("--smoke", action="store_true",
                   help="a seconds-long check of the tooling: 1 repetition, "
                        "no warm-up, iterations x0.002, 1000/2000 pairs of "
                        "32 B (overrides those options)")
    args = p.parse_args(argv)
    if args.smoke:
        args.repeat, args.warmup_rounds, args.scale = 1, 0, 0.002
        args.pairs, args.pair_sizes = "1000,2000", "32"
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    known = (TESSALLOC, *peers_mod.PEER_NAMES)
    if args.allocators:
        unknown = [a for a in args.allocators.split(",")
                   if a and a not in known]
        if unknown:
            p.error(f"unknown allocator(s): {', '.join(unknown)} "
                    f"(known: {', '.join(known)})")
    args.mixes = [m for m in args.mixes.split(",") if m]
    bad = [m for m in args.mixes if m not in MIXES]
    if bad:
        p.error(f"unknown mix(es): {', '.join(bad)}")
    try:
        args.pairs = tuple(int(x) for x in args.pairs.split(","))
        args.pair_sizes = [int(x) for x in args.pair_sizes.split(",") if x]
        assert len(args.pairs) == 2 and 0 < args.pairs[0] < args.pairs[1]
    except (ValueError, AssertionError):
        p.error("--pairs needs N1,N2 with 0 < N1 < N2; --pair-sizes integers")
    return args


def collect_allocators(args: argparse.Namespace) -> tuple[list[Allocator],
                                                          list[str]]:
    """tessalloc (from the build) + available peers; and what was skipped."""
    allocs: list[Allocator] = []
    skipped: list[str] = []
    lib = find_tessalloc(args.build)
    if lib is None:
        skipped.append(f"tessalloc: libtessalloc.so not found in {args.build}")
    else:
        allocs.append(Allocator(TESSALLOC, str(lib.resolve()), "?",
                                f"build: {lib}"))
    for peer in peers_mod.discover_peers(args.peers_cache):
        if peer.available:
            allocs.append(Allocator(peer.name, peer.preload,
                                    peer.version or "?", peer.source))
        else:
            skipped.append(f"{peer.name}: {peer.note}")
    if args.allocators:
        wanted = [a for a in args.allocators.split(",") if a]
        allocs = [a for a in allocs if a.name in wanted]
        skipped = [s for s in skipped if s.split(":")[0] in wanted]
    return allocs, skipped


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    command = command_line(argv, "core_bench.py")
    programs = find_programs(args.build)
    bench_core, pair = programs["bench_core"], programs["pair"]
    allocs, skipped = collect_allocators(args)

    # Check that each preload takes effect; read runtime versions. An
    # allocator that is there but does not take is a failure, not a skip.
    runtime: dict[str, dict[str, str]] = {}
    failures: list[str] = []
    for alloc in list(allocs):
        try:
            runtime[alloc.name] = identify(bench_core, alloc)
        except BenchError as exc:
            skipped.append(f"{alloc.name}: {exc}")
            failures.append(f"{alloc.name} not measured: {exc}")
            allocs.remove(alloc)
    allocs = [dataclasses.replace(a, version=runtime[a.name].get("version",
                                                                 "?"))
              if a.name == TESSALLOC else a for a in allocs]
    for s in skipped:
        log(f"SKIPPED {s}")
    if not allocs:
        log("no allocator to measure")
        return 1
    names = [a.name for a in allocs]
    reference = next((r for r in (args.reference, "mimalloc3", "mimalloc2")
                      if r in names), None)
    if reference != args.reference:
        log(f"reference {args.reference} not measured; using "
            f"{reference or 'none'}")

    do_callgrind = not args.no_callgrind
    if do_callgrind and shutil.which("valgrind") is None:
        skipped.append("callgrind: valgrind not installed")
        log("SKIPPED callgrind: valgrind not installed")
        do_callgrind = False

    iterations = {m: max(1, int(DEFAULT_ITERATIONS[m] * args.scale))
                  for m in args.mixes}
    rounds = args.warmup_rounds + args.repeat
    n_cg = (len(allocs) * 4 + 2) * len(args.pair_sizes) if do_callgrind else 0
    total = rounds * len(args.mixes) * len(allocs) + n_cg

    runs: list[RunResult] = []
    cg_results: list[CallgrindResult] = []
    baseline: dict[int, float] = {}
    with Progress(total) as progress:
        for rnd in range(rounds):
            warm = rnd < args.warmup_rounds
            rep = rnd - args.warmup_rounds + 1
            label = "warm-up" if warm else f"{rep}/{args.repeat}"
            for mix in args.mixes:
                for alloc in allocs:
                    progress.describe(f"{mix} {alloc.name} ({label})")
                    try:
                        r = run_mix(programs, alloc, mix, rep,
                                    iterations[mix], args.seed, args.threads,
                                    args.timeout)
                        if not warm:
                            runs.append(r)
                    except BenchError as exc:
                        failures.append(str(exc))
                        progress.log(f"FAILED: {exc}")
                    progress.advance()
        if do_callgrind:
            n1, n2 = args.pairs
            with tempfile.TemporaryDirectory(prefix="tessbench-cg.") as tmp:
                for size in args.pair_sizes:
                    progress.describe(f"callgrind loop alone, {size} B")
                    try:
                        baseline[size] = measure_baseline(
                            pair, size, n1, n2, args.pair_warmup, Path(tmp),
                            args.timeout)
                    except BenchError as exc:
                        failures.append(str(exc))
                        progress.log(f"FAILED: {exc}")
                    progress.advance()
                    progress.advance()
                    for alloc in allocs:
                        progress.describe(f"callgrind {alloc.name}, {size} B")
                        try:
                            cg_results.append(measure_pairs(
                                pair, alloc, size, n1, n2, args.pair_warmup,
                                Path(tmp), args.timeout))
                        except BenchError as exc:
                            failures.append(f"callgrind {alloc.name}: {exc}")
                            progress.log(f"FAILED: callgrind {alloc.name}: "
                                         f"{exc}")
                        for _ in range(4):
                            progress.advance()
    finished = datetime.datetime.now(datetime.timezone.utc)

    # ---- write the results
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as fh:
        runs_csv = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        runs_csv.writeheader()
        for run in runs:
            runs_csv.writerow(dataclasses.asdict(run))
    with (out / "callgrind.csv").open("w", newline="") as fh:
        cg_csv = csv.writer(fh)
        cg_csv.writerow(["allocator", "size", "n1", "n2", "ir_n1_a", "ir_n1_b",
                         "ir_n2_a", "ir_n2_b", "ir_per_pair",
                         "ir_per_pair_in_allocator", "stable"])
        for cgr in cg_results:
            cg_csv.writerow([cgr.allocator, cgr.size, cgr.n1, cgr.n2,
                             *cgr.ir_n1, *cgr.ir_n2,
                             f"{cgr.per_pair:.2f}", f"{cgr.lib_per_pair:.2f}",
                             "yes" if cgr.stable else "no"])
        for size, v in sorted(baseline.items()):
            cg_csv.writerow(["(loop alone)", size, args.pairs[0],
                             args.pairs[1], "", "", "", "", f"{v:.2f}", "",
                             ""])

    meta: Meta = {
        **common_meta(command, started, finished, machine_info(), args.build, out),
        "valgrind": (first_line(["valgrind", "--version"])
                     if do_callgrind else None),
        "allocators": [
            {"name": a.name, "preload": a.preload, "version": a.version,
             "source": a.source, "runtime": runtime.get(a.name, {})}
            for a in allocs],
        "skipped": skipped,
        "failures": failures,
        "settings": {
            "repeat": args.repeat, "warmup_rounds": args.warmup_rounds,
            "mixes": args.mixes, "iterations": iterations, "seed": args.seed,
            "threads": args.threads, "reference": reference,
            "callgrind_pairs": list(args.pairs) if do_callgrind else None,
            "pair_warmup": args.pair_warmup,
            "pair_sizes": args.pair_sizes if do_callgrind else None,
            "order": "interleaved: for each round, for each mix, every "
                     "allocator in turn",
        },
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    md = summary_markdown(meta, runs, cg_results, baseline, allocs,
                          reference, args)
    (out / "summary.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    log(f"results in {out}/ (summary.md, runs.csv, callgrind.csv, meta.json)")
    if failures:
        log(f"{len(failures)} run(s) FAILED; see summary.md")
        return 1
    return 0


def summary_markdown(meta: Meta, runs: list[RunResult],
                     cg: list[CallgrindResult], baseline: dict[int, float],
                     allocs: list[Allocator], reference: Optional[str],
                     args: argparse.Namespace) -> list[str]:
    md = header_lines("tessalloc core benchmark", meta) + [
        f"- settings: repeat {args.repeat} (+{args.warmup_rounds} warm-up "
        f"round), interleaved; iterations "
        + ", ".join(f"{k} {v:,}"
                    for k, v in meta["settings"]["iterations"].items())
        + f"; seed {args.seed}; threads {args.threads}",
        "",
    ]
    if args.smoke:
        md += ["**SMOKE RUN (--smoke): a check of the tooling; the numbers "
               "below mean nothing.**", ""]
    md += [
        "## Allocators",
        "",
        "| allocator | version | LD_PRELOAD | malloc resolved to |",
        "|---|---|---|---|",
    ]
    for a in allocs:
        seen = next((x["runtime"].get("malloc_from", "?")
                     for x in meta["allocators"] if x["name"] == a.name), "?")
        md.append(f"| {a.name} | {a.version} | {a.preload or '(none)'} | "
                  f"{seen} |")
    md += ["", "(`bench_core --identify` under each preload: the object "
           "that the dynamic linker binds malloc to.)", ""]
    md += skipped_lines(meta["skipped"])
    md += [
        "## Elapsed time (medians)",
        "",
        "Elapsed is bench_core's own CLOCK_MONOTONIC time around the work; "
        "a ratio is this allocator's median elapsed ÷ the other's "
        "(below 1 = faster). Spread = (max − min) ÷ median over the runs. "
        "Max RSS, user and sys come from wait4. The machine is shared and "
        "noisy: read the ratios, not the absolute numbers.",
        "",
    ]
    for mix in args.mixes:
        md += mix_table(mix, runs, allocs, reference)
    if cg:
        n1, n2 = args.pairs
        md += [
            "## Instructions per malloc+free pair (callgrind)",
            "",
            f"bench/pair under `valgrind --tool=callgrind`, allocator in "
            f"LD_PRELOAD: Ir/pair = (Ir({n2:,}) − Ir({n1:,})) ÷ "
            f"{n2 - n1:,} after {args.pair_warmup:,} warm-up pairs; whole "
            f"program, so it includes the loop's own instructions (shown as "
            f"'loop alone'). 'In allocator library' counts only instructions "
            f"executed inside the preloaded object (libc for glibc). Stable = "
            f"two runs of each count gave the same total.",
            "",
        ]
        md += callgrind_table(cg, baseline, reference)
    md += targets_section(runs, cg, reference)
    if meta["failures"]:
        md += ["## Failures", ""] + [f"- {f}" for f in meta["failures"]] + [""]
    return md


if __name__ == "__main__":
    sys.exit(main())
