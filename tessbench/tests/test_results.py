"""Unit tests of runs.csv / meta.json writing and of the run plan."""

from __future__ import annotations

import csv
import json
import subprocess
import tempfile
import unittest
from pathlib import Path

from tessbench import runner
from tessbench import workloads as wl
from tessbench.benchlib import git_info
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
                               threads=(1, 2), repeat=2, quick=True, baseline="a",
                               fixed_baseline="c", seed=1,
                               command="test", glibc_shim=None)

    def test_interleaved_and_skipped(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp)
            for name in ("larson", "malloc-cmp", "enclave"):
                p = wl.program_path(build, wl.BY_NAME[name])
                assert p is not None
                p.parent.mkdir(parents=True, exist_ok=True)
                p.touch()
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
            # the second repetition starts each point one allocator further along
            second = [o[1:] for o in order if o[0] == 2]
            self.assertEqual(second[:2], [("larson", 1, "b"), ("larson", 1, "a")])
            self.assertEqual(sorted(second), sorted(o[1:] for o in first))
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
        self.assertEqual(cmd, ["/b/bench/workloads/tb_frag", "--threads", "8", "--seed", "3",
                               "--allocator", "/p.so", "--csv", "/s.csv", "--duration", "10"])
        cmd = wl.command(wl.BY_NAME["x509"], build, 2, 1, False, None, None)
        self.assertEqual(cmd, ["/b/bench/workloads/x509/tb_x509", "--threads", "2", "--seed",
                               "1"])
        cmd = wl.command(wl.BY_NAME["larson"], build, 4, 1, True, None, None)
        self.assertEqual(cmd[:5], ["/b/bench/workloads/tb_larson", "--threads", "4", "--seed",
                                   "1"])
        self.assertEqual(cmd[5:], list(wl.BY_NAME["larson"].quick_args))


#: A stand-in for bench/rusage_run: runs the command, writes a report.
FAKE_RUSAGE_RUN = """#!/bin/sh
out=$2; shift 5
"$@"; code=$?
echo "status=$code max_rss_kib=2048 user_s=0.5 sys_s=0.25 minor_faults=7 major_faults=0" > "$out"
exit $code
"""


