"""report.md and report.html of a results directory.

Both pages are rendered from one list of blocks (:func:`build_document`):

* the run: command, dates, repetitions, baselines; the machine, and when
  some runs used more threads than it has CPUs, the sentence that says so;
* a summary per group of workloads (process-wide against the baseline,
  fixed-heap against the fixed-heap baseline): per allocator the geometric
  means of its throughput and memory ratios, with how many cells each
  covers, and the throughput's per thread count;
* the allocators (version, kind, source), the malloc family's edge cases
  per allocator (tb_conform's findings), the skipped pairs and the failures;
* per workload its description and unit, a table in the style of
  mimalloc-bench from the medians of the ok runs (elapsed s, ops/s and its
  ratio to the baseline, rss MiB and its ratio -- and the heap bytes
  touched and their ratio where the harness fills the heap --, user s, sys
  s, page faults), the medians of its own columns, and its plots.

report.md links the plots by relative path; report.html is self-contained:
inline CSS, the plots as base64 ``data:`` URIs, every text through
html.escape.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import math
import re
import statistics
from pathlib import Path
from typing import Optional, Sequence, Union

from tessbench.aggregate import (MEMORY, METRIC_COLUMNS, RSS, THROUGHPUT, TOUCHED, Cell,
                                 GeoMean, Group, Results, load_results)
from tessbench.plot import PlannedPlot, draw_plots, plot_plan, threads_text

DASH = "\u2013"  # an en dash: no value

#: A ratio this close to 1 is shown as neither better nor worse.
NEUTRAL_BAND = 0.02

#: Failure messages are cut to this many characters in the tables.
MESSAGE_LIMIT = 400


# ---------------------------------------------------------------------------
# number formatting


def fmt_num(value: Optional[float]) -> str:
    """A measured value: 4 significant digits, thousands separated from 1000 on."""
    if value is None:
        return DASH
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < 3 and round(abs(value), 3 - magnitude) >= 10.0 ** (magnitude + 1):
        magnitude += 1  # rounding carries into the next decade: 999.96 is 1,000
    if magnitude >= 3:
        return f"{value:,.0f}"
    decimals = min(6, max(0, 3 - magnitude))
    return f"{value:.{decimals}f}"


def fmt_count(value: Optional[float]) -> str:
    """A count (a median of counts may end in .5)."""
    if value is None:
        return DASH
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def fmt_mib(kib: Optional[float]) -> str:
    """KiB as MiB, one decimal."""
    return DASH if kib is None else f"{kib / 1024:,.1f}"


def fmt_ratio(value: Optional[float]) -> str:
    """A ratio to the baseline, two decimals."""
    return DASH if value is None else f"{value:.2f}"


def ratio_class(value: Optional[float], higher_is_better: bool) -> str:
    """"better", "worse" or "" (within :data:`NEUTRAL_BAND` of 1, or no ratio).

    Judged on the ratio as :func:`fmt_ratio` prints it, so that one printed
    figure always gets one verdict (0.9849 and 0.9751 both read 0.98).
    """
    if value is None:
        return ""
    hundredths = round(float(fmt_ratio(value)) * 100)
    if abs(hundredths - 100) <= round(NEUTRAL_BAND * 100):
        return ""
    return "better" if (hundredths > 100) == higher_is_better else "worse"


# ---------------------------------------------------------------------------
# the document


@dataclasses.dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclasses.dataclass(frozen=True)
class Para:
    text: str
    note: bool = False  # a call-out (oversubscription, --quick)


@dataclasses.dataclass(frozen=True)
class Code:
    text: str


@dataclasses.dataclass(frozen=True)
class Fields:
    """A list of "label: value" lines."""

    items: tuple[tuple[str, str], ...]


#: A table cell: its text, or (text, CSS class).
TableCell = Union[str, tuple[str, str]]


@dataclasses.dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[TableCell, ...], ...]
    numeric: tuple[bool, ...]  # per column: right-aligned
    baseline_rows: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class Image:
    path: Path
    caption: str


Block = Union[Heading, Para, Code, Fields, Table, Image]


def cell_text(cell: TableCell) -> str:
    """A table cell's text."""
    return cell if isinstance(cell, str) else cell[0]


