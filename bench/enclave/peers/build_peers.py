#!/usr/bin/env python3
"""Build the enclave benchmark's fixed-heap peer allocators as plugins.

Each peer becomes ``<build>/enclave-peers/libfixed_<name>.so`` exporting
``fixed_allocator()`` (bench/enclave/fixed_alloc.h):

* ``dlmalloc``  -- the crates.io ``dlmalloc`` crate (pinned in
  ``dlmalloc/Cargo.lock``) behind one global lock, over a bump pointer on the
  region: a Rust staticlib (``dlmalloc/``) wrapped by ``dlmalloc_plugin.c``.
* ``snmalloc``  -- snmalloc's source from the crates.io crate ``snmalloc-sys``
  (pinned version), fixed-range configuration, one C++ translation unit
  (``snmalloc_plugin.cc``).
* ``mimalloc3`` -- the object file of the PyPI wheel ``cmeel-mimalloc``
  (pinned; installed with ``pip --target`` in the same cache as
  tessbench/peers.py uses) with all but its ``mi_*`` symbols made local, wrapped
  by ``mimalloc_plugin.c``.

Sources are cached under ``.cache/`` (cargo's registry in ``.cache/cargo``
unless CARGO_HOME is set; the wheel in ``.cache/peers/mimalloc3``). Missing
tools are installed (g++ and binutils from apt, the wheel with pip); cargo
must already be there. ``plugin_check`` (plugin_check.c) is built too and run
on every plugin that was built. The outcome is written to
``<build>/enclave-peers/peers.json``: per peer its name, path, version,
status (``ok``, ``check-failed`` or ``missing``), the reason when it is not
``ok``, the check's output and notes on known deviations. A peer that cannot
be built is reported as missing, never faked.

Command line (``scripts/fetch_fixed_peers.sh`` is a thin wrapper)::

    python3 bench/enclave/peers/build_peers.py [--build-dir DIR]
        [--no-install] [--no-check] [--only NAME ...] [--strict]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

# the tessbench package (shared helpers) is at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tessbench.benchlib import (  # noqa: E402
    CMEEL_MIMALLOC, CMEEL_MIMALLOC_VERSION, PEERS_CACHE, REPO_ROOT,
    cmeel_version, dpkg_version, make_log, pip_command, privileged, utc_now,
    write_json_atomic)

HERE = Path(__file__).resolve().parent
ENCLAVE_DIR = HERE.parent
DEFAULT_BUILD = REPO_ROOT / "build"
CACHE = REPO_ROOT / ".cache"
DEFAULT_CARGO_HOME = CACHE / "cargo"
MIMALLOC_TARGET = PEERS_CACHE / "mimalloc3"  # shared with tessbench/peers.py

DLMALLOC_CRATE_DIR = HERE / "dlmalloc"
DLMALLOC_CRATE = "dlmalloc"
SNMALLOC_CRATE = "snmalloc-sys"
SNMALLOC_VERSION = "0.7.6"

PEER_NAMES: tuple[str, ...] = ("dlmalloc", "snmalloc", "mimalloc3")

CFLAGS = ["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra"]
CXXFLAGS = [
    "-std=c++20", "-O3", "-fPIC", "-mcx16", "-fno-exceptions", "-fno-rtti",
    "-pthread", "-ftls-model=initial-exec", "-Wall", "-Wextra",
    "-DNDEBUG",
    # As in an enclave, whose PAL (PALOpenEnclave) has no WaitOnAddress:
    # snmalloc's combining lock spins. On Linux (snmalloc's CMake default,
    # and this peer until the thirtieth session) it parks waiters on a
    # futex, a system call an enclave thread cannot make directly (it would
    # need an OCALL, which OE's snmalloc does not make; snmalloc_plugin.cc).
    "-DSNMALLOC_USE_WAIT_ON_ADDRESS=0",
    # As snmalloc's CMake build defines them by default on Linux.
    "-DSNMALLOC_HAS_LINUX_FUTEX_H",
    "-DSNMALLOC_HAS_LINUX_RANDOM_H", "-DSNMALLOC_PLATFORM_HAS_GETENTROPY",
]
# Only fixed_allocator() leaves the shared object.
PLUGIN_LDFLAGS = ["-shared", f"-Wl,--version-script={HERE / 'plugin.map'}",
                  "-Wl,--gc-sections", "-Wl,-z,defs"]
CHECK_TIMEOUT_S = 300

NOTES: dict[str, list[str]] = {
    "dlmalloc": [
        "one spin lock around all calls, as OE's dlmalloc takes (USE_LOCKS 1: "
        "dlmalloc's spin lock); granularity 4 KiB; the bump pointer goes back "
        "when dlmalloc trims its top (as OE's dlmalloc_sbrk with a negative "
        "increment), so footprint() = bytes below the bump pointer",
    ],
    "snmalloc": [
        "FixedRangeConfig<PALNoAlloc<DefaultPal>>; page map at the start of "
        "the region, zeroed by init (an enclave heap starts zeroed)",
        "footprint() = the backend's StatsRange current usage (chunks taken "
        "from the global range, metadata included) + page map bytes",
        "allocators are taken from AllocPool on thread_init (or on first "
        "use) and flush()ed and released to the pool on thread_cleanup",
        "its locks spin, as in an enclave (SNMALLOC_USE_WAIT_ON_ADDRESS=0: "
        "OE's PAL has no WaitOnAddress; on Linux its combining lock would "
        "park waiters on a futex)",
    ],
    "mimalloc3": [
        "region given with mi_manage_os_memory_ex(committed, pinned, not "
        "zero, exclusive=false) after mi_option_disallow_os_alloc=1; with "
        "exclusive=true mi_heap_new_in_arena returns NULL",
        "arenas come in 32 MiB units from a 64 KiB-aligned start: only the "
        "largest such part of the region is used (a region whose start is "
        "not 64 KiB-aligned loses up to 32 MiB; under 32 MiB init fails)",
        "uses OS memory outside the region (about 2.3 MiB at load, 64 KiB "
        "per new thread's metadata)",
        "footprint() unavailable ((size_t)-1): mimalloc has no cheap "
        "thread-safe measure of arena use",
        "thread_init = mi_thread_init; thread_cleanup does nothing (the heap "
        "stays with the host thread; mimalloc abandons it when the thread "
        "exits): mi_thread_done there makes mimalloc 3.4.3 segfault at "
        "thread exit with OS allocation disallowed (16 threads)",
        "may return NULL while much of the region is free: from about 10 "
        "threads in a 32 MiB region (plugin_check --region-mib 32 --threads "
        "10), now and then with 16 threads in 64 MiB",
    ],
}


@dataclasses.dataclass
class PeerResult:
    """What became of one peer."""

    name: str
    status: str  # "ok", "check-failed" or "missing"
    path: Optional[str] = None
    version: Optional[str] = None
    source: str = ""
    reason: str = ""
    check: str = "not-run"  # "pass", "fail" or "not-run"
    check_output: str = ""
    footprint_before: Optional[int] = None
    footprint_after: Optional[int] = None
    build_seconds: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return dataclasses.asdict(self)


class BuildError(Exception):
    """A step failed; the message says which and why."""


# --------------------------------------------------------------- helpers


_log = make_log("fixed-peers")


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run(cmd: Sequence[str], cwd: Optional[Path] = None,
         env: Optional[dict[str, str]] = None,
         timeout: Optional[float] = None) -> str:
    """Run cmd; return its stdout, raise BuildError with the output tail."""
    _log("running: " + " ".join(str(c) for c in cmd))
    try:
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env,
                              text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise BuildError(f"{cmd[0]}: not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"'{cmd[0]}' timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise BuildError(f"'{' '.join(str(c) for c in cmd[:3])} ...' failed "
                         f"(exit {proc.returncode}):\n"
                         + _tail(proc.stderr + proc.stdout))
    return proc.stdout


def _up_to_date(output: Path, inputs: Sequence[Path],
                cmd: Sequence[str]) -> bool:
    """True if output is newer than every input and was made by cmd."""
    stamp = output.with_name(output.name + ".cmd")
    if not output.exists() or not stamp.exists():
        return False
    if stamp.read_text() != "\n".join(cmd):
        return False
    built = output.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in inputs)


def _build(output: Path, inputs: Sequence[Path], cmd: Sequence[str]) -> None:
    """Run a compiler command unless its output is up to date."""
    if _up_to_date(output, inputs, cmd):
        _log(f"up to date: {output.name}")
        return
    output.unlink(missing_ok=True)
    _run(cmd)
    output.with_name(output.name + ".cmd").write_text("\n".join(cmd))


def apt_install(packages: Sequence[str]) -> Optional[str]:
    """apt-get install the packages that are missing; None or a message."""
    missing = [p for p in packages if dpkg_version(p) is None]
    if not missing:
        return None
    if shutil.which("apt-get") is None:
        return "apt-get not found; install " + " ".join(missing)
    update = privileged(["apt-get", "update", "-q"])
    install = privileged(["apt-get", "install", "-y", "-q",
                          "--no-install-recommends", *missing])
    if update is None or install is None:
        return "not root and no sudo: cannot apt-get install " + " ".join(missing)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        _run(update, env=env)
        _run(install, env=env)
    except BuildError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------- tools


@dataclasses.dataclass(frozen=True)
class Tools:
    """The programs the builds need (None where missing)."""

    cc: Optional[str]
    cxx: Optional[str]
    objcopy: Optional[str]
    nm: Optional[str]
    cargo: Optional[str]


def _which(name: str) -> Optional[str]:
    return shutil.which(name)


def find_tools() -> Tools:
    """Locate the compilers, binutils and cargo (CC/CXX honoured)."""
    cc = os.environ.get("CC") or _which("cc") or _which("gcc")
    cxx = os.environ.get("CXX") or _which("g++") or _which("c++")
    cargo = _which("cargo")
    if cargo is None:
        home_cargo = Path.home() / ".cargo" / "bin" / "cargo"
        cargo = str(home_cargo) if home_cargo.exists() else None
    return Tools(cc=cc, cxx=cxx, objcopy=_which("objcopy"), nm=_which("nm"),
                 cargo=cargo)


def ensure_tools(install: bool) -> tuple[Tools, Optional[str]]:
    """Install g++ and binutils from apt if missing (when install is set)."""
    tools = find_tools()
    problem: Optional[str] = None
    if install and (tools.cc is None or tools.cxx is None
                    or tools.objcopy is None or tools.nm is None):
        problem = apt_install(["gcc", "g++", "binutils", "libc6-dev"])
        tools = find_tools()
    return tools, problem


def cargo_env() -> dict[str, str]:
    """The environment for cargo: CARGO_HOME under .cache unless set.

    With CARGO_HOME moved, cargo would no longer read ~/.cargo/config.toml
    (a registry mirror, say); it is linked into the cache so it still does.
    """
    env = dict(os.environ)
    if "CARGO_HOME" not in env:
        DEFAULT_CARGO_HOME.mkdir(parents=True, exist_ok=True)
        for name in ("config.toml", "config"):
            user = Path.home() / ".cargo" / name
            ours = DEFAULT_CARGO_HOME / name
            if user.is_file() and not ours.exists() and not ours.is_symlink():
                ours.symlink_to(user)
        env["CARGO_HOME"] = str(DEFAULT_CARGO_HOME)
    return env


def cargo_packages(cargo: str, manifest: Path,
                   env: dict[str, str]) -> dict[str, tuple[str, Path]]:
    """name -> (version, manifest dir) of every package cargo resolved."""
    out = _run([cargo, "metadata", "--format-version", "1", "--offline",
                "--locked", "--manifest-path", str(manifest)], env=env)
    doc = json.loads(out)
    return {str(p["name"]): (str(p["version"]), Path(p["manifest_path"]).parent)
            for p in doc["packages"]}


# ------------------------------------------------------------ the peers


def build_dlmalloc(tools: Tools, out_dir: Path, result: PeerResult) -> Path:
    """The Rust staticlib, then the plugin around it."""
    if tools.cargo is None:
        raise BuildError("cargo not found (install Rust with rustup)")
    if tools.cc is None:
        raise BuildError("no C compiler")
    env = cargo_env()
    manifest = DLMALLOC_CRATE_DIR / "Cargo.toml"
    target_dir = out_dir / "cargo-target"
    _run([tools.cargo, "fetch", "--locked", "--manifest-path", str(manifest)],
         env=env, timeout=600)
    version, _ = cargo_packages(tools.cargo, manifest, env)[DLMALLOC_CRATE]
    result.version = version
    result.source = f"crates.io:{DLMALLOC_CRATE}=={version}"
    _run([tools.cargo, "build", "--release", "--offline", "--locked",
          "--manifest-path", str(manifest), "--target-dir", str(target_dir)],
         env=env, timeout=900)
    staticlib = target_dir / "release" / "libfixed_dlmalloc.a"
    plugin = out_dir / "libfixed_dlmalloc.so"
    source = HERE / "dlmalloc_plugin.c"
    cmd = [tools.cc, *CFLAGS, f'-DPEER_VERSION="{version}"', "-o", str(plugin),
           str(source), str(staticlib), *PLUGIN_LDFLAGS,
           "-lpthread", "-ldl", "-lm", "-lrt", "-lutil"]
    _build(plugin, [source, staticlib, HERE / "plugin.map",
                    ENCLAVE_DIR / "fixed_alloc.h"], cmd)
    return plugin


SNMALLOC_MANIFEST = f"""\
# Generated by bench/enclave/peers/build_peers.py: only here so that cargo
# fetches snmalloc's source (shipped in snmalloc-sys) into its registry.
[package]
name = "snmalloc-source"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "lib.rs"

