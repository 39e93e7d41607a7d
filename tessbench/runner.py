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
import errno
import json
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from tessbench import realprogs
from tessbench import workloads as wl
from tessbench.benchlib import (REPO_ROOT, Progress, child_env, git_info, machine_info,
                                names_list, parse_kv, preload_failure, run_measured)
from tessbench.results import STATUS_OK, RunRow, RunsWriter, write_meta

VERSION = "0.1.0"

#: Requests per redis-benchmark test (quick: a tenth).
REDIS_REQUESTS = 100000


@dataclasses.dataclass(frozen=True)
class Allocator:
    """An allocator as tessbench runs it.

    ``preload``: the library to preload (None: the default malloc, glibc);
    ``plugin``: its enclave plugin for the fixed-heap workloads (None: it
    has no fixed-heap configuration); ``preload_ok``: it can run the
    preload workloads at all. ``preload_missing`` and ``plugin_missing``:
    why a peer that has a process-wide library or a plugin cannot use it
    here (not built, not installed), "" when that kind does not exist for it.
    """

    name: str
    version: Optional[str]
    source: str
    preload: Optional[str]
    plugin: Optional[str]
    preload_ok: bool
    preload_missing: str = ""
    plugin_missing: str = ""

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
    fixed_baseline: str
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


def workload_missing(workload: wl.Workload, build: Path) -> Optional[str]:
    """Why workload cannot run here with any allocator (None when it can)."""
    if workload.kind == "server":
        return realprogs.missing()
    return wl.missing_parts(build, workload)


def why_not(workload: wl.Workload, allocator: Allocator, build: Path,
            glibc_shim: Optional[str] = None) -> Optional[str]:
    """Why allocator cannot run workload (None when it can).

    ``glibc_shim`` is libtb_glibc.so, which glibc needs on the server
    workload: Debian's redis-server links jemalloc, so without the shim
    "glibc" would silently measure jemalloc.
    """
    if workload.kind == "fixed":
        if allocator.plugin is None:
            return allocator.plugin_missing or "no fixed-heap configuration"
    elif not allocator.preload_ok:
        return (allocator.preload_missing
                or "fixed-heap only (an enclave plugin, not a process-wide malloc)")
    missing = workload_missing(workload, build)
    if missing is not None:
        return missing
    if workload.kind == "server" and allocator.preload is None and not (
            glibc_shim and Path(glibc_shim).exists()):
        return (f"not built: {glibc_shim or 'libtb_glibc.so'} (glibc's malloc in front of "
                "the jemalloc that redis-server links)")
    return None


def plan(settings: Settings) -> tuple[list[Planned], list[dict[str, str]]]:
    """The interleaved runs, and the skipped (workload, allocator) pairs."""
    skipped: list[dict[str, str]] = []
    usable: dict[str, list[Allocator]] = {}
    for w in settings.workloads:
        usable[w.name] = []
        for a in settings.allocators:
            reason = why_not(w, a, settings.build, settings.glibc_shim)
            if reason is None:
                usable[w.name].append(a)
            else:
                skipped.append({"workload": w.name, "allocator": a.name, "reason": reason})
    runs: list[Planned] = []
    for rep in range(1, settings.repeat + 1):
        for w in settings.workloads:
            thread_counts = settings.threads if w.threaded else (1,)
            for t in thread_counts:
                # each repetition starts the point's allocators one further
                # along, so that none always runs first (a cold cache, a
                # CPU that has not yet stepped up) or right after another
                order = usable[w.name]
                shift = (rep - 1) % len(order) if order else 0
                for a in order[shift:] + order[:shift]:
                    runs.append(Planned(w, a, t, rep))
    return runs, skipped


# ------------------------------------------------------------------ runs


@dataclasses.dataclass
class Outcome:
    """What one run gave: its CSV row, and for meta.json the exact commands
    (each as a shell line with the environment it set), that environment,
    and the failure message ("" when the run is ok)."""

    row: RunRow
    commands: list[str]
    env: dict[str, str]
    message: str = ""


def rusage_run_path(build: Path) -> Path:
    """The launcher that reports the child's rusage (bench/rusage_run.c)."""
    return build / "bench" / "rusage_run"