def cell_class(cell: TableCell) -> str:
    """A table cell's CSS class ("" when none)."""
    return "" if isinstance(cell, str) else cell[1]


def _failed_note(cell: Cell) -> str:
    """k/n ok, the failed runs' statuses, and the ok runs in which the
    allocator returned NULL (they did less work and held less memory, so
    their ratios flatter it)."""
    tally = ", ".join(f"{status} {n}" for status, n in sorted(cell.failed.items()))
    with_nulls = sum(1 for v in cell.values.get("nulls", ()) if v > 0)
    nulls = f"; NULL returns in {with_nulls}" if with_nulls else ""
    return f"{cell.ok}/{cell.runs}" + (f" ({tally})" if tally else "") + nulls


def _cells_note(g: GeoMean) -> str:
    return f"{g.cells} of {g.total}"


def run_fields(results: Results) -> Fields:
    meta = results.meta
    items: list[tuple[str, str]] = []
    started = meta.started or "unknown"
    finished = meta.finished or "not finished (interrupted, or still running)"
    items.append(("date", f"{started} to {finished}"))
    if meta.tessbench:
        items.append(("tessbench", meta.tessbench))
    if meta.commit:
        items.append(("commit", meta.commit))
    threads = meta.threads or tuple(sorted({k[2] for k in results.cells}))
    items.append(("thread counts", ", ".join(str(t) for t in threads) or DASH))
    repeat = str(meta.repeat) if meta.repeat is not None else "unknown"
    items.append(("repetitions per point", f"{repeat}; tables show medians over the ok ones"))
    items.append(("baseline", results.baseline))
    items.append(("fixed-heap baseline", f"{results.fixed_baseline} (for the workloads "
                                         f"{results.baseline} does not run)"))
    return Fields(tuple(items))


def machine_fields(results: Results) -> Fields:
    m = results.meta.machine
    memory = f"{m.memory_kib / 1024 / 1024:.1f} GiB" if m.memory_kib else "unknown"
    return Fields((("CPU", m.cpu_model),
                   ("CPUs", str(m.cpus) if m.cpus else "unknown"),
                   ("memory", memory), ("OS", m.os), ("kernel", m.kernel)))


def oversubscription_sentence(results: Results) -> Optional[str]:
    """The sentence on oversubscribed runs, when some run used more threads than CPUs."""
    over = results.oversubscribed()
    cpus = results.meta.machine.cpus
    if not over or not cpus:
        return None
    counts = ", ".join(str(t) for t in over if t > cpus)
    extra = [_busy_note(results, w, cpus) for w in results.workloads
             if any(t <= cpus for t in results.oversubscribed(w))]
    where = f"here at {counts} threads" if counts else ""
    where = "; ".join(x for x in (where, *extra) if x)
    return (f"This machine has {cpus} CPUs, so runs with more threads than CPUs ({where}) "
            "are oversubscribed: their threads wait for a CPU, and their numbers measure "
            "the scheduler as much as the allocator.")


def _busy_note(results: Results, workload: str, cpus: int) -> str:
    """Where the workload runs more threads than its thread count says, at a count
    that would otherwise fit the CPUs: "frag at 2 threads runs 3 threads"."""
    low = [t for t in results.oversubscribed(workload) if t <= cpus]
    return f"{workload} at " + ", ".join(
        f"{t} threads runs {results.busy_threads_at(workload, t)} threads" for t in low)