[dependencies]
{SNMALLOC_CRATE} = {{ version = "={SNMALLOC_VERSION}", default-features = false }}
"""


def fetch_snmalloc(cargo: str) -> Path:
    """cargo fetch snmalloc-sys; return its upstream/src directory."""
    env = cargo_env()
    fetch_dir = CACHE / "snmalloc-fetch"
    fetch_dir.mkdir(parents=True, exist_ok=True)
    manifest = fetch_dir / "Cargo.toml"
    if not manifest.exists() or manifest.read_text() != SNMALLOC_MANIFEST:
        manifest.write_text(SNMALLOC_MANIFEST)
        (fetch_dir / "Cargo.lock").unlink(missing_ok=True)
    (fetch_dir / "lib.rs").touch()
    _run([cargo, "fetch", "--manifest-path", str(manifest)], env=env,
         timeout=600)
    packages = cargo_packages(cargo, manifest, env)
    if SNMALLOC_CRATE not in packages:
        raise BuildError(f"cargo did not resolve {SNMALLOC_CRATE}")
    version, root = packages[SNMALLOC_CRATE]
    if version != SNMALLOC_VERSION:
        raise BuildError(f"{SNMALLOC_CRATE} resolved to {version}, "
                         f"wanted {SNMALLOC_VERSION}")
    src = root / "upstream" / "src"
    if not (src / "snmalloc" / "backend" / "fixedglobalconfig.h").is_file():
        raise BuildError(f"no snmalloc source under {src}")
    return src


def build_snmalloc(tools: Tools, out_dir: Path, result: PeerResult) -> Path:
    """snmalloc's fixed-range configuration behind snmalloc_plugin.cc."""
    if tools.cargo is None:
        raise BuildError("cargo not found (needed to fetch snmalloc-sys)")
    if tools.cxx is None:
        raise BuildError("no C++ compiler (g++)")
    result.source = f"crates.io:{SNMALLOC_CRATE}=={SNMALLOC_VERSION}"
    src = fetch_snmalloc(tools.cargo)
    result.version = SNMALLOC_VERSION
    plugin = out_dir / "libfixed_snmalloc.so"
    source = HERE / "snmalloc_plugin.cc"
    cmd = [tools.cxx, *CXXFLAGS, f'-DPEER_VERSION="{SNMALLOC_VERSION}"',
           f"-I{src}", "-o", str(plugin), str(source), *PLUGIN_LDFLAGS]
    _build(plugin, [source, HERE / "plugin.map",
                    ENCLAVE_DIR / "fixed_alloc.h"], cmd)
    return plugin


