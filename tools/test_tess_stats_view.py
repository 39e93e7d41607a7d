#!/usr/bin/env python3
"""Tests of docs/stats.schema.json and tools/tess_stats_view.py.

    .cache/venv/bin/python -m unittest tools/test_tess_stats_view.py
    .cache/venv/bin/python tools/test_tess_stats_view.py

Needs matplotlib and jsonschema (pip install matplotlib jsonschema); without
jsonschema the schema tests fail (they are not skipped).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import struct
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

try:
    import jsonschema
    JSONSCHEMA_ERROR = ""
except ImportError as _exc:  # reported by every schema test as a failure
    JSONSCHEMA_ERROR = f"{_exc} (pip install jsonschema)"

HERE = Path(__file__).resolve().parent
SCHEMA_PATH = HERE.parent / "docs" / "stats.schema.json"

sys.path.insert(0, str(HERE))
import tess_stats_view as view  # noqa: E402  (beside this file)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: A line the allocator wrote (TESS_STATS=json at exit: no time_ms).
REAL_LINE = (
    '{"tessalloc":"0.1.0","version":1,"mode":"os","footprint":184320,'
    '"peak_footprint":184320,"region_bytes":68719476736,"committed":184320,'
    '"decommitted":0,"heaps_in_use":1,"heaps_pooled":0,"allocs":1001,'
    '"frees":500,"live_bytes":126400,"slab_bytes":65536,'
    '"peak_live_bytes":150400,"requested_live_bytes":0,'
    '"fragmentation":0.6338,"large":{"allocs":1,"frees":0,"live":1,'
    '"live_bytes":102400},"huge":{"allocs":0,"frees":0,"live":0,'
    '"live_bytes":0},"classes":[{"class":2,"block_size":48,"slab_pages":16,'
    '"allocs":1000,"frees":500,"live_blocks":500,"live_bytes":24000,'
    '"slabs":1,"slab_bytes":65536,"peak_live_bytes":48000,'
    '"fragmentation":0.6338}]}')


def span(allocs: int, frees: int, size: int) -> dict[str, int]:
    live = allocs - frees
    return {"allocs": allocs, "frees": frees, "live": live,
            "live_bytes": live * size}


def size_class(index: int, block_size: int, slab_pages: int, allocs: int,
               frees: int, slabs: int) -> dict[str, Any]:
    live = allocs - frees
    slab_bytes = slabs * slab_pages * 4096
    frag = 0.0 if slab_bytes == 0 else 1 - live * block_size / slab_bytes
    return {"class": index, "block_size": block_size,
            "slab_pages": slab_pages, "allocs": allocs, "frees": frees,
            "live_blocks": live, "live_bytes": live * block_size,
            "slabs": slabs, "slab_bytes": slab_bytes, "orphaned_slabs": 0,
            "peak_live_bytes": allocs * block_size,
            "fragmentation": round(frag, 4)}


def sample(step: int) -> dict[str, Any]:
    """Line step (0, 1, 2) of a synthetic interval series."""
    classes = [size_class(0, 16, 1, 200 * (step + 1), 100 * step, step + 1),
               size_class(2, 48, 16, 1000 * (step + 1), 900 * step, step + 1),
               size_class(9, 1024, 16, 50, 50 if step == 2 else 0, 1)]
    live = sum(c["live_bytes"] for c in classes)
    slab_bytes = sum(c["slab_bytes"] for c in classes)
    large = span(step + 1, step, 102400)
    footprint = slab_bytes + (step + 1) * 102400 + 16384
    return {
        "tessalloc": "0.1.0", "version": 3, "time_ms": 500 * step,
        "mode": "os", "footprint": footprint,
        "peak_footprint": footprint, "region_bytes": 1 << 36,
        "committed": footprint, "decommitted": 0, "heaps_in_use": 1,
        "heaps_pooled": 0,
        "allocs": sum(c["allocs"] for c in classes) + large["allocs"],
        "frees": sum(c["frees"] for c in classes) + large["frees"],
        "live_bytes": live + large["live_bytes"], "slab_bytes": slab_bytes,
        "peak_live_bytes": live + large["live_bytes"],
        "requested_live_bytes": 0,
        "fragmentation": round(1 - live / slab_bytes, 4),
        "slab_free": {"current": slab_bytes - live, "held": 0, "orphaned": 0, "pending": 0},
        "empty_slab_bytes": 0, "kept_span_bytes": 0, "deferred_span_bytes": 0,
        "large": large, "huge": span(0, 0, 0),
        "span_trips": {"all": step + 1, "narrow": 0, "busy": 0, "widenings": 0},
        "classes": classes}


def holder_of(line: dict[str, Any], path: tuple[Any, ...]) -> Any:
    """The object or list that holds the last key of path in line."""
    target: Any = line
    for key in path[:-1]:
        target = target[key]
    return target


def series_text(samples: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(s, separators=(",", ":")) + "\n"
                   for s in samples)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file; fails the caller when it is not one."""
    data = path.read_bytes()
    if len(data) < 24 or data[:8] != PNG_MAGIC or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG file")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = view.main(argv)
    return status, out.getvalue(), err.getvalue()


