"""Unit tests of tessbench.aggregate: parsing, medians, ratios, geometric means."""

from __future__ import annotations

import csv
import json
import math
import tempfile
import unittest
from pathlib import Path
from typing import Optional

from tessbench import aggregate as ag


def row(workload: str, allocator: str, threads: int, rep: int, status: str = "ok",
        **values: object) -> dict[str, str]:
    """A runs.csv row as text, fixed columns all present (empty unless given)."""
    out = {c: "" for c in ag.FIXED_COLUMNS}
    out.update(workload=workload, allocator=allocator, threads=str(threads),
               repetition=str(rep), status=status)
    out.update({k: str(v) for k, v in values.items()})
    return out


def run(workload: str, allocator: str, threads: int, rep: int, status: str = "ok",
        **values: object) -> ag.Run:
    return ag.parse_run(row(workload, allocator, threads, rep, status, **values))


class MedianTest(unittest.TestCase):
    def test_odd_count_is_the_middle_value(self) -> None:
        self.assertEqual(ag.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(ag.median([7.0]), 7.0)

    def test_even_count_is_the_mean_of_the_middle_two(self) -> None:
        self.assertEqual(ag.median([4.0, 1.0, 3.0, 2.0]), 2.5)
        self.assertEqual(ag.median([10.0, 20.0]), 15.0)

    def test_no_values(self) -> None:
        with self.assertRaises(ValueError):
            ag.median([])


class ParseTest(unittest.TestCase):
    def test_fixed_and_extra_columns(self) -> None:
        r = run("malloc-cmp", "glibc", 1, 2, elapsed_s="1.5", ops="300", ops_per_s="200.0",
                max_rss_kib="1024", malloc_s="0.25", series_csv="series/a.csv")
        self.assertEqual((r.workload, r.allocator, r.threads, r.repetition),
                         ("malloc-cmp", "glibc", 1, 2))
        self.assertTrue(r.ok)
        self.assertEqual(r.metrics["ops_per_s"], 200.0)
        self.assertEqual(r.metrics["ops"], 300.0)
        self.assertEqual(r.metrics["malloc_s"], 0.25)  # a numeric extra is a metric
        self.assertNotIn("user_s", r.metrics)  # empty: not measured
        self.assertNotIn("series_csv", r.metrics)
        self.assertEqual(r.extra, {"malloc_s": "0.25", "series_csv": "series/a.csv"})
        self.assertEqual(r.key, ("malloc-cmp", "glibc", 1))

    def test_failed_row_with_empty_numbers(self) -> None:
        r = run("larson", "tessalloc", 4, 1, status="crashed")
        self.assertFalse(r.ok)
        self.assertEqual(dict(r.metrics), {})

    def test_failed_row_may_hold_garbage_but_ok_row_may_not(self) -> None:
        self.assertFalse(run("x", "y", 1, 1, status="error", ops_per_s="n/a").ok)
        with self.assertRaises(ValueError):
            run("x", "y", 1, 1, ops_per_s="n/a")

    def test_bad_identifiers(self) -> None:
        bad = row("x", "y", 1, 1)
        bad["threads"] = "two"
        with self.assertRaisesRegex(ValueError, "line 7: threads"):
            ag.parse_run(bad, line=7)
        missing = row("x", "y", 1, 1)
        del missing["status"]
        with self.assertRaisesRegex(ValueError, "status"):
            ag.parse_run(missing)

    def test_parse_number(self) -> None:
        self.assertEqual(ag.parse_number(" 2.5 "), 2.5)
        self.assertIsNone(ag.parse_number(""))
        self.assertIsNone(ag.parse_number("nan"))
        self.assertIsNone(ag.parse_number("inf"))
        self.assertIsNone(ag.parse_number("abc"))

    def test_read_runs_file(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "runs.csv"
            columns = [*ag.FIXED_COLUMNS, "footprint_ratio", "nulls"]
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, restval="")
                writer.writeheader()
                writer.writerow(row("frag", "a", 2, 1, ops_per_s="5.5", footprint_ratio="1.25",
                                    nulls="0"))
                writer.writerow(row("frag", "a", 2, 2, status="timeout"))
            runs = ag.read_runs(path)
            self.assertEqual(len(runs), 2)
            self.assertEqual(runs[0].metrics["footprint_ratio"], 1.25)
            self.assertEqual(runs[0].metrics["nulls"], 0.0)
            self.assertEqual(runs[1].status, "timeout")

    def test_read_runs_rejects_other_csv(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "runs.csv"
            path.write_text("a,b\n1,2\n")
            with self.assertRaises(ValueError):
                ag.read_runs(path)


class SummarizeTest(unittest.TestCase):
    def test_medians_over_ok_runs_only(self) -> None:
        runs = [run("w", "a", 1, 1, ops_per_s=10, max_rss_kib=100),
                run("w", "a", 1, 2, ops_per_s=30, max_rss_kib=300),
                run("w", "a", 1, 3, "crashed", ops_per_s=1000),
                run("w", "a", 1, 4, ops_per_s=20, max_rss_kib=200),
                run("w", "a", 1, 5, "check-failed")]
        cells = ag.summarize(runs)
        cell = cells[("w", "a", 1)]
        self.assertEqual(cell.runs, 5)
        self.assertEqual(cell.ok, 3)
        self.assertEqual(cell.median("ops_per_s"), 20.0)  # 1000 of the crashed run ignored
        self.assertEqual(cell.values["ops_per_s"], (10.0, 30.0, 20.0))
        self.assertEqual(cell.spread("ops_per_s"), (10.0, 30.0))
        self.assertEqual(cell.median("max_rss_kib"), 200.0)
        self.assertIsNone(cell.median("user_s"))
        self.assertEqual(dict(cell.failed), {"crashed": 1, "check-failed": 1})

    def test_even_count_median_in_a_cell(self) -> None:
        cells = ag.summarize([run("w", "a", 2, 1, elapsed_s=1.0),
                              run("w", "a", 2, 2, elapsed_s=4.0)])
        self.assertEqual(cells[("w", "a", 2)].median("elapsed_s"), 2.5)

    def test_all_failed_cell_has_no_medians(self) -> None:
        cells = ag.summarize([run("w", "a", 1, 1, "timeout"), run("w", "a", 1, 2, "error")])
        cell = cells[("w", "a", 1)]
        self.assertEqual((cell.ok, cell.runs), (0, 2))
        self.assertEqual(dict(cell.medians), {})
        self.assertIsNone(cell.spread("ops_per_s"))

    def test_cells_keyed_and_ordered(self) -> None:
        cells = ag.summarize([run("w", "b", 2, 1), run("w", "a", 1, 1), run("v", "a", 1, 1),
                              run("w", "b", 2, 2)])
        self.assertEqual(list(cells), [("w", "b", 2), ("w", "a", 1), ("v", "a", 1)])
        self.assertEqual(cells[("w", "b", 2)].runs, 2)


def two_allocators() -> dict[ag.CellKey, ag.Cell]:
    """base and fast on w1 (1 and 2 threads) and w2 (1 thread); base lacks w2."""
    return ag.summarize([
        run("w1", "base", 1, 1, ops_per_s=100, max_rss_kib=1000, elapsed_s=2.0),
        run("w1", "base", 1, 2, ops_per_s=300, max_rss_kib=1000, elapsed_s=4.0),
        run("w1", "fast", 1, 1, ops_per_s=800, max_rss_kib=500, elapsed_s=0.5),
        run("w1", "base", 2, 1, ops_per_s=400, max_rss_kib=2000),
        run("w1", "fast", 2, 1, ops_per_s=200, max_rss_kib=4000),
        run("w2", "base", 1, 1, "crashed"),
        run("w2", "fast", 1, 1, ops_per_s=50, max_rss_kib=10),
        run("w3", "fast", 1, 1, ops_per_s=50, max_rss_kib=10),
    ])


class RatioTest(unittest.TestCase):
    def test_ratio_is_allocator_over_baseline(self) -> None:
        cells = two_allocators()
        # base's median at w1/1: (100+300)/2 = 200; fast: 800 -> 4x the throughput
        self.assertEqual(ag.ratio(cells, ("w1", "fast", 1), "base", "ops_per_s"), 4.0)
        self.assertEqual(ag.ratio(cells, ("w1", "fast", 1), "base", "max_rss_kib"), 0.5)
        self.assertEqual(ag.ratio(cells, ("w1", "fast", 1), "base", "elapsed_s"), 0.5 / 3.0)
        self.assertEqual(ag.ratio(cells, ("w1", "fast", 2), "base", "ops_per_s"), 0.5)
        self.assertEqual(ag.ratio(cells, ("w1", "base", 1), "base", "ops_per_s"), 1.0)

    def test_missing_baseline_cell_or_metric(self) -> None:
        cells = two_allocators()
        self.assertIsNone(ag.ratio(cells, ("w2", "fast", 1), "base", "ops_per_s"))  # crashed
        self.assertIsNone(ag.ratio(cells, ("w3", "fast", 1), "base", "ops_per_s"))  # never ran
        self.assertIsNone(ag.ratio(cells, ("w1", "fast", 2), "base", "elapsed_s"))  # no value
        self.assertIsNone(ag.ratio(cells, ("w9", "fast", 1), "base", "ops_per_s"))  # no cell
        self.assertIsNone(ag.ratio(cells, ("w1", "fast", 1), "nobody", "ops_per_s"))

    def test_non_positive_values_give_no_ratio(self) -> None:
        cells = ag.summarize([run("w", "a", 1, 1, major_faults=0),
                              run("w", "b", 1, 1, major_faults=3)])
        self.assertIsNone(ag.ratio(cells, ("w", "b", 1), "a", "major_faults"))
        self.assertIsNone(ag.ratio(cells, ("w", "a", 1), "b", "major_faults"))

    def test_ratios_lists_only_existing(self) -> None:
        got = ag.ratios(two_allocators(), "base", "ops_per_s")
        self.assertEqual(got, {("w1", "base", 1): 1.0, ("w1", "fast", 1): 4.0,
                               ("w1", "base", 2): 1.0, ("w1", "fast", 2): 0.5})


class GeoMeanTest(unittest.TestCase):
    def test_values(self) -> None:
        self.assertAlmostEqual(ag.geomean([1.0, 4.0]), 2.0)
        self.assertAlmostEqual(ag.geomean([2.0, 8.0, 4.0]), 4.0)
        self.assertAlmostEqual(ag.geomean([0.5, 2.0]), 1.0)
        self.assertAlmostEqual(ag.geomean(iter([3.0])), 3.0)

    def test_invalid(self) -> None:
        for values in ([], [1.0, 0.0], [2.0, -1.0], [float("nan")]):
            with self.assertRaises(ValueError, msg=str(values)):
                ag.geomean(values)

    def test_per_allocator_with_missing_cells(self) -> None:
        means = ag.geomeans(two_allocators(), "base", "ops_per_s")
        self.assertEqual(list(means), ["base", "fast"])
        fast = means["fast"]
        # ratios 4.0 (w1/1) and 0.5 (w1/2); w2 (baseline crashed) and w3 (no baseline) missing
        self.assertAlmostEqual(fast.value or 0.0, math.sqrt(2.0))
        self.assertEqual((fast.cells, fast.total), (2, 4))
        base = means["base"]
        self.assertEqual(base.value, 1.0)
        self.assertEqual((base.cells, base.total), (2, 3))

    def test_order_selection_and_thread_filter(self) -> None:
        cells = two_allocators()
        means = ag.geomeans(cells, "base", "max_rss_kib", allocators=["fast", "ghost"])
        self.assertEqual(list(means), ["fast", "ghost"])
        self.assertAlmostEqual(means["fast"].value or 0.0, 1.0)  # 0.5 and 2.0
        ghost = means["ghost"]
        self.assertEqual((ghost.value, ghost.cells, ghost.total), (None, 0, 0))
        at2 = ag.geomeans(cells, "base", "ops_per_s", threads=2)["fast"]
        self.assertEqual((at2.value, at2.cells, at2.total), (0.5, 1, 1))

    def test_no_baseline_at_all(self) -> None:
        means = ag.geomeans(two_allocators(), "nobody", "ops_per_s")
        self.assertIsNone(means["fast"].value)
        self.assertEqual(means["fast"].cells, 0)

    def test_baseline_and_metric_per_workload(self) -> None:
        cells = ag.summarize([
            run("p", "glibc", 1, 1, ops_per_s=100, max_rss_kib=1000),
            run("p", "fast", 1, 1, ops_per_s=400, max_rss_kib=500),
            run("f", "dl", 1, 1, ops_per_s=10, max_rss_kib=9, peak_touched_bytes=1000),
            run("f", "fast", 1, 1, ops_per_s=90, max_rss_kib=9, peak_touched_bytes=4000)])

        def base(w: str) -> str:
            return "glibc" if w == "p" else "dl"

        def memory(w: str) -> str:
            return "max_rss_kib" if w == "p" else "peak_touched_bytes"

        self.assertEqual(ag.ratio(cells, ("f", "fast", 1), base, "ops_per_s"), 9.0)
        self.assertEqual(ag.ratio(cells, ("f", "fast", 1), base, memory), 4.0)
        self.assertEqual(ag.ratio(cells, ("p", "fast", 1), base, memory), 0.5)
        both = ag.geomeans(cells, base, "ops_per_s")["fast"]
        self.assertAlmostEqual(both.value or 0.0, 6.0)  # sqrt(4 * 9)
        only_f = ag.geomeans(cells, base, memory, workloads=["f"])["fast"]
        self.assertEqual((only_f.value, only_f.cells, only_f.total), (4.0, 1, 1))


META: dict[str, object] = {
    "tessbench": "0.1.0", "started": "2026-01-02T03:04:05+00:00", "finished": None,
    "command": "tessbench run --quick", "baseline": "base",
    "git": {"commit": "0123abc", "dirty": "yes"},
    "machine": {"cpus": 4, "cpu_model": "Test CPU", "memory_kib": 8388608, "os": "Debian",
                "kernel": "6.1"},
    "allocators": {"fast": {"version": "2.0", "source": "apt", "kind": "preload",
                            "library": "/lib/fast.so"},
                   "base": {"version": None, "source": "system", "kind": "system",
                            "library": None}},
    "workloads": {"w2": {"description": "second", "unit": "blocks"},
                  "w1": {"description": "first", "unit": "verifications"}},
    "threads": [1, 2, 8], "repeat": 2, "quick": True,
    "skipped": [{"workload": "w3", "allocator": "base", "reason": "fixed heap only"}],
    "failures": [{"workload": "w2", "allocator": "base", "threads": 1, "repetition": 1,
                  "status": "crashed", "message": "signal 11"}],
    "runs": [],
}


class MetaTest(unittest.TestCase):
    def test_parse(self) -> None:
        meta = ag.parse_meta(META)
        self.assertEqual(meta.machine.cpus, 4)
        self.assertEqual(meta.commit, "0123abc + changes")
        self.assertEqual(meta.machine.memory_kib, 8388608)
        self.assertIsNone(meta.finished)
        self.assertEqual(meta.baseline, "base")
        self.assertEqual(list(meta.allocators), ["fast", "base"])
        self.assertIsNone(meta.allocators["base"].version)
        self.assertEqual(meta.allocators["fast"].library, "/lib/fast.so")
        self.assertEqual(meta.workloads["w1"].unit, "verifications")
        self.assertEqual(meta.threads, (1, 2, 8))
        self.assertTrue(meta.quick)
        self.assertEqual(meta.skipped[0].reason, "fixed heap only")
        self.assertEqual(meta.failures[0].status, "crashed")
        self.assertEqual(meta.failures[0].threads, 1)

    def test_partial_and_wrong_types(self) -> None:
        meta = ag.parse_meta({"machine": {"cpus": "many"}, "threads": "1,2", "quick": "yes",
                              "allocators": {"x": "bad"}, "workloads": {"w": {}}})
        self.assertIsNone(meta.machine.cpus)
        self.assertEqual(meta.threads, ())
        self.assertFalse(meta.quick)
        self.assertEqual(dict(meta.allocators), {})
        self.assertEqual(meta.workloads["w"].unit, "ops")
        self.assertEqual(meta.command, "")
        self.assertEqual(meta.commit, "")


def write_dir(out: Path, meta: Optional[dict[str, object]]) -> None:
    rows = [row("w1", "fast", 1, 1, ops_per_s=4), row("w1", "base", 1, 1, ops_per_s=2),
            row("w1", "fast", 8, 1, ops_per_s=4), row("w1", "base", 8, 1, ops_per_s=1),
            row("w2", "fast", 1, 1, ops_per_s=1), row("w2", "base", 1, 1, "crashed"),
            row("w0", "other", 1, 1, ops_per_s=3)]
    with (out / "runs.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(ag.FIXED_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    if meta is not None:
        (out / "meta.json").write_text(json.dumps(meta))


class LoadResultsTest(unittest.TestCase):
    def test_orders_and_baseline(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            write_dir(out, META)
            res = ag.load_results(out)
            self.assertEqual(res.baseline, "base")
            # meta.json's order, then runs.csv's; the baseline first
            self.assertEqual(res.allocators, ("base", "fast", "other"))
            self.assertEqual(res.workloads, ("w2", "w1", "w0"))
            self.assertEqual(res.threads_of("w1"), [1, 8])
            self.assertEqual(res.allocators_of("w2"), ["base", "fast"])
            self.assertEqual(res.ratio(("w1", "fast", 8), "ops_per_s"), 4.0)
            self.assertEqual(res.oversubscribed(), [8])
            self.assertEqual(res.max_threads(), 8)
            self.assertEqual(res.unit("w2"), "blocks")
            self.assertEqual(res.unit("w0"), "ops")
            g = res.geomeans("ops_per_s")["fast"]
            self.assertAlmostEqual(g.value or 0.0, math.sqrt(8.0))
            self.assertEqual((g.cells, g.total), (2, 3))
            other = ag.load_results(out, baseline="fast")
            self.assertEqual(other.baseline, "fast")
            self.assertEqual(other.allocators[0], "fast")
            self.assertEqual(other.ratio(("w1", "base", 8), "ops_per_s"), 0.25)

    def test_without_meta(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            write_dir(out, None)
            res = ag.load_results(out)
            self.assertEqual(res.baseline, "fast")  # no glibc: the first allocator
            self.assertEqual(res.oversubscribed(), [])  # CPU count unknown

    def test_oversubscribed_counts_the_threads_a_run_keeps_busy(self) -> None:
        # frag runs max(1, N/4) other threads beside its N workers: 3 threads at 2;
        # xmalloc at least one producer and one consumer: 2 threads at 1
        rows = [row("frag", "a", 1, 1, ops_per_s=1, others=1),
                row("frag", "a", 2, 1, ops_per_s=1, others=1),
                row("xmalloc", "a", 1, 1, ops_per_s=1, producers=1, consumers=1),
                row("xmalloc", "a", 2, 1, ops_per_s=1, producers=1, consumers=1),
                row("larson", "a", 2, 1, ops_per_s=1)]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            with (out / "runs.csv").open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=[*ag.FIXED_COLUMNS, "consumers",
                                                       "others", "producers"], restval="")
                writer.writeheader()
                writer.writerows(rows)
            (out / "meta.json").write_text(json.dumps({"machine": {"cpus": 2}}))
            res = ag.load_results(out)
        self.assertEqual(res.oversubscribed("frag"), [2])
        self.assertEqual(res.oversubscribed("xmalloc"), [])
        self.assertEqual(res.oversubscribed("larson"), [])
        self.assertEqual(res.oversubscribed(), [2])
        self.assertEqual(res.busy_threads_at("frag", 2), 3)

    def test_choose_baseline(self) -> None:
        meta = ag.Meta()
        self.assertEqual(ag.choose_baseline(meta, ["a", "glibc"], None), "glibc")
        self.assertEqual(ag.choose_baseline(meta, ["a", "b"], None), "a")
        self.assertEqual(ag.choose_baseline(meta, ["a", "b"], "b"), "b")
        self.assertEqual(ag.choose_baseline(ag.Meta(baseline="z"), ["a"], None), "z")


if __name__ == "__main__":
    unittest.main()
