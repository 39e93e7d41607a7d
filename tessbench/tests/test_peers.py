"""Tests of tessbench/peers.py: no network, no apt, no real builds.

Run from the repository root::

    .cache/venv/bin/python -m unittest tessbench.tests.test_peers
"""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Optional, Sequence
from unittest import mock

from tessbench import peers
from tessbench.peers import FIXED, PRELOAD, Peer


class TempDirTest(unittest.TestCase):
    """A test with a fresh temporary directory in self.tmp."""

    def setUp(self) -> None:
        holder = tempfile.TemporaryDirectory(prefix="test_peers.")
        self.addCleanup(holder.cleanup)
        self.tmp = Path(holder.name)

    def patch(self, attribute: str, **kwargs: Any) -> Any:
        """mock.patch.object(peers, attribute, ...) for the whole test."""
        patcher = mock.patch.object(peers, attribute, **kwargs)
        self.addCleanup(patcher.stop)
        return patcher.start()

    def touch(self, relative: str, text: str = "") -> Path:
        path = self.tmp / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path


class DebianPeerTest(TempDirTest):
    """debian_peer() against a fake dpkg (versions and file lists)."""

    def fake_dpkg(self, versions: dict[str, str],
                  files: dict[str, list[str]]) -> None:
        self.patch("dpkg_version", side_effect=versions.get)
        self.patch("_dpkg_files", side_effect=lambda p: files.get(p, []))

    def spec(self, name: str) -> peers.DebianPeer:
        return next(s for s in peers.DEBIAN_PEERS if s.name == name)

    def test_tbbmalloc_preloads_the_proxy(self) -> None:
        lib = self.touch("usr/lib/libtbbmalloc.so.2")
        proxy = self.touch("usr/lib/libtbbmalloc_proxy.so.2")
        longer = self.touch("usr/lib/libtbbmalloc_proxy.so.2.8")
        self.fake_dpkg({"libtbbmalloc2": "2021.8.0-2"},
                       {"libtbbmalloc2": [str(self.tmp / "usr"), str(lib),
                                          str(longer), str(proxy)]})
        peer = peers.debian_peer(self.spec("tbbmalloc"))
        self.assertTrue(peer.available)
        self.assertEqual(peer.preload, str(proxy))
        self.assertEqual(peer.version, "2021.8.0-2")
        self.assertEqual(peer.source, "debian:libtbbmalloc2")
        self.assertEqual(peer.kind, PRELOAD)

    def test_tcmalloc_skips_the_debug_library(self) -> None:
        debug = self.touch("lib/libtcmalloc_minimal_debug.so.4")
        lib = self.touch("lib/libtcmalloc_minimal.so.4")
        self.fake_dpkg({"libtcmalloc-minimal4": "2.10-1"},
                       {"libtcmalloc-minimal4": [str(debug), str(lib)]})
        peer = peers.debian_peer(self.spec("tcmalloc"))
        self.assertEqual(peer.preload, str(lib))

    def test_scudo_pattern_crosses_directories(self) -> None:
        spec = peers.DebianPeer(
            "scudo", "libclang-rt-14-dev",
            f"{self.tmp}/llvm-14/*/libclang_rt.scudo_standalone-x86_64.so")
        wanted = self.touch("llvm-14/lib/clang/14.0.6/lib/linux/"
                            "libclang_rt.scudo_standalone-x86_64.so")
        other = self.touch("llvm-14/lib/clang/14.0.6/lib/linux/"
                           "libclang_rt.scudo-x86_64.so")
        self.fake_dpkg({"libclang-rt-14-dev": "1:14.0.6-12"},
                       {"libclang-rt-14-dev": [str(other), str(wanted)]})
        peer = peers.debian_peer(spec)
        self.assertTrue(peer.available)
        self.assertEqual(peer.preload, str(wanted))

    def test_real_scudo_pattern(self) -> None:
        spec = self.spec("scudo")
        self.assertTrue(spec.library_glob.startswith("/usr/lib/llvm-14/"))
        self.assertIn("scudo_standalone", spec.library_glob)

    def test_package_not_installed(self) -> None:
        self.fake_dpkg({}, {})
        peer = peers.debian_peer(self.spec("tcmalloc"))
        self.assertFalse(peer.available)
        self.assertIsNone(peer.preload)
        self.assertIsNone(peer.version)
        self.assertEqual(peer.note, "Debian package libtcmalloc-minimal4 is "
                                    "not installed")

    def test_installed_but_library_gone(self) -> None:
        self.fake_dpkg({"libjemalloc2": "5.3.0-1"},
                       {"libjemalloc2": [str(self.tmp / "libjemalloc.so.2")]})
        peer = peers.debian_peer(self.spec("jemalloc"))
        self.assertFalse(peer.available)
        self.assertIn("has no file matching", peer.note)


