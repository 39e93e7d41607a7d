"""The command line: which allocators it offers, and what `peers` prints."""

from __future__ import annotations

import io
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

from tessbench import cli, runner
from tessbench import workloads as wl
from tessbench.benchlib import REPO_ROOT
from tessbench.peers import FIXED, Peer


def preload(name: str, available: bool = True) -> Peer:
    return Peer(name, available, f"/lib/{name}.so" if available else None,
                "1.0" if available else None, f"src:{name}",
                "" if available else f"{name} is not installed")


def fixed(name: str, available: bool = True) -> Peer:
    return Peer(name, available, None, "2.0", f"fixed:{name}",
                "" if available else "not built", kind=FIXED,
                plugin=f"/b/libfixed_{name}.so" if available else None)


class AllocatorsTest(unittest.TestCase):
    def setUp(self) -> None:
        patches = [
            mock.patch("tessbench.peers.discover_peers", return_value=[
                Peer("glibc", True, None, "2.36", "system"), preload("jemalloc"),
                preload("snmalloc"), preload("scudo", available=False)]),
            mock.patch("tessbench.peers.tessalloc_peer", return_value=preload("tessalloc")),
            mock.patch("tessbench.peers.fixed_peers", return_value=[
                fixed("tessalloc"), fixed("dlmalloc"), fixed("snmalloc"),
                fixed("mimalloc3", available=False)]),
        ]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def test_preload_and_fixed_combined(self) -> None:
        found, notes = cli.allocators(Path("/b"), Path("/c"))
        by_name = {a.name: a for a in found}
        self.assertEqual(list(by_name), ["glibc", "jemalloc", "snmalloc", "tessalloc",
                                         "dlmalloc"])
        self.assertEqual((by_name["snmalloc"].preload, by_name["snmalloc"].plugin),
                         ("/lib/snmalloc.so", "/b/libfixed_snmalloc.so"))
        self.assertIsNone(by_name["jemalloc"].plugin)
        self.assertFalse(by_name["dlmalloc"].preload_ok)  # fixed heap only
        self.assertEqual(by_name["dlmalloc"].plugin, "/b/libfixed_dlmalloc.so")
        self.assertTrue(by_name["glibc"].preload_ok)
        self.assertIsNone(by_name["glibc"].preload)
        # what is missing is said, not faked
        self.assertIn("scudo: scudo is not installed", notes)
        self.assertIn("mimalloc3 (fixed heap): not built", notes)

    def test_peers_lists_versions_and_what_is_missing(self) -> None:
        out = io.StringIO()
        with redirect_stdout(out):
            code = cli.main(["peers", "--build", "/b"])
        self.assertEqual(code, 0)
        lines = out.getvalue().splitlines()
        self.assertRegex(lines[0], r"^allocator\s+process-wide\s+fixed heap")
        row = next(line.split() for line in lines if line.startswith("snmalloc "))
        self.assertEqual(row[:4], ["snmalloc", "yes", "yes", "1.0"])
        row = next(line.split() for line in lines if line.startswith("dlmalloc "))
        self.assertEqual(row[:4], ["dlmalloc", "-", "yes", "2.0"])
        self.assertIn("missing: scudo: scudo is not installed", lines)

    def test_default_threads(self) -> None:
        self.assertEqual(cli.default_threads(1), "1,2,4,8")
        self.assertEqual(cli.default_threads(2), "1,2,4,8")
        self.assertEqual(cli.default_threads(6), "1,2,4,8")
        self.assertEqual(cli.default_threads(8), "1,2,4,8,16")
        self.assertEqual(cli.default_threads(64), "1,2,4,8,16,32,64,128")

    def test_run_rejects_unknown_names(self) -> None:
        with mock.patch("tessbench.runner.run_all") as run_all, \
                redirect_stderr(io.StringIO()):
            self.assertEqual(cli.main(["run", "--build", "/b", "--allocators", "nope"]), 2)
            self.assertEqual(cli.main(["run", "--build", "/b", "--workloads", "nope"]), 2)
            with self.assertRaises(SystemExit) as exit_:
                cli.main(["run", "--build", "/b", "--threads", "0"])
            self.assertEqual(exit_.exception.code, 2)
            run_all.assert_not_called()

    def test_plugin_only_allocator_describes_its_plugin(self) -> None:
        """snmalloc without its preload library: the version and source of what runs."""
        with mock.patch("tessbench.peers.discover_peers", return_value=[
                Peer("glibc", True, None, "2.36", "system"), preload("snmalloc", False)]):
            found, notes = cli.allocators(Path("/b"), Path("/c"))
        snmalloc = next(a for a in found if a.name == "snmalloc")
        self.assertFalse(snmalloc.preload_ok)
        self.assertEqual((snmalloc.version, snmalloc.source), ("2.0", "fixed:snmalloc"))
        self.assertIn("snmalloc: preload workloads skipped: snmalloc is not installed", notes)
        # and the skipped pairs say why: its library is missing, not that it has none
        larson = runner.why_not(wl.BY_NAME["larson"], snmalloc, Path("/b"))
        self.assertEqual(larson, "process-wide library missing: snmalloc is not installed")
        dlmalloc = next(a for a in found if a.name == "dlmalloc")
        self.assertIn("fixed-heap only",
                      runner.why_not(wl.BY_NAME["larson"], dlmalloc, Path("/b")) or "")

    def test_peers_cache_is_relative_to_the_repository(self) -> None:
        with mock.patch("tessbench.peers.discover_peers", return_value=[]) as discover, \
                redirect_stdout(io.StringIO()):
            self.assertEqual(cli.main(["peers", "--peers-cache", "elsewhere/peers"]), 0)
        discover.assert_called_once_with(REPO_ROOT / "elsewhere" / "peers")
        with mock.patch("tessbench.peers.fetch_peers") as fetch, \
                mock.patch.object(cli, "install_fixed_peers"), redirect_stdout(io.StringIO()):
            cli.main(["peers", "--install", "--peers-cache", "p", "--build", "/b"])
        fetch.assert_called_once_with(REPO_ROOT / "p")

    def test_help_says_where_paths_are_from(self) -> None:
        out = io.StringIO()
        with redirect_stdout(out), self.assertRaises(SystemExit):
            cli.main(["run", "--help"])
        text = " ".join(out.getvalue().split())
        self.assertIn("results directory (default: tessbench-out)", text)
        self.assertIn("with the workloads, relative to the repository", text)
        self.assertIn("peers are installed, relative to the repository", text)