def summary_blocks(results: Results) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Summary")]
    blocks.append(Para(
        "Ratios are taken from medians at the same workload and thread count: a throughput "
        "ratio above 1 is faster than the baseline, a memory ratio below 1 smaller. Memory "
        "is the peak RSS, except in the enclave harness's workloads (enclave, frag), whose "
        "heap the harness fills with a pattern: there it is the heap bytes the allocator "
        "touched. Each geometric mean is taken over the allocator's cells (workload and "
        "thread count) where both it and the baseline have an ok run; \"cells\" says how "
        "many of the allocator's cells that is."))
    groups = results.groups()
    if not groups:
        blocks.append(Para("No workload ran.", note=True))
    for group in groups:
        blocks.extend(group_summary(results, group))
    return blocks


def group_summary(results: Results, group: Group) -> list[Block]:
    """The summary tables of one group of workloads (one baseline)."""
    blocks: list[Block] = [Heading(3, f"{group.title[0].upper()}{group.title[1:]}, "
                                      f"against {group.baseline}")]
    blocks.append(Para(f"Workloads: {', '.join(group.workloads)}."))
    tput = results.geomeans(THROUGHPUT, workloads=group.workloads)
    memory = results.geomeans(MEMORY, workloads=group.workloads)
    names = [a for a in results.allocators if tput[a].total > 0]
    rows: list[tuple[TableCell, ...]] = []
    base_rows: set[int] = set()
    for i, name in enumerate(names):
        tg, mg = tput[name], memory[name]
        rows.append((name,
                     (fmt_ratio(tg.value), ratio_class(tg.value, True)), _cells_note(tg),
                     (fmt_ratio(mg.value), ratio_class(mg.value, False)), _cells_note(mg)))
        if name == group.baseline:
            base_rows.add(i)
    blocks.append(Table(("allocator", "throughput ratio (geomean)", "cells",
                         "memory ratio (geomean)", "cells"), tuple(rows),
                        (False, True, True, True, True), baseline_rows=frozenset(base_rows)))
    if group.baseline not in names:
        blocks.append(Para(f"The baseline {group.baseline} has no runs here: there are no "
                           "ratios.", note=True))
    threads = sorted({k[2] for k in results.cells if k[0] in group.workloads})
    if len(threads) > 1:
        blocks.append(Para("Throughput ratio per thread count (geometric mean over the "
                           "workloads; in brackets the cells it covers):"))
        by_threads = {t: results.geomeans(THROUGHPUT, threads=t, workloads=group.workloads)
                      for t in threads}
        trows: list[tuple[TableCell, ...]] = []
        for name in names:
            row: list[TableCell] = [name]
            for t in threads:
                g = by_threads[t][name]
                text = DASH if g.total == 0 else f"{fmt_ratio(g.value)} [{g.cells}]"
                row.append((text, ratio_class(g.value, True)))
            trows.append(tuple(row))
        blocks.append(Table(("allocator", *(threads_text(t) for t in threads)), tuple(trows),
                            (False, *(True for _ in threads))))
    return blocks


def allocator_blocks(results: Results) -> list[Block]:
    meta = results.meta
    names = [*meta.allocators, *(a for a in results.allocators if a not in meta.allocators)]
    rows: list[tuple[TableCell, ...]] = []
    base_rows: set[int] = set()
    for i, name in enumerate(names):
        info = meta.allocators.get(name)
        label = name
        if name == results.baseline:
            label = f"{name} (baseline)"
        elif name == results.fixed_baseline:
            label = f"{name} (fixed-heap baseline)"
        if info is None:
            rows.append((label, "unknown", DASH, DASH, DASH))
        else:
            rows.append((label, info.version or "unknown", info.kind or DASH,
                         info.source or DASH, info.library or DASH))
        if name in (results.baseline, results.fixed_baseline):
            base_rows.add(i)
    return [Heading(2, "Allocators"),
            Table(("allocator", "version", "kind", "source", "library"), tuple(rows),
                  (False,) * 5, baseline_rows=frozenset(base_rows))]