class SnmallocPeerTest(TempDirTest):
    """snmalloc_peer() on fake cache directories."""

    def stamp(self, **fields: object) -> None:
        doc: dict[str, object] = {"crate": "snmalloc-sys",
                                  "crate_version": "0.7.6",
                                  "snmalloc_version": None}
        doc.update(fields)
        self.touch("snmalloc/build.json", json.dumps(doc))

    def test_missing(self) -> None:
        peer = peers.snmalloc_peer(self.tmp, "snmalloc")
        self.assertFalse(peer.available)
        self.assertTrue(peer.note.startswith("not built:"), peer.note)
        self.assertIn("--only snmalloc", peer.note)

    def test_built(self) -> None:
        lib = self.touch("snmalloc/libsnmallocshim.so")
        self.stamp()
        peer = peers.snmalloc_peer(self.tmp, "snmalloc")
        self.assertTrue(peer.available)
        self.assertEqual(peer.preload, str(lib.resolve()))
        self.assertEqual(peer.version, "0.7.6")
        self.assertIn("crates.io:snmalloc-sys==0.7.6", peer.source)
        checks = peers.snmalloc_peer(self.tmp, "snmalloc-checks")
        self.assertFalse(checks.available)

    def test_own_version_recorded(self) -> None:
        self.touch("snmalloc/libsnmallocshim-checks.so")
        self.stamp(snmalloc_version="0.7.1")
        peer = peers.snmalloc_peer(self.tmp, "snmalloc-checks")
        self.assertEqual(peer.version, "0.7.6 (snmalloc 0.7.1)")

    def test_other_crate_version(self) -> None:
        self.touch("snmalloc/libsnmallocshim.so")
        self.stamp(crate_version="0.7.5")
        peer = peers.snmalloc_peer(self.tmp, "snmalloc")
        self.assertFalse(peer.available)
        self.assertIn("0.7.5", peer.note)

    def test_source_version(self) -> None:
        up = self.tmp / "upstream"
        self.touch("upstream/CMakeLists.txt", "project(snmalloc CXX)\n")
        self.touch("upstream/src/snmalloc/snmalloc.h", "#pragma once\n")
        self.assertIsNone(peers.snmalloc_source_version(up))
        self.touch("upstream/CMakeLists.txt",
                   "project(snmalloc VERSION 0.7.1 LANGUAGES CXX)\n")
        self.assertEqual(peers.snmalloc_source_version(up), "0.7.1")

    def test_build_skipped_when_built(self) -> None:
        self.touch("snmalloc/libsnmallocshim.so")
        self.touch("snmalloc/libsnmallocshim-checks.so")
        self.stamp()
        with mock.patch.object(peers, "_run") as run:
            self.assertIsNone(peers.build_snmalloc(self.tmp))
        run.assert_not_called()

    def test_build_without_cargo(self) -> None:
        with mock.patch.object(peers, "find_cargo", return_value=None), \
                mock.patch.object(peers, "_run") as run:
            err = peers.build_snmalloc(self.tmp)
        run.assert_not_called()
        self.assertIsNotNone(err)
        self.assertIn("cargo not found", err or "")


