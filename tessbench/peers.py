#!/usr/bin/env python3
"""Peer allocators for the tessalloc benchmarks: find them, install them.

Preload peers (each one is measured by LD_PRELOADing its shared library;
glibc is the default malloc and needs no preload), in report order
(:data:`PEER_NAMES`):

* ``glibc``           -- the C library's malloc; version from ``confstr``
  and dpkg.
* ``jemalloc``        -- Debian package ``libjemalloc2``.
* ``mimalloc2``       -- Debian package ``libmimalloc2.0``.
* ``mimalloc3``       -- PyPI package ``cmeel-mimalloc`` (pinned), installed
  with ``pip install --target <cache>/mimalloc3``.
* ``tcmalloc``        -- Debian package ``libtcmalloc-minimal4``
  (``libtcmalloc_minimal.so.4``).
* ``tbbmalloc``       -- Debian package ``libtbbmalloc2``, through its
  malloc-replacing proxy ``libtbbmalloc_proxy.so.2``.
* ``scudo``           -- Debian package ``libclang-rt-14-dev``:
  ``libclang_rt.scudo_standalone-<arch>.so`` under ``/usr/lib/llvm-14``.
* ``snmalloc``, ``snmalloc-checks`` -- built here from the snmalloc source
  that the crates.io crate ``snmalloc-sys`` (pinned) ships: ``cargo fetch``
  into ``.cache/cargo`` (as bench/enclave/peers/build_peers.py does), then
  cmake targets ``snmallocshim`` and ``snmallocshim-checks``, built in
  ``<cache>/snmalloc-build`` and copied to ``<cache>/snmalloc/``.

Reported, never installed here:

* ``tessalloc`` (:func:`tessalloc_peer`) -- the project's own
  ``libtessalloc.so`` from a build directory;
* the fixed-heap plugins (:func:`fixed_peers`, ``kind="fixed"``) -- those
  that bench/enclave/peers/build_peers.py lists in
  ``<build>/enclave-peers/peers.json`` (dlmalloc, snmalloc, mimalloc3) and
  tessalloc's ``<build>/bench/enclave/libfixed_tessalloc.so``.

``fetch_peers()`` installs what is missing (one apt-get call, pip, the
snmalloc build) and returns one :class:`Peer` per allocator;
``discover_peers()`` only looks. A peer that cannot be found is returned with
``available=False`` and a note saying why, never with a made-up path or
version.

Command line (``scripts/fetch_peers.sh`` is a thin wrapper around it)::

    python3 -m tessbench.peers [--cache DIR] [--build DIR] [--json FILE]
        [--only NAMES] [--no-install] [--check] [--jobs N] [--strict]
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from tessbench.benchlib import (CMEEL_MIMALLOC, CMEEL_MIMALLOC_VERSION,
                                PEERS_CACHE, REPO_ROOT, child_env,
                                cmeel_version, dpkg_version, make_log,
                                pip_command, privileged, utc_now,
                                write_json_atomic)

DEFAULT_CACHE = PEERS_CACHE
#: The build directory holding libtessalloc.so (and the enclave plugins).
DEFAULT_BUILD = REPO_ROOT / "build"
#: cargo's home for the snmalloc-sys download; shared with
#: bench/enclave/peers/build_peers.py (used unless CARGO_HOME is set).
DEFAULT_CARGO_HOME = REPO_ROOT / ".cache" / "cargo"
#: Parallel jobs of the snmalloc build.
DEFAULT_JOBS = 2

#: Kinds of peer: an LD_PRELOAD library, or a fixed-heap plugin (a shared
#: object exporting fixed_allocator(), bench/enclave/fixed_alloc.h).
PRELOAD = "preload"
FIXED = "fixed"

TESSALLOC = "tessalloc"

SNMALLOC_CRATE = "snmalloc-sys"
SNMALLOC_CRATE_VERSION = "0.7.6"
#: peer name -> snmalloc's cmake target (the library is lib<target>.so).
SNMALLOC_TARGETS: dict[str, str] = {
    "snmalloc": "snmallocshim",
    "snmalloc-checks": "snmallocshim-checks",
}
SNMALLOC_CMAKE_OPTIONS: tuple[str, ...] = (
    "-DSNMALLOC_HEADER_ONLY_LIBRARY=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DSNMALLOC_BUILD_TESTING=OFF",  # only the shims are wanted
)
SNMALLOC_BUILD_TIMEOUT_S = 3600

#: The fixed-heap plugins that bench/enclave/peers/build_peers.py builds.
FIXED_PEER_NAMES: tuple[str, ...] = ("dlmalloc", "snmalloc", "mimalloc3")

PROBE_TIMEOUT_S = 60


@dataclasses.dataclass(frozen=True)
class DebianPeer:
    """A peer shipped as a Debian package holding one shared library."""

    name: str
    package: str
    #: fnmatch pattern ("*" crosses "/") matched against the package's files
    library_glob: str


DEBIAN_PEERS: tuple[DebianPeer, ...] = (
    DebianPeer("jemalloc", "libjemalloc2", "*/libjemalloc.so.2"),
    DebianPeer("mimalloc2", "libmimalloc2.0", "*/libmimalloc.so.2*"),
    DebianPeer("tcmalloc", "libtcmalloc-minimal4",
               "*/libtcmalloc_minimal.so.4"),
    # libtbbmalloc2 ships both the allocator and the proxy that replaces
    # malloc & co. with it (dpkg -L libtbbmalloc2).
    DebianPeer("tbbmalloc", "libtbbmalloc2", "*/libtbbmalloc_proxy.so.2"),
    DebianPeer("scudo", "libclang-rt-14-dev",
               "/usr/lib/llvm-14/*/libclang_rt.scudo_standalone-"
               f"{platform.machine() or 'x86_64'}.so"),
)

#: The order in which the preload peers are reported (and benchmarked).
#: tessalloc is not among them: see tessalloc_peer().
PEER_NAMES: tuple[str, ...] = ("glibc", "jemalloc", "mimalloc2", "mimalloc3",
                               "tcmalloc", "tbbmalloc", "scudo", "snmalloc",
                               "snmalloc-checks")


@dataclasses.dataclass(frozen=True)
class Peer:
    """One allocator to compare against.

    ``preload`` is the library to put in LD_PRELOAD; ``None`` for glibc, for
    a fixed-heap plugin and for a peer that is not available. ``kind`` is
    ``"preload"`` or ``"fixed"``; ``plugin`` is a fixed-heap plugin's shared
    object. ``note`` says why a peer is missing (or, for one that is there,
    something worth knowing about it).
    """

    name: str
    available: bool
    preload: Optional[str]
    version: Optional[str]
    source: str
    note: str = ""
    kind: str = PRELOAD
    plugin: Optional[str] = None

    @property
    def library(self) -> Optional[str]:
        """The shared object: the preload library or the plugin."""
        return self.plugin if self.kind == FIXED else self.preload

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, entry: dict[str, object]) -> Peer:
        """The inverse of to_json; unknown keys are ignored and the keys
        added since the first format (kind, plugin) may be absent."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in entry.items()  # type: ignore[arg-type]
                      if k in names})