def conformance_blocks(results: Results) -> list[Block]:
    """The edge cases of the malloc family, per process-wide allocator (tb_conform)."""
    found = results.meta.conformance
    if not found:
        return []
    checks = dict(results.meta.conformance_checks)
    for per in found.values():
        checks.update({name: name for name in per if name not in checks})
    blocks: list[Block] = [Heading(2, "Edge cases of the malloc family")]
    blocks.append(Para(
        "Not timed: each process-wide allocator, preloaded into tb_conform, answers the "
        "malloc family's edge cases, each in a process of its own (a crash fails that check "
        "only). A finding names the check and what happened instead (errno-N: NULL, but "
        "errno N)."))
    rows: list[tuple[TableCell, ...]] = []
    for name in [*results.allocators, *(a for a in found if a not in results.allocators)]:
        if name not in found:
            continue
        per = found[name]
        bad = [f"{check} ({result})" for check, result in per.items() if result != "ok"]
        passed = sum(1 for result in per.values() if result == "ok")
        rows.append((name, (f"{passed} of {len(per)}", "" if not bad else "worse"),
                     "; ".join(bad) or "none"))
    blocks.append(Table(("allocator", "as expected", "findings"), tuple(rows),
                        (False, True, False)))
    blocks.append(Table(("check", "expected"), tuple(checks.items()), (False, False)))
    return blocks


def _short(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 1] + "\u2026"


def skipped_failure_blocks(results: Results) -> list[Block]:
    meta = results.meta
    blocks: list[Block] = [Heading(2, "Skipped pairs")]
    if meta.skipped:
        blocks.append(Table(("workload", "allocator", "reason"),
                            tuple((s.workload, s.allocator, _short(s.reason))
                                  for s in meta.skipped), (False, False, False)))
    else:
        blocks.append(Para("None: every allocator ran every workload."))
    blocks.append(Heading(2, "Failures"))
    failed_runs = [r for r in results.runs if not r.ok]
    if meta.failures:
        blocks.append(Para("Failed runs count in no median; their messages are in "
                           "meta.json."))
        blocks.append(Table(
            ("workload", "allocator", "threads", "repetition", "status", "message"),
            tuple((f.workload, f.allocator,
                   DASH if f.threads is None else str(f.threads),
                   DASH if f.repetition is None else str(f.repetition),
                   f.status, _short(f.message)) for f in meta.failures),
            (False, False, True, True, False, False)))
    elif failed_runs:
        blocks.append(Table(
            ("workload", "allocator", "threads", "repetition", "status"),
            tuple((r.workload, r.allocator, str(r.threads), str(r.repetition), r.status)
                  for r in failed_runs), (False, False, True, True, False)))
    else:
        blocks.append(Para("None: every run finished and passed its own check."))
    return blocks


#: The columns of a workload's table (mimalloc-bench's, with ratios).
WORKLOAD_HEADER: tuple[str, ...] = (
    "allocator", "threads", "ok runs", "elapsed s", "ops/s", "ops/s ratio", "rss MiB",
    "rss ratio", "user s", "sys s", "minor faults", "major faults",
)
#: The columns added where the memory metric is the heap bytes touched.
TOUCHED_HEADER: tuple[str, ...] = ("touched MiB", "touched ratio")


def workload_header(results: Results, workload: str) -> tuple[str, ...]:
    """The columns of the workload's table."""
    if results.memory_metric(workload) == TOUCHED:
        return WORKLOAD_HEADER[:8] + TOUCHED_HEADER + WORKLOAD_HEADER[8:]
    return WORKLOAD_HEADER


