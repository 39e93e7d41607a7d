"""Writing a run's results: runs.csv (one row per run) and meta.json.

runs.csv has the fixed columns of RUN_COLUMNS, then the workload-specific
columns seen so far (sorted), empty where a row has none. It is written
with its header alone before the first run and rewritten after every run,
so an interrupted run leaves a valid file with the rows done. meta.json
is written at the start, after the edge-case checks, after every run and
at the end (then with the time it finished).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

from tessbench.benchlib import write_json_atomic

#: The fixed columns of runs.csv, in order.
RUN_COLUMNS: tuple[str, ...] = (
    "workload", "allocator", "threads", "repetition", "status", "elapsed_s", "ops",
    "ops_per_s", "max_rss_kib", "user_s", "sys_s", "minor_faults", "major_faults", "wall_s",
)

#: status of a run whose program checked its results and exited 0
STATUS_OK = "ok"


@dataclasses.dataclass
class RunRow:
    """One run: the fixed columns (None: not measured) and the extras."""

    workload: str
    allocator: str
    threads: int
    repetition: int
    status: str = STATUS_OK
    elapsed_s: Optional[float] = None
    ops: Optional[int] = None
    ops_per_s: Optional[float] = None
    max_rss_kib: Optional[int] = None
    user_s: Optional[float] = None
    sys_s: Optional[float] = None
    minor_faults: Optional[int] = None
    major_faults: Optional[int] = None
    wall_s: Optional[float] = None
    extra: dict[str, str] = dataclasses.field(default_factory=dict)

    def cells(self) -> dict[str, str]:
        """The row as CSV cells: column name -> text (None -> empty)."""
        out: dict[str, str] = {}
        for name in RUN_COLUMNS:
            value = getattr(self, name)
            out[name] = format_cell(value)
        for key, text in self.extra.items():
            if key in out:
                raise ValueError(f"extra column {key!r} clashes with a fixed column")
            out[key] = text
        return out


def format_cell(value: object) -> str:
    """A CSV cell: empty for None, shortest exact text for floats."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class RunsWriter:
    """Collects rows and keeps ``path`` (runs.csv) up to date."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[RunRow] = []

    def add(self, row: RunRow) -> None:
        """Append a row and rewrite the file (atomically)."""
        self.rows.append(row)
        self.write()

    def columns(self) -> list[str]:
        """The fixed columns, then every extra column seen, sorted."""
        extras = sorted({k for row in self.rows for k in row.extra})
        return [*RUN_COLUMNS, *extras]

    def write(self) -> None:
        """Write every row so far to the file (via a temporary file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        columns = self.columns()
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".runs-", suffix=".csv")
        try:
            os.fchmod(fd, 0o644)  # mkstemp's 0600 is for secrets, not results
            with os.fdopen(fd, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, restval="")
                writer.writeheader()
                for row in self.rows:
                    writer.writerow(row.cells())
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise


def read_runs(path: Path) -> list[dict[str, str]]:
    """runs.csv as dicts (column -> text), in file order."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_meta(meta: Mapping[str, object], path: Path) -> None:
    """meta.json, atomically, indented."""
    write_json_atomic(meta, path)
