"""The command line: which allocators it offers, and what `peers` prints."""

from __future__ import annotations

import io
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

from tessbench import cli
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
            self.assertEqual(cli.main(["run", "--build", "/b", "--threads", "0"]), 2)
            run_all.assert_not_called()


if __name__ == "__main__":
    unittest.main()
