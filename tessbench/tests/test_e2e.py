"""End to end: ``tessbench run --quick`` with two allocators and two workloads.

Needs a build with the workloads (ctest sets TESSBENCH_BUILD to it; run
alone, the test is skipped without it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from tessbench.results import read_runs

ALLOCATORS = ("glibc", "tessalloc")
WORKLOADS = ("larson", "x509")


class QuickRunTest(unittest.TestCase):
    def test_quick_run_report(self) -> None:
        build = os.environ.get("TESSBENCH_BUILD")
        if not build:
            self.skipTest("TESSBENCH_BUILD (a build directory with the workloads) not set")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            cmd = [sys.executable, "-m", "tessbench", "run", "--quick", "--repeat", "1",
                   "--threads", "1,2", "--build", build, "--out", str(out),
                   "--allocators", ",".join(ALLOCATORS), "--workloads", ",".join(WORKLOADS)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                                  check=False)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            rows = read_runs(out / "runs.csv")
            got = sorted((r["workload"], r["allocator"], r["threads"]) for r in rows)
            want = sorted((w, a, str(t)) for w in WORKLOADS for a in ALLOCATORS for t in (1, 2))
            self.assertEqual(got, want)
            for r in rows:
                self.assertEqual(r["status"], "ok", r)
                self.assertGreater(float(r["ops_per_s"]), 0)
                self.assertGreater(int(r["max_rss_kib"]), 0)
                self.assertGreater(int(r["ops"]), 0)
            pngs = sorted((out / "plots").glob("*.png"))
            self.assertTrue(pngs, "no plot written")
            import matplotlib.image
            for png in pngs:
                image = matplotlib.image.imread(str(png))
                self.assertGreater(image.shape[0], 100)
                self.assertGreater(image.shape[1], 100)
            for page in ("report.md", "report.html"):
                text = (out / page).read_text()
                for name in (*ALLOCATORS, *WORKLOADS):
                    self.assertIn(name, text, f"{page} does not name {name}")


if __name__ == "__main__":
    unittest.main()
