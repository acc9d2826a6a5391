"""Raw PTI captures: the drained buffers plus what decoding them needs, for bug reports and tests.

File layout: the magic line ``XPUPROF-PTI-RAW 1\\n``, one JSON header line, then the buffers
back to back. The header holds the PTI version, the record-size table (layout facts), the
strings behind record pointers and the API names seen, the clock offset, device UUIDs, the
selected activity types, the capture window, the threads of the ranges the records name (for
runtime records PTI wrote without one) and each buffer's length. ``replay`` walks the
buffers with the saved size table, so it needs neither PTI nor the original process.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import orjson

from ...activity import ActivityType, parse_activity_types
from ...inputs import InputError, read_input
from ...outputs import open_output, output_file
from ..base import ProcessWindow, RangeThreads
from ...vendors import pti
from .records import DecodedRecords, LayoutWalker, decode_records
from .context import ApiNameCache, RecordContext, StringCache
from .emit import XpuEmitResult, write_records

MAGIC = b"XPUPROF-PTI-RAW 1\n"


class CaptureError(ValueError):
    """A file that is not a readable xpuprof PTI capture; the message says what is wrong."""


@dataclass
class Capture:
    buffers: list[bytes]
    context: RecordContext
    record_sizes: dict[int, int]
    types: frozenset[ActivityType]
    window: ProcessWindow | None
    range_threads: RangeThreads | None = None


def save(path, buffers: list[bytes], ctx: RecordContext, types, window: ProcessWindow | None, *,
         range_threads=None) -> Path:
    """``range_threads``: (External ids, their ranges' threads) for the ids the records name."""
    header = {
        "pti_version": ctx.pti_version,
        "record_sizes": {str(k): v for k, v in pti.record_sizes().items()},
        "clock_offset_ns": int(ctx.clock_offset_ns),
        "device_uuids": [u.hex() for u in ctx.device_uuids],
        "device_names": {str(k): v for k, v in ctx.device_names.items()},
        "strings": {str(k): v for k, v in ctx.strings.seen.items()},
        "api_names": [[g, i, n] for (g, i), n in ctx.api_names.seen.items()],
        # The loaded PTI's enum wording, so a replay names copies exactly as the live trace did.
        "memory_types": [ctx.memory_type_name(i) for i in range(len(pti.MEMORY_TYPES))],
        "memcpy_types": [ctx.memcpy_type_name(i) for i in range(len(pti.MEMCPY_TYPES))],
        "activities": sorted(t.value for t in types),
        "window": None if window is None else [int(window.start_ns), int(window.end_ns)],
        "buffer_lengths": [len(b) for b in buffers],
        # For runtime records PTI wrote without a thread id (emit.XpuEmitter.runtime_threads).
        "range_threads": None if range_threads is None else [[int(i) for i in range_threads[0]],
                                                             [int(t) for t in range_threads[1]]],
    }
    out = Path(path)
    with output_file(out) as dest, open_output(dest) as f:  # atomic; never over a directory or device
        f.write(MAGIC)
        f.write(orjson.dumps(header))
        f.write(b"\n")
        for b in buffers:
            f.write(b)
    return out


# PTI's view kinds are a small enum and its records tens to hundreds of bytes: a table outside these
# bounds is a corrupt (or hostile) header, never allocated (a kind of 2**40 asked for a 4 TiB table).
MAX_RECORD_KIND = 1 << 12
MIN_RECORD_SIZE, MAX_RECORD_SIZE = 8, 1 << 16


def _record_sizes(table) -> dict[int, int]:
    if not isinstance(table, dict):
        raise TypeError(f"record_sizes is {type(table).__name__}, not an object")
    sizes = {}
    for k, v in table.items():
        kind, size = int(k), v
        if not 0 <= kind < MAX_RECORD_KIND:
            raise ValueError(f"record kind {kind} is outside 0..{MAX_RECORD_KIND - 1}")
        if type(size) is not int or not MIN_RECORD_SIZE <= size <= MAX_RECORD_SIZE:
            raise ValueError(f"record size {size!r} of kind {kind} is outside {MIN_RECORD_SIZE}..{MAX_RECORD_SIZE} "
                             f"bytes")
        sizes[kind] = size
    return sizes


def _check_magic(p: Path):
    def check(first: bytes) -> None:
        if not first.startswith(MAGIC):
            raise CaptureError(f"{p} is not an xpuprof PTI capture (it does not start with {MAGIC!r})")

    return check


def load(path) -> Capture:
    p = Path(path)
    try:
        data = read_input(p, "PTI capture", head=_check_magic(p))
    except InputError as exc:
        raise CaptureError(str(exc)) from None
    except OSError as exc:
        raise CaptureError(f"cannot read PTI capture {p}: {exc.strerror or exc}") from exc
    nl = data.find(b"\n", len(MAGIC))
    if nl < 0:
        raise CaptureError(f"{p}: the capture header is incomplete")
    try:
        h = orjson.loads(data[len(MAGIC):nl])
        lengths = [int(n) for n in h["buffer_lengths"]]
        if any(n < 0 for n in lengths):
            raise ValueError("a buffer length is negative")
        sizes = _record_sizes(h["record_sizes"])
        ctx = RecordContext(
            pti_version=str(h["pti_version"]), clock_offset_ns=int(h["clock_offset_ns"]),
            device_uuids=[bytes.fromhex(u) for u in h["device_uuids"]],
            device_names={int(k): v for k, v in h.get("device_names", {}).items()},
            strings=StringCache({int(k): v for k, v in h["strings"].items()}),
            api_names=ApiNameCache({(int(g), int(i)): n for g, i, n in h["api_names"]}),
            memory_type_name=partial(pti.table_name, tuple(h.get("memory_types") or pti.MEMORY_TYPES)),
            memcpy_type_name=partial(pti.table_name, tuple(h.get("memcpy_types") or pti.MEMCPY_TYPES)))
        types = parse_activity_types(h["activities"])
        threads = h.get("range_threads")
        if threads is not None:
            ids, tids = ([int(x) for x in col] for col in threads)
            if len(ids) != len(tids):
                raise ValueError(f"range_threads holds {len(ids)} ids but {len(tids)} threads")
            threads = RangeThreads.from_pairs(ids, tids)
        window = None if h.get("window") is None else ProcessWindow(int(h["window"][0]), int(h["window"][1]),
                                                                    threads)
    except Exception as exc:  # noqa: BLE001 - any shape of bad header (IndexError, AttributeError, ...) is one error
        raise CaptureError(f"{p}: malformed capture header ({type(exc).__name__}: {exc})"[:2000]) from None
    body = memoryview(data)[nl + 1:]
    if sum(lengths) != len(body):
        raise CaptureError(f"{p}: the header lists {sum(lengths)} bytes of buffers but the file holds {len(body)} "
                           "(truncated or corrupt capture)")
    buffers, off = [], 0
    for n in lengths:
        buffers.append(bytes(body[off:off + n]))
        off += n
    return Capture(buffers, ctx, sizes, types, window, threads)


def decode(capture: Capture, window: ProcessWindow | None = None) -> DecodedRecords:
    win = None if window is None else (int(window.start_ns), int(window.end_ns), int(capture.context.clock_offset_ns))
    return decode_records(capture.buffers, LayoutWalker(capture.record_sizes), window=win)


def replay(path, builder, *, types=None, use_window: bool = True) -> XpuEmitResult:
    """Feed a capture through the same decoder and writer as a live session. A capture that loads but
    whose records cannot be decoded is ``CaptureError`` (``BufferDecodeError`` for a buffer that cannot
    be walked), never another exception."""
    cap = load(path)
    window = cap.window if use_window else None
    records = decode(cap, window)
    try:
        return write_records(records, cap.context, builder, window, cap.types if types is None else frozenset(types),
                             range_threads=cap.range_threads)
    except Exception as exc:  # noqa: BLE001 - records that contradict their header: one error naming the file
        raise CaptureError(f"{path}: the capture's records do not match its header ({type(exc).__name__}: "
                           f"{exc})"[:2000]) from None