def log_lines(err: io.StringIO) -> list[str]:
    """tessbench's own lines on stderr (the 'not available' notes left out)."""
    return [line for line in err.getvalue().splitlines()
            if not line.startswith("tessbench: not available")]


class RunCommandTest(unittest.TestCase):
    """``tessbench run``'s answers to what it cannot do: rc 2 (or 130), one line, no traceback."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.build = self.tmp / "build"
        for path in (runner.rusage_run_path(self.build),
                     wl.program_path(self.build, wl.BY_NAME["larson"])):
            assert path is not None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        patches = [
            mock.patch("tessbench.peers.discover_peers", return_value=[
                Peer("glibc", True, None, "2.36", "system"), preload("jemalloc")]),
            mock.patch("tessbench.peers.tessalloc_peer", return_value=preload("tessalloc")),
            mock.patch("tessbench.peers.fixed_peers", return_value=[fixed("dlmalloc")]),
            mock.patch("tessbench.runner.git_info",
                       return_value={"commit": None, "dirty": None}),
        ]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def run_cli(self, *args: str) -> tuple[int, list[str]]:
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = cli.main(["run", "--build", str(self.build), "--quick", "--repeat", "1",
                             "--threads", "1", "--workloads", "larson", "--no-report", *args])
        return code, log_lines(err)

    def test_ctrl_c(self) -> None:
        with mock.patch("tessbench.runner.run_all", side_effect=KeyboardInterrupt):
            code, lines = self.run_cli("--out", str(self.tmp / "out"))
        self.assertEqual(code, 130)
        self.assertEqual(lines, ["tessbench: interrupted"])

    def test_out_not_a_directory(self) -> None:
        afile = self.tmp / "afile"
        afile.write_text("mine\n")
        for out in (afile, afile / "sub"):
            with self.subTest(out=out):
                code, lines = self.run_cli("--out", str(out), "--allocators", "glibc")
                self.assertEqual(code, 2)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(str(out), lines[0])
        self.assertEqual(afile.read_text(), "mine\n")

    def test_disk_full_names_the_path(self) -> None:
        """A write that fails names no file: the line gives the results
        directory, and no temporary file is left (a review)."""
        out = self.tmp / "out"
        real = Path.write_text

        def full(path: Path, *args: object, **kwargs: object) -> int:
            if path.name.endswith(".tmp"):
                real(path, "partial")
                raise OSError(28, "No space left on device")
            return real(path, *args, **kwargs)  # type: ignore[arg-type]

        with mock.patch.object(Path, "write_text", full):
            code, lines = self.run_cli("--out", str(out), "--allocators", "glibc")
        self.assertEqual(code, 2)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(str(out / "meta.json"), lines[0])
        self.assertIn("No space left on device", lines[0])
        self.assertEqual([p.name for p in out.glob("*.tmp")], [])

    def test_nothing_to_run(self) -> None:
        out = self.tmp / "out"
        out.mkdir()
        (out / "runs.csv").write_text("earlier\n")
        for allocators in (",", "dlmalloc"):  # none chosen; every pair skipped
            with self.subTest(allocators=allocators):
                code, lines = self.run_cli("--out", str(out), "--allocators", allocators)
                self.assertEqual(code, 2)
                self.assertIn("nothing to run", lines[-1])
                self.assertEqual(sorted(p.name for p in out.iterdir()), ["runs.csv"])
                self.assertEqual((out / "runs.csv").read_text(), "earlier\n")

    def test_baselines_must_be_chosen(self) -> None:
        with mock.patch("tessbench.runner.run_all") as run_all:
            code, lines = self.run_cli("--allocators", "glibc,jemalloc", "--baseline", "glbc")
            self.assertEqual((code, len(lines)), (2, 1))
            self.assertIn("--baseline glbc", lines[0])
            code, lines = self.run_cli("--allocators", "glibc", "--fixed-baseline", "dlmalloc")
            self.assertEqual(code, 2)
            self.assertIn("--fixed-baseline dlmalloc", lines[0])
            run_all.assert_not_called()
            # the defaults need not be chosen: their ratios are then absent
            run_all.return_value = (self.tmp / "runs.csv", 0)
            code, _ = self.run_cli("--allocators", "jemalloc", "--out", str(self.tmp / "o"))
            self.assertEqual(code, 0)
            settings = run_all.call_args.args[0]
            self.assertEqual((settings.baseline, settings.fixed_baseline),
                             ("glibc", "dlmalloc"))

    def test_threads_error_names_the_option(self) -> None:
        err = io.StringIO()
        with redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
            cli.main(["run", "--threads", "a"])
        self.assertEqual(exit_.exception.code, 2)
        self.assertIn("argument --threads", err.getvalue())
        self.assertNotIn("invalid literal", err.getvalue())
        self.assertEqual(cli.thread_counts("4,1,2,1"), (1, 2, 4))

    def test_values_the_programs_refuse_are_refused_before_the_run(self) -> None:
        # (the programs refused them only after the old results were replaced)
        for args in (["--threads", "5000"], ["--seed", "-3"], ["--seed", "x"],
                     ["--seed", str(2**64)]):
            err = io.StringIO()
            with redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
                cli.main(["run", *args])
            self.assertEqual(exit_.exception.code, 2, args)
            self.assertIn(f"argument {args[0]}", err.getvalue())
        self.assertEqual(cli.thread_counts("4096"), (4096,))
        self.assertEqual(cli.seed_value("0"), 0)


class ResultsCommandTest(unittest.TestCase):
    """``tessbench plot`` and ``report`` on results they cannot read: rc 2, one line."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.out = Path(tmp.name)
        (self.out / "runs.csv").write_text(
            "workload,allocator,threads,repetition,status,elapsed_s,ops,ops_per_s\n"
            "larson,glibc,1,1,ok,1.0,10,10.0\n")
        (self.out / "meta.json").write_text('{"baseline": "glibc"}\n')

    def run_cli(self, *args: str) -> tuple[int, list[str]]:
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            code = cli.main([*args, "--out", str(self.out)])
        return code, log_lines(err)

    def assert_refused(self, path: Path, *extra: str) -> None:
        for command in ("plot", "report"):
            with self.subTest(command=command, path=path.name):
                code, lines = self.run_cli(command, *extra)
                self.assertEqual(code, 2)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn(str(path), lines[0])

    def test_garbage_meta_json(self) -> None:
        (self.out / "meta.json").write_text("garbage {\n")
        self.assert_refused(self.out / "meta.json")

    def test_runs_csv_with_bad_columns(self) -> None:
        runs = self.out / "runs.csv"
        runs.write_text("a,b\n1,2\n")
        self.assert_refused(runs)
        runs.write_text("workload,allocator,threads,repetition,status\nlarson,glibc,x,1,ok\n")
        self.assert_refused(runs)
        runs.write_bytes(b"\xff\xfe\x00\n")
        self.assert_refused(runs)

    def test_baseline_without_runs(self) -> None:
        self.assert_refused(self.out / "runs.csv", "--baseline", "glbc")


class WorkloadsCommandTest(unittest.TestCase):
    def test_redis_not_installed_is_not_ready(self) -> None:
        out = io.StringIO()
        with mock.patch("tessbench.realprogs.missing", return_value="not installed: redis"), \
                redirect_stdout(out):
            self.assertEqual(cli.main(["workloads", "--build", "/nonexistent"]), 0)
        line = next(line for line in out.getvalue().splitlines() if line.startswith("redis "))
        self.assertIn("not installed: redis", line)
        self.assertNotIn("ready", line)


if __name__ == "__main__":
    unittest.main()
