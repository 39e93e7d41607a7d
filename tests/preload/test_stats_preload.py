"""Statistics through the preloaded library, in a real program (python3).

    test_stats_preload.py --lib build/libtessalloc.so

- TESS_STATS=json: the report printed at exit validates against
  docs/stats.schema.json and adds up (totals = classes + large + huge,
  frees <= allocs, slab bytes >= live slab bytes);
- TESS_STATS=1: the table names its columns and the size classes in use;
- TESS_STATS_INTERVAL_MS + TESS_STATS_FILE: a series of JSON lines, one
  per interval, with growing time_ms; a TESS_STATS_FILE that cannot be
  opened is said once, and the report goes to standard error;
- mallinfo2() and malloc_info() called through ctypes: malloc_info's XML
  parses and has glibc's shape, and mallinfo2 agrees with it.

Needs the jsonschema package (scripts/test.sh installs it in .cache/venv);
without it the test fails rather than skips.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "stats.schema.json").read_text())
LIB = ""

# Allocates and frees a mix of sizes, keeping some alive at exit.
WORKLOAD = """
import os
import random
random.seed(7)
keep = []
for i in range(200000):
    n = random.choice((8, 40, 200, 1500, 9000, 70000))
    b = bytearray(n)
    if i % 97 == 0:
        keep.append(b)
print(len(keep), os.getpid())
"""

INFO_PROBE = """
import ctypes, ctypes.util, json, sys
libc = ctypes.CDLL(None)
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
keep = [bytearray(300) for _ in range(10000)]
info = libc.mallinfo2()
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
fp = libc.fopen(sys.argv[1].encode(), b"w")
rc = libc.malloc_info(0, fp)
bad = libc.malloc_info(1, fp)
libc.fclose(fp)
print(json.dumps({"rc": rc, "bad": bad, "arena": info.arena, "uordblks": info.uordblks,
                  "fordblks": info.fordblks, "hblkhd": info.hblkhd}))
"""


def run_python(code: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # PYTHONMALLOC=malloc: small objects too go to malloc, not pymalloc's arenas
    full = dict(os.environ, LD_PRELOAD=LIB, PYTHONMALLOC="malloc", **env)
    return subprocess.run([sys.executable, "-c", code, *args], env=full, text=True,
                          capture_output=True, timeout=120, check=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def own_reports(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The JSON lines the workload's own process wrote (its pid is the last
    word of its output; helpers it runs print reports too)."""
    pid = int(proc.stdout.split()[-1])
    return [r for r in json_lines(proc.stderr) if r.get("pid") == pid]