def workload_rows(results: Results,
                  workload: str) -> tuple[tuple[tuple[TableCell, ...], ...], frozenset[int]]:
    """The rows of a workload's table (by threads, then allocator) and the baseline's rows."""
    rows: list[tuple[TableCell, ...]] = []
    base_rows: set[int] = set()
    touched = results.memory_metric(workload) == TOUCHED
    baseline = results.baseline_of(workload)
    for t in results.threads_of(workload):
        for name in results.allocators_of(workload):
            cell = results.cell(workload, name, t)
            if cell is None:
                continue
            tput = results.ratio(cell.key, THROUGHPUT)
            rss = results.ratio(cell.key, RSS)
            if name == baseline:
                base_rows.add(len(rows))
            row: list[TableCell] = [
                name, str(t), _failed_note(cell),
                fmt_num(cell.median("elapsed_s")), fmt_num(cell.median(THROUGHPUT)),
                (fmt_ratio(tput), ratio_class(tput, True)),
                fmt_mib(cell.median(RSS)), (fmt_ratio(rss), ratio_class(rss, False))]
            if touched:
                mem = results.ratio(cell.key, TOUCHED)
                touched_bytes = cell.median(TOUCHED)
                row += [fmt_mib(touched_bytes / 1024 if touched_bytes is not None else None),
                        (fmt_ratio(mem), ratio_class(mem, False))]
            row += [fmt_num(cell.median("user_s")), fmt_num(cell.median("sys_s")),
                    fmt_count(cell.median("minor_faults")),
                    fmt_count(cell.median("major_faults"))]
            rows.append(tuple(row))
    return tuple(rows), frozenset(base_rows)


def extra_metrics(results: Results, workload: str) -> list[str]:
    """The workload's own numeric columns that some ok run has, sorted."""
    names = {m for c in results.cells.values() if c.workload == workload for m in c.medians}
    return sorted(names - set(METRIC_COLUMNS))


_INTEGER = re.compile(r"[+-]?\d+")


def integer_metrics(results: Results, workload: str, metrics: Sequence[str]) -> set[str]:
    """Those of metrics that every ok run of the workload wrote as an integer (counts,
    sizes): shown without decimals, which a float's 4 significant digits would invent."""
    texts: dict[str, list[str]] = {m: [] for m in metrics}
    for run in results.runs:
        if run.workload == workload and run.ok:
            for m in metrics:
                if m in run.extra:
                    texts[m].append(run.extra[m].strip())
    return {m for m, seen in texts.items() if seen and all(_INTEGER.fullmatch(t) for t in seen)}


#: Shown for a workload's own column where the program could not tell (a negative
#: value: frag's peak_footprint_bytes for an allocator that does not report it).
UNKNOWN = "n/a"


def fmt_own(values: Optional[Sequence[float]], integer: bool) -> str:
    """The median of a workload's own column over the ok runs; negatives are unknown."""
    if not values:
        return DASH
    known = [v for v in values if v >= 0]
    if not known:
        return UNKNOWN
    middle = statistics.median(known)
    return fmt_count(middle) if integer else fmt_num(middle)


def workload_blocks(results: Results, workload: str,
                    plots: Sequence[PlannedPlot]) -> list[Block]:
    info = results.meta.workloads.get(workload)
    blocks: list[Block] = [Heading(2, f"Workload {workload}")]
    if info is not None and info.description:
        description = info.description.strip()
        blocks.append(Para(description if description.endswith(".") else description + "."))
    unit = results.unit(workload)
    blocks.append(Para(f"ops counts {unit}, ops/s is {unit} per second. Ratios are to "
                       f"{results.baseline_of(workload)} at the same thread count (ops/s: "
                       "above 1 is faster; memory: below 1 is smaller)."))
    if results.memory_metric(workload) == TOUCHED:
        blocks.append(Para("The harness fills the whole heap with a pattern before the "
                           "allocator starts, so the RSS is about the heap's size for every "
                           "allocator; \"touched\" is the peak of the heap bytes the "
                           "allocator changed, its real memory use."))
    header = workload_header(results, workload)
    rows, base_rows = workload_rows(results, workload)
    blocks.append(Table(header, rows, (False,) + (True,) * (len(header) - 1),
                        baseline_rows=base_rows))
    cpus = results.meta.machine.cpus
    over = results.oversubscribed(workload)
    if over and cpus:
        low = [t for t in over if t <= cpus]
        why = f"; {_busy_note(results, workload, cpus)}" if low else ""
        blocks.append(Para(f"Runs at {', '.join(str(t) for t in over)} threads are "
                           f"oversubscribed ({cpus} CPUs{why}).", note=True))
    extras = extra_metrics(results, workload)
    if extras:
        integers = integer_metrics(results, workload, extras)
        erows: list[tuple[TableCell, ...]] = []
        for t in results.threads_of(workload):
            for name in results.allocators_of(workload):
                cell = results.cell(workload, name, t)
                if cell is not None:
                    erows.append((name, str(t), *(fmt_own(cell.values.get(m), m in integers)
                                                  for m in extras)))
        unknown = any(UNKNOWN in row for row in erows)
        blocks.append(Para("The workload's own columns (medians over the ok runs"
                           + (f"; {UNKNOWN}: the allocator cannot tell" if unknown else "")
                           + "):"))
        blocks.append(Table(("allocator", "threads", *extras), tuple(erows),
                            (False,) + (True,) * (len(extras) + 1)))
    for planned in plots:
        if planned.workload == workload:
            blocks.append(Image(planned.path, planned.caption))
    return blocks


