"""Plots and report of a small synthetic results directory."""

from __future__ import annotations

import csv
import json
import re
import tempfile
import unittest
from pathlib import Path

import matplotlib.image

from tessbench import aggregate as ag
from tessbench.plot import plot_all
from tessbench.report import (fmt_num, fmt_ratio, oversubscription_sentence, ratio_class,
                              render_markdown, workload_blocks, write_report)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# (workload, allocator, threads) -> per repetition (status, ops_per_s, max_rss_kib).
# Hand-computed medians and ratios to glibc:
#   larson 1: glibc 200, tessalloc 600 -> 3.00; rss 3072 vs 1024 KiB -> 0.33
#   larson 4: glibc 500, tessalloc 1000 (rep 2 crashed) -> 2.00; rss 8192 vs 4096 -> 0.50
#   frag 1: 1000 vs 1500 -> 1.50; rss 10240 vs 5120 -> 0.50
#   frag 4: 2000 vs 2000 -> 1.00; rss 10240 vs 20480 -> 2.00
# Geometric means for tessalloc: throughput (3 * 2 * 1.5 * 1) ** 0.25 = 1.73,
# RSS (1/3 * 0.5 * 0.5 * 2) ** 0.25 = 0.64, each over 4 of 4 cells;
# per thread count: 1 -> sqrt(3 * 1.5) = 2.12, 4 -> sqrt(2 * 1) = 1.41.
DATA: dict[tuple[str, str, int], list[tuple[str, float, int]]] = {
    ("larson", "glibc", 1): [("ok", 100.0, 2048), ("ok", 300.0, 4096)],
    ("larson", "tessalloc", 1): [("ok", 500.0, 1024), ("ok", 700.0, 1024)],
    ("larson", "glibc", 4): [("ok", 400.0, 8192), ("ok", 600.0, 8192)],
    ("larson", "tessalloc", 4): [("ok", 1000.0, 4096), ("crashed", 0.0, 0)],
    ("frag", "glibc", 1): [("ok", 1000.0, 10240), ("ok", 1000.0, 10240)],
    ("frag", "tessalloc", 1): [("ok", 1500.0, 5120), ("ok", 1500.0, 5120)],
    ("frag", "glibc", 4): [("ok", 2000.0, 10240), ("ok", 2000.0, 10240)],
    ("frag", "tessalloc", 4): [("ok", 2000.0, 20480), ("ok", 2000.0, 20480)],
}

SERIES_HEADER = ["t_s", "live_bytes", "footprint_bytes", "touched_bytes", "ecalls", "nulls",
                 "mallocs", "pool_bytes"]


def meta() -> dict[str, object]:
    return {
        "tessbench": "0.1.0", "started": "2026-03-04T05:06:07+00:00",
        "finished": "2026-03-04T05:16:07+00:00",
        "command": "tessbench run --threads 1,4 --repeat 2 --allocators glibc,tessalloc",
        "git": {"commit": "c0ffee1234", "dirty": "no"},
        "machine": {"cpus": 2, "cpu_model": "Synthetic CPU @ 3 GHz", "memory_kib": 16777216,
                    "os": "Debian GNU/Linux 12", "kernel": "6.1.0"},
        "baseline": "glibc",
        "allocators": {
            "glibc": {"version": "2.36", "source": "the system", "kind": "system",
                      "library": None},
            "tessalloc": {"version": "0.3.0", "source": "this repository", "kind": "preload",
                          "library": "build/libtessalloc.so"}},
        "workloads": {
            "larson": {"description": "server simulation <with> handed-off blocks & frees",
                       "unit": "malloc+free pairs"},
            "frag": {"description": "the fragmentation soak", "unit": "ECALLs"}},
        "threads": [1, 4], "repeat": 2, "quick": False,
        "skipped": [{"workload": "x509-fixed", "allocator": "glibc",
                     "reason": "glibc has no fixed-heap plugin"}],
        "failures": [{"workload": "larson", "allocator": "tessalloc", "threads": 4,
                      "repetition": 2, "status": "crashed",
                      "message": "killed by signal 11 <script>alert(1)</script>"}],
        "runs": [],
    }