# --------------------------------------------------------------- helpers


_log = make_log("peers")


def _run(cmd: Sequence[str], check: bool = True,
         env: Optional[dict[str, str]] = None,
         cwd: Optional[Path] = None,
         timeout: Optional[float] = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, cwd=cwd, timeout=timeout)


def _which(name: str) -> Optional[str]:
    return shutil.which(name)


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 3) -> str:
    text = (proc.stderr or "").strip() or (proc.stdout or "").strip()
    return " | ".join(text.splitlines()[-lines:])


def _dpkg_files(package: str) -> list[str]:
    if _which("dpkg-query") is None:
        return []
    proc = _run(["dpkg-query", "-L", package], check=False)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def _shown(path: Path) -> str:
    """path relative to the repository when inside it (build, not /x/build)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


# ------------------------------------------------------------ discovery


def glibc_peer() -> Peer:
    """glibc: always there; its version from the running C library."""
    version: Optional[str] = None
    try:
        # "glibc 2.36", the same string as gnu_get_libc_version() gives.
        conf = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        conf = None
    words = conf.split() if conf is not None else []
    if words:
        version = words[-1]
    else:
        proc = _run(["ldd", "--version"], check=False)
        first = proc.stdout.splitlines()[0] if proc.stdout else ""
        version = first.split()[-1] if first else None
    deb = dpkg_version("libc6")
    if version and deb:
        version = f"{version} (libc6 {deb})"
    return Peer(name="glibc", available=version is not None, preload=None,
                version=version, source="system C library",
                note="" if version else "could not read the glibc version")


def debian_peer(spec: DebianPeer) -> Peer:
    """A Debian-packaged peer, if its package is installed."""
    source = f"debian:{spec.package}"
    version = dpkg_version(spec.package)
    if version is None:
        return Peer(spec.name, False, None, None, source,
                    f"Debian package {spec.package} is not installed")
    matches = [f for f in _dpkg_files(spec.package)
               if fnmatch.fnmatchcase(f, spec.library_glob)
               and os.path.exists(f)]
    if not matches:
        return Peer(spec.name, False, None, version, source,
                    f"{spec.package} is installed but has no file matching "
                    f"{spec.library_glob}")
    return Peer(spec.name, True, sorted(matches, key=len)[0], version, source)


def mimalloc3_peer(cache: Path) -> Peer:
    """mimalloc 3 from the cmeel-mimalloc wheel in <cache>/mimalloc3."""
    target = cache / "mimalloc3"
    source = f"pypi:{CMEEL_MIMALLOC}=={CMEEL_MIMALLOC_VERSION}"
    lib = target / "cmeel.prefix" / "lib" / "libmimalloc.so"
    version = cmeel_version(target) if target.is_dir() else None
    if version is None or not lib.exists():
        return Peer("mimalloc3", False, None, None, source,
                    f"{CMEEL_MIMALLOC} is not installed in {target}")
    return Peer("mimalloc3", True, str(lib.resolve()), version, source)


def snmalloc_dir(cache: Path) -> Path:
    """Where the built snmalloc shims (and build.json) are kept."""
    return cache / "snmalloc"


def _snmalloc_stamp(cache: Path) -> Optional[dict[str, object]]:
    """<cache>/snmalloc/build.json (what the build recorded), if readable."""
    try:
        doc = json.loads((snmalloc_dir(cache) / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def snmalloc_peer(cache: Path, name: str = "snmalloc") -> Peer:
    """snmalloc (or snmalloc-checks), if built into <cache>/snmalloc."""
    target = SNMALLOC_TARGETS[name]
    source = f"crates.io:{SNMALLOC_CRATE}=={SNMALLOC_CRATE_VERSION} (cmake " \
             f"target {target})"
    lib = snmalloc_dir(cache) / f"lib{target}.so"
    stamp = _snmalloc_stamp(cache)
    if not lib.is_file() or stamp is None:
        return Peer(name, False, None, None, source,
                    f"not built: {lib} missing (run python3 -m "
                    f"tessbench.peers --only {name})")
    built = stamp.get("crate_version")
    if built != SNMALLOC_CRATE_VERSION:
        return Peer(name, False, None, None, source,
                    f"{lib} was built from {SNMALLOC_CRATE} {built}, not "
                    f"{SNMALLOC_CRATE_VERSION} (run python3 -m tessbench.peers "
                    f"--only {name})")
    version = SNMALLOC_CRATE_VERSION
    own = stamp.get("snmalloc_version")
    note = ""
    if isinstance(own, str) and own:
        version += f" (snmalloc {own})"
    else:
        note = f"{SNMALLOC_CRATE}'s version (the source states none)"
    return Peer(name, True, str(lib.resolve()), version, source, note)


def discover_peers(cache: Path = DEFAULT_CACHE,
                   names: Optional[Iterable[str]] = None) -> list[Peer]:
    """The preload peers (all, or those named), in PEER_NAMES order, without
    installing anything."""
    wanted = set(PEER_NAMES if names is None else names)
    peers: list[Peer] = []
    debian = {spec.name: spec for spec in DEBIAN_PEERS}
    for name in PEER_NAMES:
        if name not in wanted:
            continue
        if name == "glibc":
            peers.append(glibc_peer())
        elif name == "mimalloc3":
            peers.append(mimalloc3_peer(cache))
        elif name in SNMALLOC_TARGETS:
            peers.append(snmalloc_peer(cache, name))
        else:
            peers.append(debian_peer(debian[name]))
    return peers


# ------------------------------------------------------------ tessalloc

#: Run as ``python3 -c PROBE`` with the allocator in LD_PRELOAD: prints which
#: shared object malloc resolves to and, when tessalloc is loaded, its
#: version (tess_version_string()).
PROBE = r"""
import ctypes
class Info(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
everything = ctypes.CDLL(None)
try:
    dladdr = everything.dladdr
except AttributeError:
    dladdr = ctypes.CDLL("libdl.so.2").dladdr
dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Info)]
info = Info()
if dladdr(ctypes.cast(everything.malloc, ctypes.c_void_p), ctypes.byref(info)):
    print("malloc_from=" + (info.fname or b"?").decode())
