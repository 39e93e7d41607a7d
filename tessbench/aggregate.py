"""Reading a results directory and summarising it: medians, ratios, geometric means.

The input is what ``tessbench run`` writes into its output directory:

* ``runs.csv``: one row per run, the columns of :data:`FIXED_COLUMNS` first,
  then workload-specific columns (empty where they do not apply);
* ``meta.json``: the command, machine, allocators, workloads, skipped pairs
  and failures (read into :class:`Meta`).

Runs are grouped into cells by (workload, allocator, threads). A cell's
medians are taken per metric over its ok repetitions only; a failed run
(status other than ``ok``) counts in the cell's tally but never in its
numbers. A ratio to the baseline is ``allocator median / baseline median``
for the same workload and thread count: above 1 means more throughput for
``ops_per_s`` and more time or memory for ``elapsed_s`` or ``max_rss_kib``.
The geometric mean of an allocator's ratios is taken over every cell where
both medians exist, and says how many of the allocator's cells it covers.

Two baselines: the baseline (glibc by default) for every workload it ran,
and the fixed-heap baseline (dlmalloc, Open Enclave's default allocator)
for the workloads the baseline cannot run, those in a fixed heap. The
summaries keep the two groups apart. Memory is compared per workload by
its memory metric: the peak RSS, except where the program reports the
bytes of its fixed heap it touched (``peak_touched_bytes``: the enclave
harness fills the whole heap with a pattern, so its RSS is the heap's
size whatever the allocator does).

Everything here is a pure function of its arguments except the two readers
(:func:`read_runs`, :func:`read_meta`) and :func:`load_results`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

#: The identifying columns at the start of every runs.csv row.
KEY_COLUMNS: tuple[str, ...] = ("workload", "allocator", "threads", "repetition", "status")

#: The measured columns that follow them; every one is numeric.
METRIC_COLUMNS: tuple[str, ...] = (
    "elapsed_s", "ops", "ops_per_s", "max_rss_kib", "user_s", "sys_s",
    "minor_faults", "major_faults", "wall_s",
)

#: The fixed columns of runs.csv, in order; workload-specific ones follow.
FIXED_COLUMNS: tuple[str, ...] = KEY_COLUMNS + METRIC_COLUMNS

#: status of a run that finished and whose program checked its results
STATUS_OK = "ok"

#: The metric of throughput (higher is better); time and memory are lower-is-better.
THROUGHPUT = "ops_per_s"
#: The metric of memory: the measured program's peak resident set, KiB.
RSS = "max_rss_kib"
#: The memory metric of the enclave harness's workloads: heap bytes touched.
TOUCHED = "peak_touched_bytes"

#: The baseline of the fixed-heap workloads, unless told otherwise.
DEFAULT_FIXED_BASELINE = "dlmalloc"
#: meta.json's kind of a workload that runs in one fixed heap (workloads.py)
FIXED_KIND = "fixed"
#: Results.geomeans' name for each workload's memory metric.
MEMORY = "memory"

#: A baseline or a metric: one for every workload, or one per workload.
PerWorkload = Union[str, Callable[[str], str]]


def _for(choice: PerWorkload, workload: str) -> str:
    """choice's value for workload."""
    return choice if isinstance(choice, str) else choice(workload)


#: (workload, allocator, threads): the key of a cell.
CellKey = tuple[str, str, int]


# ---------------------------------------------------------------------------
# runs.csv


@dataclasses.dataclass(frozen=True)
class Run:
    """One row of runs.csv.

    ``metrics`` holds every non-empty finite numeric cell of the row, fixed
    or workload-specific (``nulls``, ``malloc_s``, ...); ``extra`` holds the
    non-empty workload-specific cells as text (``series_csv`` ...).
    """

    workload: str
    allocator: str
    threads: int
    repetition: int
    status: str
    metrics: Mapping[str, float]
    extra: Mapping[str, str]

    @property
    def ok(self) -> bool:
        """Whether the run succeeded (its numbers count)."""
        return self.status == STATUS_OK

    @property
    def key(self) -> CellKey:
        """The cell the run belongs to."""
        return (self.workload, self.allocator, self.threads)