def status_of(code: int) -> str:
    """The CSV status of a program's exit status (run_measured's: -1 on timeout)."""
    if code == 0:
        return STATUS_OK
    if code == 3:
        return "check-failed"
    if code == -1:
        return "timeout"
    if code > 128 or code < 0:
        return "crashed"
    return "error"


def shell_line(cmd: Sequence[str], env: Mapping[str, str]) -> str:
    """cmd as one shell line, preceded by the environment it needs."""
    return shlex.join([*(f"{k}={v}" for k, v in env.items()), *cmd])


def fill_rusage(row: RunRow, rusage: Mapping[str, str]) -> None:
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


#: The keys of the common result line that are fixed columns, not extras.
RESULT_KEYS = ("workload", "threads", "ops", "elapsed_s", "ops_per_s")


def fill_result(row: RunRow, result: Mapping[str, str]) -> None:
    """The program's result line (wl.h's format) into row.

    Raises KeyError or ValueError when ops or elapsed_s is missing or not a
    number.
    """
    row.elapsed_s = float(result["elapsed_s"])
    row.ops = int(result["ops"])
    row.extra = {k: v for k, v in result.items() if k not in RESULT_KEYS}
    row.ops_per_s = row.ops / row.elapsed_s if row.elapsed_s > 0 else None


def implausible(row: RunRow) -> Optional[str]:
    """Why an ok run's numbers cannot be used (None when they can).

    A run that reports no work or no time has measured nothing: it is an
    error, not a row with an empty or infinite rate.
    """
    if row.ops is None or row.ops <= 0:
        return f"the result line reports {row.ops} ops"
    if row.elapsed_s is None or not row.elapsed_s > 0:
        return f"the result line reports an elapsed time of {row.elapsed_s} s"
    return None


def failed(row: RunRow, status: str) -> RunRow:
    """row as a failed run: the status, and no numbers (they count nowhere)."""
    return RunRow(row.workload, row.allocator, row.threads, row.repetition, status=status,
                  wall_s=row.wall_s)


def series_path(settings: Settings, p: Planned) -> Path:
    """Where frag's time series of a run goes."""
    return (settings.out / "series" /
            f"{p.workload.name}_{p.allocator.name}_t{p.threads}_r{p.repetition}.csv")


def program_env(p: Planned, settings: Settings) -> dict[str, str]:
    """The environment variables one program run sets (LD_PRELOAD included)."""
    if p.workload.name == "x509-fixed":
        assert p.allocator.plugin is not None
        return {"LD_PRELOAD": str(wl.fixed_shim_path(settings.build)),
                "TB_FIXED_PLUGIN": p.allocator.plugin, "TB_FIXED_HEAP": wl.FIXED_HEAP}
    env = {}
    if p.workload.name == "python":
        # for every allocator alike: CPython's own pymalloc would serve every
        # object up to 512 bytes, and the allocator measured would see little
        env["PYTHONMALLOC"] = "malloc"
    if p.workload.kind != "fixed" and p.allocator.preload is not None:
        # (fixed: the harness loads the plugin itself; glibc needs no preload)
        env["LD_PRELOAD"] = p.allocator.preload
    return env


