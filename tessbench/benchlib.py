"""Helpers shared by the benchmark drivers and the peer scripts.

Used by bench/core_bench.py, tessbench/peers.py, bench/enclave/run_enclave.py
and bench/enclave/peers/build_peers.py (the scripts put the repository root
on sys.path first), and by the rest of the tessbench package. Only the
standard library is imported at module level: rich is imported by
:class:`Progress` when a bar is made, so the peer scripts run under a bare
``python3``.

* logging and a progress bar: :func:`make_log`, :class:`Progress`;
* running measured programs: :func:`child_env`, :func:`run_measured`,
  :func:`stop_group`, :func:`preload_failure`, :func:`parse_kv`,
  :class:`BenchError`; option values: :func:`names_list`;
* reporting: :func:`median`, :func:`fmt_ratio`, :func:`verdict`,
  :func:`header_lines`, :func:`skipped_lines`;
* meta.json: :func:`machine_info`, :func:`git_info`, :func:`compiler_info`,
  :func:`command_line`, :func:`common_meta` (:class:`CommonMeta`);
* installing peers: :func:`privileged`, :func:`dpkg_version`,
  :func:`pip_command`, :func:`cmeel_version`, :func:`write_json_atomic`.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence, TypedDict

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where tessbench/peers.py installs the peers; mimalloc3/ in it is shared with
#: bench/enclave/peers/build_peers.py.
PEERS_CACHE = REPO_ROOT / ".cache" / "peers"

#: The mimalloc 3 wheel (PyPI), pinned; tessbench/peers.py preloads its shared
#: library, bench/enclave/peers/build_peers.py links its object file.
CMEEL_MIMALLOC = "cmeel-mimalloc"
CMEEL_MIMALLOC_VERSION = "3.4.3"


class BenchError(RuntimeError):
    """A benchmark program failed or printed something unexpected."""


# ------------------------------------------------------------ logging


def make_log(prog: str) -> Callable[[str], None]:
    """A function printing ``prog: message`` lines on stderr."""
    def log(text: str) -> None:
        print(f"{prog}: {text}", file=sys.stderr, flush=True)
    return log


class Progress:
    """The progress bar (rich, on stderr): one task counting every run.

    ``width`` is the width of the description column. When stderr is not a
    terminal (a log file, CI), where rich draws no live bar, each step
    described is printed as a line ``[n/total] description`` instead.
    """

    def __init__(self, total: int, width: int = 40) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn
        from rich.progress import Progress as RichProgress
        from rich.progress import TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._lines = not console.is_terminal
        self._total = total
        self._done = 0
        self._bar = RichProgress(
            TextColumn(f"{{task.description:<{width}}}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False, disable=self._lines)
        self._task = self._bar.add_task("starting", total=total)

    def __enter__(self) -> Progress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def describe(self, text: str) -> None:
        """Show text as what is running now."""
        self._bar.update(self._task, description=text)
        if self._lines:
            self.log(f"[{self._done + 1}/{self._total}] {text}")

    def add_steps(self, steps: int) -> None:
        """Count `steps` more steps to do, found while running."""
        self._total += steps
        self._bar.update(self._task, total=self._total)

    def advance(self) -> None:
        """Count one more step done."""
        self._done += 1
        self._bar.advance(self._task)

    def log(self, text: str) -> None:
        """Print a line above the bar (as is: no markup)."""
        self._bar.console.print(text, markup=False, highlight=False)


# ---------------------------------------------------- running programs


def child_env(preload: Optional[str]) -> dict[str, str]:
    """The environment for a measured program: ours, with only this preload."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    return env


