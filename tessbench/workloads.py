"""The workloads tessbench runs, and the command line of each run.

Three kinds:

* ``preload``: a ``tb_<name>`` program of bench/workloads (or a real
  program) with the allocator preloaded; every allocator that can be
  preloaded (glibc is the default malloc and needs none);
* ``fixed``: the allocator in one fixed heap, through its enclave plugin
  (tessalloc, dlmalloc, snmalloc, mimalloc 3): the enclave harness's
  workloads A (``enclave``) and B (``frag``), and x509 run through the
  fixed-heap preload shim (``x509-fixed``);
* ``server``: redis-server preloaded, driven by redis-benchmark
  (tessbench/realprogs.py).

Every program prints ``result ... ops=N elapsed_s=F ops_per_s=F [k=v ...]``
and checks its own results; see bench/workloads/wl.h.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

from tessbench.benchlib import REPO_ROOT

#: The fixed heap of x509-fixed: the enclave of the seed's scenario.
FIXED_HEAP = "64M"


@dataclasses.dataclass(frozen=True)
class Workload:
    """One workload: what it is, and how it is called.

    ``args`` are appended to every run, ``quick_args`` replace them under
    --quick (a seconds-long check of the tooling). A workload that does not
    scale with threads (``threaded=False``) runs once, at one thread.
    """

    name: str
    kind: str  # "preload", "fixed", "server"
    description: str
    unit: str  # what one op is
    program: Optional[str]  # tb_<name> under <build>/bench/workloads, or None
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    threaded: bool = True
    timeout_s: float = 600.0


WORKLOADS: tuple[Workload, ...] = (
    Workload("enclave", "fixed",
             "Open Enclave's pluggable_allocator sample in a model enclave (workload A of "
             "the fixed-heap issue): per thread a FIFO of 15 blocks, malloc(rand() % 16384) "
             "+ free of the oldest, heap 8192 pages, a new host thread per ECALL",
             "malloc+free pairs", "tb_enclave",
             ("--iterations", "100000"), ("--iterations", "2000")),
    Workload("frag", "fixed",
             "the fragmentation soak (workload B): a 64 MiB enclave, N worker + max(1, N/4) "
             "other threads doing rapid ECALLs with bursts of mixed sizes and a shared pool of "
             "long-lived blocks; footprint and live bytes sampled over time; ops are the "
             "allocation calls (malloc, calloc, realloc) of every thread",
             "allocation calls", "tb_frag", ("--duration", "10"), ("--duration", "1.5")),
    Workload("x509", "preload",
             "mbedtls: parse a leaf+intermediate certificate chain and verify it against "
             "the root with a profile, then free it (mbedtls_x509_crt_*), per thread",
             "verifications", "tb_x509", (), ("--iterations", "20")),
    Workload("x509-fixed", "fixed",
             "x509 in an enclave-sized fixed heap: the same program with every allocation "
             f"served by the allocator's enclave plugin over one {FIXED_HEAP} region "
             "(libtb_fixed.so)",
             "verifications", "tb_x509", (), ("--iterations", "20")),
    Workload("malloc-cmp", "preload",
             "IsoAlloc's comparison test: about 1.44 million malloc / calloc / realloc calls "
             "freeing every other block, then the rest, timed per call family",
             "allocation calls", "tb_malloc_cmp", (), ("--iterations", "20000"),
             threaded=False),
    Workload("larson", "preload",
             "Larson & Krishnan's server simulation: random replacement of live blocks, "
             "whose owners hand them to new threads that free them",
             "malloc+free pairs", "tb_larson", (), ("--iterations", "20000")),
    Workload("xmalloc", "preload",
             "producer/consumer: half the threads allocate, the other half free "
             "(Lever & Boreham's xmalloc-test)",
             "blocks", "tb_xmalloc", (), ("--iterations", "20000")),
    Workload("cache-thrash", "preload",
             "active false sharing: each thread allocates, writes and frees small objects; "
             "objects of different threads on one cache line thrash",
             "objects", "tb_cache_thrash", (), ("--iterations", "2000")),
    Workload("cache-scratch", "preload",
             "passive false sharing: objects handed out by the main thread are freed by the "
             "workers, whose next objects may share their lines",
             "objects", "tb_cache_scratch", (), ("--iterations", "2000")),
    Workload("mstress", "preload",
             "memory stress: many threads, widely varying sizes, blocks passed between "
             "threads, threads created anew each round",
             "operations", "tb_mstress", (), ("--iterations", "2000")),
    Workload("glibc-simple", "preload",
             "glibc's bench-malloc-simple: tight loops of N mallocs then N frees per size",
             "malloc+free pairs", "tb_glibc_simple", (), ("--iterations", "20"),
             threaded=False),
    Workload("glibc-thread", "preload",
             "glibc's bench-malloc-thread: per thread a working set with random replacement, "
             "sizes skewed to small",
             "iterations", "tb_glibc_thread", (), ("--iterations", "20000")),
    Workload("alloc-test", "preload",
             "alloc-test: random allocation and free in a bounded window of mostly small "
             "blocks, some larger",
             "operations", "tb_alloc_test", (), ("--iterations", "20000")),
    Workload("redis", "server",
             "redis-server with the allocator preloaded, driven by redis-benchmark "
             "(SET, GET, LPUSH, LPOP, SADD, HSET on a loopback port); ops/s is the mean "
             "over the tests",
             "requests", None, (), (), threaded=False),
    Workload("python", "preload",
             "python3 running a fixed CPU-bound workload (dicts, lists, strings, json, "
             "sorting) that checks its own result, with PYTHONMALLOC=malloc (every object "
             "from the allocator measured, not from pymalloc's arenas)",
             "rounds", None, (), ("--rounds", "2"), threaded=False),
)

BY_NAME: dict[str, Workload] = {w.name: w for w in WORKLOADS}

PYTHON_WORKLOAD = Path(__file__).resolve().parent / "programs" / "pyload.py"

#: The workloads whose programs run the enclave harness with a plugin
#: (tb_enclave, tb_frag: bench/workloads/enclave.c).
HARNESS_WORKLOADS = ("enclave", "frag")


def names() -> list[str]:
    """Every workload's name, in report order."""
    return [w.name for w in WORKLOADS]