try:
    version = everything.tess_version_string
except AttributeError:
    pass
else:
    version.restype = ctypes.c_char_p
    print("version=" + version().decode())
"""


def probe_preload(preload: Optional[str]) -> tuple[dict[str, str],
                                                   Optional[str]]:
    """Run PROBE under LD_PRELOAD=preload: (its key=value output, None) or
    ({}, why it failed)."""
    cmd = [sys.executable or "python3", "-c", PROBE]
    try:
        proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=child_env(preload),
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {}, f"python3 under LD_PRELOAD={preload} failed: {exc}"
    if proc.returncode != 0:
        return {}, (f"python3 under LD_PRELOAD={preload} exited with "
                    f"{proc.returncode}: {_tail(proc)}")
    info: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key] = value
    return info, None


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _cmake_cache_value(build_dir: Path, key: str) -> Optional[str]:
    try:
        text = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.split(":")[0] == key:
            return value.strip() or None
    return None


def _header_version() -> Optional[str]:
    """"0.1.0" from TESSALLOC_VERSION_* in include/tessalloc.h."""
    try:
        text = (REPO_ROOT / "include" / "tessalloc.h").read_text()
    except OSError:
        return None
    parts = [re.search(rf"#define\s+TESSALLOC_VERSION_{p}\s+(\d+)", text)
             for p in ("MAJOR", "MINOR", "PATCH")]
    if any(m is None for m in parts):
        return None
    return ".".join(m.group(1) for m in parts if m is not None)


def tessalloc_build_version(build_dir: Path) -> tuple[Optional[str], str]:
    """tessalloc's version without loading it, and where it was read: the
    build's CMakeCache.txt (project version), else include/tessalloc.h."""
    version = _cmake_cache_value(build_dir, "CMAKE_PROJECT_VERSION")
    if version:
        return version, f"{_shown(build_dir)}/CMakeCache.txt"
    version = _header_version()
    return version, "include/tessalloc.h"