#: Seconds a stopped program's process group gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 5.0


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """sig to process group pgid; a group that is gone already is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def stop_group(proc: "subprocess.Popen[bytes]", grace: Optional[float] = None) -> None:
    """Stops proc's process group (proc started with start_new_session=True).

    SIGTERM first (rusage_run passes it on to its child and reaps it), then,
    after ``grace`` seconds (default STOP_GRACE_S) or sooner when proc has
    exited, SIGKILL to the whole group: a TERM-ignoring or orphaned member
    would otherwise outlive us. Waits for proc, so it leaves no zombie.
    """
    try:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S if grace is None else grace)
        except subprocess.TimeoutExpired:
            pass
    finally:  # even when a second Ctrl-C cuts the grace short
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def run_measured(cmd: Sequence[str], env: Mapping[str, str],
                 timeout: float) -> tuple[int, str, str]:
    """Run cmd; return (exit status, stdout, stderr).

    The program runs in a session of its own (so a terminal's Ctrl-C does
    not reach it). On timeout its process group is stopped (:func:`stop_group`)
    and the status is -1; on any other exception while waiting (Ctrl-C's
    KeyboardInterrupt) the group is stopped too and the exception re-raised,
    so no measured program outlives us.
    """
    timed_out = False
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err,
                                env=dict(env), start_new_session=True)
        try:  # at once: an interrupt before it would leave the program running
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(proc)
        except BaseException:
            stop_group(proc)
            raise
        out.seek(0)
        err.seek(0)
        return (-1 if timed_out else proc.returncode,
                out.read().decode(errors="replace"),
                err.read().decode(errors="replace"))


#: What ld.so prints when it cannot load an LD_PRELOAD library: the program
#: then runs with its own malloc, not the allocator asked for.
PRELOAD_FAILED = "cannot be preloaded"


def preload_failure(stderr: str) -> Optional[str]:
    """ld.so's line saying that a preload was ignored, or None."""
    for line in stderr.splitlines():
        if PRELOAD_FAILED in line:
            return line.strip()[:300]
    return None


def names_list(text: str) -> list[str]:
    """A comma-separated option's items, blanks around them dropped, each
    once, in the order first given (a name given twice would run twice)."""
    return list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))


def parse_kv(line: str) -> dict[str, str]:
    """The key=value tokens of one line (other tokens are passed over)."""
    pairs: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            pairs[key] = value
    return pairs


# ----------------------------------------------------------- reporting


def median(values: Iterable[float]) -> float:
    """The median of values (at least one)."""
    return statistics.median(list(values))


def fmt_ratio(value: Optional[float]) -> str:
    """A ratio with two decimals, or n/a."""
    return "n/a" if value is None else f"{value:.2f}"


def verdict(ok: Optional[bool]) -> str:
    """PASS, FAIL, or n/a when the target could not be checked."""
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def skipped_lines(skipped: Sequence[str]) -> list[str]:
    """Markdown list of what was skipped, then a blank line (if any)."""
    return [f"- skipped: {s}" for s in skipped] + ([""] if skipped else [])


# ------------------------------------------------------------ metadata


class MachineInfo(TypedDict):
    """meta.json "machine"."""

    nproc: int
    cpu_count: Optional[int]
    cpu_model: Optional[str]
    mem_total: Optional[str]
    kernel: str
    os: Optional[str]
    hostname: str


class GitInfo(TypedDict):
    """meta.json "git"."""

    commit: Optional[str]
    dirty: Optional[str]


class CommonMeta(TypedDict):
    """The keys that every driver's meta.json starts with."""

    command: str
    wrapper_command: Optional[str]
    cwd: str
    started_utc: str
    finished_utc: str
    machine: MachineInfo
    git: GitInfo
    compiler: Optional[str]


def first_line(cmd: Sequence[str]) -> Optional[str]:
    """The first line a command prints (stdout, else stderr); None if it fails."""
    try:
        proc = subprocess.run(list(cmd), text=True, capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if proc.returncode == 0 and text else None


def file_value(path: str | Path, key: str, sep: str) -> Optional[str]:
    """The value of the first "key<spaces>sep value" line of a file."""
    try:
        for line in Path(path).read_text().splitlines():
            name, found, value = line.partition(sep)
            if found and name.strip() == key:
                return value.strip().strip('"')
    except OSError:
        pass
    return None


def machine_info() -> MachineInfo:
    """nproc, CPU model, memory, kernel, OS."""
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": file_value("/proc/cpuinfo", "model name", ":"),
        "mem_total": file_value("/proc/meminfo", "MemTotal", ":"),
        "kernel": platform.release(),
        "os": file_value("/etc/os-release", "PRETTY_NAME", "="),
        "hostname": platform.node(),
    }