def build_document(results: Results, plots: Sequence[PlannedPlot]) -> list[Block]:
    """The report as blocks, both pages' content."""
    meta = results.meta
    blocks: list[Block] = [Heading(1, "tessbench report")]
    blocks.append(Para(f"Allocators: {', '.join(results.allocators) or 'none'}. Workloads: "
                       f"{', '.join(results.workloads) or 'none'}."))
    if meta.quick:
        blocks.append(Para("This was a --quick run: seconds-long runs that check the "
                           "tooling; the numbers mean nothing.", note=True))
    blocks.append(Heading(2, "Run"))
    blocks.append(Code(meta.command or "(command not recorded)"))
    blocks.append(run_fields(results))
    blocks.append(Heading(2, "Machine"))
    blocks.append(machine_fields(results))
    sentence = oversubscription_sentence(results)
    if sentence:
        blocks.append(Para(sentence, note=True))
    blocks.extend(summary_blocks(results))
    blocks.extend(Image(p.path, p.caption) for p in plots if p.workload is None)
    blocks.extend(allocator_blocks(results))
    blocks.extend(conformance_blocks(results))
    blocks.extend(skipped_failure_blocks(results))
    for workload in results.workloads:
        blocks.extend(workload_blocks(results, workload, plots))
    return blocks


# ---------------------------------------------------------------------------
# Markdown


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")


