"""The tessbench command: run, plot, report, peers, workloads.

    tessbench run [--allocators A,B] [--workloads W,V] [--threads 1,2,4]
                  [--repeat N] [--quick] [--out DIR] [--baseline NAME]
                  [--fixed-baseline NAME]
    tessbench plot --out DIR
    tessbench report --out DIR [--baseline NAME] [--fixed-baseline NAME]
    tessbench peers [--install]
    tessbench workloads
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from tessbench import peers as peers_mod
from tessbench import runner
from tessbench import workloads as wl
from tessbench.benchlib import REPO_ROOT, make_log

log = make_log("tessbench")

QUICK_THREADS = "1,2"
#: The default thread counts go up to this many times the CPUs (at least to
#: MIN_TOP_THREADS): beyond it an oversubscribed run measures the scheduler
#: more than the allocator, and a workload's work (per thread) grows with
#: the threads, so that a 2-CPU machine would spend half of the run at 16.
OVERSUBSCRIBE = 2
MIN_TOP_THREADS = 8


def default_threads(cpus: int) -> str:
    """The default --threads: powers of two from 1 to max(8, 2 x CPUs)."""
    top = max(MIN_TOP_THREADS, OVERSUBSCRIBE * cpus)
    counts = [1]
    while counts[-1] * 2 <= top:
        counts.append(counts[-1] * 2)
    return ",".join(str(t) for t in counts)


DEFAULT_THREADS = default_threads(len(os.sched_getaffinity(0)))
DEFAULT_BASELINE = "glibc"
DEFAULT_FIXED_BASELINE = "dlmalloc"
DEFAULT_OUT = "tessbench-out"


def allocators(build: Path, cache: Path) -> tuple[list[runner.Allocator], list[str]]:
    """Every allocator tessbench knows, available ones first: (usable, missing notes).

    A preload peer with a fixed-heap plugin of the same name (snmalloc,
    mimalloc3) runs the fixed workloads through that plugin; dlmalloc has
    only the plugin; tessalloc has both.
    """
    found: list[runner.Allocator] = []
    notes: list[str] = []
    fixed = {p.name: p for p in peers_mod.fixed_peers(build)}
    preload_peers = [*peers_mod.discover_peers(cache), peers_mod.tessalloc_peer(build)]
    seen: set[str] = set()
    for p in preload_peers:
        seen.add(p.name)
        plug = fixed.get(p.name)
        plugin = plug.plugin if plug is not None and plug.available else None
        if not p.available and plugin is None:
            notes.append(f"{p.name}: {p.note}")
            continue
        # plugin only: the preload peer's version and source describe nothing that runs
        described = p if p.available or plug is None else plug
        found.append(runner.Allocator(
            p.name, described.version, described.source, p.preload, plugin,
            preload_ok=p.available,
            preload_missing="" if p.available else f"process-wide library missing: {p.note}",
            plugin_missing=(f"fixed-heap plugin missing: {plug.note}"
                            if plug is not None and plugin is None else "")))
        if not p.available:
            notes.append(f"{p.name}: preload workloads skipped: {p.note}")
    for name, plug in fixed.items():
        if name in seen:
            continue
        if plug.available:
            found.append(runner.Allocator(name, plug.version, plug.source, None, plug.plugin,
                                          preload_ok=False))
        else:
            notes.append(f"{name} (fixed heap): {plug.note}")
    return found, notes


#: The most threads a workload program takes (bench/workloads/wl.c).
MAX_THREADS = 4096


def thread_counts(text: str) -> tuple[int, ...]:
    """--threads' value: comma-separated counts from 1 to MAX_THREADS, ascending, each once."""
    try:
        counts = {int(t) for t in text.split(",") if t.strip()}
    except ValueError:
        counts = set()
    if not counts or min(counts) < 1 or max(counts) > MAX_THREADS:
        raise argparse.ArgumentTypeError(
            f"wants comma-separated thread counts from 1 to {MAX_THREADS}, not {text!r}")
    return tuple(sorted(counts))


