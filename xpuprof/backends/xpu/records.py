"""Vectorized decoding of PTI view buffers into numpy structured arrays, one per record kind.

Two steps per buffer:
1. *locate*: the byte offset of every record. Live buffers are walked with PTI's own
   ``ptiViewGetNextRecord`` (PTI knows its strides; the reference forbids guessing them), called
   from C (``xpuprof._native.ptibuf.walk``) so no Python runs per record. Replayed captures are
   walked with the record-size table saved alongside them (``LayoutWalker``).
2. *gather*: for each kind, the records' bytes are gathered in one numpy ``take`` over the
   buffer viewed as uint64 words and reinterpreted with the kind's structured dtype.

Kinds the decoder has no layout for are skipped and counted (``DecodedRecords.unknown``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from ...vendors import pti

Walker = Callable[[bytes], np.ndarray]


class BufferDecodeError(ValueError):
    """A PTI buffer that cannot be walked (truncated, corrupt, or of an unknown layout)."""


_NATIVE_UNSET = object()
_native_module = _NATIVE_UNSET


def _native():
    """The C helper module, or None when it is not built (the numpy fallbacks then apply)."""
    global _native_module
    if _native_module is _NATIVE_UNSET:
        try:
            from ..._native import ptibuf
        except ImportError:
            ptibuf = None
        _native_module = ptibuf
    return _native_module


class PtiWalker:
    """Locates records with PTI's ``ptiViewGetNextRecord`` (C address), looping in C."""

    def __init__(self, next_record_address: int) -> None:
        native = _native()
        if native is None:
            raise BufferDecodeError("xpuprof._native.ptibuf is not built; rebuild xpuprof "
                                    "(`python setup.py build_ext --inplace`) to walk live PTI buffers")
        self._walk = native.walk
        self._address = int(next_record_address)

    def __call__(self, buf: bytes) -> np.ndarray:
        raw, status = self._walk(buf, self._address)
        if status != pti.Result.STATUS_END_OF_BUFFER:
            found = len(raw) // 8
            raise BufferDecodeError(f"ptiViewGetNextRecord stopped with result {status} after {found} records "
                                    f"in a {len(buf)}-byte buffer (expected {int(pti.Result.STATUS_END_OF_BUFFER)}, "
                                    "end of buffer)")
        return np.frombuffer(raw, dtype=np.uint64)


class LayoutWalker:
    """Locates records with a kind -> record-size table (the layout facts saved in a capture)."""

    def __init__(self, sizes: dict[int, int] | None = None) -> None:
        sizes = pti.record_sizes() if sizes is None else {int(k): int(v) for k, v in sizes.items()}
        if any(v <= 0 for v in sizes.values()):
            raise ValueError(f"record sizes must be positive: {sizes}")
        self.sizes = sizes
        table = np.zeros(max(sizes, default=0) + 1, dtype=np.uint32)
        for k, v in sizes.items():
            table[k] = v
        self._table = table
        native = _native()
        self._walk_sizes = None if native is None else native.walk_sizes

    def _walk_python(self, buf: bytes) -> tuple[np.ndarray, int]:
        # Fallback without the C extension: one Python step per record (slow, still correct).
        offsets, off, n = [], 0, len(buf)
        table = self._table
        while off < n:
            if n - off < 4:
                return np.array(offsets, np.uint64), off
            kind = int.from_bytes(buf[off:off + 4], "little")
            size = int(table[kind]) if kind < len(table) else 0
            if size == 0 or size > n - off:
                return np.array(offsets, np.uint64), off
            offsets.append(off)
            off += size
        return np.array(offsets, np.uint64), -1

    def __call__(self, buf: bytes) -> np.ndarray:
        if self._walk_sizes is not None:
            raw, stop = self._walk_sizes(buf, self._table.tobytes())
            offsets = np.frombuffer(raw, dtype=np.uint64)
        else:
            offsets, stop = self._walk_python(buf)
        if stop >= 0:
            remaining = len(buf) - stop
            kind = int.from_bytes(buf[stop:stop + 4], "little") if remaining >= 4 else None
            size = self.sizes.get(kind, 0) if kind is not None else 0
            if kind is None or size:
                raise BufferDecodeError(
                    f"truncated PTI buffer: the record at offset {stop} "
                    + (f"(kind {kind}) needs {size} bytes" if kind is not None else "has no complete kind field")
                    + f" but only {remaining} of the buffer's {len(buf)} bytes remain")
            raise BufferDecodeError(
                f"PTI buffer holds a record of unknown kind {kind} at offset {stop}; its size is not in the layout "
                f"table (known kinds: {sorted(self.sizes)}), so the rest of the {len(buf)}-byte buffer cannot be walked")
        return offsets


@dataclass
class DecodedRecords:
    """Structured arrays by view kind, plus counts of records the decoder skipped."""

    by_kind: dict[int, np.ndarray] = field(default_factory=dict)
    unknown: dict[int, int] = field(default_factory=dict)
    buffers: int = 0

    def get(self, kind: int) -> np.ndarray:
        got = self.by_kind.get(int(kind))
        return got if got is not None else np.empty(0, dtype=pti.record_dtype(kind))

    @property
    def record_count(self) -> int:
        return sum(len(a) for a in self.by_kind.values()) + sum(self.unknown.values())