def write_series(path: Path, scale: float, footprint_known: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SERIES_HEADER)
        for i in range(20):
            live = int(scale * (1 + i % 5) * 1024 * 1024)
            footprint = int(live * 1.3) if footprint_known else -1
            writer.writerow([i * 0.1, live, footprint, live, i * 10, 0, i * 100, 4096])


def make_out_dir(out: Path) -> None:
    columns = [*ag.FIXED_COLUMNS, "footprint_ratio", "series_csv"]
    with (out / "runs.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        for (workload, allocator, threads), reps in DATA.items():
            for rep, (status, ops_per_s, rss) in enumerate(reps, start=1):
                row = {"workload": workload, "allocator": allocator, "threads": threads,
                       "repetition": rep, "status": status}
                if status == "ok":
                    row.update(elapsed_s=2.0, ops=int(ops_per_s * 2), ops_per_s=ops_per_s,
                               max_rss_kib=rss, user_s=1.5, sys_s=0.25, minor_faults=100,
                               major_faults=0, wall_s=2.1)
                    if workload == "frag":
                        rel = f"series/frag_{allocator}_t{threads}_r{rep}.csv"
                        write_series(out / rel, 1.0 + rep / 10, allocator == "tessalloc")
                        row.update(series_csv=rel, footprint_ratio=1.3)
                writer.writerow(row)
    (out / "meta.json").write_text(json.dumps(meta()))


def table_row(markdown: str, section: str, allocator: str, threads: int) -> list[str]:
    """The cells of the row of allocator at threads in the table under the heading."""
    start = markdown.index(f"## {section}\n")
    end = markdown.find("\n## ", start + 1)
    text = markdown[start:end if end >= 0 else len(markdown)]
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] == allocator and cells[1] == str(threads):
            return cells
    raise AssertionError(f"no row {allocator} {threads} under {section}")


class FormatTest(unittest.TestCase):
    """The numbers and verdicts of the tables, at their rounding boundaries."""

    def test_fmt_num_keeps_four_significant_digits_across_a_decade(self) -> None:
        # rounding to 4 significant digits may carry into the next decade
        self.assertEqual(fmt_num(999.96), "1,000")
        self.assertEqual(fmt_num(9.99996), "10.00")
        self.assertEqual(fmt_num(0.099996), "0.1000")
        self.assertEqual(fmt_num(999.94), "999.9")
        self.assertEqual(fmt_num(0.01083), "0.01083")

    def test_one_printed_ratio_gets_one_verdict(self) -> None:
        for higher_is_better in (True, False):
            for low, high in ((0.9751, 0.9849), (1.0151, 1.0249), (0.9651, 0.9749),
                              (1.0251, 1.0349)):
                self.assertEqual(fmt_ratio(low), fmt_ratio(high))
                self.assertEqual(ratio_class(low, higher_is_better),
                                 ratio_class(high, higher_is_better), (low, high))
        # the band is 0.98 to 1.02 as printed
        self.assertEqual(ratio_class(0.9751, True), "")
        self.assertEqual(ratio_class(1.0249, True), "")
        self.assertEqual(ratio_class(0.9749, True), "worse")
        self.assertEqual(ratio_class(1.0251, True), "better")
        self.assertEqual(ratio_class(1.0251, False), "worse")


class ReportTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name) / "out"
        self.out.mkdir()
        make_out_dir(self.out)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_plots(self) -> None:
        pngs = plot_all(self.out)
        names = sorted(p.name for p in pngs)
        self.assertEqual(names, ["frag_series_t1.png", "frag_series_t4.png", "rss_frag.png",
                                 "rss_larson.png", "summary_vs_glibc.png",
                                 "throughput_frag.png", "throughput_larson.png"])
        for png in pngs:
            self.assertEqual(png.parent, self.out / "plots")
            with png.open("rb") as f:
                self.assertEqual(f.read(8), PNG_SIGNATURE, png.name)
            image = matplotlib.image.imread(str(png))
            self.assertGreater(image.shape[0], 200, png.name)
            self.assertGreater(image.shape[1], 200, png.name)

    def test_single_thread_count_gets_bars(self) -> None:
        rows = (self.out / "runs.csv").read_text().splitlines()
        kept = [rows[0], *(r for r in rows[1:] if ",4," not in r)]
        (self.out / "runs.csv").write_text("\n".join(kept) + "\n")
        pngs = plot_all(self.out)
        self.assertIn(self.out / "plots" / "throughput_larson.png", pngs)
        for png in pngs:
            self.assertEqual(png.read_bytes()[:8], PNG_SIGNATURE)
        md, _ = write_report(self.out)
        self.assertEqual(table_row(md.read_text(), "Workload larson", "tessalloc", 1)[5],
                         "3.00")
        self.assertNotIn("oversubscribed", md.read_text())

    def test_report(self) -> None:
        plot_all(self.out)
        md_path, html_path = write_report(self.out)
        self.assertEqual((md_path, html_path),
                         (self.out / "report.md", self.out / "report.html"))
        md = md_path.read_text()
        page = html_path.read_text()
        for text in (md, page):
            for name in ("glibc", "tessalloc", "larson", "frag"):
                self.assertIn(name, text)
            self.assertIn(meta()["command"], text)
            self.assertIn("This machine has 2 CPUs", text)
            self.assertIn("oversubscribed", text)
            self.assertIn("glibc has no fixed-heap plugin", text)
            self.assertIn("2.36", text)
            self.assertIn("c0ffee1234", text)
            self.assertNotIn("c0ffee1234 + changes", text)
            self.assertIn("malloc+free pairs", text)
            self.assertIn("footprint_ratio", text)

        # the mimalloc-bench style tables: hand-computed medians and ratios
        # columns: allocator threads ok elapsed ops/s ratio rss ratio user sys minor major
        row = table_row(md, "Workload larson", "tessalloc", 1)
        self.assertEqual(row[2], "2/2")
        self.assertEqual(row[4], fmt_num(600.0))
        self.assertEqual((row[5], row[6], row[7]), ("3.00", "1.0", "0.33"))
        self.assertEqual((row[8], row[9], row[10], row[11]), ("1.500", "0.2500", "100", "0"))
        row = table_row(md, "Workload larson", "tessalloc", 4)
        self.assertEqual(row[2], "1/2 (crashed 1)")
        self.assertEqual((row[4], row[5], row[7]), (fmt_num(1000.0), "2.00", "0.50"))
        row = table_row(md, "Workload larson", "glibc", 1)
        self.assertEqual((row[4], row[5], row[6], row[7]), (fmt_num(200.0), "1.00", "3.0",
                                                            "1.00"))
        self.assertEqual(table_row(md, "Workload frag", "tessalloc", 1)[5:8:2],
                         ["1.50", "0.50"])
        self.assertEqual(table_row(md, "Workload frag", "tessalloc", 4)[5:8:2],
                         ["1.00", "2.00"])

        # the summary: geometric means over 4 of 4 cells
        self.assertIn("| tessalloc | 1.73 | 4 of 4 | 0.64 | 4 of 4 |", md)
        self.assertIn("| glibc | 1.00 | 4 of 4 | 1.00 | 4 of 4 |", md)
        self.assertIn("| tessalloc | 2.12 \\[2\\] | 1.41 \\[2\\] |", md)

        # Markdown links the plots by relative path
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
        self.assertIn("plots/throughput_larson.png", links)
        self.assertIn("plots/frag_series_t4.png", links)
        self.assertIn("plots/summary_vs_glibc.png", links)
        for link in links:
            self.assertTrue((self.out / link).is_file(), link)

        # the HTML page is self-contained and escapes its text
        self.assertIn("data:image/png;base64,", page)
        self.assertEqual(page.count("<img "), len(links))
        self.assertNotRegex(page, r"(?i)src\s*=\s*[\"']?\s*https?://")
        self.assertNotRegex(page, r"(?i)https?://")
        self.assertNotIn("<script>", page)
        self.assertIn("&lt;script&gt;", page)
        self.assertIn("&lt;with&gt; handed-off blocks &amp; frees", page)
        self.assertRegex(page, r'<td class="num better">3\.00</td>')
        self.assertRegex(page, r'<td class="num better">1\.73</td>')
        self.assertRegex(page, r'<td class="num worse">2\.00</td>')  # frag 4 threads rss

    def test_report_draws_missing_plots_and_takes_another_baseline(self) -> None:
        md_path, _ = write_report(self.out, baseline="tessalloc")
        md = md_path.read_text()
        self.assertTrue((self.out / "plots" / "summary_vs_tessalloc.png").is_file())
        self.assertTrue((self.out / "plots" / "throughput_larson.png").is_file())
        row = table_row(md, "Workload larson", "glibc", 1)
        self.assertEqual((row[5], row[7]), ("0.33", "3.00"))
        self.assertIn("| tessalloc | 1.00 | 4 of 4 | 1.00 | 4 of 4 |", md)
        self.assertIn("| glibc | 0.58 | 4 of 4 | 1.57 | 4 of 4 |", md)


