#!/usr/bin/env python3
"""Run real Debian programs with libtessalloc.so preloaded.

Each workload runs twice, without and with LD_PRELOAD, in separate
directories; the transcripts (exit codes and stdout, or digests of them)
must be identical, and the preloaded runs must print nothing mentioning
tessalloc on stderr. A missing program is a failure naming the Debian
package to install.

    run_preload.py --lib build/libtessalloc.so [--only python|sqlite3|sort|git]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

PYTHON = "/usr/bin/python3"

# Program each workload needs, and the Debian package that provides it.
NEEDS: dict[str, tuple[str, str]] = {
    "python": (PYTHON, "python3"),
    "sqlite3": ("sqlite3", "sqlite3"),
    "sort": ("sort", "coreutils"),
    "git": ("git", "git"),
}


class PreloadFailure(Exception):
    """A workload misbehaved; the message says how."""


class Runner:
    """Runs commands in one mode (plain or preloaded); keeps a transcript."""

    def __init__(self, lib: Optional[Path], workdir: Path) -> None:
        self.lib = lib
        self.workdir = workdir
        self.transcript: list[str] = []
        self.env = dict(os.environ)
        self.env.pop("LD_PRELOAD", None)
        self.env.update(LC_ALL="C", LANG="C", TZ="UTC")
        if lib is not None:
            self.env["LD_PRELOAD"] = str(lib)

    @property
    def mode(self) -> str:
        return "preloaded" if self.lib else "plain"

    def run(self, args: list[str], stdin: Optional[bytes] = None,
            cwd: Optional[Path] = None, digest: bool = False,
            env: Optional[dict[str, str]] = None) -> bytes:
        """Run args; record the exit code and stdout (or its digest)."""
        proc = subprocess.run(
            args, input=stdin, cwd=cwd or self.workdir,
            env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, check=False, timeout=180)
        err = proc.stderr.decode(errors="replace")
        if proc.returncode < 0:
            raise PreloadFailure(
                f"{self.mode}: {' '.join(args)} killed by signal "
                f"{-proc.returncode}\nstderr:\n{err[-4000:]}")
        if self.lib and "tessalloc:" in err:
            raise PreloadFailure(
                f"{self.mode}: {' '.join(args)} printed a tessalloc "
                f"message:\n{err[-4000:]}")
        shown = hashlib.sha256(proc.stdout).hexdigest() if digest else \
            proc.stdout.decode(errors="replace")
        # Work directories differ between the modes: not part of the output.
        command = " ".join(args).replace(str(self.workdir), "$WORKDIR")
        if proc.returncode != 0:  # a failure: keep its reason
            shown += f"\n[stderr] {err[-2000:]}"
        self.transcript.append(
            f"$ {command}\n[rc {proc.returncode}]\n{shown}\n")
        return proc.stdout


# ---------------------------------------------------------------- python --

PY_WORKLOAD = r'''
import ctypes, hashlib, json, os, random, shutil, sys, threading


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def where(libc: ctypes.CDLL, addr: int) -> str:
    info = DlInfo()
    if not libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)):
        return "?"
    return (info.fname or b"?").decode()


def is_executable(name: str) -> bool:
    path = name if "/" in name else shutil.which(name) or name
    return os.path.realpath(path) == os.path.realpath("/proc/self/exe")


def check_preload() -> None:
    """Prove libtessalloc is in this process and owns malloc."""
    process = ctypes.CDLL(None)
    try:
        version = process.tess_version_string
    except AttributeError:
        sys.exit("tess_version_string not found: library not loaded")
    version.restype = ctypes.c_char_p
    text = version()
    if not text or not text.startswith(b"tessalloc "):
        sys.exit(f"bad version string {text!r}")
    tess = ctypes.cast(process.tess_malloc, ctypes.c_void_p).value
    malloc = ctypes.cast(process.malloc, ctypes.c_void_p).value
    home = where(process, tess)
    found = where(process, malloc)
    if found != home and is_executable(found):
        # A non-PIE python3 takes malloc's address, so the lookup finds the
        # executable's canonical PLT stub; ask the library itself instead.
        print(f"malloc lookup found a stub in {found}", file=sys.stderr)
        malloc = ctypes.cast(ctypes.CDLL(home).malloc, ctypes.c_void_p).value
    if malloc != tess:
        sys.exit(f"malloc at {malloc:#x} ({where(process, malloc)}) is not "
                 f"tess_malloc at {tess:#x} ({where(process, tess)})")
    # Calls through the stub land in tessalloc: its usable_size accepts
    # the block (it aborts on foreign pointers) and agrees with glibc's name.
    process.malloc.restype = ctypes.c_void_p
    process.tess_usable_size.restype = ctypes.c_size_t
    process.malloc_usable_size.restype = ctypes.c_size_t
    p = process.malloc(ctypes.c_size_t(1000))
    size = process.tess_usable_size(ctypes.c_void_p(p))
    if size < 1000 or size != process.malloc_usable_size(ctypes.c_void_p(p)):
        sys.exit(f"malloc(1000) block has usable size {size}")
    process.free(ctypes.c_void_p(p))
    print(f"preload check ok: {text.decode()}", file=sys.stderr)


def workload() -> str:
    h = hashlib.sha256()
    rng = random.Random(1234)
    d = {f"key{i}": [i, str(i) * (i % 7), {"n": i}] for i in range(200000)}
    for i in range(0, 200000, 3):
        del d[f"key{i}"]
    h.update(repr(sorted(d.items())[::500]).encode())
    words = ["".join(rng.choice("abcdefghij")
                     for _ in range(rng.randint(0, 120)))
             for _ in range(20000)]
    text = "|".join(words)
    h.update(text.upper().encode())
    h.update(str(text.count("abc")).encode())
    obj = {"items": [{"id": i, "name": words[i % len(words)],
                      "vals": [rng.random() for _ in range(8)]}
                     for i in range(20000)]}
    dumped = json.dumps(obj, sort_keys=True)
    if json.loads(dumped) != obj:
        sys.exit("json round trip differs")
    h.update(hashlib.sha256(dumped.encode()).digest())
    rows = [(rng.randint(0, 1000), rng.random(), words[i % 100])
            for i in range(300000)]
    rows.sort()
    h.update(repr(rows[::997]).encode())
    blob = bytearray()
    for _ in range(64):
        blob += rng.randbytes(65536)
    h.update(hashlib.sha256(bytes(blob)).digest())
    results = [""] * 4

    def work(k: int) -> None:
        local = random.Random(k)
        items = [str(local.random()) * (1 + k) for _ in range(40000)]
        items.sort()
        table = {s: len(s) for s in items}
        digest = hashlib.sha256("".join(items).encode()).hexdigest()
        results[k] = digest + str(len(table))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.update("".join(results).encode())
    return h.hexdigest()


if os.environ.get("TESS_CHECK_PRELOAD"):
    check_preload()
print(workload())
'''


def python_workload(r: Runner) -> None:
    script = r.workdir / "workload.py"
    script.write_text(PY_WORKLOAD)
    # The preload check writes to stderr only, so stdout stays comparable.
    env = {"TESS_CHECK_PRELOAD": "1"} if r.lib else {}
    r.run([PYTHON, "-I", str(script)], env=env)


# --------------------------------------------------------------- sqlite3 --

def sqlite_script() -> bytes:
    """A deterministic SQL script: ~100k inserts, indexes, queries."""
    rng = random.Random(42)
    out = ["CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT,"
           " city INTEGER, score REAL, note TEXT);",
           "CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT);",
           "BEGIN;"]
    for c in range(200):
        out.append(f"INSERT INTO city VALUES({c}, 'city{c:03d}');")
    syll = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "an"]
    for i in range(100000):
        name = "".join(rng.choice(syll) for _ in range(rng.randint(2, 5)))
        note = "x" * rng.randint(0, 300)
        city = rng.randrange(200)
        score = rng.randrange(100000) / 100
        out.append(f"INSERT INTO person VALUES({i}, '{name}', {city},"
                   f" {score}, '{note}');")
    out += [
        "COMMIT;",
        "CREATE INDEX person_name ON person(name);",
        "CREATE INDEX person_city ON person(city, score);",
        "SELECT count(*), count(DISTINCT name), sum(length(note))"
        " FROM person;",
        "SELECT c.name, count(*), round(avg(p.score), 4), max(p.name)"
        " FROM person p JOIN city c ON c.id = p.city"
        " GROUP BY c.id ORDER BY c.id;",
        "SELECT name, count(*) AS n FROM person GROUP BY name"
        " ORDER BY n DESC, name LIMIT 50;",
        "SELECT id, name, score FROM person"
        " ORDER BY score DESC, id LIMIT 100;",
        "SELECT id FROM person WHERE name LIKE 'ka%'"
        " ORDER BY note, id LIMIT 200;",
        "UPDATE person SET note = note || name WHERE id % 7 = 0;",
        "DELETE FROM person WHERE score < 10;",
        "SELECT count(*), sum(length(note)) FROM person;",
        "SELECT group_concat(name, ',') FROM (SELECT name FROM person"
        " ORDER BY id LIMIT 2000);",
        "PRAGMA integrity_check;",
    ]
    return ("\n".join(out) + "\n").encode()


def sqlite_workload(r: Runner) -> None:
    script = sqlite_script()
    r.run(["sqlite3", "-bail", str(r.workdir / "db.sqlite")], stdin=script)


# ------------------------------------------------------------------ sort --

def make_sort_input(path: Path, megabytes: int) -> None:
    """Deterministic lines: a number, a word, some repeats for -u."""
    rng = random.Random(7)
    target = megabytes << 20
    size = 0
    with path.open("w") as f:
        while size < target:
            lines = []
            for _ in range(10000):
                num = rng.randrange(1 << 40) >> rng.randrange(40)
                word = rng.randbytes(rng.randrange(1, 24)).hex()
                lines.append(f"{num} {word}\n" if num % 5 else "repeat line\n")
            chunk = "".join(lines)
            f.write(chunk)
            size += len(chunk)


def sort_workload(r: Runner, data: Path) -> None:
    tmp = r.workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    r.run(["sort", str(data)], digest=True)
    r.run(["sort", "-n", str(data)], digest=True)
    r.run(["sort", "-u", str(data)], digest=True)
    # A small buffer forces temporary files and a multi-way merge.
    r.run(["sort", "-S", "2M", "-T", str(tmp), "-k2,2", "-k1,1n", str(data)],
          digest=True)


# ------------------------------------------------------------------- git --

def git_workload(r: Runner) -> None:
    repo = r.workdir / "repo"
    home = r.workdir / "home"
    repo.mkdir()
    home.mkdir()
    env = {
        "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.org",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.org",
    }

    def git(*args: str, digest: bool = False, stamp: int = 0) -> bytes:
        date = f"@{1700000000 + stamp * 3600} +0000"
        dates = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        return r.run(["git", *args], cwd=repo, digest=digest,
                     env={**env, **dates})

    rng = random.Random(99)
    words = [rng.randbytes(4).hex() for _ in range(500)]

    def write_file(i: int, version: int) -> None:
        path = repo / f"dir{i % 20:02d}" / f"file{i:04d}.txt"
        path.parent.mkdir(exist_ok=True)
        lines = [" ".join(rng.choice(words) for _ in range(12))
                 for _ in range(20 + (i * 7 + version) % 80)]
        path.write_text("\n".join(lines) + "\n")

    git("init", "-q", "-b", "main")
    for i in range(400):
        write_file(i, 0)
    git("add", "-A")
    git("commit", "-q", "-m", "initial import", stamp=1)
    for version in range(1, 7):
        for i in rng.sample(range(400), 60):
            write_file(i, version)
        for i in range(400 + version * 10, 410 + version * 10):
            write_file(i, version)
        victim = repo / f"dir{version:02d}" / f"file{version:04d}.txt"
        if victim.exists():
            victim.unlink()
        git("add", "-A")
        git("commit", "-q", "-m", f"change {version}", stamp=1 + version)
    git("log", "--stat", "--format=%H %an %ad %s")
    git("diff", "HEAD~3", "HEAD", digest=True)
    git("diff", "--stat", "HEAD~5", "HEAD~1")
    git("-c", "pack.threads=1", "gc", "-q")
    git("fsck", "--full", "--no-progress")
    git("rev-list", "--all", "--objects", digest=True)
    git("grep", "-c", words[0])
    git("blame", "--porcelain", "dir07/file0007.txt", digest=True)
    git("ls-tree", "-r", "HEAD", digest=True)


# ---------------------------------------------------------------- driver --

def find_program(name: str) -> None:
    prog, package = NEEDS[name]
    if prog.startswith("/"):
        found = Path(prog).is_file()
    else:
        found = shutil.which(prog) is not None
    if not found:
        raise PreloadFailure(
            f"{prog} is missing: install the Debian package '{package}' "
            f"(apt-get install {package})")


def check_loaded(lib: Path, workdir: Path) -> None:
    """The library must actually load under LD_PRELOAD."""
    r = Runner(lib, workdir)
    maps = r.run(["cat", "/proc/self/maps"]).decode()
    if str(lib.resolve()) not in maps and lib.name not in maps:
        raise PreloadFailure(f"{lib} is not mapped in a preloaded process")


def first_difference(plain: list[str], preloaded: list[str]) -> str:
    """The first step whose transcript differs, in both versions."""
    for a, b in zip(plain, preloaded):
        if a != b:
            return f"\n--- plain:\n{a[:1500]}\n--- preloaded:\n{b[:1500]}"
    return f"{len(plain)} vs {len(preloaded)} steps"


def run_one(name: str, lib: Path, base: Path, sort_mb: int) -> None:
    find_program(name)
    check_loaded(lib, base)
    shared = base / "shared"
    shared.mkdir(exist_ok=True)
    work: Callable[[Runner], None]
    if name == "python":
        work = python_workload
    elif name == "sqlite3":
        work = sqlite_workload
    elif name == "sort":
        data = shared / "sort-input.txt"
        make_sort_input(data, sort_mb)
        work = functools.partial(sort_workload, data=data)
    else:
        work = git_workload
    transcripts = []
    for mode_lib in (None, lib):
        workdir = base / ("preloaded" if mode_lib else "plain")
        workdir.mkdir()
        runner = Runner(mode_lib, workdir)
        work(runner)
        transcripts.append(runner.transcript)
    plain, preloaded = transcripts
    if plain != preloaded:
        raise PreloadFailure("output differs with LD_PRELOAD, "
                             + first_difference(plain, preloaded))
    if any("[rc 0]" not in step for step in plain):
        bad = next(step for step in plain if "[rc 0]" not in step)
        raise PreloadFailure(
            f"a command failed even without preload:\n{bad[:2000]}")
    print(f"preload {name}: {len(plain)} command(s), outputs identical")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, type=Path,
                        help="libtessalloc.so")
    parser.add_argument("--only", choices=sorted(NEEDS),
                        help="run one workload")
    parser.add_argument("--sort-mb", type=int, default=30,
                        help="sort input size in MiB")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory")
    args = parser.parse_args()
    lib: Path = args.lib.resolve()
    if not lib.is_file():
        print(f"FAIL: {lib} does not exist", file=sys.stderr)
        return 1
    names = [args.only] if args.only else sorted(NEEDS)
    failed = 0
    for name in names:
        base = Path(tempfile.mkdtemp(prefix=f"tess-preload-{name}-"))
        try:
            run_one(name, lib, base, args.sort_mb)
        except (PreloadFailure, subprocess.TimeoutExpired) as e:
            print(f"FAIL preload {name}: {e}", file=sys.stderr)
            failed += 1
        finally:
            if args.keep:
                print(f"kept {base}")
            else:
                shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
