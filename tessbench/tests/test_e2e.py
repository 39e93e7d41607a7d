"""End to end: ``tessbench run --quick`` with two allocators and two workloads.

Needs a build with the workloads (ctest sets TESSBENCH_BUILD to it; run
alone, the test is skipped without it).
"""

from __future__ import annotations

import json
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
            stale = out / "plots" / "throughput_gone.png"  # an earlier run's
            stale.parent.mkdir(parents=True)
            stale.write_bytes(b"old")
            (out / "meta.json").write_text('{"tessbench": "0.1", "command": "old"}\n')
            cmd = [sys.executable, "-m", "tessbench", "run", "--quick", "--repeat", "1",
                   "--threads", "1,2", "--build", build, "--out", str(out),
                   "--allocators", ",".join(ALLOCATORS), "--workloads", ",".join(WORKLOADS)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                                  check=False)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            rows = read_runs(out / "runs.csv")
            # the columns the issue names, in runs.csv's header
            for column in ("workload", "allocator", "threads", "repetition", "elapsed_s",
                           "ops_per_s", "max_rss_kib", "user_s", "sys_s", "minor_faults",
                           "major_faults"):
                self.assertIn(column, rows[0])
            self.assertIn("intermediates", rows[0])  # a workload-specific column (x509)
            # interleaved: within a workload and thread count, A B A B ...
            order = [(r["workload"], r["threads"], r["allocator"]) for r in rows]
            want_order = [(w, str(t), a) for w in WORKLOADS for t in (1, 2) for a in ALLOCATORS]
            self.assertEqual(order, want_order)
            got = sorted((r["workload"], r["allocator"], r["threads"]) for r in rows)
            want = sorted((w, a, str(t)) for w in WORKLOADS for a in ALLOCATORS for t in (1, 2))
            self.assertEqual(got, want)
            for r in rows:
                self.assertEqual(r["status"], "ok", r)
                self.assertGreater(float(r["ops_per_s"]), 0)
                self.assertGreater(float(r["elapsed_s"]), 0)
                self.assertAlmostEqual(float(r["ops_per_s"]),
                                       int(r["ops"]) / float(r["elapsed_s"]), delta=1e-6
                                       * float(r["ops_per_s"]))
                self.assertGreater(int(r["max_rss_kib"]), 0)
                self.assertGreater(int(r["ops"]), 0)
                self.assertGreaterEqual(float(r["user_s"]) + float(r["sys_s"]), 0)
            meta = json.loads((out / "meta.json").read_text())
            self.assertEqual(meta["machine"]["cpus"], len(os.sched_getaffinity(0)))
            for name in ALLOCATORS:
                self.assertTrue(meta["allocators"][name]["version"], name)
            self.assertTrue(meta["finished"])
            self.assertEqual(len(meta["runs"]), len(rows))
            for run in meta["runs"]:
                self.assertTrue(run["commands"])
                if run["allocator"] == "tessalloc":
                    self.assertIn("LD_PRELOAD=", run["commands"][0])
            self.assertFalse(stale.exists(), "an earlier run's plot was kept")
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
            page = (out / "report.html").read_text()
            self.assertIn('src="data:image/png;base64,', page)  # self-contained
            self.assertNotIn('src="plots/', page)


if __name__ == "__main__":
    unittest.main()
