"""``tessbench run``: every (workload, threads, allocator) run, interleaved.

The plan visits allocators innermost (A B C A B C ...), then thread counts,
workloads and repetitions, so drift of a noisy machine hits every
allocator alike. Each run is a fresh process started by rusage_run (wait4:
its own peak RSS, CPU times and page faults), with only the allocator
under test preloaded. A run whose program fails its self-check, crashes
or times out is recorded with that status and no numbers; allocator and
workload pairs that cannot run (no fixed-heap variant, not installed) are
skipped and listed in meta.json with the reason, never faked.
"""

from __future__ import annotations

import dataclasses
import datetime
import shlex
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from tessbench import realprogs
from tessbench import workloads as wl
from tessbench.benchlib import (REPO_ROOT, Progress, child_env, machine_info, parse_kv,
                                run_measured)
from tessbench.results import STATUS_OK, RunRow, RunsWriter, write_meta

VERSION = "0.1.0"

#: Requests per redis-benchmark test (quick: a tenth).
REDIS_REQUESTS = 100000

#: The workload-specific keys kept from the enclave harness's result line.
ENCLAVE_KEYS = ("nulls", "footprint_peak", "touched_bytes", "os_calls_after_init")
FRAG_KEYS = ("nulls", "peak_live_bytes", "peak_footprint_bytes", "peak_touched_bytes",
             "os_calls_after_init", "worker_ecalls")


@dataclasses.dataclass(frozen=True)
class Allocator:
    """An allocator as tessbench runs it.

    ``preload``: the library to preload (None: the default malloc, glibc);
    ``plugin``: its enclave plugin for the fixed-heap workloads (None: it
    has no fixed-heap configuration); ``preload_ok``: it can run the
    preload workloads at all.
    """

    name: str
    version: Optional[str]
    source: str
    preload: Optional[str]
    plugin: Optional[str]
    preload_ok: bool

    def kind(self) -> str:
        """meta.json's kind: system, preload or fixed."""
        if self.preload_ok:
            return "system" if self.preload is None else "preload"
        return "fixed"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What ``tessbench run`` was asked for."""

    build: Path
    out: Path
    allocators: tuple[Allocator, ...]
    workloads: tuple[wl.Workload, ...]
    threads: tuple[int, ...]
    repeat: int
    quick: bool
    baseline: str
    seed: int
    command: str
    glibc_shim: Optional[str]  # libtb_glibc.so: glibc's malloc in programs linked with another


@dataclasses.dataclass(frozen=True)
class Planned:
    """One run of the plan."""

    workload: wl.Workload
    allocator: Allocator
    threads: int
    repetition: int


# ----------------------------------------------------------------- plan


def why_not(workload: wl.Workload, allocator: Allocator, build: Path) -> Optional[str]:
    """Why allocator cannot run workload (None when it can)."""
    if workload.kind == "fixed":
        if allocator.plugin is None:
            return "no fixed-heap configuration"
    elif not allocator.preload_ok:
        return "fixed-heap only (an enclave plugin, not a process-wide malloc)"
    if workload.kind == "server":
        return realprogs.missing()
    return wl.missing_parts(build, workload)


def plan(settings: Settings) -> tuple[list[Planned], list[dict[str, str]]]:
    """The interleaved runs, and the skipped (workload, allocator) pairs."""
    skipped: list[dict[str, str]] = []
    usable: dict[str, list[Allocator]] = {}
    for w in settings.workloads:
        usable[w.name] = []
        for a in settings.allocators:
            reason = why_not(w, a, settings.build)
            if reason is None:
                usable[w.name].append(a)
            else:
                skipped.append({"workload": w.name, "allocator": a.name, "reason": reason})
    runs: list[Planned] = []
    for rep in range(1, settings.repeat + 1):
        for w in settings.workloads:
            thread_counts = settings.threads if w.threaded else (1,)
            for t in thread_counts:
                for a in usable[w.name]:
                    runs.append(Planned(w, a, t, rep))
    return runs, skipped


# ------------------------------------------------------------------ runs


def rusage_run_path(build: Path) -> Path:
    """The launcher that reports the child's rusage (bench/rusage_run.c)."""
    return build / "bench" / "rusage_run"


def status_of(code: int) -> str:
    """The CSV status of a program's exit status."""
    if code == 0:
        return STATUS_OK
    if code == 3:
        return "check-failed"
    if code == -1:
        return "timeout"
    if code > 128 or code < 0:
        return "crashed"
    return "error"