def busy_threads(run: Run) -> int:
    """The threads the run keeps busy at once: its thread count, or more where
    the program reports its threads by role (frag's ``others`` beside its
    workers: 3 threads at 2; xmalloc's ``producers`` and ``consumers``: 2 at 1)."""
    m = run.metrics
    if "producers" in m and "consumers" in m:
        return max(run.threads, int(m["producers"] + m["consumers"]))
    return run.threads + max(0, int(m.get("others", 0)))


def parse_number(text: str) -> Optional[float]:
    """A cell as a finite float; None when empty, not a number, NaN or infinite."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_run(row: Mapping[str, Optional[str]], line: int = 0,
              source: str = "runs.csv") -> Run:
    """One runs.csv row (column -> text) as a :class:`Run`.

    Raises ValueError, naming ``source`` and ``line``, when an identifying
    column is missing or malformed, or when an ok row has a fixed metric
    that is not a number.
    """
    where = f"{source} line {line}" if line else f"{source} row"

    def text(name: str) -> str:
        value = row.get(name)
        if value is None:
            raise ValueError(f"{where}: no {name} column")
        return value.strip()

    def integer(name: str) -> int:
        value = text(name)
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{where}: {name} is not an integer: {value!r}") from None

    status = text("status")
    metrics: dict[str, float] = {}
    for name in METRIC_COLUMNS:
        raw = (row.get(name) or "").strip()
        value = parse_number(raw)
        if value is not None:
            metrics[name] = value
        elif raw and status == STATUS_OK:
            raise ValueError(f"{where}: {name} is not a number: {raw!r}")
    extra: dict[str, str] = {}
    for name, raw_value in row.items():
        if name is None or name in FIXED_COLUMNS or not raw_value:
            continue
        if not isinstance(raw_value, str):  # csv's overflow list of a long row
            continue
        extra[name] = raw_value
        value = parse_number(raw_value)
        if value is not None:
            metrics[name] = value
    return Run(workload=text("workload"), allocator=text("allocator"),
               threads=integer("threads"), repetition=integer("repetition"),
               status=status, metrics=metrics, extra=extra)


def parse_runs(rows: Iterable[Mapping[str, Optional[str]]],
               source: str = "runs.csv") -> list[Run]:
    """Rows as read by csv.DictReader (header on line 1) as runs, in order."""
    return [parse_run(row, line, source) for line, row in enumerate(rows, start=2)]


def read_runs(path: Path) -> list[Run]:
    """runs.csv as runs, in file order.

    Raises ValueError naming path when it is not a runs.csv (not text, not
    CSV, a column missing or malformed).
    """
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in KEY_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path}: not a runs.csv (no column {', '.join(missing)})")
            return parse_runs(reader, str(path))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: not a runs.csv ({exc})") from exc


# ---------------------------------------------------------------------------
# meta.json


@dataclasses.dataclass(frozen=True)
class Machine:
    """The machine the runs ran on (None / "unknown": not recorded)."""

    cpus: Optional[int] = None
    cpu_model: str = "unknown"
    memory_kib: Optional[int] = None
    os: str = "unknown"
    kernel: str = "unknown"


@dataclasses.dataclass(frozen=True)
class AllocatorInfo:
    """An allocator as meta.json describes it."""

    name: str
    version: Optional[str] = None
    source: str = ""
    kind: str = ""
    library: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class WorkloadInfo:
    """A workload as meta.json describes it; ``unit`` is what one op is."""

    name: str
    description: str = ""
    unit: str = "ops"
    kind: str = ""


@dataclasses.dataclass(frozen=True)
class Skipped:
    """An allocator/workload pair that was not run, and why."""

    workload: str
    allocator: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Failure:
    """A failed run and its message."""

    workload: str
    allocator: str
    threads: Optional[int]
    repetition: Optional[int]
    status: str
    message: str


@dataclasses.dataclass(frozen=True)
class Meta:
    """meta.json; every field has a default so a partial file still reads."""

    tessbench: str = ""
    started: str = ""
    finished: Optional[str] = None
    command: str = ""
    #: the repository's commit, "+ changes" when the tree was dirty ("" unknown)
    commit: str = ""
    machine: Machine = Machine()
    baseline: Optional[str] = None
    fixed_baseline: Optional[str] = None
    allocators: Mapping[str, AllocatorInfo] = dataclasses.field(default_factory=dict)
    workloads: Mapping[str, WorkloadInfo] = dataclasses.field(default_factory=dict)
    threads: tuple[int, ...] = ()
    repeat: Optional[int] = None
    quick: bool = False
    skipped: tuple[Skipped, ...] = ()
    failures: tuple[Failure, ...] = ()
    #: allocator -> check -> "ok", "fail: detail" or "crash: detail" (tb_conform)
    conformance: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: check -> what the allocator must do
    conformance_checks: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _get_str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    value = d.get(key)
    return value if isinstance(value, str) else default


def _get_opt_str(d: Mapping[str, Any], key: str) -> Optional[str]:
    value = d.get(key)
    return value if isinstance(value, str) else None


def _get_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _get_dict(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = d.get(key)
    return value if isinstance(value, dict) else {}


def _get_dicts(d: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = d.get(key)
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]


def parse_meta(data: Mapping[str, Any]) -> Meta:
    """meta.json's object as a :class:`Meta`; wrong-typed fields read as absent."""
    m = _get_dict(data, "machine")
    machine = Machine(cpus=_get_int(m, "cpus"), cpu_model=_get_str(m, "cpu_model", "unknown"),
                      memory_kib=_get_int(m, "memory_kib"), os=_get_str(m, "os", "unknown"),
                      kernel=_get_str(m, "kernel", "unknown"))
    allocators = {
        name: AllocatorInfo(name=name, version=_get_opt_str(a, "version"),
                            source=_get_str(a, "source"), kind=_get_str(a, "kind"),
                            library=_get_opt_str(a, "library"))
        for name, a in _get_dict(data, "allocators").items() if isinstance(a, dict)
    }
    workloads = {
        name: WorkloadInfo(name=name, description=_get_str(w, "description"),
                           unit=_get_str(w, "unit", "ops") or "ops", kind=_get_str(w, "kind"))
        for name, w in _get_dict(data, "workloads").items() if isinstance(w, dict)
    }
    threads_value = data.get("threads")
    threads = tuple(t for t in threads_value if isinstance(t, int) and not isinstance(t, bool)) \
        if isinstance(threads_value, list) else ()
    skipped = tuple(Skipped(_get_str(s, "workload"), _get_str(s, "allocator"),
                            _get_str(s, "reason")) for s in _get_dicts(data, "skipped"))
    failures = tuple(Failure(_get_str(f, "workload"), _get_str(f, "allocator"),
                             _get_int(f, "threads"), _get_int(f, "repetition"),
                             _get_str(f, "status"), _get_str(f, "message"))
                     for f in _get_dicts(data, "failures"))
    conformance = {
        name: {str(k): str(v) for k, v in found.items() if isinstance(v, str)}
        for name, found in _get_dict(data, "conformance").items() if isinstance(found, dict)
    }
    checks = {str(k): str(v) for k, v in _get_dict(data, "conformance_checks").items()
              if isinstance(v, str)}
    git = _get_dict(data, "git")
    commit = _get_str(git, "commit")
    if commit and git.get("dirty") == "yes":
        commit += " + changes"
    return Meta(tessbench=_get_str(data, "tessbench"), started=_get_str(data, "started"),
                finished=_get_opt_str(data, "finished"), command=_get_str(data, "command"),
                commit=commit, machine=machine, baseline=_get_opt_str(data, "baseline"),
                fixed_baseline=_get_opt_str(data, "fixed_baseline"),
                allocators=allocators, workloads=workloads, threads=threads,
                repeat=_get_int(data, "repeat"), quick=data.get("quick") is True,
                skipped=skipped, failures=failures, conformance=conformance,
                conformance_checks=checks)