def run_program(p: Planned, settings: Settings) -> Outcome:
    """Runs one planned program (a tb_ program or python3) under rusage_run."""
    row = RunRow(p.workload.name, p.allocator.name, p.threads, p.repetition)
    seed = settings.seed + p.repetition - 1
    series: Optional[Path] = None
    if p.workload.name == "frag":
        series = series_path(settings, p)
        series.parent.mkdir(parents=True, exist_ok=True)
        series.unlink(missing_ok=True)
    plugin = p.allocator.plugin if p.workload.kind == "fixed" else None
    cmd = wl.command(p.workload, settings.build, p.threads, seed, settings.quick, plugin, series)
    env_set = program_env(p, settings)
    preload = env_set.get("LD_PRELOAD", "")
    with tempfile.TemporaryDirectory(prefix="tessbench-") as tmp:
        report = Path(tmp) / "rusage.txt"
        launcher = [str(rusage_run_path(settings.build)), "-o", str(report), "-p", preload, "--"]
        env = child_env(None)  # rusage_run sets LD_PRELOAD in the child only
        env.update({k: v for k, v in env_set.items() if k != "LD_PRELOAD"})
        start = time.monotonic()
        code, stdout, stderr = run_measured(launcher + cmd, env, p.workload.timeout_s)
        row.wall_s = time.monotonic() - start
        rusage = parse_kv(report.read_text()) if report.exists() and code != -1 else {}
    out = Outcome(row, [shell_line(cmd, env_set)], env_set)
    row.status = status_of(code)
    ignored_preload = preload_failure(stderr)
    if ignored_preload is not None:  # it ran with another malloc than the one asked for
        out.row, out.message = failed(row, "error"), ignored_preload
        return out
    results = [line for line in stdout.splitlines() if line.startswith("result ")]
    if row.status != STATUS_OK:
        out.message = (stderr.strip().splitlines() or [f"exit status {code}"])[-1][:300]
        return out
    if not results:
        out.row, out.message = failed(row, "error"), "exit status 0 but no result line"
        return out
    try:
        fill_result(row, parse_kv(results[-1]))
    except (KeyError, ValueError) as exc:
        out.row = failed(row, "error")
        out.message = f"malformed result line ({exc!r}): {results[-1][:200]}"
        return out
    problem = implausible(row)
    if problem is not None:
        out.row, out.message = failed(row, "error"), problem
        return out
    if series is not None and series.exists():
        row.extra["series_csv"] = series.relative_to(settings.out).as_posix()
    fill_rusage(row, rusage)
    return out


def run_server(p: Planned, settings: Settings) -> Outcome:
    """One redis run (glibc through libtb_glibc.so: Debian's redis links jemalloc)."""
    row = RunRow(p.workload.name, p.allocator.name, p.threads, p.repetition)
    preload = p.allocator.preload if p.allocator.preload is not None else settings.glibc_shim
    requests = REDIS_REQUESTS // 10 if settings.quick else REDIS_REQUESTS
    start = time.monotonic()
    res = realprogs.run_redis(rusage_run_path(settings.build), preload, requests,
                              settings.seed + p.repetition - 1, p.workload.timeout_s)
    row.wall_s = time.monotonic() - start
    row.status = res.status
    env_set = {"LD_PRELOAD": preload} if preload else {}
    commands = [shell_line(res.server_cmd, env_set), shlex.join(res.client_cmd)]
    out = Outcome(row, commands, env_set, res.message)
    if res.status != STATUS_OK:
        return out
    row.elapsed_s, row.ops, row.ops_per_s = res.elapsed_s, res.ops, res.ops_per_s
    row.extra = dict(res.extra)
    problem = implausible(row)
    if problem is not None:
        out.row, out.message = failed(row, "error"), problem
        return out
    fill_rusage(row, res.rusage)
    return out


# ---------------------------------------------------------- edge cases


def conformance(settings: Settings, allocator: Allocator) -> dict[str, str]:
    """tb_conform's findings for a process-wide allocator: check -> "ok",
    "fail: detail" or "crash: detail" ({} when tb_conform is not built or
    the allocator cannot be preloaded)."""
    prog = wl.conform_path(settings.build)
    if not allocator.preload_ok or not prog.exists():
        return {}
    code, stdout, stderr = run_measured([str(prog)], child_env(allocator.preload), 120)
    ignored_preload = preload_failure(stderr)
    if ignored_preload is not None:  # the findings would be glibc's
        return {"tb_conform": f"error: {ignored_preload}"}
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        kv = parse_kv(line)
        if line.startswith("conform ") and "check" in kv and "result" in kv:
            detail = kv.get("detail")
            found[kv["check"]] = kv["result"] + (f": {detail}" if detail else "")
    if code != 0 and not found:
        found["tb_conform"] = f"{status_of(code)}: {stderr.strip()[-200:]}"
    return found


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
        "git": dict(git_info(results=settings.out)),  # the run's own output is no change
        "machine": machine(),
        "baseline": settings.baseline,
        "fixed_baseline": settings.fixed_baseline,
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
        "conformance_checks": wl.CONFORM_CHECKS,
        "conformance": {},
        "skipped": [],
        "failures": [],
        "runs": [],
    }


