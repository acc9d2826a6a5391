"""The recording cap: how many bytes one profile's host recorder may take.

A program that records ranges without end (a serving loop profiled for hours, a range per token) must
never be stopped by its profiler: past the cap the recorder stops recording, counts what it did not
record, and the trace says so (``recording_stopped`` in its metadata); the program goes on, and the
trace of everything before the cap is written as usual.

The cap is ``XPUPROF_MAX_RECORD_BYTES`` (bytes; ``K``/``M``/``G``/``T`` suffixes in powers of 1024; ``0``
means no cap), else a quarter of the memory this process can still have: the least of the machine's
memory, the cgroup's ``memory.max`` less what the cgroup uses, and ``RLIMIT_AS``/``RLIMIT_DATA`` less
what the process maps now - at least 16 MiB. A quarter, because building and writing the trace at stop
takes about as much again as the records (``benchmarks/RESULTS.md``: ~94 B per range in all, 48 B of
it the record), with room left for the program itself.

What the cap covers: xpuprof's own host records - ``record_function`` ranges, instants, their names and
args, and the correlation marks device sessions take from them. torch's operator events live in torch's
own profiler and device records in the vendor library's buffers (bounded by each backend).
"""
from __future__ import annotations

import logging
import os

from .. import diagnostics

log = logging.getLogger("xpuprof")

ENV_MAX_RECORD = "XPUPROF_MAX_RECORD_BYTES"
MIN_DEFAULT_CAP = 16 << 20
SHARE_OF_AVAILABLE = 4  # the default cap is 1/4 of the memory the process can still have
_SCALE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(raw: str) -> int | None:
    """``123``, ``64K``, ``1G`` -> bytes; None when it is not one (negative, fractional, text)."""
    raw = raw.strip()
    scale = _SCALE.get(raw[-1:].upper(), 1)
    digits = raw[:-1] if scale > 1 else raw
    if digits.isascii() and digits.isdigit():
        return int(digits) * scale
    return None


def max_record_bytes() -> int:
    """The cap for a profile starting now (0: none); a bad ``XPUPROF_MAX_RECORD_BYTES`` is said once and
    the default used."""
    raw = os.environ.get(ENV_MAX_RECORD, "").strip()
    if raw:
        value = parse_size(raw)
        if value is not None:
            return value
        diagnostics.warn_once(log, ("bad-setting", ENV_MAX_RECORD, raw),
                              "xpuprof: %s=%r is not a size in bytes (an integer, optionally with K, M, G or T; 0 "
                              "for no cap); using the default, a quarter of the memory available", ENV_MAX_RECORD, raw)
    return default_max_bytes()


def default_max_bytes() -> int:
    """A quarter of the memory this process can still have (at least ``MIN_DEFAULT_CAP``)."""
    return max(MIN_DEFAULT_CAP, available_memory() // SHARE_OF_AVAILABLE)


def available_memory() -> int:
    """The least of: the machine's memory, the cgroup's limit less its use, the address-space and data
    limits less what this process maps now."""
    limits = [_physical_memory()]
    limits += [x for x in (_cgroup_room(), _rlimit_room()) if x is not None]
    return max(0, min(limits))


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 34  # unknown: 16 GiB


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            text = f.read(64).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _cgroup_room() -> int | None:
    """cgroup v2's memory.max less memory.current for this process's cgroup (None: no limit known)."""
    try:
        with open("/proc/self/cgroup", "rb") as f:
            lines = f.read(4096).decode("ascii", "replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            base = "/sys/fs/cgroup" + line[3:].strip()
            limit = _read_int(f"{base}/memory.max")
            if limit is None:
                return None
            return limit - (_read_int(f"{base}/memory.current") or 0)
    return None


def _rlimit_room() -> int | None:
    import resource

    rooms = []
    status = _proc_status()
    for which, key in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft, _ = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY:
            rooms.append(soft - status.get(key, 0))
    return min(rooms) if rooms else None


def _proc_status() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f.read(8192).decode("ascii", "replace").splitlines():
                key, _, value = line.partition(":")
                parts = value.split()
                if key in ("VmSize", "VmData") and parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def describe(stopped_ns: int, why: str, not_recorded: int, used: int, cap: int, not_recorded_instants: int = 0) -> dict:
    """The trace's ``recording_stopped`` note; ``stopped_ns`` on the monotonic clock, written as ``ts`` in the
    trace's microseconds (as ``collection_paused`` is)."""
    from ..clock import BASE_TIME_NS, MONOTONIC_TO_EPOCH_NS

    note = {"reason": why, "ranges_not_recorded": int(not_recorded), "bytes_recorded": int(used),
            "cap_bytes": int(cap) or None, "setting": ENV_MAX_RECORD,
            "note": "host recording stopped here; the program went on and everything recorded before is in this "
                    "trace (ranges, instants and their args after this time are missing)"}
    if not_recorded_instants:
        note["instants_not_recorded"] = int(not_recorded_instants)
    if stopped_ns:
        note["ts"] = round((stopped_ns + MONOTONIC_TO_EPOCH_NS - BASE_TIME_NS) / 1000, 3)
    return note