def read_meta(path: Path) -> Meta:
    """meta.json as a :class:`Meta`; ValueError naming path when it is not a JSON object."""
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return parse_meta(data)


# ---------------------------------------------------------------------------
# cells and medians


def median(values: Sequence[float]) -> float:
    """The median (the mean of the middle two for an even count); ValueError if empty."""
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


@dataclasses.dataclass(frozen=True)
class Cell:
    """The runs of one (workload, allocator, threads).

    ``values`` lists each metric's values over the ok runs, in repetition
    order; ``medians`` their medians (a metric no ok run has is absent);
    ``failed`` counts the failed runs per status.
    """

    workload: str
    allocator: str
    threads: int
    runs: int
    ok: int
    values: Mapping[str, tuple[float, ...]]
    medians: Mapping[str, float]
    failed: Mapping[str, int]

    @property
    def key(self) -> CellKey:
        """(workload, allocator, threads)."""
        return (self.workload, self.allocator, self.threads)

    def median(self, metric: str) -> Optional[float]:
        """The metric's median over the ok runs; None when none has it."""
        return self.medians.get(metric)

    def spread(self, metric: str) -> Optional[tuple[float, float]]:
        """(min, max) of the metric over the ok runs; None when none has it."""
        values = self.values.get(metric)
        return (min(values), max(values)) if values else None


