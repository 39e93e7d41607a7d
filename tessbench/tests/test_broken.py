"""Every workload, given an allocator broken on purpose, fails loudly.

The broken allocator (bench/workloads/broken.h) returns overlapping blocks:
preloaded (libtb_broken.so) for the process-wide workloads, as the enclave
plugin (libtb_broken_fixed.so) for the fixed-heap ones. Each workload runs
as ``tessbench run --quick`` would run it, through the runner, and its row
must not be ok: the C workloads' own checks (and the enclave harness's)
must catch the overlap (status check-failed); python3 and redis-server,
real programs, may instead crash or assert, which fails the run too.

Needs a build with the workloads (ctest sets TESSBENCH_BUILD to it).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import unittest
from pathlib import Path
from typing import Optional
from unittest import mock

from tessbench import realprogs, runner
from tessbench import workloads as wl
from tessbench.results import STATUS_OK

#: The workloads whose own checks must catch the overlap; the others (real
#: programs) must fail, however.
REAL_PROGRAMS = ("python", "redis")

#: Arguments that make the check certain on a busy machine: cache-thrash
#: and -scratch hold one object per thread, so two live objects overlap
#: only when threads are amid their objects at once (more threads, an
#: overlap every 2nd allocation, a time bound).
SURE_FAIL: dict[str, tuple[tuple[str, ...], int, dict[str, str]]] = {
    "cache-thrash": (("--duration", "1.5"), 8, {"TB_BROKEN_EVERY": "2"}),
    "cache-scratch": (("--duration", "1.5"), 8, {"TB_BROKEN_EVERY": "2"}),
}


class BrokenAllocatorTest(unittest.TestCase):
    build: Path

    @classmethod
    def setUpClass(cls) -> None:
        build = os.environ.get("TESSBENCH_BUILD")
        if not build:
            raise unittest.SkipTest("TESSBENCH_BUILD (a build with the workloads) not set")
        cls.build = Path(build)

    def broken(self) -> runner.Allocator:
        lib = self.build / "bench" / "workloads"
        return runner.Allocator("broken", "0", "test", str(lib / "libtb_broken.so"),
                                str(lib / "libtb_broken_fixed.so"), preload_ok=True)

    def run_broken(self, workload: wl.Workload, out: Path) -> tuple[str, str]:
        """(status, message) of one quick run of workload with the broken allocator."""
        args, threads, env = SURE_FAIL.get(workload.name, (workload.quick_args, 2, {}))
        if not workload.threaded:
            threads = 1
        work = dataclasses.replace(workload, quick_args=args, timeout_s=120)
        allocator = self.broken()
        settings = runner.Settings(
            build=self.build, out=out, allocators=(allocator,), workloads=(work,),
            threads=(threads,), repeat=1, quick=True, baseline="glibc",
            fixed_baseline="dlmalloc", seed=1, command="test", glibc_shim=None)
        reason: Optional[str] = runner.why_not(work, allocator, self.build)
        self.assertIsNone(reason, f"{workload.name} cannot run here: {reason}")
        planned = runner.Planned(work, allocator, threads, 1)
        with mock.patch.dict(os.environ, env):
            if work.kind == "server":
                outcome = runner.run_server(planned, settings)
            else:
                outcome = runner.run_program(planned, settings)
        return outcome.row.status, outcome.message

    def test_every_workload_fails(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for workload in wl.WORKLOADS:
                if workload.kind == "server" and realprogs.missing():
                    self.fail(f"{workload.name}: {realprogs.missing()}")
                with self.subTest(workload=workload.name):
                    status, message = self.run_broken(workload, Path(tmp))
                    self.assertNotEqual(status, STATUS_OK,
                                        f"{workload.name} passed with overlapping blocks")
                    if workload.name not in REAL_PROGRAMS:
                        self.assertEqual(status, "check-failed", message)
                    else:
                        self.assertIn(status, ("check-failed", "crashed", "error"), message)


if __name__ == "__main__":
    unittest.main()