def _check_fits(buf: bytes, offsets: np.ndarray, size: int) -> None:
    if len(offsets) and int(offsets.max()) + size > len(buf):
        raise BufferDecodeError(f"truncated PTI buffer: a {size}-byte record at offset {int(offsets.max())} "
                                f"runs past the buffer's end ({len(buf)} bytes)")


def _gather_numpy(buf: bytes, offsets: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Records at ``offsets`` as one structured array, with numpy only (no C helper)."""
    size, n = dtype.itemsize, len(offsets)
    _check_fits(buf, offsets, size)
    if n and int(offsets[-1] - offsets[0]) == (n - 1) * size:
        # One contiguous run of this kind: a plain strided view.
        return np.frombuffer(buf, dtype=dtype, count=n, offset=int(offsets[0]))
    if size % 8 == 0 and not (offsets & 7).any():
        words = np.frombuffer(buf, dtype=np.uint64, count=len(buf) // 8)
        idx = (offsets >> 3).astype(np.intp)[:, None] + np.arange(size // 8, dtype=np.intp)
        return np.ascontiguousarray(words.take(idx)).view(dtype).reshape(n)
    raw = np.frombuffer(buf, dtype=np.uint8)
    idx = offsets.astype(np.intp)[:, None] + np.arange(size, dtype=np.intp)
    return np.ascontiguousarray(raw.take(idx)).view(dtype).reshape(n)


def _kinds(buf: bytes, offsets: np.ndarray) -> np.ndarray:
    if not (offsets & 3).any():
        return np.frombuffer(buf, dtype=np.uint32, count=len(buf) // 4).take((offsets >> 2).astype(np.intp))
    raw = np.frombuffer(buf, dtype=np.uint8)
    o = offsets.astype(np.intp)
    return (raw[o].astype(np.uint32) | raw[o + 1].astype(np.uint32) << 8
            | raw[o + 2].astype(np.uint32) << 16 | raw[o + 3].astype(np.uint32) << 24)


def _split_by_kind(offsets: np.ndarray, kinds: np.ndarray) -> dict[int, np.ndarray]:
    """kind -> that kind's offsets, in buffer order."""
    if not len(offsets):
        return {}
    top = int(kinds.max())
    if top < 256:
        # One stable radix sort groups the kinds; counts give each group's slice.
        order = np.argsort(kinds.astype(np.uint8), kind="stable")
        counts = np.bincount(kinds, minlength=top + 1)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        grouped = offsets[order]
        return {k: grouped[bounds[k]:bounds[k + 1]] for k in np.flatnonzero(counts).tolist()}
    return {int(k): offsets[kinds == k] for k in np.unique(kinds).tolist()}


def decode_buffers(buffers: Iterable[bytes], walker: Walker, *, release: bool = False) -> DecodedRecords:
    """Decode PTI buffers into structured arrays by kind (in buffer order within each kind).

    Pass 1 locates every record and groups offsets by kind; pass 2 copies each buffer's records
    straight into one preallocated array per kind (no per-buffer pieces to concatenate).
    ``release``: drop each buffer as soon as its records are copied out (the caller hands over
    its only references), so the raw buffers and the decoded arrays are not held whole together.
    """
    result = DecodedRecords()
    located: list[tuple[bytes, dict[int, np.ndarray]] | None] = []
    totals: dict[int, int] = {}
    for buf in buffers:
        result.buffers += 1
        offsets = walker(buf)
        groups = _split_by_kind(offsets, _kinds(buf, offsets))
        for kind in list(groups):
            if kind not in pti.RECORD_STRUCTS:
                result.unknown[kind] = result.unknown.get(kind, 0) + len(groups.pop(kind))
            else:
                totals[kind] = totals.get(kind, 0) + len(groups[kind])
        located.append((buf, groups))
    if release:
        buf = None
        if isinstance(buffers, list):
            buffers.clear()  # handed over: from here on `located` holds the only references
    native = _native()
    # np.empty: pages are committed as records are written, so memory grows as buffers are freed.
    outs = {kind: np.empty(total, dtype=pti.record_dtype(kind)) for kind, total in totals.items()}
    pos = dict.fromkeys(totals, 0)
    for i in range(len(located)):
        buf, groups = located[i]
        for kind, sel in groups.items():
            if not len(sel):
                continue
            out, size = outs[kind], outs[kind].dtype.itemsize
            if native is not None:
                try:
                    native.gather_into(buf, np.ascontiguousarray(sel, dtype=np.uint64), size,
                                       out.view(np.uint8), pos[kind] * size)
                except ValueError as exc:
                    raise BufferDecodeError(str(exc)) from None
            else:
                part = np.ascontiguousarray(_gather_numpy(buf, sel, out.dtype))
                # byte copy: padding too, so both paths give identical bytes
                out.view(np.uint8)[pos[kind] * size:(pos[kind] + len(sel)) * size] = part.view(np.uint8).reshape(-1)
            pos[kind] += len(sel)
        if release:
            located[i] = buf = None
    result.by_kind.update(outs)
    return result


def decode_buffer(buf: bytes, walker: Walker) -> DecodedRecords:
    """Decode one buffer (see ``decode_buffers``)."""
    return decode_buffers([buf], walker)