def _mimalloc_object(target: Path) -> Optional[Path]:
    objs = sorted((target / "cmeel.prefix" / "lib").glob("mimalloc-*/mimalloc.o"))
    return objs[-1] if objs else None


def fetch_mimalloc(install: bool) -> Path:
    """pip install --target the pinned wheel (if missing); its prefix."""
    target = MIMALLOC_TARGET
    if (target.is_dir() and cmeel_version(target) == CMEEL_MIMALLOC_VERSION
            and _mimalloc_object(target) is not None):
        return target / "cmeel.prefix"
    if not install:
        raise BuildError(f"{CMEEL_MIMALLOC}=={CMEEL_MIMALLOC_VERSION} is not "
                         f"installed in {target} (and --no-install)")
    pip = pip_command()
    if pip is None:
        problem = apt_install(["python3-pip"])
        pip = pip_command()
        if pip is None:
            raise BuildError(f"no pip, and installing python3-pip failed: {problem}")
    if target.exists():  # partial or another version: start afresh
        shutil.rmtree(target)
    # --target skips pip's "externally managed" check (PEP 668) on purpose.
    _run([*pip, "install", "--disable-pip-version-check", "--quiet",
          "--root-user-action=ignore", "--target", str(target),
          f"{CMEEL_MIMALLOC}=={CMEEL_MIMALLOC_VERSION}"], timeout=900)
    if _mimalloc_object(target) is None:
        raise BuildError(f"{CMEEL_MIMALLOC} has no lib/mimalloc-*/mimalloc.o")
    return target / "cmeel.prefix"