def find_tessalloc(build_dir: Path) -> Optional[Path]:
    """libtessalloc.so in the build tree, if it was built."""
    direct = build_dir / "libtessalloc.so"
    if direct.is_file():
        return direct
    if not build_dir.is_dir():
        return None
    hits = sorted((h for h in build_dir.rglob("libtessalloc.so*")
                   if h.is_file()), key=lambda p: (len(str(p)), str(p)))
    return hits[0] if hits else None


def tessalloc_peer(build_dir: Path = DEFAULT_BUILD) -> Peer:
    """The project's own libtessalloc.so from build_dir (never built here).

    Its version is what tess_version_string() returns with the library
    preloaded; that also checks that the preload takes.
    """
    source = f"build:{_shown(build_dir)}"
    lib = find_tessalloc(build_dir)
    if lib is None:
        return Peer(TESSALLOC, False, None, None, source,
                    f"not built: run cmake --build {_shown(build_dir)}")
    preload = str(lib.resolve())
    info, problem = probe_preload(preload)
    if problem is not None:
        return Peer(TESSALLOC, False, None, None, source, problem)
    runtime = info.get("version", "")
    if runtime:
        return Peer(TESSALLOC, True, preload,
                    runtime.removeprefix("tessalloc ").strip(), source)
    version, where = tessalloc_build_version(build_dir)
    return Peer(TESSALLOC, True, preload, version, source,
                f"tess_version_string() not found; version from {where}")


# ---------------------------------------------------- fixed-heap plugins


def fixed_peers_json(build_dir: Path) -> Path:
    """Where bench/enclave/peers/build_peers.py lists its plugins."""
    return build_dir / "enclave-peers" / "peers.json"


def tessalloc_fixed_peer(build_dir: Path = DEFAULT_BUILD) -> Peer:
    """tessalloc's fixed-heap plugin from build_dir."""
    plugin = build_dir / "bench" / "enclave" / "libfixed_tessalloc.so"
    source = f"build:{_shown(build_dir)}"
    if not plugin.is_file():
        return Peer(TESSALLOC, False, None, None, source,
                    f"not built: run cmake --build {_shown(build_dir)} "
                    f"--target fixed_tessalloc", kind=FIXED)
    version, _ = tessalloc_build_version(build_dir)
    return Peer(TESSALLOC, True, None, version, source, kind=FIXED,
                plugin=str(plugin.resolve()))


def _fixed_entry(entry: dict[str, object], json_path: Path) -> Peer:
    """One entry of build_peers.py's peers.json as a Peer."""
    name = str(entry["name"])
    raw = entry.get("path") or entry.get("plugin") or ""
    version = entry.get("version")
    version_s = str(version) if version not in (None, "") else None
    source = str(entry.get("source") or json_path)
    status = str(entry.get("status", "ok"))
    if status != "ok" or not raw:
        reason = str(entry.get("reason") or f"status {status}")
        return Peer(name, False, None, version_s, source,
                    reason.strip().splitlines()[0] if reason.strip()
                    else f"status {status}", kind=FIXED)
    path = Path(str(raw))
    if not path.is_absolute():
        path = json_path.parent / path
    if not path.is_file():
        return Peer(name, False, None, version_s, source,
                    f"{path} (listed in {json_path}) does not exist",
                    kind=FIXED)
    return Peer(name, True, None, version_s, source, kind=FIXED,
                plugin=str(path.resolve()))