def summarize(runs: Iterable[Run]) -> dict[CellKey, Cell]:
    """The runs grouped into cells, in order of each cell's first run."""
    grouped: dict[CellKey, list[Run]] = {}
    for run in runs:
        grouped.setdefault(run.key, []).append(run)
    cells: dict[CellKey, Cell] = {}
    for key, group in grouped.items():
        ok_runs = sorted((r for r in group if r.ok), key=lambda r: r.repetition)
        values: dict[str, list[float]] = {}
        for run in ok_runs:
            for metric, value in run.metrics.items():
                values.setdefault(metric, []).append(value)
        failed: dict[str, int] = {}
        for run in group:
            if not run.ok:
                failed[run.status] = failed.get(run.status, 0) + 1
        cells[key] = Cell(workload=key[0], allocator=key[1], threads=key[2], runs=len(group),
                          ok=len(ok_runs), values={m: tuple(v) for m, v in values.items()},
                          medians={m: median(v) for m, v in values.items()}, failed=failed)
    return cells


# ---------------------------------------------------------------------------
# ratios and geometric means


def ratio(cells: Mapping[CellKey, Cell], key: CellKey, baseline: PerWorkload,
          metric: PerWorkload) -> Optional[float]:
    """The cell's median of metric over the baseline's at the same workload and threads.

    ``baseline`` and ``metric`` are names, or functions of the workload
    giving them. None when either median is missing or not positive (no
    meaningful ratio).
    """
    cell = cells.get(key)
    base = cells.get((key[0], _for(baseline, key[0]), key[2]))
    if cell is None or base is None:
        return None
    name = _for(metric, key[0])
    value, reference = cell.median(name), base.median(name)
    if value is None or reference is None or value <= 0 or reference <= 0:
        return None
    return value / reference