def program_path(build: Path, workload: Workload) -> Optional[Path]:
    """Where workload's tb_ program is built (None when it runs no tb_ program)."""
    if workload.program is None:
        return None
    sub = "workloads/x509" if workload.program == "tb_x509" else "workloads"
    return build / "bench" / sub / workload.program


#: The edge cases tb_conform checks (bench/workloads/conform.c): name -> what
#: the allocator must do.
CONFORM_CHECKS: dict[str, str] = {
    "malloc_huge_enomem": "malloc(SIZE_MAX) returns NULL with errno ENOMEM",
    "malloc_above_ptrdiff_enomem": "malloc(PTRDIFF_MAX + 1) returns NULL with errno ENOMEM",
    "calloc_overflow_enomem": "calloc whose count * size overflows returns NULL, errno ENOMEM",
    "realloc_huge_keeps_block": "realloc(p, SIZE_MAX) returns NULL, errno ENOMEM, p intact",
    "malloc_zero_unique": "malloc(0) returns a unique pointer",
    "usable_size_writable": "malloc_usable_size(p) >= the size asked for, all of it writable",
    "posix_memalign_einval": "posix_memalign with alignment 24 returns EINVAL",
    "aligned_alloc_4mib": "aligned_alloc(A, 2A) is A-aligned, for A = 16 B .. 4 MiB",
    "memalign_page": "memalign(4096, 10) is page-aligned",
    "valloc_free": "valloc(5000) is page-aligned and can be freed",
    "pvalloc_usable_free": "pvalloc(100) is a page, its usable size at least 4096, freeable",
}


def conform_path(build: Path) -> Path:
    """tb_conform: the malloc family's edge cases under a preloaded allocator."""
    return build / "bench" / "workloads" / "tb_conform"


def fixed_shim_path(build: Path) -> Path:
    """The fixed-heap preload shim (libtb_fixed.so) of x509-fixed."""
    return build / "bench" / "workloads" / "x509" / "libtb_fixed.so"


def missing_parts(build: Path, workload: Workload) -> Optional[str]:
    """Why workload cannot run with this build (None when it can)."""
    needed: list[Path] = []
    prog = program_path(build, workload)
    if prog is not None:
        needed.append(prog)
    if workload.name == "x509-fixed":
        needed.append(fixed_shim_path(build))
    absent = [p for p in needed if not p.exists()]
    if not absent:
        return None
    # CMake leaves a note where a program could not be built (tb_x509 without
    # mbedtls 2.x): building again would not help
    for p in absent:
        why = p.with_name(p.name + ".missing")
        if why.is_file():
            return f"{p.name} not built: {why.read_text(encoding='utf-8').strip()}"
    return "not built: " + ", ".join(str(p) for p in absent)


def command(workload: Workload, build: Path, threads: int, seed: int, quick: bool,
            plugin: Optional[str], series_csv: Optional[Path]) -> list[str]:
    """The command of one run (without the launcher and the preload).

    ``plugin`` is the allocator's enclave plugin (enclave and frag, whose
    programs run the enclave harness with it), ``series_csv`` where frag
    writes its time series.
    """
    extra: Sequence[str] = workload.quick_args if quick else workload.args
    if workload.name == "python":
        return [sys_python(), str(PYTHON_WORKLOAD), "--seed", str(seed), *extra]
    prog = program_path(build, workload)
    assert prog is not None
    cmd = [str(prog), "--threads", str(threads), "--seed", str(seed)]
    if workload.name in HARNESS_WORKLOADS:
        assert plugin is not None
        cmd += ["--allocator", plugin]
        if series_csv is not None:
            cmd += ["--csv", str(series_csv)]
    return cmd + list(extra)


def sys_python() -> str:
    """The python3 of the system (not the venv's): the real program measured."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def repo_relative(path: Path) -> str:
    """path relative to the repository when inside it (for commands in reports)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)