def fixed_peers(build_dir: Path = DEFAULT_BUILD) -> list[Peer]:
    """The fixed-heap plugins: tessalloc's, then those listed in
    <build>/enclave-peers/peers.json (dlmalloc, snmalloc, mimalloc3 and any
    other it names). All have kind="fixed" and the plugin path in plugin."""
    json_path = fixed_peers_json(build_dir)
    how = ("run python3 bench/enclave/peers/build_peers.py --build-dir "
           f"{_shown(build_dir)}")
    peers = [tessalloc_fixed_peer(build_dir)]
    entries: list[dict[str, object]] = []
    problem: Optional[str] = None
    if not json_path.is_file():
        problem = f"not built: {json_path} not found ({how})"
    else:
        try:
            doc = json.loads(json_path.read_text())
        except (OSError, ValueError) as exc:
            problem = f"cannot read {json_path}: {exc}"
        else:
            raw = doc.get("peers", []) if isinstance(doc, dict) else doc
            entries = [e for e in (raw if isinstance(raw, list) else [])
                       if isinstance(e, dict) and "name" in e]
    seen: set[str] = set()
    for entry in entries:
        peer = _fixed_entry(entry, json_path)
        if peer.name in seen:
            continue
        seen.add(peer.name)
        peers.append(peer)
    for name in FIXED_PEER_NAMES:
        if name not in seen:
            peers.append(Peer(name, False, None, None, f"fixed:{name}",
                              problem or f"not in {json_path} ({how} "
                              f"--only {name})", kind=FIXED))
    return peers


# --------------------------------------------------------- installation