def ratios(cells: Mapping[CellKey, Cell], baseline: PerWorkload,
           metric: PerWorkload) -> dict[CellKey, float]:
    """Every cell's ratio to the baseline that exists (see :func:`ratio`)."""
    out: dict[CellKey, float] = {}
    for key in cells:
        r = ratio(cells, key, baseline, metric)
        if r is not None:
            out[key] = r
    return out


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of positive values; ValueError when empty or not all positive."""
    logs: list[float] = []
    for value in values:
        if not value > 0:
            raise ValueError(f"geometric mean of a non-positive value: {value!r}")
        logs.append(math.log(value))
    if not logs:
        raise ValueError("geometric mean of no values")
    return math.exp(math.fsum(logs) / len(logs))


@dataclasses.dataclass(frozen=True)
class GeoMean:
    """An allocator's geometric mean of one metric's ratios to the baseline.

    ``cells`` is how many of its cells have a ratio (the mean covers them),
    ``total`` how many cells it has at all; ``value`` is None when no cell
    has a ratio.
    """

    allocator: str
    metric: str
    value: Optional[float]
    cells: int
    total: int


def geomeans(cells: Mapping[CellKey, Cell], baseline: PerWorkload, metric: PerWorkload,
             allocators: Optional[Sequence[str]] = None,
             threads: Optional[int] = None,
             workloads: Optional[Iterable[str]] = None) -> dict[str, GeoMean]:
    """Per allocator, the geometric mean of its ratios over workloads and thread counts.

    Cells without a ratio (failed runs, no baseline cell) are left out and
    only lower the count. ``allocators`` picks and orders the allocators
    (default: every one, in order of first cell); ``threads`` keeps only
    the cells at that thread count, ``workloads`` only those workloads'.
    """
    names = list(allocators) if allocators is not None else _unique(k[1] for k in cells)
    kept = set(workloads) if workloads is not None else None
    per_cell = ratios(cells, baseline, metric)
    label = metric if isinstance(metric, str) else "per workload"
    out: dict[str, GeoMean] = {}
    for name in names:
        keys = [k for k in cells if k[1] == name and (threads is None or k[2] == threads)
                and (kept is None or k[0] in kept)]
        found = [per_cell[k] for k in keys if k in per_cell]
        out[name] = GeoMean(allocator=name, metric=label,
                            value=geomean(found) if found else None,
                            cells=len(found), total=len(keys))
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ---------------------------------------------------------------------------
# a results directory


@dataclasses.dataclass(frozen=True)
class Group:
    """Workloads summarised together, against one baseline."""

    title: str
    baseline: str
    workloads: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Results:
    """A results directory read and summarised.

    ``workloads`` and ``allocators`` are those runs.csv has, in meta.json's
    order, then any only runs.csv names (the baselines first among the
    allocators); ``baseline`` is the allocator ratios are taken to, and
    ``fixed_baseline`` the one for the workloads the baseline did not run
    (see :meth:`baseline_of`).
    """

    out_dir: Path
    meta: Meta
    runs: tuple[Run, ...]
    cells: Mapping[CellKey, Cell]
    baseline: str
    workloads: tuple[str, ...]
    allocators: tuple[str, ...]
    fixed_baseline: str = DEFAULT_FIXED_BASELINE

    def cell(self, workload: str, allocator: str, threads: int) -> Optional[Cell]:
        """The cell, or None when that point was not run."""
        return self.cells.get((workload, allocator, threads))

    def threads_of(self, workload: str) -> list[int]:
        """The thread counts the workload ran at, ascending."""
        return sorted({k[2] for k in self.cells if k[0] == workload})

    def allocators_of(self, workload: str) -> list[str]:
        """The allocators that ran the workload, in :attr:`allocators` order."""
        present = {k[1] for k in self.cells if k[0] == workload}
        return [a for a in self.allocators if a in present]

    def is_fixed_heap(self, workload: str) -> bool:
        """Whether the workload runs in a fixed heap: its kind in meta.json;
        for results without one, whether the fixed-heap baseline ran it and
        the baseline did not."""
        info = self.meta.workloads.get(workload)
        if info is not None and info.kind:
            return info.kind == FIXED_KIND
        ran = {k[1] for k in self.cells if k[0] == workload}
        return self.baseline not in ran and self.fixed_baseline in ran

    def baseline_of(self, workload: str) -> str:
        """The allocator the workload's ratios are taken to: the fixed-heap
        baseline for a fixed-heap workload, else the baseline (a workload its
        baseline did not run has no ratios). By kind, not by who ran it: with
        tessalloc as the baseline, which runs both kinds, the enclave
        workloads were taken to it rather than to dlmalloc."""
        return self.fixed_baseline if self.is_fixed_heap(workload) else self.baseline

    def memory_metric(self, workload: str) -> str:
        """The workload's memory metric: heap bytes touched where the program
        reports them (the enclave harness's workloads), else the peak RSS."""
        if any(c.median(TOUCHED) is not None for c in self.cells.values()
               if c.workload == workload):
            return TOUCHED
        return RSS

    def ratio(self, key: CellKey, metric: str) -> Optional[float]:
        """The cell's ratio of metric to its workload's baseline (see :func:`ratio`)."""
        return ratio(self.cells, key, self.baseline_of, metric)

    def memory_ratio(self, key: CellKey) -> Optional[float]:
        """The cell's ratio of its workload's memory metric to the baseline's."""
        return ratio(self.cells, key, self.baseline_of, self.memory_metric)

    def geomeans(self, metric: str, threads: Optional[int] = None,
                 workloads: Optional[Iterable[str]] = None) -> dict[str, GeoMean]:
        """Per allocator, the geometric mean of the metric's ratios to each
        workload's baseline (see :func:`geomeans`); ``metric`` "memory" is
        each workload's :meth:`memory_metric`."""
        chosen: PerWorkload = self.memory_metric if metric == MEMORY else metric
        return geomeans(self.cells, self.baseline_of, chosen, self.allocators, threads,
                        workloads)

    def groups(self) -> list[Group]:
        """The workloads by kind: the process-wide ones against the baseline,
        then the fixed-heap ones against the fixed-heap baseline (a group
        with no workload is left out)."""
        out: list[Group] = []
        for title, base, fixed in (("process-wide workloads", self.baseline, False),
                                   ("fixed-heap workloads", self.fixed_baseline, True)):
            names = tuple(w for w in self.workloads if self.is_fixed_heap(w) == fixed)
            if names:
                out.append(Group(title, base, names))
        return out

    def max_threads(self) -> int:
        """The largest thread count run (0 when nothing ran)."""
        return max((k[2] for k in self.cells), default=0)

    def oversubscribed(self, workload: Optional[str] = None) -> list[int]:
        """The thread counts run (of the workload, or of any) at which some run
        kept more threads busy than the machine has CPUs (see :func:`busy_threads`;
        empty if the CPU count is unknown)."""
        cpus = self.meta.machine.cpus
        if not cpus:
            return []
        return sorted({r.threads for r in self.runs
                       if (workload is None or r.workload == workload)
                       and busy_threads(r) > cpus})

    def busy_threads_at(self, workload: str, threads: int) -> int:
        """The most threads a run of the workload at that thread count kept busy."""
        return max((busy_threads(r) for r in self.runs
                    if r.workload == workload and r.threads == threads), default=threads)

    def unit(self, workload: str) -> str:
        """What one op of the workload is ("ops" when meta.json does not say)."""
        info = self.meta.workloads.get(workload)
        return info.unit if info is not None else "ops"


def choose_baseline(meta: Meta, allocators: Sequence[str], asked: Optional[str]) -> str:
    """The baseline: the one asked for, else meta.json's, else glibc or the first allocator."""
    if asked:
        return asked
    if meta.baseline:
        return meta.baseline
    if "glibc" in allocators or not allocators:
        return "glibc"
    return allocators[0]


def load_results(out_dir: Path, baseline: Optional[str] = None,
                 fixed_baseline: Optional[str] = None) -> Results:
    """Reads ``out_dir``'s runs.csv and meta.json (a missing meta.json reads as empty).

    ``baseline`` and ``fixed_baseline`` default to meta.json's, then to
    glibc (or the first allocator) and dlmalloc.
    """
    runs = read_runs(out_dir / "runs.csv")
    meta_path = out_dir / "meta.json"
    meta = read_meta(meta_path) if meta_path.exists() else Meta()
    workloads = _unique([*meta.workloads, *(r.workload for r in runs)])
    ran = {r.workload for r in runs}
    allocators = _unique([*meta.allocators, *(r.allocator for r in runs)])
    used = {r.allocator for r in runs}
    chosen = choose_baseline(meta, allocators, baseline)
    fixed = fixed_baseline or meta.fixed_baseline or DEFAULT_FIXED_BASELINE
    ordered = sorted((a for a in allocators if a in used),
                     key=lambda a: (a != chosen, a != fixed))
    return Results(out_dir=out_dir, meta=meta, runs=tuple(runs), cells=summarize(runs),
                   baseline=chosen, workloads=tuple(w for w in workloads if w in ran),
                   allocators=tuple(ordered), fixed_baseline=fixed)
