"""``run_all`` and the plan: what a run does to its results directory, and
which pairs it runs at all (stand-in programs, no build needed)."""

from __future__ import annotations

import csv
import io
import json
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path
from typing import Optional
from unittest import mock

from tessbench import runner
from tessbench import workloads as wl
from tessbench.results import RUN_COLUMNS, RunRow

GLIBC = runner.Allocator("glibc", "2.36", "system", None, None, preload_ok=True)
JEMALLOC = runner.Allocator("jemalloc", "5", "apt", "/lib/jemalloc.so", None, preload_ok=True)
DLMALLOC = runner.Allocator("dlmalloc", "0.2", "crates.io", None, "/lib/fixed_dl.so",
                            preload_ok=False)

#: What an earlier run left in the results directory.
OLD_RUNS = "workload,allocator,threads,repetition,status\nlarson,old,1,1,ok\n"
OLD_FILES = {"runs.csv": OLD_RUNS, "meta.json": '{"tessbench": "0.1", "command": "old"}\n',
             "report.md": "old\n", "report.html": "<p>old</p>\n",
             "plots/throughput_larson.png": "old", "series/frag_old_t1_r1.csv": "old"}


def ok_outcome(p: runner.Planned, settings: runner.Settings) -> runner.Outcome:
    row = RunRow(p.workload.name, p.allocator.name, p.threads, p.repetition, elapsed_s=1.0,
                 ops=10, ops_per_s=10.0)
    return runner.Outcome(row, ["true"], {})


class RunAllTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.build = Path(tmp.name) / "build"
        prog = wl.program_path(self.build, wl.BY_NAME["larson"])
        assert prog is not None
        prog.parent.mkdir(parents=True)
        prog.touch()  # the plan needs it to exist; run_program is replaced
        self.out = Path(tmp.name) / "out"
        for name, text in OLD_FILES.items():
            (self.out / name).parent.mkdir(parents=True, exist_ok=True)
            (self.out / name).write_text(text)
        patch = mock.patch.object(runner, "git_info",
                                  return_value={"commit": None, "dirty": None})
        self.git_info = patch.start()
        self.addCleanup(patch.stop)

    def settings(self, allocators: tuple[runner.Allocator, ...] = (GLIBC,),
                 workloads: tuple[str, ...] = ("larson",), out: Optional[Path] = None,
                 glibc_shim: Optional[str] = None) -> runner.Settings:
        return runner.Settings(build=self.build, out=out or self.out, allocators=allocators,
                               workloads=tuple(wl.BY_NAME[w] for w in workloads),
                               threads=(1,), repeat=1, quick=True, baseline="glibc",
                               fixed_baseline="dlmalloc", seed=1, command="tessbench new",
                               glibc_shim=glibc_shim)

    def run_all(self, settings: runner.Settings) -> tuple[Path, int]:
        with redirect_stderr(io.StringIO()):
            return runner.run_all(settings, lambda line: None)

    def test_interrupted_run_leaves_no_earlier_results(self) -> None:
        with mock.patch.object(runner, "run_program", side_effect=KeyboardInterrupt), \
                self.assertRaises(KeyboardInterrupt):
            self.run_all(self.settings())
        with (self.out / "runs.csv").open(newline="") as f:
            self.assertEqual(list(csv.reader(f)), [list(RUN_COLUMNS)])  # the header alone
        self.assertEqual(json.loads((self.out / "meta.json").read_text())["command"],
                         "tessbench new")
        for stale in ("report.md", "report.html", "plots", "series"):
            self.assertFalse((self.out / stale).exists(), stale)

    def test_finished_run_removes_the_earlier_report(self) -> None:
        """With --no-report no report is written: the old one, whose plots are gone, must go."""
        with mock.patch.object(runner, "run_program", side_effect=ok_outcome):
            csv_path, failed = self.run_all(self.settings())
        self.assertEqual(failed, 0)
        self.assertIn("larson,glibc,1,1,ok", csv_path.read_text())
        self.assertFalse((self.out / "report.md").exists())
        self.assertFalse((self.out / "report.html").exists())

    def test_nothing_to_run_leaves_the_directory_alone(self) -> None:
        before = {name: (self.out / name).read_text() for name in OLD_FILES}
        for settings, why in ((self.settings(allocators=()), "no allocator chosen"),
                              (self.settings(workloads=()), "no workload chosen"),
                              (self.settings(allocators=(DLMALLOC,)), "skipped")):
            with self.subTest(why=why), \
                    mock.patch.object(runner, "run_program", side_effect=ok_outcome), \
                    self.assertRaisesRegex(runner.NothingToRun, why):
                self.run_all(settings)
            self.assertEqual({name: (self.out / name).read_text() for name in OLD_FILES},
                             before)
        fresh = self.out.parent / "fresh"
        with self.assertRaises(runner.NothingToRun):
            self.run_all(self.settings(allocators=(), out=fresh))
        self.assertFalse(fresh.exists())

    def test_out_with_files_of_its_own_is_refused(self) -> None:
        """A directory no run wrote keeps its files (`--out .` removed a user's plots/)."""
        mine = self.out.parent / "mine"
        (mine / "plots").mkdir(parents=True)
        (mine / "plots" / "figure.png").write_text("mine")
        (mine / "meta.json").write_text('{"not": "tessbench"}\n')
        with mock.patch.object(runner, "run_program", side_effect=ok_outcome), \
                self.assertRaisesRegex(runner.NotResults, "not an earlier tessbench run"):
            self.run_all(self.settings(out=mine))
        self.assertEqual((mine / "plots" / "figure.png").read_text(), "mine")
        self.assertFalse((mine / "runs.csv").exists())
        empty = self.out.parent / "empty"
        empty.mkdir()
        with mock.patch.object(runner, "run_program", side_effect=ok_outcome):
            csv_path, failed = self.run_all(self.settings(out=empty))
        self.assertEqual(failed, 0)
        self.assertTrue(csv_path.exists())

    def test_out_that_is_a_file(self) -> None:
        target = self.out / "report.md"
        with self.assertRaisesRegex(NotADirectoryError, "not a directory"):
            self.run_all(self.settings(out=target))
        self.assertEqual(target.read_text(), "old\n")

    def test_meta_git_ignores_the_runs_own_output(self) -> None:
        runner.base_meta(self.settings(), "now")
        self.git_info.assert_called_once_with(results=self.out)