def git_info(repo: Path = REPO_ROOT, results: Optional[Path] = None) -> GitInfo:
    """The commit checked out in repo and whether tracked files differ from it.

    Untracked files (caches) do not count, nor do files under `results`
    (the run's own output, rewritten before this is asked).
    """
    rev = first_line(["git", "-C", str(repo), "rev-parse", "HEAD"])
    dirty = None
    cmd = ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]
    # git rejects a pathspec outside the repository; results there cannot be dirt anyway
    if results is not None and Path(results).resolve().is_relative_to(Path(repo).resolve()):
        cmd += ["--", ".", f":(exclude){Path(results).resolve()}"]
    try:
        proc = subprocess.run(cmd, text=True, capture_output=True, timeout=30, check=False)
        if proc.returncode == 0:
            dirty = "yes" if proc.stdout.strip() else "no"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"commit": rev, "dirty": dirty}


def compiler_info(build: Path) -> Optional[str]:
    """The first line of --version of the build's C compiler (else cc)."""
    cache = build / "CMakeCache.txt"
    cc = None
    if cache.exists():
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_C_COMPILER:"):
                cc = line.split("=", 1)[1]
                break
    return first_line([cc or "cc", "--version"])


def command_line(argv: Optional[Sequence[str]], script: str) -> str:
    """The command as typed: sys.argv, or script + argv when called from code."""
    return shlex.join([sys.executable, *sys.argv] if argv is None
                      else [script, *argv])


def common_meta(command: str, started: datetime.datetime,
                finished: datetime.datetime, machine: MachineInfo,
                build: Path, results: Optional[Path] = None) -> CommonMeta:
    """The first keys of meta.json: command, dates, machine, git, compiler.

    results: the run's output directory, whose files do not make the
    working tree dirty.
    """
    return {
        "command": command,
        "wrapper_command": os.environ.get("TESSBENCH_COMMAND"),
        "cwd": os.getcwd(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "machine": machine,
        "git": git_info(results=results),
        "compiler": compiler_info(build),
    }


def header_lines(title: str, meta: CommonMeta) -> list[str]:
    """summary.md's title and its command, date, machine, git, compiler lines."""
    m = meta["machine"]
    return [
        f"# {title}",
        "",
        f"- command: `{meta['command']}`"
        + (f" (via `{meta['wrapper_command']}`)" if meta["wrapper_command"]
           else ""),
        f"- date: {meta['started_utc']} – {meta['finished_utc']} (UTC)",
        f"- machine: {m['nproc']} CPUs usable, {m['cpu_model']}, "
        f"{m['mem_total']}, {m['os']}, Linux {m['kernel']}",
        f"- git: {meta['git']['commit'] or '(no commit)'}"
        + (" (working tree dirty)" if meta["git"]["dirty"] == "yes" else ""),
        f"- compiler: {meta['compiler']}",
    ]


# ------------------------------------------------------- installing peers


def privileged(cmd: list[str]) -> Optional[list[str]]:
    """cmd as root: as is when we are root, through sudo otherwise."""
    if os.geteuid() == 0:
        return cmd
    if shutil.which("sudo") is not None:
        return ["sudo", *cmd]
    return None


def dpkg_version(package: str) -> Optional[str]:
    """The installed version of a Debian package, or None."""
    if shutil.which("dpkg-query") is None:
        return None
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}",
                           package], text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        return None
    status, _, version = proc.stdout.partition("\t")
    if not status.endswith(" installed") or not version:
        return None
    return version


def pip_command() -> Optional[list[str]]:
    """A working pip: this interpreter's, else python3's."""
    for python in (sys.executable, shutil.which("python3")):
        if python and subprocess.run(
                [python, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, check=False).returncode == 0:
            return [python, "-m", "pip"]
    return None


def cmeel_version(target: Path) -> Optional[str]:
    """The version of the cmeel-mimalloc wheel installed in target, or None."""
    for dist in metadata.distributions(path=[str(target)]):
        if (dist.metadata["Name"] or "").lower() == CMEEL_MIMALLOC:
            return dist.version
    return None


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return (datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"))


def write_json_atomic(doc: Mapping[str, object], path: Path) -> None:
    """Write doc as indented JSON to path through a temporary file, which a
    write that fails (the disk full) removes; the OSError then names path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
