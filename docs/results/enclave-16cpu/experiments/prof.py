#!/usr/bin/env python3
"""Symbolizes prof.c's samples: self time by function, and for the
functions named with --callers, what called them: the first word on the
stack that lies in a function other than it and those named with --skip
(a guess: a stale return address can come first).

    prof.py a.prof --root build [--callers tessi_plat_yield
                                 --skip tessi_lock_slow] [--top 30]

Mapped files are found here by base name under the --root folders (the
device's paths differ); a library not found (the device's libc) is
reported whole.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import pathlib
import subprocess


def load_segments(path: pathlib.Path) -> list[tuple[int, int, int]]:
    """(file offset, vaddr, size) of each LOAD segment."""
    out = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True).stdout
    segments = []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            segments.append((int(fields[1], 16), int(fields[2], 16), int(fields[5], 16)))
    return segments


def load_symbols(path: pathlib.Path) -> tuple[list[int], list[str]]:
    out = subprocess.run(["nm", "-n", "--defined-only", str(path)], capture_output=True,
                         text=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwW":
            addrs.append(int(fields[0], 16))
            names.append(fields[2])
    return addrs, names


class Symbolizer:
    def __init__(self, maps: list[str], roots: list[pathlib.Path]) -> None:
        self.maps = []
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or "x" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            self.maps.append((start, end, int(fields[2], 16), fields[5]))
        self.maps.sort()
        self.starts = [m[0] for m in self.maps]
        self.roots = roots
        self.files: dict[str, tuple | None] = {}

    def _file(self, device_path: str):
        name = pathlib.PurePosixPath(device_path).name
        if name not in self.files:
            found = None
            for root in self.roots:
                hits = sorted(root.rglob(name)) if root.is_dir() else []
                if hits:
                    found = hits[0]
                    break
            self.files[name] = (load_segments(found), *load_symbols(found)) if found else None
        return self.files[name]

    def name(self, pc: int) -> str:
        i = bisect.bisect_right(self.starts, pc) - 1
        if i < 0 or pc >= self.maps[i][1]:
            return "?"
        start, _, offset, path = self.maps[i]
        base = pathlib.PurePosixPath(path).name
        info = self._file(path)
        if info is None:
            return f"[{base}]"
        segments, addrs, names = info
        file_off = pc - start + offset
        for seg_off, vaddr, size in segments:
            if seg_off <= file_off < seg_off + size:
                va = file_off - seg_off + vaddr
                j = bisect.bisect_right(addrs, va) - 1
                return f"{names[j]} [{base}]" if j >= 0 else f"[{base}]"
        return f"[{base}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=pathlib.Path)
    parser.add_argument("--root", type=pathlib.Path, action="append", default=[])
    parser.add_argument("--callers", action="append", default=[])
    parser.add_argument("--skip", action="append", default=[])
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    lines = args.profile.read_text().splitlines()
    at = lines.index(next(x for x in lines if x.startswith("samples ")))
    sym = Symbolizer(lines[1:at], args.root or [pathlib.Path(".")])
    samples = [[int(w, 16) for w in x.split()] for x in lines[at + 1:]]
    self_time = collections.Counter(sym.name(words[0]) for words in samples)
    total = len(samples)
    print(f"{total} samples")
    for name, n in self_time.most_common(args.top):
        print(f"{100 * n / total:6.2f} %  {name}")
    for callee in args.callers:
        skip = {callee, *args.skip}
        callers: collections.Counter[str] = collections.Counter()
        for words in samples:
            if sym.name(words[0]).split(" ")[0] != callee:
                continue
            names = (sym.name(w) for w in words[1:])
            callers[next((n for n in names if n != "?" and n.split(" ")[0] not in skip),
                         "?")] += 1
        print(f"\ncallers of {callee}:")
        for name, n in callers.most_common(10):
            print(f"{100 * n / total:6.2f} %  {name}")


if __name__ == "__main__":
    main()