class FixedHeapReportTest(unittest.TestCase):
    """A process-wide workload against glibc and a fixed-heap one against dlmalloc."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name)
        columns = [*ag.FIXED_COLUMNS, "peak_touched_bytes"]
        # enclave 1: dlmalloc 100/s, touched 4 MiB; tessalloc 300/s, 2 MiB -> 3.00, 0.50
        # enclave 2: dlmalloc 100/s, 4 MiB; tessalloc 1200/s, 8 MiB -> 12.00, 2.00
        # geometric means: throughput sqrt(3 * 12) = 6.00, memory sqrt(0.5 * 2) = 1.00
        # larson 1: glibc 100/s, rss 1024 KiB; tessalloc 200/s, 512 KiB -> 2.00, 0.50
        rows = [("enclave", "dlmalloc", 1, 100.0, 4), ("enclave", "tessalloc", 1, 300.0, 2),
                ("enclave", "dlmalloc", 2, 100.0, 4), ("enclave", "tessalloc", 2, 1200.0, 8),
                ("larson", "glibc", 1, 100.0, 0), ("larson", "tessalloc", 1, 200.0, 0)]
        with (self.out / "runs.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, restval="")
            writer.writeheader()
            for workload, allocator, threads, rate, touched_mib in rows:
                row: dict[str, object] = {
                    "workload": workload, "allocator": allocator, "threads": threads,
                    "repetition": 1, "status": "ok", "elapsed_s": 1.0, "ops": int(rate),
                    "ops_per_s": rate, "user_s": 1.0, "sys_s": 0.0, "minor_faults": 10,
                    "major_faults": 0,
                    # the harness fills the heap: the same RSS for every allocator
                    "max_rss_kib": 34000 if workload == "enclave" else
                    (1024 if allocator == "glibc" else 512)}
                if touched_mib:
                    row["peak_touched_bytes"] = touched_mib << 20
                writer.writerow(row)
        doc = meta()
        doc.update(baseline="glibc", fixed_baseline="dlmalloc", threads=[1, 2], repeat=1,
                   failures=[], skipped=[])
        doc["allocators"] = {"glibc": {"version": "2.36", "kind": "system"},
                             "tessalloc": {"version": "0.1.0", "kind": "preload"},
                             "dlmalloc": {"version": "0.2.14", "kind": "fixed"}}
        doc["workloads"] = {"enclave": {"unit": "malloc+free pairs", "kind": "fixed"},
                            "larson": {"unit": "malloc+free pairs", "kind": "preload"}}
        doc["conformance_checks"] = {"malloc_huge_enomem": "malloc(SIZE_MAX): NULL, ENOMEM",
                                     "pvalloc_usable_free": "pvalloc works"}
        doc["conformance"] = {
            "glibc": {"malloc_huge_enomem": "ok", "pvalloc_usable_free": "ok"},
            "tessalloc": {"malloc_huge_enomem": "fail: errno-0",
                          "pvalloc_usable_free": "crash: signal-11"}}
        (self.out / "meta.json").write_text(json.dumps(doc))

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_fixed_heap_workloads_by_kind(self) -> None:
        """By the workload's kind, not by who ran it: with tessalloc, which runs
        both kinds, as the baseline, enclave was taken to it (a review)."""
        results = ag.load_results(self.out, baseline="tessalloc")
        self.assertEqual(results.baseline_of("enclave"), "dlmalloc")
        self.assertEqual(results.baseline_of("larson"), "tessalloc")
        self.assertEqual([(g.baseline, g.workloads) for g in results.groups()],
                         [("tessalloc", ("larson",)), ("dlmalloc", ("enclave",))])
        # the fixed-heap baseline did not run: its group stays, without ratios
        results = ag.load_results(self.out, fixed_baseline="snmalloc")
        self.assertEqual([(g.baseline, g.workloads) for g in results.groups()],
                         [("glibc", ("larson",)), ("snmalloc", ("enclave",))])
        self.assertIsNone(results.ratio(("enclave", "tessalloc", 1), ag.THROUGHPUT))

    def test_two_baselines(self) -> None:
        results = ag.load_results(self.out)
        self.assertEqual(results.baseline_of("larson"), "glibc")
        self.assertEqual(results.baseline_of("enclave"), "dlmalloc")
        self.assertEqual(results.memory_metric("enclave"), ag.TOUCHED)
        self.assertEqual(results.memory_metric("larson"), ag.RSS)
        self.assertEqual([(g.title, g.baseline, g.workloads) for g in results.groups()],
                         [("process-wide workloads", "glibc", ("larson",)),
                          ("fixed-heap workloads", "dlmalloc", ("enclave",))])
        md = write_report(self.out)[0].read_text()
        process = md[md.index("### Process-wide workloads, against glibc"):]
        fixed = md[md.index("### Fixed-heap workloads, against dlmalloc"):]
        self.assertIn("| tessalloc | 2.00 | 1 of 1 | 0.50 | 1 of 1 |",
                      process[:process.index("###", 4)])
        self.assertIn("| tessalloc | 6.00 | 2 of 2 | 1.00 | 2 of 2 |", fixed)
        self.assertIn("| dlmalloc | 1.00 | 2 of 2 | 1.00 | 2 of 2 |", fixed)
        # the enclave table: rss ratio 1.00 for all, touched MiB and its ratio
        row = table_row(md, "Workload enclave", "tessalloc", 2)
        self.assertEqual((row[5], row[7], row[8], row[9]), ("12.00", "1.00", "8.0", "2.00"))
        self.assertIn("touched ratio", md)
        names = sorted(p.name for p in (self.out / "plots").glob("*.png"))
        self.assertIn("summary_vs_dlmalloc.png", names)
        self.assertIn("summary_vs_glibc.png", names)
        self.assertIn("touched_enclave.png", names)
        self.assertIn("rss_larson.png", names)
        self.assertIn("dlmalloc (fixed-heap baseline)", md)
        # the edge cases: per allocator what went as expected, and the findings
        self.assertIn("| glibc | 2 of 2 | none |", md)
        self.assertIn("| tessalloc | 0 of 2 | malloc_huge_enomem (fail: errno-0); "
                      "pvalloc_usable_free (crash: signal-11) |", md)
        self.assertIn("| pvalloc_usable_free | pvalloc works |", md)


class OwnColumnsTest(unittest.TestCase):
    """A workload's own columns: integers without invented decimals, "cannot tell" as n/a."""

    def test_integers_and_unknowns(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            columns = [*ag.FIXED_COLUMNS, "footprint_ratio", "generations",
                       "peak_footprint_bytes"]
            # (allocator, repetition, footprint_ratio, generations, peak_footprint_bytes)
            rows = [("tessalloc", 1, "1.25", "2", "1048576"),
                    ("tessalloc", 2, "1.5", "3", "2097152"),
                    ("mimalloc3", 1, "", "2", "-1"), ("mimalloc3", 2, "", "2", "-1")]
            with (out / "runs.csv").open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, restval="")
                writer.writeheader()
                for allocator, rep, ratio, generations, footprint in rows:
                    writer.writerow({
                        "workload": "frag", "allocator": allocator, "threads": 1,
                        "repetition": rep, "status": "ok", "elapsed_s": 1.0, "ops": 100,
                        "ops_per_s": 100.0, "footprint_ratio": ratio,
                        "generations": generations, "peak_footprint_bytes": footprint})
            (out / "meta.json").write_text(json.dumps({"fixed_baseline": "tessalloc"}))
            results = ag.load_results(out)
            md = render_markdown(workload_blocks(results, "frag", []), out)
        self.assertIn("n/a: the allocator cannot tell", md)
        own = "## Own\n" + md[md.index("The workload's own columns"):]
        # columns: allocator threads footprint_ratio generations peak_footprint_bytes
        self.assertEqual(table_row(own, "Own", "tessalloc", 1)[2:],
                         ["1.375", "2.5", "1,572,864"])
        self.assertEqual(table_row(own, "Own", "mimalloc3", 1)[2:], ["\u2013", "2", "n/a"])

    def test_frag_at_two_threads_on_two_cpus_is_oversubscribed(self) -> None:
        # frag at 2 threads runs 2 workers and 1 other thread: 3 threads on 2 CPUs
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            columns = [*ag.FIXED_COLUMNS, "others"]
            with (out / "runs.csv").open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, restval="")
                writer.writeheader()
                for allocator in ("dlmalloc", "tessalloc"):
                    for threads in (1, 2):
                        writer.writerow({
                            "workload": "frag", "allocator": allocator, "threads": threads,
                            "repetition": 1, "status": "ok", "elapsed_s": 1.0, "ops": 100,
                            "ops_per_s": 100.0, "others": 1})
            (out / "meta.json").write_text(json.dumps({"fixed_baseline": "dlmalloc",
                                                       "machine": {"cpus": 2}}))
            results = ag.load_results(out)
            md = render_markdown(workload_blocks(results, "frag", []), out)
            sentence = oversubscription_sentence(results)
        self.assertIn("Runs at 2 threads are oversubscribed (2 CPUs; frag at 2 threads "
                      "runs 3 threads).", md)
        self.assertIsNotNone(sentence)
        self.assertIn("frag at 2 threads runs 3 threads", sentence or "")

    def test_runs_with_null_returns_are_marked(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            columns = [*ag.FIXED_COLUMNS, "nulls"]
            with (out / "runs.csv").open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, restval="")
                writer.writeheader()
                for allocator, rep, nulls in (("dlmalloc", 1, 0), ("dlmalloc", 2, 0),
                                              ("mimalloc3", 1, 7), ("mimalloc3", 2, 0)):
                    writer.writerow({
                        "workload": "frag", "allocator": allocator, "threads": 1,
                        "repetition": rep, "status": "ok", "elapsed_s": 1.0, "ops": 100,
                        "ops_per_s": 100.0, "nulls": nulls})
            (out / "meta.json").write_text(json.dumps({"fixed_baseline": "dlmalloc"}))
            results = ag.load_results(out)
            md = render_markdown(workload_blocks(results, "frag", []), out)
        self.assertEqual(table_row(md, "Workload frag", "mimalloc3", 1)[2],
                         "2/2; NULL returns in 1")
        self.assertEqual(table_row(md, "Workload frag", "dlmalloc", 1)[2], "2/2")


if __name__ == "__main__":
    unittest.main()