class WhyNotTest(unittest.TestCase):
    def test_redis_glibc_needs_the_shim(self) -> None:
        redis = wl.BY_NAME["redis"]
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch("tessbench.realprogs.missing", return_value=None):
            build = Path(tmp)
            shim = build / "libtb_glibc.so"
            for absent in (None, str(shim)):
                reason = runner.why_not(redis, GLIBC, build, absent)
                self.assertIsNotNone(reason)
                self.assertIn("libtb_glibc.so", reason or "")
            # a preloaded allocator brings its own malloc: no shim needed
            self.assertIsNone(runner.why_not(redis, JEMALLOC, build, None))
            shim.touch()
            self.assertIsNone(runner.why_not(redis, GLIBC, build, str(shim)))
            settings = runner.Settings(
                build=build, out=build / "out", allocators=(GLIBC, JEMALLOC),
                workloads=(redis,), threads=(1,), repeat=1, quick=True, baseline="glibc",
                fixed_baseline="dlmalloc", seed=1, command="t",
                glibc_shim=str(build / "gone.so"))
            runs, skipped = runner.plan(settings)
            self.assertEqual([r.allocator.name for r in runs], ["jemalloc"])
            self.assertEqual([(s["workload"], s["allocator"]) for s in skipped],
                             [("redis", "glibc")])

    def test_redis_not_installed(self) -> None:
        with mock.patch("tessbench.realprogs.missing", return_value="not installed: redis"):
            self.assertEqual(runner.workload_missing(wl.BY_NAME["redis"], Path("/b")),
                             "not installed: redis")
            self.assertEqual(runner.why_not(wl.BY_NAME["redis"], JEMALLOC, Path("/b")),
                             "not installed: redis")


class SelectedTest(unittest.TestCase):
    def test_duplicates_count_once(self) -> None:
        known = ["glibc", "jemalloc", "tessalloc"]
        self.assertEqual(runner.selected("tessalloc, glibc,tessalloc,glibc", known, "x"),
                         ["tessalloc", "glibc"])
        self.assertEqual(runner.selected(",", known, "x"), [])
        self.assertEqual(runner.selected(None, known, "x"), known)
        with self.assertRaisesRegex(ValueError, "unknown x: nope"):
            runner.selected("glibc,nope", known, "x")


if __name__ == "__main__":
    unittest.main()
