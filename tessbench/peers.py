#!/usr/bin/env python3
"""Peer allocators for the tessalloc benchmarks: find them, install them.

Peers (each one is measured by LD_PRELOADing its shared library; glibc is
the default malloc and needs no preload):

* ``glibc``     -- the C library's malloc; version from ``confstr`` and dpkg.
* ``jemalloc``  -- Debian package ``libjemalloc2``.
* ``mimalloc2`` -- Debian package ``libmimalloc2.0``.
* ``mimalloc3`` -- PyPI package ``cmeel-mimalloc`` (pinned), installed with
  ``pip install --target <cache>/mimalloc3``.

``fetch_peers()`` installs what is missing (apt-get, pip) and returns one
:class:`Peer` per allocator; ``discover_peers()`` only looks. A peer that
cannot be found is returned with ``available=False`` and a note saying why,
never with a made-up path or version.

Command line (``scripts/fetch_peers.sh`` is a thin wrapper around it)::

    python3 -m tessbench.peers [--cache DIR] [--json FILE] [--no-install]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from tessbench.benchlib import (CMEEL_MIMALLOC, CMEEL_MIMALLOC_VERSION, PEERS_CACHE,
                      cmeel_version, dpkg_version, make_log, pip_command,
                      privileged, utc_now, write_json_atomic)

DEFAULT_CACHE = PEERS_CACHE


@dataclasses.dataclass(frozen=True)
class DebianPeer:
    """A peer shipped as a Debian package holding one shared library."""

    name: str
    package: str
    library_glob: str  # matched against the package's file list


DEBIAN_PEERS: tuple[DebianPeer, ...] = (
    DebianPeer("jemalloc", "libjemalloc2", "*/libjemalloc.so.2"),
    DebianPeer("mimalloc2", "libmimalloc2.0", "*/libmimalloc.so.2*"),
)

#: The order in which peers are reported (and benchmarked).
PEER_NAMES: tuple[str, ...] = ("glibc", "jemalloc", "mimalloc2", "mimalloc3")


@dataclasses.dataclass(frozen=True)
class Peer:
    """One allocator to compare against.

    ``preload`` is the library to put in LD_PRELOAD; ``None`` for glibc (and
    for a peer that is not available).
    """

    name: str
    available: bool
    preload: Optional[str]
    version: Optional[str]
    source: str
    note: str = ""

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return dataclasses.asdict(self)


# --------------------------------------------------------------- helpers


_log = make_log("peers")


def _run(cmd: Sequence[str], check: bool = True,
         env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env)


def _dpkg_files(package: str) -> list[str]:
    proc = _run(["dpkg-query", "-L", package], check=False)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


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
               if Path(f).match(spec.library_glob) and os.path.exists(f)]
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


def discover_peers(cache: Path = DEFAULT_CACHE) -> list[Peer]:
    """All peers, in PEER_NAMES order, without installing anything."""
    peers = {"glibc": glibc_peer(), "mimalloc3": mimalloc3_peer(cache)}
    for spec in DEBIAN_PEERS:
        peers[spec.name] = debian_peer(spec)
    return [peers[name] for name in PEER_NAMES]


# --------------------------------------------------------- installation


def install_debian_packages(packages: Sequence[str]) -> Optional[str]:
    """apt-get install the packages that are missing.

    Returns None on success, else a message. apt-get update runs only when
    something is missing.
    """
    missing = [p for p in packages if dpkg_version(p) is None]
    if not missing:
        return None
    if shutil.which("apt-get") is None:
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
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return f"'{' '.join(cmd)}' failed: " + " | ".join(tail)
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
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return "pip install failed: " + " | ".join(tail)
    return None


def fetch_peers(cache: Path = DEFAULT_CACHE,
                install: bool = True) -> list[Peer]:
    """Install the missing peers (unless install=False), then discover.

    An installation failure does not raise: the peer comes back with
    available=False and the failure in its note.
    """
    cache.mkdir(parents=True, exist_ok=True)
    problems: dict[str, str] = {}
    if install:
        err = install_debian_packages([s.package for s in DEBIAN_PEERS])
        if err:
            for spec in DEBIAN_PEERS:
                problems[spec.name] = err
        err = install_mimalloc3(cache)
        if err:
            problems["mimalloc3"] = err
    peers = discover_peers(cache)
    return [dataclasses.replace(p, note=problems[p.name])
            if not p.available and p.name in problems else p for p in peers]


def write_peers_json(peers: Sequence[Peer], path: Path) -> None:
    """Write the peers to a JSON file (atomically)."""
    write_json_atomic({"generated": utc_now(),
                       "peers": [p.to_json() for p in peers]}, path)


def read_peers_json(path: Path) -> list[Peer]:
    """Peers from a file written by write_peers_json."""
    doc = json.loads(path.read_text())
    return [Peer(**entry) for entry in doc["peers"]]


def format_peers(peers: Sequence[Peer]) -> str:
    """A plain-text table: name, preload path, version (or why missing)."""
    rows = [("name", "preload", "version")]
    for p in peers:
        if p.available:
            rows.append((p.name, p.preload or "(none: default malloc)",
                         p.version or "?"))
        else:
            rows.append((p.name, "MISSING", p.note))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}"
                     for r in rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="cache directory (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None,
                        help="where to write the peer list "
                             "(default: <cache>/peers.json)")
    parser.add_argument("--no-install", action="store_true",
                        help="only look for peers, install nothing")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any peer is missing")
    args = parser.parse_args(argv)

    cache = args.cache.resolve()
    peers = fetch_peers(cache, install=not args.no_install)
    write_peers_json(peers, args.json or cache / "peers.json")
    print(format_peers(peers))
    missing = [p.name for p in peers if not p.available]
    if missing:
        _log("missing (will be skipped by the benchmarks): "
             + ", ".join(missing))
    return 1 if missing and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