def now() -> str:
    """The time now, UTC, ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class NothingToRun(ValueError):
    """The plan has no run: nothing chosen, or every pair skipped."""


def nothing_to_run(settings: Settings) -> str:
    """Why a plan with no run is empty."""
    if not settings.allocators:
        return "no allocator chosen"
    if not settings.workloads:
        return "no workload chosen"
    return "every workload and allocator pair was skipped (see above)"


#: What an earlier run left in the results directory besides runs.csv and
#: meta.json: all of it describes runs that the new runs.csv no longer has.
DERIVED_DIRS = ("plots", "series")
DERIVED_FILES = ("report.md", "report.html")


class NotResults(ValueError):
    """The results directory holds files that no earlier run wrote."""


def earlier_results(out: Path) -> bool:
    """Whether out is empty or holds an earlier run's results (a meta.json
    that tessbench wrote)."""
    if not any(out.iterdir()):
        return True
    try:
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "tessbench" in meta


def prepare_out(out: Path) -> None:
    """Makes the results directory, or raises OSError naming it; raises
    NotResults for a directory with files of its own, which a run would
    delete or overwrite (a review: `--out .` in a folder of the user's
    removed its plots/ and report.md)."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", str(out))
    if out.is_dir() and not earlier_results(out):
        raise NotResults(f"{out}: holds files that are not an earlier tessbench run's (no meta.json "
                         "of tessbench); give an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)


def run_all(settings: Settings, log: Callable[[str], None]) -> tuple[Path, int]:
    """Runs the plan; writes runs.csv and meta.json; returns (csv, failed runs).

    Raises NothingToRun, before touching the results directory, when the
    plan is empty. Otherwise an earlier run's results there are replaced
    before the first run: runs.csv by its header alone, then meta.json, and
    the plots, series and reports are removed, so that an interrupted run
    leaves no earlier run's results beside its own.
    """
    runs, skipped = plan(settings)
    for s in skipped:
        log(f"skipped: {s['workload']} with {s['allocator']}: {s['reason']}")
    if not runs:
        raise NothingToRun(f"nothing to run: {nothing_to_run(settings)}; "
                           f"{settings.out} left as it was")
    prepare_out(settings.out)
    for name in DERIVED_DIRS:
        shutil.rmtree(settings.out / name, ignore_errors=True)
    for name in DERIVED_FILES:
        (settings.out / name).unlink(missing_ok=True)
    writer = RunsWriter(settings.out / "runs.csv")
    writer.write()  # the header alone, before meta.json names this run
    meta = base_meta(settings, now())
    meta["skipped"] = skipped
    failures: list[dict[str, object]] = []
    run_log: list[dict[str, object]] = []
    meta["failures"], meta["runs"] = failures, run_log
    meta_path = settings.out / "meta.json"
    write_meta(meta, meta_path)
    meta["conformance"] = {a.name: conformance(settings, a) for a in settings.allocators
                           if a.preload_ok}
    write_meta(meta, meta_path)
    with Progress(len(runs), width=44) as bar:
        for p in runs:
            bar.describe(f"{p.workload.name} {p.allocator.name} t={p.threads} "
                         f"#{p.repetition}")
            runner = run_server if p.workload.kind == "server" else run_program
            out = runner(p, settings)
            row = out.row
            writer.add(row)
            run_log.append({"workload": p.workload.name, "allocator": p.allocator.name,
                            "threads": p.threads, "repetition": p.repetition,
                            "status": row.status, "commands": out.commands, "env": out.env})
            if row.status != STATUS_OK:
                failures.append({"workload": p.workload.name, "allocator": p.allocator.name,
                                 "threads": p.threads, "repetition": p.repetition,
                                 "status": row.status, "message": out.message})
                bar.log(f"{p.workload.name} with {p.allocator.name} at {p.threads} threads: "
                        f"{row.status}: {out.message}")
            write_meta(meta, meta_path)  # an interrupted run leaves it complete so far
            bar.advance()
    meta["finished"] = now()
    write_meta(meta, meta_path)
    return writer.path, len(failures)


def repo_path(path: Path) -> Path:
    """path, resolved against the repository when relative."""
    return path if path.is_absolute() else REPO_ROOT / path


def selected(names: Optional[str], known: Sequence[str], what: str) -> list[str]:
    """The comma-separated names asked for (all known when None), checked.

    A name given twice counts once (in its first place): twice would run
    each point twice under the same repetition number.
    """
    if names is None:
        return list(known)
    wanted = names_list(names)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return wanted