def fill_rusage(row: RunRow, rusage: dict[str, str]) -> None:
    """The rusage_run report's numbers into row."""
    def num(key: str) -> Optional[float]:
        try:
            return float(rusage[key])
        except (KeyError, ValueError):
            return None
    rss, minor, major = num("max_rss_kib"), num("minor_faults"), num("major_faults")
    row.max_rss_kib = int(rss) if rss is not None else None
    row.user_s, row.sys_s = num("user_s"), num("sys_s")
    row.minor_faults = int(minor) if minor is not None else None
    row.major_faults = int(major) if major is not None else None


def fill_result(row: RunRow, p: Planned, result: dict[str, str], out: Path,
                series: Optional[Path]) -> None:
    """The program's result line into row (enclave harness lines mapped)."""
    name = p.workload.name
    if name == "enclave":
        row.elapsed_s = float(result["elapsed_ms"]) / 1000
        row.ops = int(result["mallocs"])
        row.extra = {k: result[k] for k in ENCLAVE_KEYS if k in result}
    elif name == "frag":
        row.elapsed_s = float(result["elapsed_ms"]) / 1000
        row.ops = int(result["ecalls"])
        row.extra = {k: result[k] for k in FRAG_KEYS if k in result}
        live, peak = int(result["peak_live_bytes"]), int(result["peak_footprint_bytes"])
        row.extra["footprint_ratio"] = f"{peak / live:.3f}" if live > 0 and peak >= 0 else ""
        if series is not None and series.exists():
            row.extra["series_csv"] = str(series.relative_to(out))
    else:
        row.elapsed_s = float(result["elapsed_s"])
        row.ops = int(result["ops"])
        fixed = {"workload", "threads", "ops", "elapsed_s", "ops_per_s"}
        row.extra = {k: v for k, v in result.items() if k not in fixed}
    row.ops_per_s = row.ops / row.elapsed_s if row.elapsed_s > 0 else None


def run_program(p: Planned, settings: Settings) -> tuple[RunRow, str, dict[str, str], str]:
    """Runs one planned program run: (row, command, env set, failure message)."""
    row = RunRow(p.workload.name, p.allocator.name, p.threads, p.repetition)
    seed = settings.seed + p.repetition - 1
    series: Optional[Path] = None
    if p.workload.name == "frag":
        series = (settings.out / "series" /
                  f"frag_{p.allocator.name}_t{p.threads}_r{p.repetition}.csv")
        series.parent.mkdir(parents=True, exist_ok=True)
    plugin = p.allocator.plugin if p.workload.kind == "fixed" else None
    cmd = wl.command(p.workload, settings.build, p.threads, seed, settings.quick, plugin, series)
    env_set: dict[str, str] = {}
    preload: Optional[str] = p.allocator.preload
    if p.workload.name == "x509-fixed":
        preload = str(wl.fixed_shim_path(settings.build))
        assert plugin is not None
        env_set = {"TB_FIXED_PLUGIN": plugin, "TB_FIXED_HEAP": wl.FIXED_HEAP}
    elif p.workload.kind == "fixed":
        preload = None  # the harness loads the plugin itself
    if preload is not None:
        env_set["LD_PRELOAD"] = preload
    report = settings.out / ".rusage.txt"
    launcher = [str(rusage_run_path(settings.build)), "-o", str(report), "-p", preload or "",
                "--"]
    env = child_env(None)
    env.update({k: v for k, v in env_set.items() if k != "LD_PRELOAD"})
    start = time.monotonic()
    code, stdout, stderr = run_measured(launcher + cmd, env, p.workload.timeout_s)
    row.wall_s = time.monotonic() - start
    rusage = parse_kv(report.read_text()) if report.exists() and code != -1 else {}
    report.unlink(missing_ok=True)
    command = shlex.join(cmd)
    row.status = status_of(code)
    results = [line for line in stdout.splitlines() if line.startswith("result ")]
    if row.status == STATUS_OK and not results:
        row.status = "error"
    if row.status != STATUS_OK:
        last = (stderr.strip().splitlines() or [f"exit status {code}"])[-1]
        return row, command, env_set, last[:300]
    fill_result(row, p, parse_kv(results[-1]), settings.out, series)
    fill_rusage(row, rusage)
    return row, command, env_set, ""