def install_debian_packages(packages: Sequence[str]) -> Optional[str]:
    """apt-get install the packages that are missing, in one call.

    Returns None on success, else a message. apt-get update runs (once) only
    when something is missing.
    """
    missing = list(dict.fromkeys(p for p in packages
                                 if dpkg_version(p) is None))
    if not missing:
        return None
    if _which("apt-get") is None:
        return "apt-get not found (not a Debian system?)"
    update = privileged(["apt-get", "update"])
    install = privileged(["apt-get", "install", "-y",
                          "--no-install-recommends", *missing])
    if update is None or install is None:
        return ("not root and no sudo: cannot apt-get install "
                + " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (update, install):
        _log("running: " + " ".join(cmd))
        proc = _run(cmd, check=False, env=env)
        if proc.returncode != 0:
            return f"'{' '.join(cmd)}' failed: " + _tail(proc)
    return None


def install_mimalloc3(cache: Path) -> Optional[str]:
    """pip install --target <cache>/mimalloc3 cmeel-mimalloc==<pinned>.

    Returns None on success (or when already there), else a message.
    """
    current = mimalloc3_peer(cache)
    if current.available and current.version == CMEEL_MIMALLOC_VERSION:
        return None
    pip = pip_command()
    if pip is None:  # a fresh Debian has no pip: the system one will do
        err = install_debian_packages(["python3-pip"])
        pip = pip_command()
        if pip is None:
            return f"no pip found, and installing python3-pip failed: {err}"
    target = cache / "mimalloc3"
    if target.exists():  # partial or another version: start afresh
        shutil.rmtree(target)
    # --target skips pip's "externally managed" check (PEP 668) on purpose.
    cmd = [*pip, "install", "--disable-pip-version-check", "--quiet",
           "--root-user-action=ignore",
           "--target", str(target),
           f"{CMEEL_MIMALLOC}=={CMEEL_MIMALLOC_VERSION}"]
    _log("running: " + " ".join(cmd))
    proc = _run(cmd, check=False)
    if proc.returncode != 0:
        return "pip install failed: " + _tail(proc)
    return None


# -------------------------------------------------------------- snmalloc


class BuildError(Exception):
    """A step of the snmalloc build failed; the message says which."""


def find_cargo() -> Optional[str]:
    """cargo on PATH, else rustup's ~/.cargo/bin/cargo."""
    cargo = _which("cargo")
    if cargo is None:
        home = Path.home() / ".cargo" / "bin" / "cargo"
        cargo = str(home) if home.is_file() else None
    return cargo


def snmalloc_tool_packages() -> list[str]:
    """The Debian packages the snmalloc build needs and does not find."""
    packages = []
    if _which("cmake") is None:
        packages.append("cmake")
    if not (os.environ.get("CXX") or _which("g++") or _which("c++")):
        packages.append("g++")
    if _which("make") is None:
        packages.append("make")
    return packages


def cargo_env() -> dict[str, str]:
    """The environment for cargo: CARGO_HOME=.cache/cargo unless set.

    As in bench/enclave/peers/build_peers.py, the user's ~/.cargo/config.toml
    (a registry mirror, say) is linked into the moved CARGO_HOME.
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


SNMALLOC_MANIFEST = f"""\
# Generated by tessbench/peers.py: only here so that cargo fetches
# snmalloc's source (shipped in the {SNMALLOC_CRATE} crate) into its registry.
[package]
name = "snmalloc-preload-source"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "lib.rs"

[dependencies]
{SNMALLOC_CRATE} = {{ version = "={SNMALLOC_CRATE_VERSION}", \
default-features = false }}
"""


def _checked(cmd: Sequence[str], what: str, env: Optional[dict[str, str]] = None,
             cwd: Optional[Path] = None, timeout: Optional[float] = 900,
             log: Optional[Path] = None) -> str:
    """Run cmd; its stdout, or BuildError with the tail of its output."""
    _log("running: " + " ".join(cmd))
    try:
        proc = _run(cmd, check=False, env=env, cwd=cwd, timeout=timeout)
    except FileNotFoundError as exc:
        raise BuildError(f"{what}: {cmd[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{what}: timed out after {timeout} s") from exc
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}): "
                         + _tail(proc))
    return proc.stdout


def fetch_snmalloc_source(cache: Path, cargo: str) -> Path:
    """cargo fetch snmalloc-sys (pinned); its upstream/ directory."""
    env = cargo_env()
    fetch_dir = cache / "snmalloc-fetch"
    fetch_dir.mkdir(parents=True, exist_ok=True)
    manifest = fetch_dir / "Cargo.toml"
    if not manifest.is_file() or manifest.read_text() != SNMALLOC_MANIFEST:
        manifest.write_text(SNMALLOC_MANIFEST)
        (fetch_dir / "Cargo.lock").unlink(missing_ok=True)
    (fetch_dir / "lib.rs").touch()
    _checked([cargo, "fetch", "--manifest-path", str(manifest)],
             "cargo fetch", env=env, timeout=900)
    out = _checked([cargo, "metadata", "--format-version", "1", "--offline",
                    "--manifest-path", str(manifest)], "cargo metadata",
                   env=env)
    for pkg in json.loads(out).get("packages", []):
        if pkg.get("name") == SNMALLOC_CRATE:
            if pkg.get("version") != SNMALLOC_CRATE_VERSION:
                raise BuildError(f"cargo resolved {SNMALLOC_CRATE} "
                                 f"{pkg.get('version')}, wanted "
                                 f"{SNMALLOC_CRATE_VERSION}")
            upstream = Path(str(pkg["manifest_path"])).parent / "upstream"
            if not (upstream / "CMakeLists.txt").is_file():
                raise BuildError(f"no CMakeLists.txt in {upstream}")
            return upstream
    raise BuildError(f"cargo did not resolve {SNMALLOC_CRATE}")


def snmalloc_source_version(upstream: Path) -> Optional[str]:
    """snmalloc's own version, if its source states one (project(... VERSION
    x) in CMakeLists.txt, or a SNMALLOC_VERSION* define); else None."""
    try:
        text = (upstream / "CMakeLists.txt").read_text(errors="replace")
    except OSError:
        text = ""
    match = re.search(r"project\s*\(\s*snmalloc\b[^)]*\bVERSION\s+([0-9][\w.]*)",
                      text, re.IGNORECASE)
    if match:
        return match.group(1)
    for header in sorted((upstream / "src").rglob("*.h")):
        try:
            head = header.read_text(errors="replace")
        except OSError:
            continue
        match = re.search(r'#\s*define\s+SNMALLOC_VERSION\s+"([^"]+)"', head)
        if match:
            return match.group(1)
        parts = [re.search(rf"#\s*define\s+SNMALLOC_VERSION_{p}\s+(\d+)", head)
                 for p in ("MAJOR", "MINOR", "PATCH")]
        if all(parts):
            return ".".join(m.group(1) for m in parts if m is not None)
    return None


def build_snmalloc(cache: Path, names: Iterable[str] = tuple(SNMALLOC_TARGETS),
                   jobs: int = DEFAULT_JOBS) -> Optional[str]:
    """Build the named snmalloc shims into <cache>/snmalloc (unless there).

    Returns None on success (or when already built), else a message.
    """
    wanted = [n for n in SNMALLOC_TARGETS if n in set(names)]
    todo = [n for n in wanted if not snmalloc_peer(cache, n).available]
    if not todo:
        return None
    cargo = find_cargo()
    if cargo is None:
        return "cargo not found (install Rust with rustup): needed to " \
               f"fetch {SNMALLOC_CRATE}"
    cmake = _which("cmake")
    if cmake is None:
        return "cmake not found"
    try:
        upstream = fetch_snmalloc_source(cache, cargo)
        build = cache / "snmalloc-build"
        home = _cmake_cache_value(build, "CMAKE_HOME_DIRECTORY")
        if home is not None and not _same_file(home, str(upstream)):
            _log(f"{build} was configured for {home}: starting afresh")
            shutil.rmtree(build)
        _log(f"building snmalloc ({', '.join(todo)}) from {upstream}: "
             "this takes a few minutes")
        _checked([cmake, "-S", str(upstream), "-B", str(build),
                  *SNMALLOC_CMAKE_OPTIONS], "cmake configure",
                 timeout=600, log=build / "configure.log")
        targets = [SNMALLOC_TARGETS[n] for n in todo]
        _checked([cmake, "--build", str(build), "--parallel", str(jobs),
                  "--target", *targets], "cmake --build",
                 timeout=SNMALLOC_BUILD_TIMEOUT_S, log=build / "build.log")
        out_dir = snmalloc_dir(cache)
        out_dir.mkdir(parents=True, exist_ok=True)
        for target in targets:
            name = f"lib{target}.so"
            built = sorted(build.rglob(name), key=lambda p: len(str(p)))
            if not built:
                raise BuildError(f"the build made no {name}")
            tmp = out_dir / (name + ".tmp")
            shutil.copy2(built[0], tmp)
            tmp.replace(out_dir / name)
    except BuildError as exc:
        return f"snmalloc build: {exc}"
    libraries = sorted(p.name for p in snmalloc_dir(cache).glob("lib*.so"))
    write_json_atomic({
        "crate": SNMALLOC_CRATE,
        "crate_version": SNMALLOC_CRATE_VERSION,
        "snmalloc_version": snmalloc_source_version(upstream),
        "source": str(upstream),
        "cmake_options": list(SNMALLOC_CMAKE_OPTIONS),
        "compiler": _cmake_cache_value(build, "CMAKE_CXX_COMPILER"),
        "libraries": libraries,
        "built": utc_now(),
    }, snmalloc_dir(cache) / "build.json")
    return None


# ------------------------------------------------------------ fetching


def fetch_peers(cache: Path = DEFAULT_CACHE, install: bool = True,
                names: Optional[Iterable[str]] = None,
                jobs: int = DEFAULT_JOBS) -> list[Peer]:
    """Install the missing preload peers (all, or those named; unless
    install=False), then discover them, in PEER_NAMES order.

    All the Debian packages wanted (and the snmalloc build's tools) go in one
    apt-get call. An installation failure does not raise: the peer comes
    back with available=False and the failure in its note.
    """
    wanted = set(PEER_NAMES if names is None else names)
    cache.mkdir(parents=True, exist_ok=True)
    problems: dict[str, str] = {}
    if install:
        debian = [s for s in DEBIAN_PEERS if s.name in wanted]
        snmallocs = [n for n in SNMALLOC_TARGETS
                     if n in wanted and not snmalloc_peer(cache, n).available]
        packages = [s.package for s in debian]
        if snmallocs:
            packages += snmalloc_tool_packages()
        err = install_debian_packages(packages)
        if err:
            for spec in debian:
                problems[spec.name] = err
            for name in snmallocs:
                problems[name] = err
        if "mimalloc3" in wanted:
            err = install_mimalloc3(cache)
            if err:
                problems["mimalloc3"] = err
        if snmallocs:
            err = build_snmalloc(cache, snmallocs, jobs)
            if err:
                for name in snmallocs:
                    problems[name] = err
    peers = discover_peers(cache, wanted)
    return [dataclasses.replace(p, note=problems[p.name])
            if not p.available and p.name in problems else p for p in peers]


# ------------------------------------------------------------- checking


def find_bench_core(build_dir: Path) -> Optional[Path]:
    """<build>/bench/bench_core, if built."""
    exe = build_dir / "bench" / "bench_core"
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def check_preload(peer: Peer, bench_core: Optional[Path] = None
                  ) -> Optional[str]:
    """Check that a preload peer really replaces malloc: python3 runs with
    it preloaded and malloc resolves to its library (and the same with
    ``bench_core --identify`` when given). None if so, else why not."""
    if peer.kind != PRELOAD or not peer.available:
        return None
    info, problem = probe_preload(peer.preload)
    if problem is not None:
        return problem
    problem = _resolves_to(peer, "python3", info)
    if problem is not None or bench_core is None:
        return problem
    what = "bench_core --identify"
    try:
        proc = subprocess.run([str(bench_core), "--identify"], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=child_env(peer.preload),
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{what} failed: {exc}"
    if proc.returncode != 0:
        return f"{what} exited with {proc.returncode}: {_tail(proc)}"
    info = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key] = value
    return _resolves_to(peer, what, info)


def _resolves_to(peer: Peer, what: str, info: dict[str, str]
                 ) -> Optional[str]:
    """None if info's malloc_from is the peer's library (libc for glibc)."""
    source = info.get("malloc_from", "")
    if peer.preload is None:
        ok = Path(source).name.startswith("libc.so")
    else:
        ok = bool(source) and _same_file(source, peer.preload)
    if ok:
        return None
    return (f"{what}: malloc resolves to {source or '?'!r}, not to "
            f"{peer.preload or 'libc'}: the preload does not take")


def check_peers(peers: Sequence[Peer], bench_core: Optional[Path] = None
                ) -> list[Peer]:
    """The peers, those whose preload does not take marked unavailable."""
    checked = []
    for peer in peers:
        problem = check_preload(peer, bench_core)
        if problem is None:
            checked.append(peer)
        else:
            _log(f"{peer.name}: {problem}")
            checked.append(dataclasses.replace(peer, available=False,
                                               note=problem))
    return checked


# -------------------------------------------------------------- output


def _key(peer: Peer) -> tuple[str, str]:
    return peer.kind, peer.name


def write_peers_json(peers: Sequence[Peer], path: Path,
                     merge: bool = False) -> None:
    """Write the peers to a JSON file (atomically).

    With merge, the entries already in the file for other peers (another
    name or kind) are kept, after these.
    """
    entries = list(peers)
    if merge and path.is_file():
        try:
            old = read_peers_json(path)
        except (OSError, ValueError, KeyError, TypeError):
            old = []
        have = {_key(p) for p in entries}
        entries += [p for p in old if _key(p) not in have]
    write_json_atomic({"generated": utc_now(),
                       "peers": [p.to_json() for p in entries]}, path)


def read_peers_json(path: Path) -> list[Peer]:
    """Peers from a file written by write_peers_json."""
    doc = json.loads(path.read_text())
    return [Peer.from_json(entry) for entry in doc["peers"]]


def format_peers(peers: Sequence[Peer]) -> str:
    """A plain-text table: name, kind, status, version, library, reason."""
    rows = [("name", "kind", "status", "version", "library", "reason")]
    for p in peers:
        if p.available:
            library = p.library or "(none: default malloc)"
        else:
            library = "-"
        rows.append((p.name, p.kind,
                     "available" if p.available else "MISSING",
                     p.version or "-", library, p.note))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(f"{cell:<{w}}" for cell, w in zip(r, widths))
                     .rstrip() for r in rows)


def known_names() -> tuple[str, ...]:
    """Every name --only accepts."""
    names = [*PEER_NAMES, TESSALLOC]
    names += [n for n in FIXED_PEER_NAMES if n not in names]
    return tuple(names)


def parse_only(text: Optional[str]) -> Optional[list[str]]:
    """--only's comma list (None: all); ValueError on an unknown name."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known_names()]
    if unknown:
        raise ValueError(f"unknown peer(s): {', '.join(unknown)} "
                         f"(known: {', '.join(known_names())})")
    if not names:
        raise ValueError("--only needs at least one name")
    return names


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="cache directory (default: %(default)s)")
    parser.add_argument("--build", type=Path, default=DEFAULT_BUILD,
                        help="build directory with libtessalloc.so and the "
                             "fixed-heap plugins (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None,
                        help="where to write the peer list "
                             "(default: <cache>/peers.json)")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated subset to install and list, of "
                             + ", ".join(known_names()))
    parser.add_argument("--no-install", action="store_true",
                        help="only look for peers (list them), install "
                             "nothing")
    parser.add_argument("--check", action="store_true",
                        help="check that every preload peer takes "
                             "(python3, and <build>/bench/bench_core "
                             "--identify if built); one that does not is "
                             "reported missing")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS,
                        help="parallel jobs for the snmalloc build "
                             "(default: %(default)s)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any of the installable "
                             "preload peers listed is missing")
    args = parser.parse_args(argv)
    try:
        only = parse_only(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")

    cache: Path = args.cache.resolve()
    build: Path = args.build.resolve()
    wanted = set(known_names() if only is None else only)
    names = [n for n in PEER_NAMES if n in wanted]
    peers = fetch_peers(cache, install=not args.no_install, names=names,
                        jobs=args.jobs) if names else []
    if TESSALLOC in wanted:
        peers.insert(1 if peers and peers[0].name == "glibc" else 0,
                     tessalloc_peer(build))
    if args.check:
        peers = check_peers(peers, find_bench_core(build))
    fixed = [p for p in fixed_peers(build) if p.name in wanted]
    everything = peers + fixed
    write_peers_json(everything, args.json or cache / "peers.json",
                     merge=only is not None)
    print(format_peers(everything))
    missing = [f"{p.name} ({p.kind})" for p in everything if not p.available]
    if missing:
        _log("missing (will be skipped by the benchmarks): "
             + ", ".join(missing))
    strict_missing = [p.name for p in peers
                      if not p.available and p.name in PEER_NAMES]
    return 1 if strict_missing and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