class DiscoverTest(TempDirTest):
    """discover_peers(): order, subsets, nothing installed."""

    def test_order_and_subset(self) -> None:
        with mock.patch.object(peers, "dpkg_version", return_value=None), \
                mock.patch.object(peers, "cmeel_version", return_value=None):
            everything = peers.discover_peers(self.tmp)
            some = peers.discover_peers(self.tmp, ["snmalloc", "tcmalloc"])
        self.assertEqual([p.name for p in everything], list(peers.PEER_NAMES))
        self.assertEqual([p.name for p in some], ["tcmalloc", "snmalloc"])
        missing = [p for p in everything if not p.available]
        self.assertTrue(all(p.note for p in missing))
        self.assertTrue(all(p.preload is None for p in missing))

    def test_peer_names_keep_the_old_ones_first(self) -> None:
        self.assertEqual(peers.PEER_NAMES[:4],
                         ("glibc", "jemalloc", "mimalloc2", "mimalloc3"))
        self.assertNotIn("tessalloc", peers.PEER_NAMES)


class FakeRun:
    """Stands in for peers._run: records commands, returns success."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, cmd: Sequence[str], check: bool = True,
                 env: Optional[dict[str, str]] = None,
                 cwd: Optional[Path] = None,
                 timeout: Optional[float] = None
                 ) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(cmd))
        return subprocess.CompletedProcess(list(cmd), 0, "", "")


class InstallTest(TempDirTest):
    """install_debian_packages() and fetch_peers() with apt faked."""

    def setUp(self) -> None:
        super().setUp()
        self.run_ = FakeRun()
        self.patch("_run", new=self.run_)
        self.patch("privileged", side_effect=lambda c: c)
        self.patch("_which", side_effect=lambda n: f"/usr/bin/{n}")
        self.patch("_log")

    def test_nothing_missing_runs_nothing(self) -> None:
        with mock.patch.object(peers, "dpkg_version", return_value="1"):
            self.assertIsNone(peers.install_debian_packages(["a", "b"]))
        self.assertEqual(self.run_.commands, [])

    def test_one_update_one_install(self) -> None:
        installed = {"a": "1"}
        with mock.patch.object(peers, "dpkg_version",
                               side_effect=installed.get):
            self.assertIsNone(
                peers.install_debian_packages(["a", "b", "c", "b"]))
        self.assertEqual(self.run_.commands, [
            ["apt-get", "update"],
            ["apt-get", "install", "-y", "--no-install-recommends", "b", "c"],
        ])

    def test_fetch_installs_all_debian_packages_at_once(self) -> None:
        with mock.patch.object(peers, "dpkg_version", return_value=None), \
                mock.patch.object(peers, "install_mimalloc3",
                                  return_value="no network") as pip, \
                mock.patch.object(peers, "build_snmalloc",
                                  return_value="no cargo") as build:
            result = peers.fetch_peers(self.tmp)
        installs = [c for c in self.run_.commands if "install" in c]
        self.assertEqual(len(installs), 1)
        for spec in peers.DEBIAN_PEERS:
            self.assertIn(spec.package, installs[0])
        self.assertEqual(sum(c == ["apt-get", "update"]
                             for c in self.run_.commands), 1)
        pip.assert_called_once()
        build.assert_called_once()
        notes = {p.name: p.note for p in result}
        self.assertEqual(notes["mimalloc3"], "no network")
        self.assertEqual(notes["snmalloc"], "no cargo")
        self.assertEqual(notes["snmalloc-checks"], "no cargo")

    def test_fetch_only_subset(self) -> None:
        with mock.patch.object(peers, "dpkg_version", return_value=None), \
                mock.patch.object(peers, "install_mimalloc3") as pip, \
                mock.patch.object(peers, "build_snmalloc") as build:
            result = peers.fetch_peers(self.tmp, names=["tcmalloc"])
        pip.assert_not_called()
        build.assert_not_called()
        self.assertEqual([p.name for p in result], ["tcmalloc"])
        installs = [c for c in self.run_.commands if "install" in c]
        self.assertEqual(installs, [["apt-get", "install", "-y",
                                     "--no-install-recommends",
                                     "libtcmalloc-minimal4"]])

    def test_no_install_installs_nothing(self) -> None:
        with mock.patch.object(peers, "dpkg_version", return_value=None), \
                mock.patch.object(peers, "install_mimalloc3") as pip, \
                mock.patch.object(peers, "build_snmalloc") as build:
            peers.fetch_peers(self.tmp, install=False)
        pip.assert_not_called()
        build.assert_not_called()
        self.assertEqual(self.run_.commands, [])


class TessallocTest(TempDirTest):
    """tessalloc_peer() and its version."""

    def test_not_built(self) -> None:
        peer = peers.tessalloc_peer(self.tmp / "build")
        self.assertFalse(peer.available)
        self.assertIsNone(peer.preload)
        self.assertIsNone(peer.version)
        self.assertEqual(peer.note, f"not built: run cmake --build "
                                    f"{self.tmp / 'build'}")

    def test_not_built_in_the_repository(self) -> None:
        with mock.patch.object(peers, "REPO_ROOT", self.tmp):
            peer = peers.tessalloc_peer(self.tmp / "build")
        self.assertEqual(peer.note, "not built: run cmake --build build")

    def test_built_version_from_the_library(self) -> None:
        lib = self.touch("build/libtessalloc.so")
        info = {"malloc_from": str(lib), "version": "tessalloc 0.1.0"}
        with mock.patch.object(peers, "probe_preload",
                               return_value=(info, None)) as probe:
            peer = peers.tessalloc_peer(self.tmp / "build")
        probe.assert_called_once_with(str(lib.resolve()))
        self.assertTrue(peer.available)
        self.assertEqual(peer.version, "0.1.0")
        self.assertEqual(peer.preload, str(lib.resolve()))

    def test_version_fallback_from_cmake_cache(self) -> None:
        self.touch("build/sub/libtessalloc.so.0")
        self.touch("build/CMakeCache.txt",
                   "CMAKE_PROJECT_VERSION:STATIC=9.8.7\n")
        with mock.patch.object(peers, "probe_preload",
                               return_value=({}, None)):
            peer = peers.tessalloc_peer(self.tmp / "build")
        self.assertTrue(peer.available)
        self.assertEqual(peer.version, "9.8.7")
        self.assertIn("CMakeCache.txt", peer.note)

    def test_library_that_does_not_load(self) -> None:
        self.touch("build/libtessalloc.so")
        with mock.patch.object(peers, "probe_preload",
                               return_value=({}, "exited with 127")):
            peer = peers.tessalloc_peer(self.tmp / "build")
        self.assertFalse(peer.available)
        self.assertEqual(peer.note, "exited with 127")

    def test_header_version(self) -> None:
        version = peers._header_version()
        self.assertIsNotNone(version)
        self.assertRegex(version or "", r"^\d+\.\d+\.\d+$")


class FixedPeersTest(TempDirTest):
    """fixed_peers() on a sample build_peers.py peers.json."""

    def write_sample(self) -> Path:
        build = self.tmp / "build"
        dl = self.touch("build/enclave-peers/libfixed_dlmalloc.so")
        self.touch("build/enclave-peers/libfixed_mimalloc3.so")
        doc = {
            "generated": "2026-01-01T00:00:00+00:00",
            "build_dir": str(build / "enclave-peers"),
            "peers": [
                {"name": "dlmalloc", "status": "ok", "path": str(dl),
                 "version": "0.2.10", "source": "crates.io:dlmalloc==0.2.10",
                 "reason": "", "check": "pass", "notes": ["one lock"]},
                {"name": "snmalloc", "status": "missing", "path": None,
                 "version": "0.7.6", "source": "crates.io:snmalloc-sys==0.7.6",
                 "reason": "'g++ -std=c++20 ...' failed (exit 1):\nerror"},
                {"name": "mimalloc3", "status": "ok",
                 "path": "libfixed_mimalloc3.so", "version": "3.4.3",
                 "source": "pypi:cmeel-mimalloc==3.4.3"},
            ],
        }
        self.touch("build/enclave-peers/peers.json", json.dumps(doc))
        return build

    def test_sample(self) -> None:
        build = self.write_sample()
        result = peers.fixed_peers(build)
        self.assertEqual([p.name for p in result],
                         ["tessalloc", "dlmalloc", "snmalloc", "mimalloc3"])
        self.assertTrue(all(p.kind == FIXED for p in result))
        self.assertTrue(all(p.preload is None for p in result))
        by_name = {p.name: p for p in result}
        self.assertFalse(by_name["tessalloc"].available)
        self.assertIn("--target fixed_tessalloc", by_name["tessalloc"].note)
        dl = by_name["dlmalloc"]
        self.assertTrue(dl.available)
        self.assertEqual(dl.version, "0.2.10")
        self.assertEqual(dl.plugin, str((build / "enclave-peers" /
                                         "libfixed_dlmalloc.so").resolve()))
        self.assertEqual(dl.library, dl.plugin)
        sn = by_name["snmalloc"]
        self.assertFalse(sn.available)
        self.assertEqual(sn.note, "'g++ -std=c++20 ...' failed (exit 1):")
        mi = by_name["mimalloc3"]  # relative path: next to peers.json
        self.assertTrue(mi.available)
        self.assertTrue((mi.plugin or "").endswith("libfixed_mimalloc3.so"))

    def test_tessalloc_plugin(self) -> None:
        build = self.write_sample()
        plugin = self.touch("build/bench/enclave/libfixed_tessalloc.so")
        self.touch("build/CMakeCache.txt",
                   "CMAKE_PROJECT_VERSION:STATIC=0.1.0\n")
        tess = peers.fixed_peers(build)[0]
        self.assertTrue(tess.available)
        self.assertEqual(tess.plugin, str(plugin.resolve()))
        self.assertEqual(tess.version, "0.1.0")

    def test_listed_plugin_gone(self) -> None:
        build = self.write_sample()
        (build / "enclave-peers" / "libfixed_dlmalloc.so").unlink()
        dl = next(p for p in peers.fixed_peers(build) if p.name == "dlmalloc")
        self.assertFalse(dl.available)
        self.assertIn("does not exist", dl.note)

    def test_no_peers_json(self) -> None:
        result = peers.fixed_peers(self.tmp / "build")
        self.assertEqual([p.name for p in result],
                         ["tessalloc", *peers.FIXED_PEER_NAMES])
        for peer in result[1:]:
            self.assertFalse(peer.available)
            self.assertIn("not found", peer.note)
            self.assertIn("build_peers.py", peer.note)

    def test_broken_peers_json(self) -> None:
        self.touch("build/enclave-peers/peers.json", "{not json")
        result = peers.fixed_peers(self.tmp / "build")
        self.assertTrue(all("cannot read" in p.note for p in result[1:]))


class JsonTest(TempDirTest):
    """write_peers_json / read_peers_json and the table."""

    sample = [
        Peer("glibc", True, None, "2.36", "system C library"),
        Peer("tcmalloc", False, None, None, "debian:libtcmalloc-minimal4",
             "Debian package libtcmalloc-minimal4 is not installed"),
        Peer("snmalloc", True, "/x/libsnmallocshim.so", "0.7.6",
             "crates.io:snmalloc-sys==0.7.6"),
        Peer("dlmalloc", True, None, "0.2.10", "crates.io:dlmalloc",
             kind=FIXED, plugin="/b/libfixed_dlmalloc.so"),
    ]

    def test_round_trip(self) -> None:
        path = self.tmp / "out" / "peers.json"
        peers.write_peers_json(self.sample, path)
        self.assertEqual(peers.read_peers_json(path), self.sample)
        doc = json.loads(path.read_text())
        self.assertIn("generated", doc)
        self.assertEqual(doc["peers"][3]["kind"], "fixed")
        self.assertEqual(doc["peers"][3]["plugin"], "/b/libfixed_dlmalloc.so")

    def test_reads_the_old_format(self) -> None:
        path = self.touch("old.json", json.dumps({"peers": [
            {"name": "jemalloc", "available": True,
             "preload": "/usr/lib/libjemalloc.so.2", "version": "5.3.0-1",
             "source": "debian:libjemalloc2", "note": "", "extra": 1}]}))
        (peer,) = peers.read_peers_json(path)
        self.assertEqual(peer.kind, PRELOAD)
        self.assertIsNone(peer.plugin)
        self.assertEqual(peer.library, "/usr/lib/libjemalloc.so.2")

    def test_merge_keeps_other_entries(self) -> None:
        path = self.tmp / "peers.json"
        peers.write_peers_json(self.sample, path)
        newer = Peer("tcmalloc", True, "/usr/lib/libtcmalloc_minimal.so.4",
                     "2.10-1", "debian:libtcmalloc-minimal4")
        peers.write_peers_json([newer], path, merge=True)
        got = peers.read_peers_json(path)
        self.assertEqual(got[0], newer)
        self.assertEqual(len(got), len(self.sample))
        peers.write_peers_json([newer], path)
        self.assertEqual(peers.read_peers_json(path), [newer])

    def test_table(self) -> None:
        lines = peers.format_peers(self.sample).splitlines()
        self.assertEqual(lines[0].split(),
                         ["name", "kind", "status", "version", "library",
                          "reason"])
        self.assertIn("(none: default malloc)", lines[1])
        self.assertIn("MISSING", lines[2])
        self.assertIn("is not installed", lines[2])
        self.assertIn("/b/libfixed_dlmalloc.so", lines[4])
        self.assertIn("fixed", lines[4])
        self.assertTrue(all(line == line.rstrip() for line in lines))


class CommandLineTest(TempDirTest):
    """main() with --no-install and --only; nothing installed."""

    def test_parse_only(self) -> None:
        self.assertIsNone(peers.parse_only(None))
        self.assertEqual(peers.parse_only("scudo, tessalloc,dlmalloc"),
                         ["scudo", "tessalloc", "dlmalloc"])
        with self.assertRaises(ValueError):
            peers.parse_only("scudo,nosuch")
        with self.assertRaises(ValueError):
            peers.parse_only(",")

    def test_no_install_only(self) -> None:
        out, err = io.StringIO(), io.StringIO()
        json_path = self.tmp / "peers.json"
        with mock.patch.object(peers, "dpkg_version", return_value=None), \
                mock.patch.object(peers, "install_debian_packages") as apt, \
                mock.patch.object(peers, "build_snmalloc") as build, \
                redirect_stdout(out), redirect_stderr(err):
            code = peers.main(["--no-install", "--cache", str(self.tmp),
                               "--build", str(self.tmp / "build"),
                               "--json", str(json_path),
                               "--only", "tcmalloc,snmalloc,tessalloc",
                               "--strict"])
        apt.assert_not_called()
        build.assert_not_called()
        self.assertEqual(code, 1)  # tcmalloc, snmalloc missing
        got = peers.read_peers_json(json_path)
        self.assertEqual([(p.name, p.kind) for p in got],
                         [("tessalloc", PRELOAD), ("tcmalloc", PRELOAD),
                          ("snmalloc", PRELOAD), ("tessalloc", FIXED),
                          ("snmalloc", FIXED)])
        self.assertIn("not built: run cmake --build", out.getvalue())
        self.assertIn("missing", err.getvalue())

    def test_unknown_name(self) -> None:
        with redirect_stderr(io.StringIO()), \
                self.assertRaises(SystemExit) as exit_:
            peers.main(["--no-install", "--only", "nosuch"])
        self.assertEqual(exit_.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