def _header_version(include_dir: Path) -> Optional[str]:
    """"3.4.3" from MI_MALLOC_VERSION 30403 in mimalloc.h."""
    match = re.search(r"#define\s+MI_MALLOC_VERSION\s+(\d+)",
                      (include_dir / "mimalloc.h").read_text())
    if match is None:
        return None
    n = int(match.group(1))
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}"


def build_mimalloc(tools: Tools, out_dir: Path, install: bool,
                   result: PeerResult) -> Path:
    """mimalloc.o with only mi_* global, behind mimalloc_plugin.c."""
    if tools.cc is None or tools.objcopy is None or tools.nm is None:
        raise BuildError("needs a C compiler, objcopy and nm")
    result.source = f"pypi:{CMEEL_MIMALLOC}=={CMEEL_MIMALLOC_VERSION}"
    prefix = fetch_mimalloc(install)
    obj = _mimalloc_object(prefix.parent)
    if obj is None:
        raise BuildError("mimalloc.o not found in the wheel")
    include = prefix / "include" / obj.parent.name
    header_version = _header_version(include)
    if header_version != CMEEL_MIMALLOC_VERSION:
        raise BuildError(f"mimalloc.h says version {header_version}, the wheel "
                         f"is {CMEEL_MIMALLOC_VERSION}")
    result.version = CMEEL_MIMALLOC_VERSION

    # Keep only the public mi_* API global: the object also defines malloc,
    # free, operator new/delete, ... which must not leave the plugin.
    symbols = [line.split()[-1] for line in
               _run([tools.nm, "-g", "--defined-only", str(obj)]).splitlines()
               if line.strip()]
    keep = sorted(s for s in symbols if s.startswith("mi_"))
    if "mi_manage_os_memory_ex" not in keep:
        raise BuildError("mimalloc.o does not define mi_manage_os_memory_ex")
    keep_file = out_dir / "mimalloc-keep-symbols.txt"
    keep_file.write_text("\n".join(keep) + "\n")
    local_obj = out_dir / "mimalloc-local.o"
    _build(local_obj, [obj, keep_file],
           [tools.objcopy, f"--keep-global-symbols={keep_file}", str(obj),
            str(local_obj)])

    plugin = out_dir / "libfixed_mimalloc3.so"
    source = HERE / "mimalloc_plugin.c"
    cmd = [tools.cc, *CFLAGS, f'-DPEER_VERSION="{CMEEL_MIMALLOC_VERSION}"',
           f"-I{include}", "-o", str(plugin), str(source), str(local_obj),
           *PLUGIN_LDFLAGS, "-lpthread"]
    _build(plugin, [source, local_obj, HERE / "plugin.map",
                    ENCLAVE_DIR / "fixed_alloc.h"], cmd)
    return plugin