class StatsPreload(unittest.TestCase):
    def check_consistent(self, report: dict[str, Any]) -> None:
        jsonschema.validate(report, SCHEMA)
        classes = report["classes"]
        self.assertTrue(classes, "no size class in use")
        class_live = sum(c["live_bytes"] for c in classes)
        self.assertEqual(report["live_bytes"],
                         class_live + report["large"]["live_bytes"] + report["huge"]["live_bytes"])
        self.assertEqual(report["slab_bytes"], sum(c["slab_bytes"] for c in classes))
        self.assertEqual(report["allocs"], sum(c["allocs"] for c in classes)
                         + report["large"]["allocs"] + report["huge"]["allocs"])
        self.assertLessEqual(report["frees"], report["allocs"])
        self.assertGreaterEqual(report["slab_bytes"], class_live)
        self.assertGreaterEqual(report["peak_footprint"], report["footprint"])
        self.assertGreaterEqual(report["peak_live_bytes"], report["live_bytes"])
        for c in classes:
            self.assertEqual(c["live_blocks"], c["allocs"] - c["frees"])
            self.assertEqual(c["live_bytes"], c["live_blocks"] * c["block_size"])
            self.assertGreaterEqual(c["peak_live_bytes"], c["live_bytes"])
        self.assertGreater(report["allocs"], 200000)  # the workload's, at least
        # read at exit, nothing in flight: the slab bytes not in live
        # blocks are exactly those the census found, holder by holder
        free = report["slab_free"]
        self.assertEqual(free["current"] + free["held"] + free["orphaned"] + free["pending"],
                         report["slab_bytes"] - class_live)
        self.assertGreater(free["current"], 0)  # the main thread's heap
        if report["mode"] == "os":
            self.assertEqual(free["orphaned"], 0)
            self.assertEqual(sum(c["orphaned_slabs"] for c in classes), 0)

    def test_json_at_exit(self) -> None:
        proc = run_python(WORKLOAD, {"TESS_STATS": "json"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        reports = own_reports(proc)
        self.assertEqual(len(reports), 1, proc.stderr[-2000:])
        self.check_consistent(reports[0])
        self.assertEqual(reports[0]["mode"], "os")

    def test_json_at_exit_fixed_mode(self) -> None:
        proc = run_python(WORKLOAD, {"TESS_STATS": "json", "TESS_HEAP_SIZE": "256M"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        reports = own_reports(proc)
        self.assertEqual(len(reports), 1, proc.stderr[-2000:])
        self.check_consistent(reports[0])
        self.assertEqual(reports[0]["mode"], "fixed")
        self.assertEqual(reports[0]["region_bytes"], 256 << 20)

    def test_unwritable_file_falls_back_to_stderr(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / "no-such-dir" / "stats.json"
            proc = run_python(WORKLOAD, {"TESS_STATS": "json",
                                         "TESS_STATS_FILE": str(missing)})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("tessalloc: TESS_STATS_FILE: cannot be opened", proc.stderr)
        reports = own_reports(proc)
        self.assertEqual(len(reports), 1, proc.stderr[-2000:])
        self.check_consistent(reports[0])

    def test_table_at_exit(self) -> None:
        proc = run_python(WORKLOAD, {"TESS_STATS": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("statistics (OS mode)", proc.stderr)
        self.assertRegex(proc.stderr, r"block\s+allocs\s+frees\s+live")
        self.assertRegex(proc.stderr, r"\n\s+48\s+\d+")  # 40-byte bytearrays' class

    def test_series(self) -> None:
        for mode_env in ({}, {"TESS_HEAP_SIZE": "256M"}):
            with tempfile.TemporaryDirectory() as tmp:
                series = Path(tmp) / "series.jsonl"
                env = {"TESS_STATS_INTERVAL_MS": "20", "TESS_STATS_FILE": str(series),
                       **mode_env}
                proc = run_python(WORKLOAD, env)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                pid = int(proc.stdout.split()[-1])
                lines = [x for x in json_lines(series.read_text()) if x["pid"] == pid]
                self.assertGreaterEqual(len(lines), 3, f"{mode_env}: {len(lines)} lines")
                times = [line["time_ms"] for line in lines]
                self.assertEqual(times, sorted(times))
                for line in lines:
                    jsonschema.validate(line, SCHEMA)

    def test_mallinfo_and_malloc_info(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            xml_path = Path(tmp) / "info.xml"
            proc = run_python(INFO_PROBE, {}, str(xml_path))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            info = json.loads(proc.stdout)
            self.assertEqual(info["rc"], 0)
            self.assertEqual(info["bad"], errno.EINVAL)  # options must be 0, as glibc answers
            self.assertGreaterEqual(info["uordblks"], 10000 * 300)
            self.assertGreaterEqual(info["arena"], info["uordblks"])
            root = ET.parse(xml_path).getroot()
        self.assertEqual(root.tag, "malloc")
        self.assertEqual(root.get("version"), "1")
        heap = root.find("heap")
        assert heap is not None
        self.assertEqual(heap.get("nr"), "0")
        sizes = heap.find("sizes")
        assert sizes is not None
        for size in sizes.findall("size"):
            self.assertLessEqual(int(size.get("from", "0")), int(size.get("to", "0")))
            self.assertGreater(int(size.get("count", "0")), 0)
        totals = {t.get("type"): t for t in root.findall("total")}
        self.assertEqual(set(totals), {"fast", "rest", "mmap"})
        systems = {s.get("type"): int(s.get("size", "-1")) for s in root.findall("system")}
        self.assertGreaterEqual(systems["max"], systems["current"])
        self.assertGreaterEqual(systems["current"], info["uordblks"])


def main() -> None:
    global LIB
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True, help="libtessalloc.so to preload")
    args, rest = parser.parse_known_args()
    LIB = str(Path(args.lib).resolve())
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
