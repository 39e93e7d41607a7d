#!/usr/bin/env python3
"""Unit tests of run_enclave.py's parsing and formatting (no benchmark runs).

    python3 bench/enclave/test_run_enclave.py     (needs rich, like the runner)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import unittest
import unittest.mock
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_enclave as re_mod  # noqa: E402  (beside this file)


def a_run(name: str, threads: int, ms: float, nulls: int = 0,
          footprint: int = 1 << 20, overlap: bool = False) -> re_mod.ARun:
    return re_mod.ARun(
        allocator=name, host="new-thread", threads=threads, repetition=1,
        elapsed_ms=ms, nulls=nulls, first_null_s=-1.0, violations=0,
        os_calls_load=0, os_calls_init=0, os_calls_after_init=0,
        os_calls_after_init_outside=0, os_mmap_bytes_load=0,
        os_mmap_bytes_init=0, os_mmap_bytes_after_init=0,
        footprint_peak=footprint, footprint_end=1 << 20,
        touched_bytes=1 << 20, status="ok", overlap=overlap)


def b_run(name: str, peak_footprint: int,
          mean_ratio: Optional[float] = None) -> re_mod.BRun:
    return re_mod.BRun(
        allocator=name, host="pooled", repetition=1, duration_s=1.0,
        ecalls=100, worker_ecalls=80, ecalls_per_s=100.0, mallocs=1,
        nulls=0, first_null_s=-1.0, violations=0,
        peak_live_bytes=1000, peak_footprint_bytes=peak_footprint,
        peak_touched_bytes=1500, footprint_end=0, os_calls_load=0,
        os_calls_init=0, os_calls_after_init=0,
        os_calls_after_init_outside=0, os_mmap_bytes_load=0,
        os_mmap_bytes_init=0, os_mmap_bytes_after_init=0, samples=2,
        series_csv="", status="ok", mean_footprint_ratio=mean_ratio)


class ParseTest(unittest.TestCase):
    def test_parse_result_takes_the_last_result_line(self) -> None:
        out = ("tessalloc = 1.0 ms\nresult workload=a elapsed_ms=1.5\n"
               "noise\nresult workload=a elapsed_ms=2.5 status=ok\n")
        kv = re_mod.parse_result(out)
        self.assertEqual(kv["elapsed_ms"], "2.5")
        self.assertEqual(kv["status"], "ok")
        self.assertEqual(re_mod.parse_result("no result here"), {})

    def test_b_ratios_take_the_fine_peaks_when_reported(self) -> None:
        run = b_run("tessalloc", 1204)
        self.assertAlmostEqual(run.footprint_ratio, 1.204)
        self.assertAlmostEqual(run.touched_ratio, 1.5)
        fine = dataclasses.replace(run, fine_peak_live_bytes=1100,
                                   fine_peak_footprint_bytes=1250)
        self.assertAlmostEqual(fine.footprint_ratio, 1250 / 1100)
        self.assertAlmostEqual(fine.touched_ratio, 1500 / 1100)
        self.assertEqual(fine.judged_footprint, 1250)

    def test_compress(self) -> None:
        self.assertEqual(re_mod.compress([1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8")
        self.assertEqual(re_mod.compress([]), "")

    def test_read_peers(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "libfixed_a.so").write_bytes(b"")
            (d / "peers.json").write_text(json.dumps({"peers": [
                {"name": "a", "status": "ok", "path": "libfixed_a.so",
                 "version": "1.2", "source": "crates.io:a"},
                {"name": "b", "status": "missing", "path": "",
                 "reason": "cargo not installed"},
                {"name": "c", "status": "ok", "path": str(d / "gone.so")},
            ]}))
            found, skipped = re_mod.read_peers(d / "peers.json")
            self.assertEqual([p.name for p in found], ["a"])
            self.assertEqual(found[0].path, str(d / "libfixed_a.so"))
            self.assertEqual(found[0].version, "1.2")
            self.assertEqual(len(skipped), 2)
            self.assertIn("cargo not installed", skipped[0])
            none, why = re_mod.read_peers(d / "absent.json")
            self.assertEqual(none, [])
            self.assertIn("not found", why[0])

    def test_order_plugins(self) -> None:
        plugins = [re_mod.Plugin(n, n, "?", "") for n in
                   ("mimalloc3", "extra", "tessalloc", "dlmalloc",
                    "snmalloc")]
        self.assertEqual([p.name for p in re_mod.order_plugins(plugins)],
                         ["dlmalloc", "snmalloc", "tessalloc", "mimalloc3",
                          "extra"])


class TableTest(unittest.TestCase):
    def test_sample_style_table(self) -> None:
        args = argparse.Namespace(host_a="new-thread", heap_pages_a=8192,
                                  tcs_a=16, num_allocations=100000,
                                  max_allocation_size=16384, repeat=3)
        runs = [a_run("dlmalloc", 1, v) for v in (5.0, 6.0, 9.0)]
        runs += [a_run("snmalloc", 1, v) for v in (2.75, 2.8, 3.0)]
        runs += [a_run("mimalloc3", 1, 3.3, nulls=4)]
        lines = re_mod.a_table(runs, ["dlmalloc", "snmalloc", "tessalloc",
                                      "mimalloc3"], [1], args)
        i = lines.index("num-threads = 1:")
        self.assertEqual(lines[i + 1],
                         "      dlmalloc = 6.0 ms, snmalloc = 2.8 ms, "
                         "tessalloc = n/a, mimalloc3 = 3.3 ms (4 NULL in 1 of 1 runs)")
        self.assertEqual(lines[i + 2], "")

    def test_short_runs_get_more(self) -> None:
        # 5 runs each: 0.05 s (tessalloc), 0.8 s (dlmalloc at 4), 3 s (at 16)
        plan = re_mod.plan_fill_runs({("tessalloc", 16): [0.05] * 5, ("dlmalloc", 4): [0.8] * 5,
                                      ("dlmalloc", 16): [3.0] * 5}, 4.0, 25)
        self.assertEqual(plan, {("tessalloc", 16): 20})  # 4 s spent at 4: none left
        # the cap counts the runs made; what is left, by their mean
        self.assertEqual(re_mod.plan_fill_runs({("a", 1): [0.1] * 5}, 4.0, 12), {("a", 1): 7})
        self.assertEqual(re_mod.plan_fill_runs({("a", 2): [0.3, 0.5, 0.4]}, 4.0, 25),
                         {("a", 2): 7})
        self.assertEqual(re_mod.plan_fill_runs({("a", 1): [0.2] * 5, ("a", 3): []}, 0.5, 25), {})
        # runs that gave no result: their time is spent, but they are no runs
        self.assertEqual(re_mod.plan_fill_runs({("a", 1): [0.1] * 4}, 4.0, 25,
                                               {("a", 1): 2.0, ("b", 1): 0.01}),
                         {("a", 1): 16})
        self.assertEqual(re_mod.plan_fill_runs({("a", 1): [0.1] * 4}, 4.0, 25,
                                               {("a", 1): 300.0}), {})

    def test_fill_seconds_without_bound_fills_up_to_repeat_max(self) -> None:
        # --fill-seconds inf (or one so large that what fits overflows a
        # float) means every count gets --repeat-max runs; it used to raise
        # OverflowError after all the rounds of A had run
        for fill in (math.inf, 1e308):
            with self.subTest(fill=fill):
                self.assertEqual(re_mod.plan_fill_runs({("a", 1): [0.05] * 5}, fill, 25),
                                 {("a", 1): 20})
        self.assertEqual(re_mod.parse_args(["--fill-seconds", "inf"]).fill_seconds, math.inf)

    def test_run_counts_are_told(self) -> None:
        want = {("tessalloc", 1): 25, ("tessalloc", 2): 25, ("tessalloc", 3): 25,
                ("dlmalloc", 1): 25, ("dlmalloc", 2): 9, ("dlmalloc", 3): 5,
                ("dlmalloc", 4): 5, ("tessalloc", 4): 25, ("dlmalloc", 6): 5}
        runs = [a_run(name, n, 1.0) for (name, n), c in want.items() for _ in range(c)]
        self.assertEqual(re_mod.runs_text(runs),
                         "25 run(s) (dlmalloc 9 at 2 threads, 5 at 3-4, 6 threads)")
        self.assertEqual(re_mod.runs_text([a_run("tessalloc", 4, 1.0)] * 3), "3 run(s)")
        self.assertEqual(re_mod.thread_ranges([1]), "1 thread")
        self.assertEqual(re_mod.thread_ranges([1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8 threads")

    def test_fill_runs_are_told_only_where_there_could_be_some(self) -> None:
        # --quick (--fill-seconds 0), --fill-seconds 0, or --repeat already at
        # --repeat-max: the summary said that short runs 'got more there, as
        # many as fit, up to 25' although no run could be added
        runs = [a_run("tessalloc", 1, 1.0)]
        for argv in (["--quick"], ["--fill-seconds", "0"],
                     ["--repeat", "30"], ["--repeat", "5", "--repeat-max", "5"]):
            with self.subTest(argv=argv):
                text = "\n".join(re_mod.a_section(runs, [], ["tessalloc"], [1],
                                                   re_mod.parse_args(argv), nproc=2))
                self.assertIn("median of 1 run(s), interleaved", text)
                self.assertNotIn("got more there", text)
        text = "\n".join(re_mod.a_section(runs, [], ["tessalloc"], [1],
                                           re_mod.parse_args([]), nproc=2))
        self.assertIn("after 5 rounds, an allocator whose runs at a thread count took "
                      "under 10 s of wall time in all got more there", text)

    def test_a_ratio_table_is_a_table_with_tessalloc_alone(self) -> None:
        # no peer built: the header had an empty ratio column that the
        # delimiter row has not, and markdown shows no table at all then
        args = re_mod.parse_args([])
        for names in (["tessalloc"], ["dlmalloc", "tessalloc"], ["dlmalloc"]):
            with self.subTest(names=names):
                runs = [a_run(name, 1, 1.0) for name in names]
                md = re_mod.a_section(runs, [], names, [1], args, nproc=2)
                i = md.index(next(r for r in md if r.startswith("| threads |")))
                cells = [r.strip("|").count("|") for r in md[i:i + 3]]
                self.assertEqual(cells, [cells[0]] * 3, md[i:i + 3])

    def test_runs_not_kept_still_count_their_nulls_and_os_calls(self) -> None:
        clean = a_run("tessalloc", 4, 1.0)
        self.assertEqual(re_mod.unkept_lapses(clean), "")
        lapsed = dataclasses.replace(clean, nulls=3, os_calls_after_init=2)
        self.assertEqual(re_mod.unkept_lapses(lapsed),
                         "3 NULL returns; 2 OS memory calls after init")

    def test_b_nulls_of_the_statistics_run_fail_the_target(self) -> None:
        runs = [b_run("tessalloc", 1100),
                dataclasses.replace(b_run("tessalloc", 1100), repetition=0, nulls=7)]
        rows = "\n".join(re_mod.b_targets(runs, ["pooled"]))
        self.assertIn("| pooled | zero NULLs (every run, the statistics run too) | 7 | FAIL |",
                      rows)

    def test_footprint_target_judged_on_calls_at_once(self) -> None:
        mib = 1 << 20
        runs = [a_run("dlmalloc", 2, 9.0, footprint=2 * mib),
                a_run("tessalloc", 2, 1.0, footprint=3 * mib)]
        once = [a_run("dlmalloc", 2, 9.0, footprint=2 * mib, overlap=True),
                a_run("tessalloc", 2, 1.0, footprint=5 * mib, overlap=True)]
        rows = re_mod.a_targets(runs, once, [1, 2], nproc=2)
        judged = [r for r in rows if "at once: peak footprint" in r]
        self.assertEqual(len(judged), 1)
        self.assertIn("2.500x", judged[0])
        self.assertIn(re_mod.verdict(False), judged[0])
        plain = [r for r in rows if "as scheduled here" in r]
        self.assertIn("1.500x", plain[0])
        self.assertTrue(plain[0].endswith("| n/a |"))
        self.assertTrue(any("every call at once: the same for touched" in r
                            for r in rows))
        # the calls at once are timed against snmalloc's, recorded only
        once_sn = once + [a_run("snmalloc", 2, 4.0, overlap=True)]
        rows = re_mod.a_targets(runs + [a_run("snmalloc", 2, 2.0)],
                                once_sn, [1, 2], nproc=2)
        timed = [r for r in rows if "time against snmalloc" in r]
        self.assertEqual(len(timed), 1)
        self.assertIn("tessalloc ÷ snmalloc 0.250", timed[0])
        self.assertTrue(timed[0].endswith("| n/a |"))
        # without runs at once the plain figure is the one judged
        rows = re_mod.a_targets(runs, [], [1, 2], nproc=2)
        self.assertFalse(any("every call at once" in r for r in rows))
        plain = [r for r in rows if "as scheduled here" in r]
        self.assertIn(re_mod.verdict(True), plain[0])

    def test_one_thread_target_needs_both_peers(self) -> None:
        # snmalloc not built: 'faster than both peers' was PASS on dlmalloc alone
        runs = [a_run("dlmalloc", 1, 5.0), a_run("tessalloc", 1, 3.0)]
        row = [r for r in re_mod.a_targets(runs, [], [1], nproc=2)
               if "faster than both peers" in r]
        self.assertEqual(row, ["| 1 thread: faster than both peers | tessalloc 3.0 ms vs "
                               "dlmalloc 5.0 ms, snmalloc n/a | n/a |"])
        # slower than the one measured: FAIL whatever the other would say
        runs = [a_run("dlmalloc", 1, 2.0), a_run("tessalloc", 1, 3.0)]
        row = [r for r in re_mod.a_targets(runs, [], [1], nproc=2)
               if "faster than both peers" in r]
        self.assertTrue(row[0].endswith(f"| {re_mod.verdict(False)} |"), row[0])
        runs += [a_run("snmalloc", 1, 4.0), a_run("dlmalloc", 1, 4.0), a_run("dlmalloc", 1, 5.0)]
        row = [r for r in re_mod.a_targets(runs, [], [1], nproc=2)
               if "faster than both peers" in r]
        self.assertTrue(row[0].endswith(f"| {re_mod.verdict(True)} |"), row[0])

    def test_every_thread_count_target_needs_both_at_every_count(self) -> None:
        # snmalloc without a result at 2 threads: PASS over 1 and 3 alone before
        runs = [a_run("tessalloc", n, 3.0) for n in (1, 2, 3)]
        runs += [a_run("snmalloc", n, 4.0) for n in (1, 3)]
        row = [r for r in re_mod.a_targets(runs, [], [1, 2, 3], nproc=2)
               if "at every thread count" in r]
        self.assertEqual(row, ["| no slower than snmalloc at every thread count | worst "
                               "tessalloc ÷ snmalloc 0.750 at 3 threads (no result of both "
                               "at 2 threads) | n/a |"])
        # slower where both ran: FAIL all the same
        runs.append(a_run("tessalloc", 3, 5.0))
        runs.append(a_run("tessalloc", 3, 5.0))
        row = [r for r in re_mod.a_targets(runs, [], [1, 2, 3], nproc=2)
               if "at every thread count" in r]
        self.assertTrue(row[0].endswith(f"| {re_mod.verdict(False)} |"), row[0])
        runs.append(a_run("snmalloc", 2, 4.0))
        runs = [r for r in runs if not (r.allocator == "tessalloc" and r.threads == 3)]
        runs.append(a_run("tessalloc", 3, 3.0))
        row = [r for r in re_mod.a_targets(runs, [], [1, 2, 3], nproc=2)
               if "at every thread count" in r]
        self.assertTrue(row[0].endswith(f"| {re_mod.verdict(True)} |"), row[0])

    def test_ratio_interval_pairs_the_rounds(self) -> None:
        def rounds(name: str, threads: int, times: list[float]) -> list[re_mod.ARun]:
            return [dataclasses.replace(a_run(name, threads, ms), repetition=k + 1)
                    for k, ms in enumerate(times)]
        # each round's host speed moves both alike: paired, the 10 % lead
        # stands out of a spread of 2x
        host = [1.0, 2.0, 1.2, 1.8, 1.1, 1.9, 1.5, 1.3, 1.7, 1.4]
        runs = rounds("tessalloc", 4, [10 * h for h in host])
        runs += rounds("snmalloc", 4, [11 * h for h in host])
        low, high = re_mod.ratio_interval(runs, "snmalloc", 4)
        self.assertGreater(low, 1.05)
        self.assertLess(high, 1.15)
        self.assertEqual(re_mod.ratio_interval(runs, "snmalloc", 4), (low, high))
        # noise alone: the interval holds 1
        runs = rounds("tessalloc", 4, [10 * h for h in host])
        runs += rounds("snmalloc", 4, [10 * h for h in reversed(host)])
        low, high = re_mod.ratio_interval(runs, "snmalloc", 4)
        self.assertLess(low, 1.0)
        self.assertGreater(high, 1.0)
        # too few rounds of both
        runs = rounds("tessalloc", 4, [10.0] * 4) + rounds("snmalloc", 4, [11.0] * 4)
        self.assertIsNone(re_mod.ratio_interval(runs, "snmalloc", 4))

    def test_every_thread_count_target_tells_a_lag_beyond_the_noise(self) -> None:
        host = [1.0, 2.0, 1.2, 1.8, 1.1, 1.9, 1.5, 1.3, 1.7, 1.4]
        runs = []
        for k, h in enumerate(host):
            for name, ms in (("tessalloc", 10.0), ("snmalloc", 11.0)):
                runs.append(dataclasses.replace(a_run(name, 1, ms * h), repetition=k + 1))
            for name, ms in (("tessalloc", 12.0), ("snmalloc", 10.0)):
                runs.append(dataclasses.replace(a_run(name, 2, ms * h), repetition=k + 1))
        row = [r for r in re_mod.a_targets(runs, [], [1, 2], nproc=2)
               if "at every thread count" in r]
        self.assertIn("behind at 2 threads, beyond the noise at 2 threads", row[0])
        self.assertTrue(row[0].endswith(f"| {re_mod.verdict(False)} |"), row[0])

    def test_b_footprint_just_past_the_target_prints_past_it(self) -> None:
        rows = re_mod.b_targets([b_run("tessalloc", 1203)], ["pooled"])
        judged = [r for r in rows if "peak footprint <=" in r]
        self.assertEqual(len(judged), 1)
        self.assertIn("| 1.203 |", judged[0])
        self.assertIn(re_mod.verdict(False), judged[0])
        rows = re_mod.b_targets([b_run("tessalloc", 1200)], ["pooled"])
        judged = [r for r in rows if "peak footprint <=" in r]
        self.assertIn("| 1.200 |", judged[0])
        self.assertIn(re_mod.verdict(True), judged[0])

    def test_a_figure_at_a_limit_prints_on_its_side_of_it(self) -> None:
        # three decimals showed 1.2004 as 1.200, the target itself, beside
        # its FAIL; the same at the speed and footprint targets of A
        self.assertEqual(re_mod.fmt_judged(1.2004, 1.2), "1.2004")
        self.assertEqual(re_mod.fmt_judged(1.19999, 1.2), "1.19999")
        self.assertEqual(re_mod.fmt_judged(1.2, 1.2), "1.200")
        self.assertEqual(re_mod.fmt_judged(1.1504, 1.2, 1.15), "1.1504")
        self.assertEqual(re_mod.fmt_judged(1.2034), "1.203")
        self.assertEqual(re_mod.fmt_judged(None, 1.2), "n/a")
        mib = 1 << 20
        runs = [a_run("tessalloc", 1, 10.004), a_run("snmalloc", 1, 10.0),
                a_run("dlmalloc", 1, 20.0),
                a_run("tessalloc", 2, 1.0, footprint=20004 * mib // 10000),
                a_run("dlmalloc", 2, 20.0, footprint=mib)]
        rows = re_mod.a_targets(runs, [], [1, 2], nproc=2)
        worst = [r for r in rows if "at every thread count" in r]
        self.assertIn("worst tessalloc ÷ snmalloc 1.0004 at 1 thread", worst[0])
        self.assertTrue(worst[0].endswith(f"| {re_mod.verdict(False)} |"), worst[0])
        footprint = [r for r in rows if "peak footprint <=" in r]
        self.assertIn("| 2.0004x | FAIL |", footprint[0])
        rows = re_mod.a_targets([a_run("tessalloc", 1, 1.0), a_run("dlmalloc", 1, 19.9996)],
                                [], [1], nproc=8)
        speed = [r for r in rows if "faster than dlmalloc" in r]
        self.assertIn("| 19.9996x | FAIL |", speed[0])

    def test_one_thread_times_print_apart_where_they_differ(self) -> None:
        # 5.71 ms against snmalloc's 5.74 printed 'tessalloc 5.7 ms vs ...
        # snmalloc 5.7 ms' beside PASS ('faster than both')
        runs = [a_run("tessalloc", 1, 5.71), a_run("snmalloc", 1, 5.74),
                a_run("dlmalloc", 1, 8.0)]
        row = [r for r in re_mod.a_targets(runs, [], [1], nproc=2)
               if "faster than both peers" in r]
        self.assertEqual(row, ["| 1 thread: faster than both peers | tessalloc 5.7 ms vs "
                               "dlmalloc 8.0 ms, snmalloc 5.74 ms | PASS |"])

    def test_a_ratios_and_interval_at_one_print_on_their_side(self) -> None:
        # snmalloc 0.04 % ahead in every round: a ratio and an interval of
        # 0.9996, 'behind' and 'beyond the noise', printed 1.00 and
        # 1.00-1.00 ('one that lies wholly below 1 is a lag beyond the noise')
        runs = []
        for k in range(5):
            for name, ms in (("tessalloc", 10.0), ("snmalloc", 9.996)):
                runs.append(dataclasses.replace(a_run(name, 1, ms), repetition=k + 1))
        md = re_mod.a_section(runs, [], ["snmalloc", "tessalloc"], [1],
                              re_mod.parse_args([]), nproc=2)
        self.assertIn("| 1 | 10.0 | 10.0 | 0.9996 | 0.9996–0.9996 |", md)
        self.assertTrue(any("behind at 1 thread, beyond the noise at 1 thread" in r
                            for r in md))

    def test_b_figures_at_a_limit_print_on_their_side_of_it(self) -> None:
        run = dataclasses.replace(b_run("tessalloc", 12004), peak_live_bytes=10000,
                                  peak_touched_bytes=11999)
        rows = re_mod.b_targets([run], ["pooled"])
        judged = [r for r in rows if "peak footprint <=" in r]
        self.assertIn("| 1.2004 | FAIL |", judged[0])
        touched = [r for r in rows if "touched pages" in r]
        self.assertIn("| 1.1999 | PASS |", touched[0])
        args = re_mod.parse_args(["--quick"])
        with tempfile.TemporaryDirectory() as folder:
            md = re_mod.b_section([dataclasses.replace(run, series_csv="b.csv")],
                                  ["tessalloc"], ["pooled"], args, Path(folder))
        row = [r for r in md if r.startswith("| tessalloc | pooled |")]
        self.assertIn("| 1.2004 | n/a |", row[0])
        self.assertIn("| 1.1999 | 0 |", row[0])
        # the speed targets: 2.4996x dlmalloc's printed 2.500x beside FAIL
        def rated(name: str, mallocs: int) -> re_mod.BRun:
            return dataclasses.replace(b_run(name, 1100), mallocs=mallocs,
                                       worker_mallocs=mallocs)

        rows = re_mod.b_targets([rated("tessalloc", 24996), rated("dlmalloc", 10000),
                                 rated("snmalloc", 24997)], ["pooled"])
        dl = [r for r in rows if "2.5 x dlmalloc's" in r]
        self.assertIn("| 2.4996x, workers' calls 2.4996x (", dl[0])
        self.assertTrue(dl[0].endswith("| FAIL |"), dl[0])
        sn = [r for r in rows if "snmalloc's |" in r]
        self.assertIn("| 0.99996x, workers' calls 0.99996x (", sn[0])

    def test_b_footprint_over_time_is_recorded_beside_the_peaks(self) -> None:
        # the start-up samples and the last (when the threads stopped) are left
        # out: 2 samples of 300 and 330 bytes of footprint for 200 and 300
        # live make 630 / 500
        series = {"t_s": [0, 0.5, 1, 1.5, 2],
                  "live_bytes": [0, 100, 200, 300, 50],
                  "footprint_bytes": [4096, 9999, 300, 330, 8000]}
        self.assertAlmostEqual(re_mod.mean_footprint_ratio(series), 1.26)
        unknown = dict(series, footprint_bytes=[-1, -1, -1, -1, -1])
        self.assertIsNone(re_mod.mean_footprint_ratio(unknown))
        self.assertIsNone(re_mod.mean_footprint_ratio(
            {"live_bytes": [0, 1, 2], "footprint_bytes": [1, 2, 3]}))
        # recorded for every allocator, tessalloc first; the judged peak
        # ratio is unchanged by it
        rows = re_mod.b_targets([b_run("dlmalloc", 1100, 1.301),
                                 b_run("tessalloc", 1267, 1.2724),
                                 b_run("mimalloc3", -1)], ["pooled"])
        over = [r for r in rows if "over time" in r]
        self.assertEqual(over, ["| pooled | footprint ÷ live over time "
                                "(recorded, not a target; each allocator's own "
                                "measure) | tessalloc 1.272, dlmalloc 1.301 | n/a |"])
        judged = [r for r in rows if "peak footprint <=" in r]
        self.assertIn("| 1.267 |", judged[0])
        self.assertIn(re_mod.verdict(False), judged[0])

    def test_b_speed_is_judged_on_allocation_calls(self) -> None:
        # tessalloc makes more ECALLs (cheap ones of the other threads) but
        # only 1.1x the allocation calls of snmalloc, 0.9x those of dlmalloc
        def run(name: str, ecalls_per_s: float, worker: int, mallocs: int,
                worker_mallocs: int = -1) -> re_mod.BRun:
            return dataclasses.replace(b_run(name, 1100), ecalls_per_s=ecalls_per_s,
                                       worker_ecalls=worker, mallocs=mallocs,
                                       worker_mallocs=worker_mallocs)

        rows = re_mod.b_targets([run("tessalloc", 300.0, 90, 1100),
                                 run("snmalloc", 100.0, 90, 1000),
                                 run("dlmalloc", 40.0, 30, 1222)], ["pooled"])
        sn = [r for r in rows if "snmalloc's |" in r]
        self.assertEqual(sn, ["| pooled | allocation calls/s, all threads and workers alone, "
                              ">= snmalloc's | 1.100x, workers' calls n/a "
                              "(ECALLs/s 3.00x, worker ECALLs/s 1.00x) | "
                              f"{re_mod.verdict(True)} |"])
        dl = [r for r in rows if "2.5 x dlmalloc's" in r]
        self.assertEqual(len(dl), 1)
        self.assertIn("| 0.900x, workers' calls n/a (ECALLs/s 7.50x, worker ECALLs/s 3.00x) |",
                      dl[0])
        self.assertIn(re_mod.verdict(False), dl[0])
        # the published pooled run's shape: more calls in all (the other
        # threads' short ECALLs) but fewer in the workers' bursts: FAIL
        rows = re_mod.b_targets([run("tessalloc", 300.0, 90, 1548, 1204),
                                 run("snmalloc", 100.0, 90, 1325, 1226)], ["pooled"])
        sn = [r for r in rows if "snmalloc's |" in r]
        self.assertIn("| 1.168x, workers' calls 0.982x (", sn[0])
        self.assertIn(re_mod.verdict(False), sn[0])

    def test_b_speed_shows_the_workers_calls_per_cpu_second_unjudged(self) -> None:
        # tessalloc's workers got 10 CPU-seconds for 1204 calls, snmalloc's
        # 8 for 1150 (its waiting threads slept): 0.84x per CPU-second,
        # shown; the verdict stays the lower of the two per-second ratios
        def run(name: str, mallocs: int, worker_mallocs: int, cpu: float) -> re_mod.BRun:
            return dataclasses.replace(b_run(name, 1100), mallocs=mallocs,
                                       worker_mallocs=worker_mallocs, worker_cpu_s=cpu)

        rows = re_mod.b_targets([run("tessalloc", 1300, 1204, 10.0),
                                 run("snmalloc", 1250, 1150, 8.0)], ["pooled"])
        sn = [r for r in rows if "snmalloc's |" in r]
        self.assertIn("| 1.040x, workers' calls 1.047x (", sn[0])
        self.assertIn("workers' calls per CPU-second 0.84x)", sn[0])
        self.assertIn(re_mod.verdict(True), sn[0])
        # without CPU times (an older enclave_bench): nothing said of them
        rows = re_mod.b_targets([run("tessalloc", 1300, 1204, math.nan),
                                 run("snmalloc", 1250, 1150, math.nan)], ["pooled"])
        self.assertNotIn("CPU-second", [r for r in rows if "snmalloc's |" in r][0])

    def test_b_table_prints_the_judged_ratios_with_three_decimals(self) -> None:
        args = re_mod.parse_args(["--quick"])
        with tempfile.TemporaryDirectory() as folder:
            run = dataclasses.replace(b_run("tessalloc", 1203, 1.2034),
                                      series_csv="b_tessalloc_pooled.csv")
            md = re_mod.b_section([run], ["tessalloc"],
                                  ["pooled"], args, Path(folder))
        row = [r for r in md if r.startswith("| tessalloc | pooled |")]
        self.assertEqual(len(row), 1)
        self.assertIn("| 1.203 | 1.203 |", row[0])
        self.assertIn("| 1.500 |", row[0])  # touched: 1500 / 1000

    def test_footprint_budget(self) -> None:
        series = {"t_s": [0.01, 0.5, 1.002, 1.5, 2.0],
                  "live_bytes": [10, 20, 1000, 2000, 5],
                  "footprint_bytes": [0, 0, 0, 0, 0]}

        def line(ms: int, footprint: int, live: int,
                 free: tuple[int, int, int, int]) -> dict:
            return {"time_ms": ms, "footprint": footprint, "live_bytes": live,
                    "slab_free": {"current": free[0], "held": free[1], "orphaned": free[2],
                                  "pending": free[3]},
                    "kept_span_bytes": 8, "empty_slab_bytes": 2, "deferred_span_bytes": 3}

        stats = [line(10, 1, 1, (0, 0, 0, 0)), line(500, 1, 1, (0, 0, 0, 0)),
                 line(1001, 1500, 1100, (40, 20, 200, 6)),  # the JSON cuts 1.0015 s
                 line(1500, 2900, 2300, (60, 40, 300, 4)), line(2000, 1, 1, (0, 0, 0, 0))]
        parts = re_mod.footprint_budget(series, stats)
        assert parts is not None
        # samples 1.0 and 1.5 s only, as mean_footprint_ratio takes them
        self.assertEqual(parts, {"live": 1500, "rounding": 200, "current": 50, "held": 30,
                                 "orphaned": 250, "pending": 5, "kept": 10,
                                 "rest": 2200 - 2045})  # deferred spans are free: no part
        rows = re_mod.budget_rows("tessalloc", "pooled", parts)
        self.assertEqual(len(rows), len(re_mod.BUDGET_PARTS) + 1)
        self.assertTrue(rows[-1].endswith("| 1.467 |"), rows[-1])  # 2200 / 1500
        # a sample without its line, or a line of the old format: no budget
        self.assertIsNone(re_mod.footprint_budget(series, stats[:3] + stats[4:]))
        old = [dict(x) for x in stats]
        del old[3]["slab_free"]
        self.assertIsNone(re_mod.footprint_budget(series, old))


class OptionsTest(unittest.TestCase):
    def test_lists_drop_blanks_and_repeats(self) -> None:
        self.assertEqual(re_mod.names_list(" tessalloc, dlmalloc,,tessalloc "),
                         ["tessalloc", "dlmalloc"])
        self.assertEqual(re_mod.parse_args(["--workloads", "b, a,b"]).workloads, ["b", "a"])

    def test_bad_values_are_refused(self) -> None:
        for bad in (["--warmup-rounds", "-1"], ["--duration", "0"], ["--duration", "nan"],
                    ["--num-allocations", "0"], ["--workers", "0"], ["--others", "-1"],
                    ["--sample-interval", "-0.5"], ["--workloads", ","], ["--hosts", " "],
                    ["--fill-seconds", "-1"], ["--fill-seconds", "nan"], ["--repeat-max", "0"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit), \
                    unittest.mock.patch("sys.stderr"):
                re_mod.parse_args(bad)
        self.assertEqual(re_mod.parse_args(["--warmup-rounds", "0", "--others", "0"]).others, 0)


class OutputTest(unittest.TestCase):
    """The results in --out are replaced whole at the end, or not at all."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.out = root / "out"
        self.out.mkdir()
        self.old = {"a_runs.csv": "old a", "b_runs.csv": "old b", "summary.md": "old summary",
                    "meta.json": "{}", "notes.txt": "the user's"}
        for name, text in self.old.items():
            (self.out / name).write_text(text)
        (self.out / "experiments").mkdir()
        self.plugin = root / "libfixed_x.so"
        self.plugin.write_text("")

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def contents(self) -> dict[str, str]:
        return {p.name: p.read_text() for p in self.out.iterdir() if p.is_file()}

    def test_an_interrupted_run_leaves_the_results_as_they_were(self) -> None:
        def interrupted(*args: object) -> int:
            stage = args[-1]
            assert isinstance(stage, Path) and stage.parent == self.out
            (stage / "a_runs.csv").write_text("half of a new run")
            raise KeyboardInterrupt

        argv = ["--bench", "/bin/true", "--allocators", str(self.plugin), "--out",
                str(self.out)]
        with unittest.mock.patch.object(re_mod, "run_staged", interrupted), \
                unittest.mock.patch("sys.stderr"):
            self.assertEqual(re_mod.main(argv), 130)
        self.assertEqual(self.contents(), self.old)
        self.assertEqual(sorted(p.name for p in self.out.iterdir() if p.is_dir()),
                         ["experiments"])

    def run_a_job(self, argv: list[str],
                  fake_run_a: object) -> tuple[int, str]:
        """run_staged with A's runs made by fake_run_a; its status and
        summary.md."""
        args = re_mod.parse_args(argv + ["--workloads", "a", "--out", str(self.out)])
        plugins = [re_mod.Plugin("tessalloc", "t.so", "1", ""),
                   re_mod.Plugin("broken", "b.so", "1", "")]
        stage = self.out / ".partial-test"
        stage.mkdir()
        with unittest.mock.patch.object(re_mod, "run_a", fake_run_a), \
                unittest.mock.patch("sys.stderr"), unittest.mock.patch("sys.stdout"):
            status = re_mod.run_staged(args, plugins, [], Path("/bin/true"), "test",
                                       re_mod.datetime.datetime.now(), stage)
        return status, (self.out / "summary.md").read_text()

    def test_runs_without_a_result_get_no_fill_runs(self) -> None:
        # a peer that crashes at every run (no result, nothing kept) was
        # given --repeat-max attempts at every count, since its attempts
        # were short: each one more crash and finding, and the cap counted
        # attempts, not the runs behind a median
        calls: dict[str, int] = {}

        def fake_run_a(bench: Path, plugin: re_mod.Plugin, threads: int,
                       repetition: int, args: argparse.Namespace,
                       overlap: bool = False) -> tuple[re_mod.ARun, str]:
            calls[plugin.name] = calls.get(plugin.name, 0) + 1
            if plugin.name == "broken":
                raise re_mod.BenchError("A broken: exit 1: corruption")
            return dataclasses.replace(a_run(plugin.name, threads, 1.0),
                                       repetition=repetition), ""

        status, _ = self.run_a_job(["--max-threads", "1", "--repeat", "2",
                                    "--warmup-rounds", "0", "--fill-seconds", "60",
                                    "--repeat-max", "4"], fake_run_a)
        self.assertEqual(status, 0)
        self.assertEqual(calls, {"tessalloc": 4, "broken": 2})

    def test_a_finished_run_replaces_its_workloads_files(self) -> None:
        stage = self.out / ".partial-x"
        stage.mkdir()
        (stage / "a_runs.csv").write_text("new a")
        (stage / "a_time_vs_threads.png").write_text("new plot")
        (stage / "summary.md").write_text("new summary")
        (self.out / "a_table.txt").write_text("old table, not made this time")
        re_mod.move_results(stage, self.out, ["a"])
        self.assertEqual(self.contents(), {
            "a_runs.csv": "new a", "a_time_vs_threads.png": "new plot",
            "summary.md": "new summary", "b_runs.csv": "old b", "meta.json": "{}",
            "notes.txt": "the user's"})


if __name__ == "__main__":
    unittest.main()