def build_check(tools: Tools, out_dir: Path) -> Path:
    """The plugin_check program."""
    if tools.cc is None:
        raise BuildError("no C compiler")
    exe = out_dir / "plugin_check"
    source = HERE / "plugin_check.c"
    cmd = [tools.cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-pthread",
           "-o", str(exe), str(source), "-ldl"]
    _build(exe, [source, ENCLAVE_DIR / "fixed_alloc.h"], cmd)
    return exe


def _footprint(output: str, when: str) -> Optional[int]:
    match = re.search(rf"^footprint {when}: (\d+) bytes", output, re.MULTILINE)
    return int(match.group(1)) if match else None


def run_check(check: Path, result: PeerResult) -> None:
    """Run plugin_check on the peer's plugin; record pass or fail."""
    assert result.path is not None
    cmd = [str(check), result.path]
    _log("running: " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=CHECK_TIMEOUT_S,
                              check=False)
        output, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired:
        output, code = f"timed out after {CHECK_TIMEOUT_S} s", -1
    result.check_output = output.strip()
    result.footprint_before = _footprint(output, "before")
    result.footprint_after = _footprint(output, "after")
    if code == 0 and "result: PASS" in output:
        result.check = "pass"
    else:
        result.check = "fail"
        result.status = "check-failed"
        result.reason = f"plugin_check exited with {code}: " + _tail(output, 4)