class RunProgramTest(unittest.TestCase):
    """run_program against stand-in programs: what becomes of their result lines."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.build = Path(self.tmp.name) / "build"
        launcher = runner.rusage_run_path(self.build)
        launcher.parent.mkdir(parents=True)
        launcher.write_text(FAKE_RUSAGE_RUN)
        launcher.chmod(0o755)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def run_with(self, script: str) -> runner.Outcome:
        prog = wl.program_path(self.build, wl.BY_NAME["larson"])
        assert prog is not None
        prog.parent.mkdir(parents=True, exist_ok=True)
        prog.write_text("#!/bin/sh\n" + script)
        prog.chmod(0o755)
        a = alloc("a", True, False)
        settings = runner.Settings(build=self.build, out=self.build / "out", allocators=(a,),
                                   workloads=(wl.BY_NAME["larson"],), threads=(1,), repeat=1,
                                   quick=True, baseline="a", fixed_baseline="c", seed=1,
                                   command="test", glibc_shim=None)
        return runner.run_program(runner.Planned(wl.BY_NAME["larson"], a, 2, 1), settings)

    def test_ok_run(self) -> None:
        out = self.run_with("echo 'result workload=larson threads=2 ops=300 elapsed_s=1.5 "
                            "ops_per_s=200.0 generations=4'\n")
        self.assertEqual(out.message, "")
        row = out.row
        self.assertEqual((row.status, row.ops, row.elapsed_s, row.ops_per_s),
                         ("ok", 300, 1.5, 200.0))
        self.assertEqual((row.max_rss_kib, row.user_s, row.sys_s, row.minor_faults),
                         (2048, 0.5, 0.25, 7))
        self.assertEqual(row.extra, {"generations": "4"})
        # the exact command, with the preload it ran under
        self.assertEqual(out.commands, [
            f"LD_PRELOAD=/lib/a.so {self.build}/bench/workloads/tb_larson --threads 2 "
            "--seed 1 --iterations 20000"])
        self.assertEqual(out.env, {"LD_PRELOAD": "/lib/a.so"})

    def test_no_time_is_an_error_not_an_empty_rate(self) -> None:
        out = self.run_with("echo 'result workload=larson threads=2 ops=300 "
                            "elapsed_s=0.000000 ops_per_s=0'\n")
        self.assertEqual(out.row.status, "error")
        self.assertIn("elapsed time of 0.0", out.message)
        self.assertIsNone(out.row.ops_per_s)
        self.assertIsNone(out.row.max_rss_kib)  # a failed run has no numbers

    def test_malformed_or_missing_result(self) -> None:
        out = self.run_with("echo 'result workload=larson ops=many elapsed_s=1'\n")
        self.assertEqual(out.row.status, "error")
        self.assertIn("malformed result line", out.message)
        out = self.run_with("echo hello\n")
        self.assertEqual(out.row.status, "error")
        self.assertIn("no result line", out.message)

    def test_failed_check_and_crash(self) -> None:
        out = self.run_with("echo 'tb_larson: check failed: a block' >&2; exit 3\n")
        self.assertEqual((out.row.status, out.message), ("check-failed",
                                                         "tb_larson: check failed: a block"))
        out = self.run_with("kill -SEGV $$\n")
        self.assertEqual(out.row.status, "crashed")

    def test_ignored_preload_is_an_error(self) -> None:
        """ld.so ran the program with its own malloc: its numbers are not the allocator's."""
        out = self.run_with("echo \"ERROR: ld.so: object '/lib/a.so' from LD_PRELOAD cannot be "
                            "preloaded (cannot open shared object file): ignored.\" >&2\n"
                            "echo 'result workload=larson threads=2 ops=300 elapsed_s=1.5 "
                            "ops_per_s=200.0'\n")
        self.assertEqual(out.row.status, "error")
        self.assertIn("cannot be preloaded", out.message)
        self.assertIsNone(out.row.ops_per_s)

    def test_conformance_findings(self) -> None:
        prog = wl.conform_path(self.build)
        prog.parent.mkdir(parents=True, exist_ok=True)
        prog.write_text("#!/bin/sh\n"
                        "echo 'conform check=malloc_huge_enomem result=ok'\n"
                        "echo 'conform check=pvalloc_usable_free result=crash "
                        "detail=signal-11'\n"
                        "echo 'conform check=calloc_overflow_enomem result=fail detail=errno-0'\n"
                        "echo 'conform checks=3 ok=1'\n")
        prog.chmod(0o755)
        settings = runner.Settings(build=self.build, out=self.build / "out", allocators=(),
                                   workloads=(), threads=(1,), repeat=1, quick=True,
                                   baseline="a", fixed_baseline="c", seed=1, command="test",
                                   glibc_shim=None)
        # a preload that ld.so can load (libc itself), so the findings count
        loadable = runner.Allocator("a", "1", "test", "libc.so.6", None, preload_ok=True)
        found = runner.conformance(settings, loadable)
        self.assertEqual(found, {"malloc_huge_enomem": "ok",
                                 "pvalloc_usable_free": "crash: signal-11",
                                 "calloc_overflow_enomem": "fail: errno-0"})
        # one that it cannot: the findings would be glibc's, not the allocator's
        found = runner.conformance(settings, alloc("a", True, False))
        self.assertEqual(list(found), ["tb_conform"])
        self.assertIn("cannot be preloaded", found["tb_conform"])
        # a fixed-heap-only allocator is not preloaded anywhere: no findings
        self.assertEqual(runner.conformance(settings, alloc("c", False, True)), {})

    def test_environment_of_fixed_runs(self) -> None:
        settings = runner.Settings(build=Path("/b"), out=Path("/o"), allocators=(),
                                   workloads=(), threads=(1,), repeat=1, quick=True,
                                   baseline="a", fixed_baseline="c", seed=1, command="test",
                                   glibc_shim=None)
        both = alloc("b", True, True)
        env = runner.program_env(runner.Planned(wl.BY_NAME["x509-fixed"], both, 1, 1), settings)
        self.assertEqual(env, {"LD_PRELOAD": "/b/bench/workloads/x509/libtb_fixed.so",
                               "TB_FIXED_PLUGIN": "/lib/fixed_b.so", "TB_FIXED_HEAP": "64M"})
        self.assertEqual(runner.program_env(runner.Planned(wl.BY_NAME["enclave"], both, 1, 1),
                                            settings), {})
        glibc = runner.Allocator("glibc", "2.36", "system", None, None, preload_ok=True)
        self.assertEqual(runner.program_env(runner.Planned(wl.BY_NAME["larson"], glibc, 1, 1),
                                            settings), {})
        # python: every allocator sees python's objects (not pymalloc's arenas)
        self.assertEqual(runner.program_env(runner.Planned(wl.BY_NAME["python"], glibc, 1, 1),
                                            settings), {"PYTHONMALLOC": "malloc"})
        self.assertEqual(runner.program_env(runner.Planned(wl.BY_NAME["python"], both, 1, 1),
                                            settings),
                         {"PYTHONMALLOC": "malloc", "LD_PRELOAD": "/lib/b.so"})


if __name__ == "__main__":
    unittest.main()


class GitInfoTest(unittest.TestCase):
    """meta.json's git entry: a run's own results do not make the tree dirty."""

    def git(self, repo: Path, *args: str) -> None:
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)

    def test_results_directory_is_not_dirt(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp)
            (repo / "results").mkdir()
            (repo / "src.c").write_text("int x;\n")
            (repo / "results" / "summary.md").write_text("old\n")
            self.git(repo, "init", "-q")
            self.git(repo, "add", ".")
            self.git(repo, "commit", "-q", "-m", "c")
            clean = git_info(repo, results=repo / "results")
            self.assertEqual(clean["dirty"], "no")
            self.assertEqual(len(clean["commit"] or ""), 40)
            (repo / "results" / "summary.md").write_text("new\n")
            self.assertEqual(git_info(repo)["dirty"], "yes")
            self.assertEqual(git_info(repo, results=repo / "results")["dirty"], "no")
            (repo / "src.c").write_text("int y;\n")
            self.assertEqual(git_info(repo, results=repo / "results")["dirty"], "yes")

    def test_results_outside_the_repository(self) -> None:
        """git refuses a pathspec outside the repository: the answer must still come."""
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as out:
            repo = Path(tmp)
            (repo / "src.c").write_text("int x;\n")
            self.git(repo, "init", "-q")
            self.git(repo, "add", ".")
            self.git(repo, "commit", "-q", "-m", "c")
            self.assertEqual(git_info(repo, results=Path(out))["dirty"], "no")
            (repo / "src.c").write_text("int y;\n")
            self.assertEqual(git_info(repo, results=Path(out))["dirty"], "yes")