def seed_value(text: str) -> int:
    """--seed's value: an integer the programs take (0 to 2**63; repetition r uses seed+r-1)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed <= 2**63:
        raise argparse.ArgumentTypeError(f"wants an integer from 0 to 2**63, not {text!r}")
    return seed


def check_baselines(baselines: Sequence[tuple[str, Optional[str]]],
                    allocators: Sequence[str], where: str) -> None:
    """Raises ValueError when a baseline asked for (option, name) is not in allocators."""
    for option, name in baselines:
        if name is not None and name not in allocators:
            raise ValueError(f"{option} {name}: not among the allocators {where} "
                             f"({', '.join(allocators) or 'none'})")


def error_line(exc: BaseException, where: Optional[Path] = None) -> str:
    """An exception as one line; an OSError as 'path: reason' (without
    [Errno N]), the path `where` when the error names none (a write that
    failed: the disk full)."""
    if isinstance(exc, OSError) and exc.strerror:
        path = exc.filename if exc.filename is not None else where
        if path is not None:
            return f"{path}: {exc.strerror}"
    return " ".join(str(exc).split())


def cmd_run(args: argparse.Namespace) -> int:
    build = runner.repo_path(args.build)
    out = Path(args.out)
    known, notes = allocators(build, runner.repo_path(args.peers_cache))
    by_name = {a.name: a for a in known}
    for note in notes:
        log(f"not available: {note}")
    try:
        names = runner.selected(args.allocators, list(by_name), "allocator (or not available)")
        work = runner.selected(args.workloads, wl.names(), "workload")
        check_baselines((("--baseline", args.baseline),
                         ("--fixed-baseline", args.fixed_baseline)), names, "chosen")
    except ValueError as exc:
        log(str(exc))
        return 2
    threads = args.threads or thread_counts(QUICK_THREADS if args.quick else DEFAULT_THREADS)
    if args.repeat < 1:
        log("--repeat wants at least 1")
        return 2
    baseline = args.baseline or DEFAULT_BASELINE
    fixed_baseline = args.fixed_baseline or DEFAULT_FIXED_BASELINE
    settings = runner.Settings(
        build=build, out=out, allocators=tuple(by_name[n] for n in names),
        workloads=tuple(wl.BY_NAME[n] for n in work), threads=threads, repeat=args.repeat,
        quick=args.quick, baseline=baseline, fixed_baseline=fixed_baseline,
        seed=args.seed,
        command=shlex.join(["tessbench", *sys.argv[1:]]),
        glibc_shim=str(build / "bench" / "workloads" / "libtb_glibc.so"))
    if not runner.rusage_run_path(build).exists():
        log(f"{runner.rusage_run_path(build)} is missing: build the project first "
            f"(cmake -S . -B {args.build} && cmake --build {args.build} -j)")
        return 2
    try:
        csv_path, failed = runner.run_all(settings, log)
        log(f"wrote {csv_path}" + (f"; {failed} run(s) failed (see meta.json)" if failed
                                   else ""))
        if not args.no_report:
            make_report(out, baseline, fixed_baseline)
    except (OSError, ValueError) as exc:  # NothingToRun, a bad --out, a write that failed
        log(error_line(exc, out))
        return 2
    return 1 if failed else 0


def make_report(out: Path, baseline: Optional[str], fixed_baseline: Optional[str]) -> None:
    """Plots, then report.md and report.html, in out."""
    from tessbench import plot, report  # matplotlib only when drawing
    for png in plot.plot_all(out, baseline, fixed_baseline):
        log(f"wrote {png}")
    for page in report.write_report(out, baseline, fixed_baseline):
        log(f"wrote {page}")


def results_missing(out: Path) -> bool:
    """Says so (and returns True) when out has no runs.csv."""
    if (out / "runs.csv").is_file():
        return False
    log(f"{out / 'runs.csv'} not found: run 'tessbench run --out {out}' first")
    return True


def check_results_baselines(out: Path, baseline: Optional[str],
                            fixed_baseline: Optional[str]) -> None:
    """Raises ValueError when a baseline asked for has no run in out's runs.csv."""
    from tessbench.aggregate import load_results
    ran = load_results(out).allocators
    check_baselines((("--baseline", baseline), ("--fixed-baseline", fixed_baseline)),
                    ran, f"in {out / 'runs.csv'}")


def cmd_plot(args: argparse.Namespace) -> int:
    from tessbench import plot
    out = Path(args.out)
    if results_missing(out):
        return 2
    try:
        check_results_baselines(out, args.baseline, args.fixed_baseline)
        for png in plot.plot_all(out, args.baseline, args.fixed_baseline):
            log(f"wrote {png}")
    except (OSError, ValueError) as exc:  # unreadable results, an unwritable directory
        log(error_line(exc, out))
        return 2
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if results_missing(out):
        return 2
    try:
        check_results_baselines(out, args.baseline, args.fixed_baseline)
        make_report(out, args.baseline, args.fixed_baseline)
    except (OSError, ValueError) as exc:  # unreadable results, an unwritable directory
        log(error_line(exc, out))
        return 2
    return 0


#: The script that builds the enclave harness's fixed-heap peers.
BUILD_FIXED_PEERS = REPO_ROOT / "bench" / "enclave" / "peers" / "build_peers.py"


