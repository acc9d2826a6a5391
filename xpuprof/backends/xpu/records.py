"""The records stage of the XPU pipeline: PTI view buffers -> record columns, one set per kind.

Two steps per buffer:
1. *locate*: the byte offset of every record. Live buffers are walked with PTI's own
   ``ptiViewGetNextRecord`` (PTI knows its strides; the reference forbids guessing them), called
   from C (``xpuprof._native.records.walk``) so no Python runs per record. Replayed captures are
   walked with the record-size table saved alongside them (``LayoutWalker``).
2. *decode*: ``decode_records`` takes the fields the emit stage reads (``EMITTED_FIELDS``) straight
   from the buffers into one typed column per field (``backends/record_columns.py``, in C): counted
   first so every column is allocated once, the capture window applied on the way, each buffer
   released once read. ``decode_buffers`` instead gathers whole records into structured arrays
   (every field, PTI's layout), for layout checks and tools.

Kinds the decoder has no layout for are skipped and counted (``DecodedRecords.unknown``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from ...vendors import pti
from ..record_columns import ColumnPlan, KindPlan, RecordColumns, decode_columns

Walker = Callable[[bytes], np.ndarray]


class BufferDecodeError(ValueError):
    """A PTI buffer that cannot be walked (truncated, corrupt, or of an unknown layout)."""


_NATIVE_UNSET = object()
_native_module = _NATIVE_UNSET


def _native():
    """The C records module, or None when it is not built (the numpy fallbacks then apply)."""
    global _native_module
    if _native_module is _NATIVE_UNSET:
        from ... import _native as c_parts

        records = c_parts.optional("records")
        _native_module = records
    return _native_module


class PtiWalker:
    """Locates records with PTI's ``ptiViewGetNextRecord`` (C address), looping in C."""

    def __init__(self, next_record_address: int) -> None:
        native = _native()
        if native is None:
            raise BufferDecodeError("xpuprof._native.records is not built; rebuild xpuprof "
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
    """Records by view kind (structured arrays from ``decode_buffers``, ``RecordColumns`` from
    ``decode_records``), plus counts of records the decoder skipped. ``windowed``: the decode
    applied the capture window already; ``out_of_window`` and ``misordered`` (records ending before
    they start, counted over all records) are then its counts by kind."""

    by_kind: dict[int, np.ndarray | RecordColumns] = field(default_factory=dict)
    unknown: dict[int, int] = field(default_factory=dict)
    buffers: int = 0
    windowed: bool = False
    out_of_window: dict[int, int] = field(default_factory=dict)
    misordered: dict[int, int] = field(default_factory=dict)
    empty: Callable[[int], object] | None = field(default=None, repr=False)

    def get(self, kind: int):
        got = self.by_kind.get(int(kind))
        if got is not None:
            return got
        return self.empty(int(kind)) if self.empty is not None else np.empty(0, dtype=pti.record_dtype(kind))

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




# ----------------------------------------------------------------------------- columns
# The fields the emit stage reads, per record kind: what decode_records takes from the buffers. A
# new per-kernel arg (kernel resources, submission intervals ...) is a field named here plus its
# column in emit.write_kernels; a kernel-name filter would drop rows by the ``_name`` pointer
# column before the emit stage, between the two (one interning of the distinct names decides).
_API = ("_start_timestamp", "_end_timestamp", "_api_group", "_api_id", "_process_id", "_thread_id",
        "_correlation_id")
_COPY_COMMON = ("_start_timestamp", "_end_timestamp", "_append_timestamp", "_submit_timestamp", "_sycl_queue_id",
                "_correlation_id", "_context_handle", "_queue_handle", "_name", "_mem_op_id", "_bytes")
EMITTED_FIELDS: dict[int, tuple[str, ...]] = {
    pti.ViewKind.DEVICE_GPU_KERNEL: ("_start_timestamp", "_end_timestamp", "_append_timestamp", "_submit_timestamp",
                                     "_sycl_task_begin_timestamp", "_sycl_enqk_begin_timestamp", "_device_uuid",
                                     "_sycl_queue_id", "_name", "_correlation_id", "_source_file_name",
                                     "_source_line_number", "_context_handle", "_queue_handle", "_kernel_id",
                                     "_sycl_node_id", "_sycl_invocation_id"),
    pti.ViewKind.RUNTIME_API: _API,
    pti.ViewKind.DRIVER_API: _API,
    pti.ViewKind.EXTERNAL_CORRELATION: ("_correlation_id", "_external_id", "_external_kind"),
    pti.ViewKind.DEVICE_GPU_MEM_COPY: _COPY_COMMON + ("_device_uuid", "_memcpy_type", "_mem_src", "_mem_dst"),
    pti.ViewKind.DEVICE_GPU_MEM_FILL: _COPY_COMMON + ("_device_uuid", "_mem_type", "_value_for_set"),
    pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P: ("_start_timestamp", "_end_timestamp", "_src_uuid", "_dst_uuid",
                                           "_sycl_queue_id", "_memcpy_type", "_correlation_id", "_context_handle",
                                           "_queue_handle", "_mem_op_id", "_bytes"),
    pti.ViewKind.DEVICE_SYNCHRONIZATION: ("_start_timestamp", "_end_timestamp", "_thread_id", "_api_group",
                                          "_api_id", "_correlation_id", "_synch_type", "_context_handle",
                                          "_queue_handle", "_event_handle", "_number_wait_events", "_return_code"),
    pti.ViewKind.COLLECTION_OVERHEAD: ("_overhead_start_timestamp_ns", "_overhead_end_timestamp_ns",
                                       "_overhead_kind", "_overhead_duration_ns", "_overhead_count",
                                       "_overhead_thread_id"),
    pti.ViewKind.DEVICE_CPU_KERNEL: (),  # decoded (a known kind), not written: Kineto draws no CPU kernels
    pti.ViewKind.COMMUNICATION: ("_start_timestamp", "_end_timestamp", "_name", "_communicator_id", "_send_size",
                                 "_recv_size", "_process_id", "_thread_id"),
}
# Pointers and handles stay uint64 columns (interned by address, written as hex); every other
# integer field becomes int64.
POINTER_FIELDS = frozenset({"_name", "_source_file_name", "_queue_handle", "_context_handle", "_event_handle"})
_PLAN: ColumnPlan | None = None


def column_plan() -> ColumnPlan:
    """The PTI column plan: every kind of ``EMITTED_FIELDS`` with its record layout."""
    global _PLAN
    if _PLAN is None:
        kinds = []
        for kind, fields in EMITTED_FIELDS.items():
            layout = pti.record_dtype(kind)
            start = "_overhead_start_timestamp_ns" if "_overhead_start_timestamp_ns" in fields else (
                "_start_timestamp" if "_start_timestamp" in fields else None)
            end = start and start.replace("start", "end")
            kinds.append(KindPlan(int(kind), layout, fields, start, end))
        _PLAN = ColumnPlan(kinds, POINTER_FIELDS)
    return _PLAN


def decode_records(buffers: list, walker: Walker, *, window: tuple[int, int, int] | None = None,
                   release: bool = False) -> DecodedRecords:
    """The emit stage's columns of every record in ``buffers`` (see the module docstring).
    ``window``: (start ns, end ns, clock offset ns); records starting outside it are not kept, only
    counted. ``release``: the caller hands ``buffers`` over (each entry is dropped once read)."""
    plan = column_plan()
    got = decode_columns(buffers, walker, plan, window=window, release=release, error=BufferDecodeError)
    by_kind = {k: v for k, v in got.by_kind.items()}
    return DecodedRecords(by_kind=by_kind, unknown=got.unknown, buffers=got.buffers, windowed=window is not None,
                          out_of_window=got.out_of_window, misordered=got.misordered, empty=plan.empty)