# ------------------------------------------------------------------ main


def build_all(build_dir: Path, names: Sequence[str], install: bool,
              check: bool) -> list[PeerResult]:
    """Build the named peers (and plugin_check); never raises for a peer."""
    out_dir = build_dir / "enclave-peers"
    out_dir.mkdir(parents=True, exist_ok=True)
    tools, tool_problem = ensure_tools(install)
    results: list[PeerResult] = []
    for name in names:
        result = PeerResult(name=name, status="missing",
                            notes=list(NOTES.get(name, [])))
        started = time.monotonic()
        try:
            if name == "dlmalloc":
                plugin = build_dlmalloc(tools, out_dir, result)
            elif name == "snmalloc":
                plugin = build_snmalloc(tools, out_dir, result)
            else:
                plugin = build_mimalloc(tools, out_dir, install, result)
            result.path = str(plugin)
            result.status = "ok"
        except BuildError as exc:
            result.reason = str(exc)
            if tool_problem:
                result.reason += f"\n(installing tools failed: {tool_problem})"
            _log(f"{name}: not built: {exc}")
        result.build_seconds = round(time.monotonic() - started, 1)
        results.append(result)

    built = [r for r in results if r.status == "ok"]
    try:
        checker = build_check(tools, out_dir)
    except BuildError as exc:
        _log(f"plugin_check not built: {exc}")
        for r in built:
            r.check_output = f"plugin_check not built: {exc}"
    else:
        if check:
            for r in built:
                run_check(checker, r)
    return results


def write_json(results: Sequence[PeerResult], build_dir: Path,
               path: Path) -> None:
    """Write the results to path (atomically), keeping the entries of the
    peers not built this time (--only) from the file that was there: it
    lists every plugin in the directory, not the last few built."""
    entries = {r.name: r.to_json() for r in results}
    try:
        earlier = json.loads(path.read_text(encoding="utf-8")).get("peers", [])
    except (OSError, ValueError, AttributeError):
        earlier = []
    for entry in earlier if isinstance(earlier, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        if name in PEER_NAMES and name not in entries:
            entries[name] = entry
    peers = [entries[n] for n in PEER_NAMES if n in entries]
    write_json_atomic({"generated": utc_now(),
                       "build_dir": str(build_dir / "enclave-peers"),
                       "peers": peers}, path)


def format_results(results: Sequence[PeerResult]) -> str:
    """One line per peer: name, status, version, path or reason."""
    lines = []
    for r in results:
        where = r.path if r.status != "missing" else r.reason.splitlines()[0]
        check = f"check {r.check}"
        lines.append(f"{r.name:<10} {r.status:<12} {r.version or '?':<8} "
                     f"{check:<14} {where}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n", maxsplit=1)[0])
    parser.add_argument("--build-dir", type=Path, default=DEFAULT_BUILD,
                        help="build directory; plugins go to "
                             "BUILD_DIR/enclave-peers (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=PEER_NAMES,
                        default=list(PEER_NAMES), help="build only these peers")
    parser.add_argument("--no-install", action="store_true",
                        help="install nothing (apt, pip); use what is there")
    parser.add_argument("--no-check", action="store_true",
                        help="build plugin_check but do not run it")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 unless every peer is ok")
    args = parser.parse_args(argv)

    build_dir: Path = args.build_dir.resolve()
    started = time.monotonic()
    results = build_all(build_dir, args.only, install=not args.no_install,
                        check=not args.no_check)
    json_path = build_dir / "enclave-peers" / "peers.json"
    write_json(results, build_dir, json_path)
    print(format_results(results))
    _log(f"wrote {json_path} in {time.monotonic() - started:.0f} s")
    bad = [r.name for r in results if r.status != "ok"]
    if bad:
        _log("not ok: " + ", ".join(bad))
    return 1 if bad and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