def md_text(text: str) -> str:
    """Text with Markdown's active characters escaped, on one line."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def render_markdown(blocks: Sequence[Block], out_dir: Path) -> str:
    """The blocks as GitHub-flavoured Markdown; images linked relative to out_dir."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {md_text(block.text)}")
        elif isinstance(block, Para):
            out.append(("> **Note:** " if block.note else "") + md_text(block.text))
        elif isinstance(block, Code):
            longest = max((len(m) for m in re.findall(r"`+", block.text)), default=0)
            fence = "`" * max(3, longest + 1)
            out.append(f"{fence}\n{block.text}\n{fence}")
        elif isinstance(block, Fields):
            out.append("\n".join(f"- {md_text(k)}: {md_text(v)}" for k, v in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(md_text(h) for h in block.header) + " |",
                     "|" + "|".join("---:" if n else "---" for n in block.numeric) + "|"]
            for row in block.rows:
                lines.append("| " + " | ".join(md_text(cell_text(c)) or " " for c in row)
                             + " |")
            out.append("\n".join(lines))
        else:
            rel = block.path.relative_to(out_dir).as_posix() \
                if block.path.is_relative_to(out_dir) else block.path.as_posix()
            out.append(f"![{md_text(block.caption)}]({rel})")
    return "\n\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# HTML

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 72em; padding: 0 1em; color: #1d1d1f; line-height: 1.45; }
h1 { border-bottom: 2px solid #ccc; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .15em; }
pre { background: #f4f4f6; padding: .7em 1em; overflow-x: auto; border-radius: 4px; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #d6d6d9; padding: .25em .6em; }
th { background: #eef0f3; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.baseline td { font-weight: 600; background: #f7f7f9; }
td.better { background: #e3f4e3; }
td.worse { background: #fae3e3; }
p.note { border-left: 4px solid #d9a400; background: #fff8e0; padding: .5em .8em; }
ul.fields { list-style: none; padding-left: 0; }
ul.fields b { display: inline-block; min-width: 11em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e2e2e2; }
figcaption { font-size: .85em; color: #555; }
"""


def h(text: str) -> str:
    """Text escaped for HTML (quotes included)."""
    return html.escape(text, quote=True)


def _td(cell: TableCell, numeric: bool) -> str:
    classes = " ".join(c for c in ("num" if numeric else "", cell_class(cell)) if c)
    attr = f' class="{h(classes)}"' if classes else ""
    return f"<td{attr}>{h(cell_text(cell))}</td>"


def render_html(blocks: Sequence[Block], title: str) -> str:
    """The blocks as one self-contained HTML page (images inlined as data: URIs)."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{h(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            body.append(f'<p class="note">{h(block.text)}</p>' if block.note
                        else f"<p>{h(block.text)}</p>")
        elif isinstance(block, Code):
            body.append(f"<pre><code>{h(block.text)}</code></pre>")
        elif isinstance(block, Fields):
            items = "".join(f"<li><b>{h(k)}</b> {h(v)}</li>" for k, v in block.items)
            body.append(f'<ul class="fields">{items}</ul>')
        elif isinstance(block, Table):
            head = "".join(f'<th class="num">{h(c)}</th>' if n else f"<th>{h(c)}</th>"
                           for c, n in zip(block.header, block.numeric))
            rows = []
            for i, row in enumerate(block.rows):
                attr = ' class="baseline"' if i in block.baseline_rows else ""
                cells = "".join(_td(c, n) for c, n in zip(row, block.numeric))
                rows.append(f"<tr{attr}>{cells}</tr>")
            body.append(f"<table><thead><tr>{head}</tr></thead>"
                        f"<tbody>{''.join(rows)}</tbody></table>")
        else:
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{h(block.caption)}" '
                        f'src="data:image/png;base64,{data}">'
                        f"<figcaption>{h(block.caption)}</figcaption></figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{h(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


# ---------------------------------------------------------------------------
# entry point


def ensure_plots(results: Results) -> list[PlannedPlot]:
    """The results' plots, drawing those missing or older than runs.csv / meta.json."""
    plan = plot_plan(results)
    inputs = [results.out_dir / name for name in ("runs.csv", "meta.json")]
    newest = max((p.stat().st_mtime for p in inputs if p.exists()), default=0.0)
    stale = [p for p in plan if not p.path.exists() or p.path.stat().st_mtime < newest]
    if stale:
        draw_plots(results, stale)
    return plan


def write_report(out_dir: Path, baseline: Optional[str] = None,
                 fixed_baseline: Optional[str] = None) -> tuple[Path, Path]:
    """Writes out_dir/report.md and out_dir/report.html; returns their paths.

    ``baseline`` and ``fixed_baseline`` default to meta.json's. Plots that
    are missing or older than the results are drawn first.
    """
    out_dir = Path(out_dir)
    results = load_results(out_dir, baseline, fixed_baseline)
    plots = [p for p in ensure_plots(results) if p.path.exists()]
    blocks = build_document(results, plots)
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    md_path.write_text(render_markdown(blocks, out_dir), encoding="utf-8")
    title = f"tessbench report: {', '.join(results.workloads) or 'no workloads'}"
    html_path.write_text(render_html(blocks, title), encoding="utf-8")
    return md_path, html_path