def run_server(p: Planned, settings: Settings) -> tuple[RunRow, str, dict[str, str], str]:
    """One redis run (glibc through libtb_glibc.so: redis links jemalloc)."""
    row = RunRow(p.workload.name, p.allocator.name, p.threads, p.repetition)
    preload = p.allocator.preload if p.allocator.preload is not None else settings.glibc_shim
    requests = REDIS_REQUESTS // 10 if settings.quick else REDIS_REQUESTS
    start = time.monotonic()
    res = realprogs.run_redis(rusage_run_path(settings.build), preload, requests,
                              settings.seed + p.repetition - 1, p.workload.timeout_s)
    row.wall_s = time.monotonic() - start
    row.status = res.status
    env_set = {"LD_PRELOAD": preload} if preload else {}
    command = (f"redis-server --port PORT (preloaded) + redis-benchmark -n {requests} -c 50 "
               f"-r 100000 -d 64 -t {','.join(realprogs.REDIS_TESTS)} --csv")
    if res.status != STATUS_OK:
        return row, command, env_set, res.message
    row.elapsed_s, row.ops, row.ops_per_s = res.elapsed_s, res.ops, res.ops_per_s
    row.extra = res.extra
    fill_rusage(row, res.rusage)
    return row, command, env_set, ""


# ----------------------------------------------------------------- meta


def machine() -> dict[str, object]:
    """meta.json's machine."""
    m = machine_info()
    mem = (m["mem_total"] or "0").split()[0]
    return {"cpus": m["nproc"], "cpu_model": m["cpu_model"] or "unknown",
            "memory_kib": int(mem) if mem.isdigit() else 0, "os": m["os"] or "unknown",
            "kernel": m["kernel"]}


def base_meta(settings: Settings, started: str) -> dict[str, object]:
    """meta.json before the first run."""
    return {
        "tessbench": VERSION,
        "started": started,
        "finished": None,
        "command": settings.command,
        "machine": machine(),
        "baseline": settings.baseline,
        "allocators": {a.name: {"version": a.version, "source": a.source, "kind": a.kind(),
                                "library": a.preload, "plugin": a.plugin}
                       for a in settings.allocators},
        "workloads": {w.name: {"description": w.description, "unit": w.unit, "kind": w.kind}
                      for w in settings.workloads},
        "threads": list(settings.threads),
        "repeat": settings.repeat,
        "quick": settings.quick,
        "seed": settings.seed,
        "build": str(settings.build),
        "skipped": [],
        "failures": [],
        "runs": [],
    }


def now() -> str:
    """The time now, UTC, ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_all(settings: Settings, log: Callable[[str], None]) -> tuple[Path, int]:
    """Runs the plan; writes runs.csv and meta.json; returns (csv, failed runs)."""
    settings.out.mkdir(parents=True, exist_ok=True)
    runs, skipped = plan(settings)
    meta = base_meta(settings, now())
    meta["skipped"] = skipped
    failures: list[dict[str, object]] = []
    run_log: list[dict[str, object]] = []
    meta["failures"], meta["runs"] = failures, run_log
    meta_path = settings.out / "meta.json"
    write_meta(meta, meta_path)
    for s in skipped:
        log(f"skipped: {s['workload']} with {s['allocator']}: {s['reason']}")
    writer = RunsWriter(settings.out / "runs.csv")
    with Progress(len(runs), width=44) as bar:
        for p in runs:
            bar.describe(f"{p.workload.name} {p.allocator.name} t={p.threads} "
                         f"#{p.repetition}")
            runner = run_server if p.workload.kind == "server" else run_program
            row, command, env_set, message = runner(p, settings)
            writer.add(row)
            run_log.append({"workload": p.workload.name, "allocator": p.allocator.name,
                            "threads": p.threads, "repetition": p.repetition,
                            "command": command, "env": env_set})
            if row.status != STATUS_OK:
                failures.append({"workload": p.workload.name, "allocator": p.allocator.name,
                                 "threads": p.threads, "repetition": p.repetition,
                                 "status": row.status, "message": message})
                bar.log(f"{p.workload.name} with {p.allocator.name} at {p.threads} threads: "
                        f"{row.status}: {message}")
            bar.advance()
    meta["finished"] = now()
    write_meta(meta, meta_path)
    if not runs:
        writer.write()
    return writer.path, len(failures)


def repo_path(path: Path) -> Path:
    """path, resolved against the repository when relative."""
    return path if path.is_absolute() else REPO_ROOT / path


def selected(names: Optional[str], known: Sequence[str], what: str) -> list[str]:
    """The comma-separated names asked for (all known when None), checked."""
    if names is None:
        return list(known)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return wanted
