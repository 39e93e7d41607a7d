"""Measured programs never outlive tessbench: Ctrl-C, timeouts, redis stops.

Each test starts a shell whose background child ignores SIGTERM, as a
program behind rusage_run would outlive a SIGKILL sent to rusage_run
alone, and checks that the child is gone afterwards.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
import unittest
from pathlib import Path
from types import FrameType
from typing import Optional
from unittest import mock

from tessbench import benchlib, realprogs

#: A shell line that starts a TERM-ignoring child, writes its pid, then waits.
STUBBORN_CHILD = '(trap "" TERM; exec sleep 60) & echo $! > "{pidfile}"; wait'


def wait_for_pid(pidfile: Path, limit_s: float = 10.0) -> int:
    """The pid written to pidfile, once it is there."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{pidfile} was never written")


def running(pid: int) -> bool:
    """Whether pid is a live process (a zombie waiting for its reaper is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next((line.split()[1] for line in status.splitlines()
                  if line.startswith("State:")), "")
    return state not in ("Z", "X")


class StubbornChildTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.pidfile = Path(tmp.name) / "child.pid"
        self.script = STUBBORN_CHILD.format(pidfile=self.pidfile)
        patch = mock.patch.object(benchlib, "STOP_GRACE_S", 0.3)
        patch.start()
        self.addCleanup(patch.stop)
        self.addCleanup(self.kill_leftover)

    def kill_leftover(self) -> None:
        """A failing test must not leave its sleep behind."""
        if self.pidfile.exists() and self.pidfile.read_text().strip():
            pid = int(self.pidfile.read_text())
            if running(pid):
                os.kill(pid, signal.SIGKILL)

    def assert_gone(self, pid: int) -> None:
        deadline = time.monotonic() + 5
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertFalse(running(pid), "the measured program's child outlived tessbench")


class RunMeasuredTest(StubbornChildTest):
    def test_ctrl_c_stops_the_process_group(self) -> None:
        def interrupt(signum: int, frame: Optional[FrameType]) -> None:
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGUSR1, interrupt)
        self.addCleanup(signal.signal, signal.SIGUSR1, previous)
        main = threading.main_thread().ident
        assert main is not None

        def press_ctrl_c() -> None:  # as a terminal would, once the program runs
            wait_for_pid(self.pidfile)
            time.sleep(0.2)  # run_measured is waiting by now
            signal.pthread_kill(main, signal.SIGUSR1)

        helper = threading.Thread(target=press_ctrl_c)
        helper.start()
        try:
            with self.assertRaises(KeyboardInterrupt):
                benchlib.run_measured(["sh", "-c", self.script], dict(os.environ), 60)
        finally:
            helper.join()
        self.assert_gone(wait_for_pid(self.pidfile))

    def test_timeout_stops_the_process_group(self) -> None:
        # the shell dies of SIGTERM at once, its child does not: SIGKILL it too
        code, _, _ = benchlib.run_measured(["sh", "-c", self.script], dict(os.environ), 0.5)
        self.assertEqual(code, -1)
        self.assert_gone(wait_for_pid(self.pidfile))


class RedisStopTest(StubbornChildTest):
    def test_server_group_is_stopped(self) -> None:
        """A server that does not stop (SIGTERM ignored) is killed with its launcher."""
        launcher = self.pidfile.parent / "fake_rusage_run"
        launcher.write_text(f"#!/bin/sh\n{self.script}\n")
        launcher.chmod(0o755)

        def did_not_stop(*args: object) -> realprogs.ServerRun:
            wait_for_pid(self.pidfile)
            return realprogs.ServerRun("timeout", "redis-server did not stop")

        with mock.patch.object(realprogs, "drive", did_not_stop):
            res = realprogs.run_redis(launcher, None, 10, 1, 5)
        self.assertEqual(res.status, "timeout")
        self.assert_gone(wait_for_pid(self.pidfile))


class PreloadFailureTest(unittest.TestCase):
    def test_ld_so_message(self) -> None:
        line = ("ERROR: ld.so: object '/nope.so' from LD_PRELOAD cannot be preloaded "
                "(cannot open shared object file): ignored.")
        self.assertEqual(benchlib.preload_failure(f"noise\n{line}\nmore\n"), line)
        self.assertIsNone(benchlib.preload_failure("tb_larson: fine\n"))


if __name__ == "__main__":
    unittest.main()