class SchemaTest(unittest.TestCase):
    validator: Any = None

    def setUp(self) -> None:
        if JSONSCHEMA_ERROR:
            self.fail(f"jsonschema is required: {JSONSCHEMA_ERROR}")
        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        self.validator = jsonschema.Draft202012Validator(schema)

    def assert_valid(self, obj: Any) -> None:
        errors = [e.message for e in self.validator.iter_errors(obj)]
        self.assertEqual(errors, [])

    def assert_invalid(self, obj: Any) -> None:
        self.assertFalse(self.validator.is_valid(obj),
                         f"accepted: {json.dumps(obj)[:200]}")

    def test_synthetic_lines_are_valid(self) -> None:
        for line in series_text([sample(i) for i in range(3)]).splitlines():
            with self.subTest(line=line[:60]):
                self.assert_valid(json.loads(line))

    def test_real_line_is_valid(self) -> None:
        self.assert_valid(json.loads(REAL_LINE))  # version 1: no slab_free

    def test_versions_2_and_3_need_their_fields(self) -> None:
        for version in (2, 3):
            for path in (("slab_free",), ("empty_slab_bytes",), ("kept_span_bytes",),
                         ("deferred_span_bytes",),
                         ("slab_free", "pending"),
                         ("classes", 0, "orphaned_slabs")):
                with self.subTest(version=version, missing=path):
                    line = sample(1)
                    line["version"] = version
                    del holder_of(line, path)[path[-1]]
                    self.assert_invalid(line)
        for path in (("span_trips",), ("span_trips", "widenings")):
            with self.subTest(missing=path):
                line = sample(1)
                del holder_of(line, path)[path[-1]]
                self.assert_invalid(line)
        line = sample(1)
        line["version"] = 2
        del line["span_trips"]
        self.assert_valid(line)  # a version 2 line has none
        line = sample(1)
        line["version"] = 4
        self.assert_invalid(line)

    def test_no_classes_and_no_time_are_valid(self) -> None:
        line = sample(0)
        del line["time_ms"]
        line["classes"] = []
        line["mode"] = "fixed"
        self.assert_valid(line)

    def test_extra_property_is_invalid(self) -> None:
        for where in ("top", "large", "class", "span_trips"):
            with self.subTest(where=where):
                line = sample(1)
                target = {"top": line, "large": line["large"],
                          "class": line["classes"][0],
                          "span_trips": line["span_trips"]}[where]
                target["extra"] = 1
                self.assert_invalid(line)

    def test_negative_number_is_invalid(self) -> None:
        for path in (("footprint",), ("time_ms",), ("huge", "live"),
                     ("classes", 1, "live_bytes")):
            with self.subTest(path=path):
                line = sample(1)
                holder_of(line, path)[path[-1]] = -1
                self.assert_invalid(line)

    def test_other_invalid_lines(self) -> None:
        good = sample(2)
        changes: list[tuple[str, Any]] = [
            ("fragmentation", 1.5), ("fragmentation", -0.1),
            ("mode", "mmap"), ("version", 0), ("footprint", 1.5),
            ("footprint", "1"), ("classes", {}), ("tessalloc", 1),
        ]
        for key, value in changes:
            with self.subTest(key=key, value=value):
                line = copy.deepcopy(good)
                line[key] = value
                self.assert_invalid(line)
        for key in ("footprint", "classes", "large", "mode"):
            with self.subTest(missing=key):
                line = copy.deepcopy(good)
                del line[key]
                self.assert_invalid(line)
        line = copy.deepcopy(good)
        line["classes"][0]["class"] = 64
        self.assert_invalid(line)
        line = copy.deepcopy(good)
        del line["classes"][0]["slab_bytes"]
        self.assert_invalid(line)


class ViewerTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.dir = Path(self._tmp.name)
        self.series = self.dir / "run.jsonl"
        self.series.write_text(series_text([sample(i) for i in range(3)]),
                               encoding="utf-8")

    def test_read_series_skips_blank_lines(self) -> None:
        self.series.write_text("\n" + REAL_LINE + "\n  \n" + REAL_LINE + "\n",
                               encoding="utf-8")
        series = view.read_series(self.series)
        self.assertEqual(len(series), 2)
        self.assertEqual(series[0]["footprint"], 184320)

    def test_time_axis(self) -> None:
        timed = [sample(i) for i in range(3)]
        x, shown, label = view.time_axis(timed)
        self.assertEqual((x, shown, label), ([0.0, 0.5, 1.0], timed, "time (s)"))
        at_exit = json.loads(REAL_LINE)  # no time_ms
        x, shown, label = view.time_axis(timed + [at_exit])
        self.assertEqual((x, shown), ([0.0, 0.5, 1.0], timed))
        self.assertIn("1 line(s) without time_ms not shown", label)
        x, shown, label = view.time_axis([at_exit, at_exit])
        self.assertEqual((x, shown, label),
                         ([0.0, 1.0], [at_exit, at_exit], "sample"))

    def test_size_label(self) -> None:
        self.assertEqual([view.size_label(n) for n in (48, 1024, 1536, 2 << 20)],
                         ["48", "1K", "1.5K", "2M"])

    def test_main_writes_both_pngs(self) -> None:
        out = self.dir / "plots"
        status, stdout, stderr = run_main(
            [str(self.series), "--out", str(out), "--title", "synthetic"])
        self.assertEqual(status, 0, stderr)
        footprint = out / "run_footprint.png"
        fragmentation = out / "run_fragmentation.png"
        self.assertEqual(stdout.splitlines(),
                         [str(footprint), str(fragmentation)])
        for png in (footprint, fragmentation):
            with self.subTest(png=png.name):
                self.assertGreater(png.stat().st_size, 1000)
                width, height = png_size(png)
                self.assertGreater(width, 0)
                self.assertGreater(height, 0)

    def test_main_writes_beside_the_input_by_default(self) -> None:
        status, _, stderr = run_main([str(self.series)])
        self.assertEqual(status, 0, stderr)
        for name in ("run_footprint.png", "run_fragmentation.png"):
            png_size(self.dir / name)

    def test_no_classes(self) -> None:
        line = json.loads(REAL_LINE)
        line["classes"] = []
        self.series.write_text(json.dumps(line) + "\n", encoding="utf-8")
        status, _, stderr = run_main([str(self.series)])
        self.assertEqual(status, 0, stderr)
        png_size(self.dir / "run_fragmentation.png")

    def assert_bad_input(self, text: str, line_number: int,
                         why: str) -> None:
        self.series.write_text(text, encoding="utf-8")
        status, stdout, stderr = run_main(
            [str(self.series), "--out", str(self.dir / "bad")])
        self.assertEqual(status, 2)
        self.assertEqual(stdout, "")
        self.assertIn(f"{self.series}:{line_number}:", stderr)
        self.assertIn(why, stderr)
        self.assertFalse((self.dir / "bad").exists())

    def test_malformed_line_exits_2(self) -> None:
        good = series_text([sample(0)])
        self.assert_bad_input(good + "\n" + '{"footprint": 1,\n' + good, 3,
                              "not valid JSON")

    def test_skip_invalid_leaves_out_cut_lines(self) -> None:
        good = series_text([sample(0)])
        cut = REAL_LINE[:40] + REAL_LINE  # cut short, run into the next
        self.assert_bad_input(good + cut + "\n" + good, 2,
                              "--skip-invalid leaves such lines out")
        self.series.write_bytes((good + cut + "\n" + good).encode()
                                + b"\xff\n")  # and a line not UTF-8
        status, stdout, stderr = run_main(
            [str(self.series), "--out", str(self.dir), "--skip-invalid"])
        self.assertEqual(status, 0, stderr)
        self.assertIn("left out 2 line(s) that are not JSON: 2, 4", stderr)
        self.assertEqual(len(stdout.splitlines()), 2)
        skipped: list[int] = []
        self.assertEqual(len(view.read_series(self.series, skipped)), 2)
        self.assertEqual(skipped, [2, 4])

    def test_skip_invalid_still_refuses_bad_objects(self) -> None:
        line = sample(1)
        del line["classes"]
        self.series.write_text(series_text([sample(0), line]),
                               encoding="utf-8")
        status, _, stderr = run_main([str(self.series), "--skip-invalid"])
        self.assertEqual(status, 2)
        self.assertIn("missing required key(s): classes", stderr)

    def test_missing_key_exits_2(self) -> None:
        line = sample(1)
        del line["slab_bytes"]
        del line["classes"]
        self.assert_bad_input(series_text([sample(0), line]), 2,
                              "missing required key(s): slab_bytes, classes")

    def test_not_an_object_or_number_exits_2(self) -> None:
        self.assert_bad_input("[1, 2]\n", 1, "expected a JSON object")
        line = sample(0)
        line["classes"][1]["fragmentation"] = "high"
        self.assert_bad_input(series_text([line]), 1,
                              "classes[1].fragmentation is not a number")

    def test_empty_or_missing_file_exits_2(self) -> None:
        self.series.write_text("\n\n", encoding="utf-8")
        status, _, stderr = run_main([str(self.series)])
        self.assertEqual(status, 2)
        self.assertIn("no statistics lines", stderr)
        status, _, stderr = run_main([str(self.dir / "absent.jsonl")])
        self.assertEqual(status, 2)
        self.assertIn("cannot read", stderr)


if __name__ == "__main__":
    unittest.main()