def install_fixed_peers(build: Path) -> None:
    """Builds the fixed-heap peers (dlmalloc, snmalloc, mimalloc 3) into
    <build>/enclave-peers with bench/enclave/peers/build_peers.py; one that
    cannot be built is listed as missing, with the reason, afterwards."""
    cmd = [sys.executable, str(BUILD_FIXED_PEERS), "--build-dir", str(build)]
    log("running: " + shlex.join(cmd))
    code = subprocess.run(cmd, check=False).returncode
    if code != 0:
        log(f"{BUILD_FIXED_PEERS.name} exited with {code}")


def cmd_peers(args: argparse.Namespace) -> int:
    build = runner.repo_path(args.build)
    cache = runner.repo_path(args.peers_cache)
    if args.install:
        try:
            peers_mod.fetch_peers(cache)
        except OSError as exc:  # a cache that cannot be made or written
            log(error_line(exc, cache))
            return 2
        install_fixed_peers(build)
    known, notes = allocators(build, cache)
    print(f"{'allocator':<16} {'process-wide':<13} {'fixed heap':<11} version / source")
    for a in known:
        print(f"{a.name:<16} {'yes' if a.preload_ok else '-':<13} "
              f"{'yes' if a.plugin else '-':<11} {a.version or '?'} ({a.source})")
    for note in notes:
        print(f"missing: {note}")
    return 0


def cmd_workloads(args: argparse.Namespace) -> int:
    build = runner.repo_path(args.build)
    for w in wl.WORKLOADS:
        ready = runner.workload_missing(w, build) or "ready"
        print(f"{w.name:<13} {w.kind:<8} {ready}\n    {w.description}; ops: {w.unit}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="tessbench",
        description="Compare allocators (tessalloc and real peers) on real workloads: "
                    "runs interleaved, CSV + JSON metadata, plots and a report.")
    sub = top.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--build", type=Path, default=Path("build"),
                       help="the CMake build directory with the workloads, relative to the "
                            "repository (default: build)")
        p.add_argument("--peers-cache", type=Path, default=peers_mod.DEFAULT_CACHE,
                       help="where the peers are installed, relative to the repository "
                            "(default: .cache/peers)")

    run = sub.add_parser("run", help="run workloads over allocators, then plot and report")
    common(run)
    run.add_argument("--allocators", help="comma-separated names (default: every available)")
    run.add_argument("--workloads", help="comma-separated names (default: all; see "
                                         "'tessbench workloads')")
    run.add_argument("--threads", type=thread_counts,
                     help=f"thread counts (default: powers of two up to max(8, 2 x CPUs), "
                          f"here {DEFAULT_THREADS}; --quick: {QUICK_THREADS})")
    run.add_argument("--repeat", type=int, default=3, help="runs per point (default 3)")
    run.add_argument("--quick", action="store_true",
                     help="seconds-long runs: checks the tooling, numbers meaningless")
    run.add_argument("--out", default=DEFAULT_OUT,
                     help=f"results directory (default: {DEFAULT_OUT})")
    # None: the default, which need not be among --allocators (its ratios are then absent)
    run.add_argument("--baseline", default=None,
                     help=f"allocator the ratios are taken to (default {DEFAULT_BASELINE})")
    run.add_argument("--fixed-baseline", default=None,
                     help="allocator the ratios of the fixed-heap workloads are taken to "
                          f"(default {DEFAULT_FIXED_BASELINE}, Open Enclave's default)")
    run.add_argument("--seed", type=seed_value, default=1,
                     help="PRNG seed, 0 to 2**63 (repetition r: seed+r-1)")
    run.add_argument("--no-report", action="store_true", help="only runs.csv and meta.json")
    run.set_defaults(func=cmd_run)

    plot = sub.add_parser("plot", help="draw the plots of a results directory")
    rep = sub.add_parser("report", help="write report.md and report.html (and the plots)")
    for p in (plot, rep):
        p.add_argument("--out", default=DEFAULT_OUT,
                       help=f"results directory (default: {DEFAULT_OUT})")
        p.add_argument("--baseline", default=None, help="default: the run's baseline")
        p.add_argument("--fixed-baseline", default=None,
                       help="default: the run's fixed-heap baseline")
    plot.set_defaults(func=cmd_plot)
    rep.set_defaults(func=cmd_report)

    peers = sub.add_parser("peers", help="list the allocators and why any is missing")
    common(peers)
    peers.add_argument("--install", action="store_true",
                       help="install the missing peers first (apt, PyPI, crates.io) and "
                            "build the fixed-heap ones (into <build>/enclave-peers)")
    peers.set_defaults(func=cmd_peers)

    works = sub.add_parser("workloads", help="list the workloads")
    common(works)
    works.set_defaults(func=cmd_workloads)
    return top


#: The exit status of a command stopped by Ctrl-C (the shells' 128 + SIGINT).
INTERRUPTED = 130


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:  # the measured programs are stopped already (run_measured)
        log("interrupted")
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
