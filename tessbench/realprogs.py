"""Real programs under tessbench: redis-server driven by redis-benchmark.

redis-server (Debian's) runs with the allocator preloaded, through
rusage_run so its peak RSS, CPU times and page faults are its own; it
listens on a free loopback port with persistence off. redis-benchmark
runs a fixed set of tests against it (CSV output); afterwards a value
written and read back, and the key count, check the server still works.
Debian's redis-server is linked with jemalloc: without a preload its
malloc is jemalloc's, so glibc's malloc is measured through
libtb_glibc.so, which forwards the malloc family to glibc's own.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping, Optional

from tessbench.benchlib import child_env, parse_kv, preload_failure, stop_group

REDIS_TESTS = ("set", "get", "lpush", "lpop", "sadd", "hset")
#: Seconds redis-server gets to answer its first ping.
START_TIMEOUT_S = 15.0


@dataclasses.dataclass
class ServerRun:
    """What one redis run measured (status "ok" or why not)."""

    status: str
    message: str = ""
    server_cmd: list[str] = dataclasses.field(default_factory=list)
    client_cmd: list[str] = dataclasses.field(default_factory=list)
    elapsed_s: Optional[float] = None
    ops: Optional[int] = None
    ops_per_s: Optional[float] = None
    rusage: dict[str, str] = dataclasses.field(default_factory=dict)
    extra: dict[str, str] = dataclasses.field(default_factory=dict)


def missing() -> Optional[str]:
    """Why the redis workload cannot run here (None when it can)."""
    absent = [p for p in ("redis-server", "redis-benchmark", "redis-cli") if not shutil.which(p)]
    if absent:
        return "not installed: " + ", ".join(absent) + " (Debian redis-server, redis-tools)"
    return None


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cli(port: int, *args: str) -> str:
    """redis-cli's answer to one command (stripped), '' when it fails."""
    proc = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True, timeout=30, check=False, env=child_env(None))
    return proc.stdout.strip() if proc.returncode == 0 else ""


def parse_benchmark_csv(text: str) -> dict[str, float]:
    """redis-benchmark --csv output: test name (lower case) -> requests/s."""
    rates: dict[str, float] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2 or row[0] == "test":
            continue
        try:
            rate = float(row[1])
        except ValueError:
            continue
        name = row[0].split()[0].lower()
        rates[name] = rate
    return rates


def combined_rate(rates: Mapping[str, float]) -> float:
    """The requests per second over all the tests, each of which ran the same number
    of requests: their harmonic mean (the arithmetic mean would weigh the fast tests
    more than the time they took). ValueError when empty or a rate is not positive."""
    if not rates or any(not rate > 0 for rate in rates.values()):
        raise ValueError(f"no combined rate of {dict(rates)!r}")
    return len(rates) / math.fsum(1.0 / rate for rate in rates.values())


def server_command(port: int, workdir: str) -> list[str]:
    """redis-server on a loopback port, persistence off, in the foreground."""
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", workdir, "--daemonize", "no",
            "--loglevel", "warning"]


def benchmark_command(port: int, requests: int) -> list[str]:
    """redis-benchmark: REDIS_TESTS, requests each, 50 clients, 64-byte values."""
    return ["redis-benchmark", "-p", str(port), "-q", "--csv", "-n", str(requests),
            "-c", "50", "-r", "100000", "-d", "64", "-t", ",".join(REDIS_TESTS)]


def exit_status(code: Optional[int]) -> str:
    """The status of a server that exited on its own (rusage_run's exit code)."""
    if code is not None and (code > 128 or code < 0):
        return "crashed"
    return "error"


def run_redis(rusage_run: Path, preload: Optional[str], requests: int, seed: int,
              timeout: float) -> ServerRun:
    """One redis-server run under rusage_run with ``preload``."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tessbench-redis-") as tmp:
        report = Path(tmp) / "rusage.txt"
        server_cmd = server_command(port, tmp)
        launcher = [str(rusage_run), "-o", str(report), "-p", preload or "", "--"]
        with subprocess.Popen(launcher + server_cmd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True) as server:
            try:
                res = drive(server, port, report, requests, seed, timeout)
            finally:
                # the whole group: rusage_run passes TERM on to redis-server, but
                # SIGKILL to rusage_run alone would orphan it
                stop_group(server)
        res.server_cmd, res.client_cmd = server_cmd, benchmark_command(port, requests)
        return res


def drive(server: "subprocess.Popen[bytes]", port: int, report: Path, requests: int, seed: int,
          timeout: float) -> ServerRun:
    """Wait for the server, benchmark it, check it, stop it, read its rusage."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while cli(port, "ping") != "PONG":
        exited = server.poll() is not None
        if exited or time.monotonic() > deadline:
            stop_group(server)  # reading its stderr to the end needs it stopped
            err = server.stderr.read().decode(errors="replace") if server.stderr else ""
            if not exited:
                return ServerRun("timeout", f"redis-server did not answer within "
                                            f"{START_TIMEOUT_S:g} s: {err.strip()[-200:]}")
            code = server.returncode
            return ServerRun(exit_status(code), f"redis-server did not start (exit status "
                                                f"{code}): {err.strip()[-200:]}")
        time.sleep(0.05)
    start = time.monotonic()
    try:
        # (the client with the system's malloc, whatever tessbench was run under)
        bench = subprocess.run(benchmark_command(port, requests), capture_output=True,
                               text=True, timeout=timeout, check=False, env=child_env(None))
    except subprocess.TimeoutExpired:
        return ServerRun("timeout", "redis-benchmark did not finish")
    elapsed = time.monotonic() - start
    if server.poll() is not None:
        return ServerRun(exit_status(server.poll()),
                         f"redis-server exited during the benchmark (status {server.poll()})")
    if bench.returncode != 0:
        return ServerRun("error", f"redis-benchmark failed: {bench.stderr.strip()[-200:]}")
    rates = parse_benchmark_csv(bench.stdout)
    if sorted(rates) != sorted(REDIS_TESTS):
        return ServerRun("error", f"redis-benchmark reported {sorted(rates)}")
    if any(not rate > 0 for rate in rates.values()):
        return ServerRun("error", f"redis-benchmark reported a rate of no requests: {rates}")
    # the server must still answer correctly after the load
    token = f"tessbench-{seed}-{port}"
    ok = (cli(port, "set", "tessbench:check", token) == "OK"
          and cli(port, "get", "tessbench:check") == token
          and cli(port, "dbsize").isdigit() and int(cli(port, "dbsize")) > 1)
    cli(port, "shutdown", "nosave")
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        return ServerRun("timeout", "redis-server did not stop")
    if not ok:
        return ServerRun("check-failed", "redis-server answered wrongly after the benchmark")
    failure = preload_failure(server.stderr.read().decode(errors="replace")
                              if server.stderr else "")
    if failure is not None:  # it ran, but with its own malloc: not the allocator asked for
        return ServerRun("error", failure)
    rusage = parse_kv(report.read_text()) if report.exists() else {}
    if rusage.get("status") != "0":
        return ServerRun(exit_status(int(rusage["status"]) if rusage.get("status", "")
                                     .lstrip("-").isdigit() else None),
                         f"redis-server exit status {rusage.get('status', 'unknown')}")
    ops = requests * len(REDIS_TESTS)
    extra = {f"redis_{name}_rps": f"{rate:.1f}" for name, rate in rates.items()}
    return ServerRun("ok", "", elapsed_s=elapsed, ops=ops,
                     ops_per_s=combined_rate(rates), rusage=rusage, extra=extra)
