"""Unit tests of runs.csv / meta.json writing and of the run plan."""

from __future__ import annotations

import csv
import json
import tempfile
import unittest
from pathlib import Path

from tessbench import runner
from tessbench import workloads as wl
from tessbench.results import RUN_COLUMNS, RunRow, RunsWriter, format_cell, read_runs, write_meta


class RunsWriterTest(unittest.TestCase):
    def test_fixed_columns_then_sorted_extras(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "runs.csv"
            writer = RunsWriter(path)
            writer.add(RunRow("larson", "glibc", 2, 1, elapsed_s=1.5, ops=300, ops_per_s=200.0,
                              max_rss_kib=1024, extra={"zeta": "1"}))
            writer.add(RunRow("malloc-cmp", "tessalloc", 1, 1, status="check-failed",
                              extra={"alpha": "x"}))
            with path.open(newline="") as f:
                header = next(csv.reader(f))
            self.assertEqual(header, [*RUN_COLUMNS, "alpha", "zeta"])
            rows = read_runs(path)
            self.assertEqual(len(rows), 2)
            self.assertEqual(rows[0]["ops_per_s"], "200.0")
            self.assertEqual(rows[0]["zeta"], "1")
            self.assertEqual(rows[0]["alpha"], "")
            self.assertEqual(rows[1]["status"], "check-failed")
            self.assertEqual(rows[1]["elapsed_s"], "")  # failed: no numbers
            self.assertEqual(rows[1]["alpha"], "x")
            # the file is always complete: no temporary file left behind
            self.assertEqual(sorted(p.name for p in Path(tmp).iterdir()), ["runs.csv"])

    def test_extra_column_may_not_shadow_a_fixed_one(self) -> None:
        row = RunRow("x", "y", 1, 1, extra={"ops": "5"})
        with self.assertRaises(ValueError):
            row.cells()

    def test_format_cell(self) -> None:
        self.assertEqual(format_cell(None), "")
        self.assertEqual(format_cell(0.1), "0.1")
        self.assertEqual(format_cell(3), "3")

    def test_meta_round_trip(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "meta.json"
            write_meta({"baseline": "glibc", "threads": [1, 2]}, path)
            self.assertEqual(json.loads(path.read_text()), {"baseline": "glibc",
                                                            "threads": [1, 2]})


def alloc(name: str, preload: bool, plugin: bool) -> runner.Allocator:
    return runner.Allocator(name, "1", "test", f"/lib/{name}.so" if preload else None,
                            f"/lib/fixed_{name}.so" if plugin else None, preload_ok=preload)


class PlanTest(unittest.TestCase):
    def settings(self, build: Path, allocators: tuple[runner.Allocator, ...],
                 workloads: tuple[str, ...]) -> runner.Settings:
        return runner.Settings(build=build, out=build / "out", allocators=allocators,
                               workloads=tuple(wl.BY_NAME[w] for w in workloads),
                               threads=(1, 2), repeat=2, quick=True, baseline="a", seed=1,
                               command="test", glibc_shim=None)

    def test_interleaved_and_skipped(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp)
            for prog in ("tb_larson", "tb_malloc_cmp"):
                p = wl.program_path(build, wl.BY_NAME[prog[3:].replace("_", "-")])
                assert p is not None
                p.parent.mkdir(parents=True, exist_ok=True)
                p.touch()
            (build / "bench" / "enclave").mkdir(parents=True)
            wl.enclave_bench_path(build).touch()
            allocs = (alloc("a", True, False), alloc("b", True, True), alloc("c", False, True))
            runs, skipped = runner.plan(self.settings(build, allocs,
                                                      ("larson", "malloc-cmp", "enclave")))
            order = [(r.repetition, r.workload.name, r.threads, r.allocator.name) for r in runs]
            first = [o for o in order if o[0] == 1]
            self.assertEqual(first, [
                (1, "larson", 1, "a"), (1, "larson", 1, "b"),
                (1, "larson", 2, "a"), (1, "larson", 2, "b"),
                (1, "malloc-cmp", 1, "a"), (1, "malloc-cmp", 1, "b"),  # not threaded
                (1, "enclave", 1, "b"), (1, "enclave", 1, "c"),
                (1, "enclave", 2, "b"), (1, "enclave", 2, "c")])
            self.assertEqual(len(order), 2 * len(first))
            reasons = {(s["workload"], s["allocator"]): s["reason"] for s in skipped}
            self.assertIn("fixed-heap only", reasons[("larson", "c")])
            self.assertIn("no fixed-heap", reasons[("enclave", "a")])

    def test_missing_program_is_skipped_with_its_path(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            runs, skipped = runner.plan(self.settings(Path(tmp), (alloc("a", True, False),),
                                                      ("xmalloc",)))
            self.assertEqual(runs, [])
            self.assertIn("not built", skipped[0]["reason"])
            self.assertIn("tb_xmalloc", skipped[0]["reason"])

    def test_status_of_exit_codes(self) -> None:
        self.assertEqual(runner.status_of(0), "ok")
        self.assertEqual(runner.status_of(3), "check-failed")
        self.assertEqual(runner.status_of(-1), "timeout")
        self.assertEqual(runner.status_of(134), "crashed")
        self.assertEqual(runner.status_of(1), "error")

    def test_commands(self) -> None:
        build = Path("/b")
        cmd = wl.command(wl.BY_NAME["frag"], build, 8, 3, False, "/p.so", Path("/s.csv"))
        self.assertEqual(cmd[:5], ["/b/bench/enclave/enclave_bench", "--allocator", "/p.so",
                                   "--seed", "3"])
        self.assertIn("--workers", cmd)
        self.assertEqual(cmd[cmd.index("--others") + 1], "2")
        self.assertEqual(cmd[cmd.index("--csv") + 1], "/s.csv")
        cmd = wl.command(wl.BY_NAME["larson"], build, 4, 1, True, None, None)
        self.assertEqual(cmd[:5], ["/b/bench/workloads/tb_larson", "--threads", "4", "--seed",
                                   "1"])
        self.assertEqual(cmd[5:], list(wl.BY_NAME["larson"].quick_args))


if __name__ == "__main__":
    unittest.main()
