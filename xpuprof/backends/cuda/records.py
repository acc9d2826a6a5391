"""Raw CUPTI activity buffers, copied out of CUPTI's completion callback and cut by kind.

cupti-python hands the completion callback a list of record objects, each over its own private
copy of one record (CUPTI's buffer is freed when the callback returns). The callback only copies
those records back to back, notes each record's offset, the record class per kind (so the
matching numpy dtype is known) and kernel names per distinct name pointer; decoding happens
later, vectorized, in ``decode``.
"""
from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass, field

import numpy as np

from ...vendors.cupti import (KIND_CONCURRENT_KERNEL, KIND_CUDA_EVENT, KIND_DRIVER,  # noqa: F401 (the kinds read)
                              KIND_EXTERNAL_CORRELATION, KIND_KERNEL, KIND_MEMCPY, KIND_MEMCPY2, KIND_MEMSET,
                              KIND_OVERHEAD, KIND_RUNTIME, KIND_SYNCHRONIZATION, dtype_for_class)

# Fields moved into the epoch time domain. The kernel's ``queued``/``submitted`` stay raw: Kineto
# writes ``queued`` as CUPTI's own value (0 when latency timestamps are off), and so do we.
TIME_FIELDS = ("start", "end", "completed", "device_timestamp")


@dataclass
class RawChunk:
    """One completed CUPTI buffer: its bytes and where each record starts."""

    data: bytes | mmap.mmap  # the records back to back (``own_pages``)
    offsets: np.ndarray  # int64 byte offsets into data
    kinds: np.ndarray  # int32 CUpti_ActivityKind per record
    dtypes: dict[int, np.dtype]  # kind -> record dtype
    names: dict[int, str] = field(default_factory=dict)  # kernel name pointer -> name
    time_offset_ns: int = 0  # added to every timestamp field: CUPTI clock -> epoch ns

    def __len__(self) -> int:
        return len(self.offsets)

    def rows(self, kinds) -> np.ndarray | None:
        """All records of the given kinds (which must share one dtype) as a structured array."""
        kinds = [k for k in kinds if k in self.dtypes]
        if not kinds:
            return None
        dt = self.dtypes[kinds[0]]
        if any(self.dtypes[k] != dt for k in kinds[1:]):
            raise ValueError(f"activity kinds {kinds} use different record layouts")
        offs = self.offsets_of(kinds)
        if not len(offs):
            return None
        rows = gather_rows(self.data, offs, dt)
        self.to_epoch(rows)
        return rows

    def offsets_of(self, kinds) -> np.ndarray:
        return self.offsets[self.kinds == kinds[0]] if len(kinds) == 1 else self.offsets[np.isin(self.kinds, kinds)]

    def to_epoch(self, rows: np.ndarray) -> None:
        """Add the chunk's clock offset to the rows' timestamp fields (in place)."""
        if self.time_offset_ns:
            for name in TIME_FIELDS:
                if name in rows.dtype.names:
                    col = rows[name].astype(np.int64)
                    rows[name] = np.where(col != 0, col + self.time_offset_ns, 0)


OWN_PAGES_FROM = 1 << 20


def own_pages(data) -> bytes | mmap.mmap:
    """A chunk's bytes in memory of their own: from 1 MiB up, an anonymous mapping, which goes
    back to the system the moment the chunk is freed. Heap memory would not: glibc's malloc keeps
    freed blocks of this size in the heap (its mmap threshold rises as blocks are freed), so the
    resident size kept every buffer until the end of the decode."""
    view = memoryview(data).cast("B")
    if view.nbytes < OWN_PAGES_FROM:
        return bytes(view)
    pages = mmap.mmap(-1, view.nbytes)
    pages.write(view)
    return pages


_UNSET = object()
_rowgather_module = _UNSET


def _rowgather():
    """The C record gather (``xpuprof._native.records``), or None when it is not built (numpy gathers then)."""
    global _rowgather_module
    if _rowgather_module is _UNSET:
        from ... import _native

        records = _native.optional("records")
        _rowgather_module = records
    return _rowgather_module


def gather_rows(data: bytes, offsets: np.ndarray, dt: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """The records at ``offsets`` as one structured array (a copy; into ``out`` when given). 8-byte
    words are gathered when the layout allows (CUPTI's records are 8-aligned): 8x fewer index
    entries than bytes."""
    size = dt.itemsize
    if out is None:
        out = np.empty(len(offsets), dt)
    native = _rowgather()
    if native is not None and (not len(offsets) or int(offsets.min()) >= 0):
        native.gather_into(data, np.ascontiguousarray(offsets, np.int64), size, out.view(np.uint8), 0)
        return out
    raw_out = out.view(np.uint8).reshape(len(offsets), size)
    if size % 8 == 0 and not (offsets & 7).any():
        words = np.frombuffer(data, np.uint64, count=len(data) // 8)
        idx = (offsets >> 3)[:, None] + np.arange(size // 8)
        raw_out[:] = words[idx].view(np.uint8).reshape(len(offsets), size)
    else:
        raw = np.frombuffer(data, np.uint8)
        raw_out[:] = raw[offsets[:, None] + np.arange(size)]
    return out


def field_spans(dt: np.dtype, narrow: np.dtype) -> np.ndarray:
    """(source offset, length, destination offset) per run of ``narrow``'s fields, as int64 triples:
    fields next to each other in both layouts are one span."""
    spans: list[list[int]] = []
    for name in narrow.names:
        sub, src = dt.fields[name][:2]
        dst = narrow.fields[name][1]
        if spans and spans[-1][0] + spans[-1][1] == src and spans[-1][2] + spans[-1][1] == dst:
            spans[-1][1] += sub.itemsize
        else:
            spans.append([src, sub.itemsize, dst])
    return np.array(spans, np.int64).reshape(-1, 3)


def gather_fields(data, offsets: np.ndarray, dt: np.dtype, out: np.ndarray) -> np.ndarray:
    """Only ``out``'s fields of the ``dt`` records at ``offsets``, into ``out`` (whose dtype holds a
    subset of ``dt``'s fields, packed)."""
    native = _rowgather()
    if native is not None and (not len(offsets) or int(offsets.min()) >= 0):
        native.gather_fields(data, np.ascontiguousarray(offsets, np.int64), field_spans(dt, out.dtype),
                             out.view(np.uint8), 0, out.dtype.itemsize)
        return out
    whole = gather_rows(data, offsets, dt)
    for name in out.dtype.names:  # one plain copy per field (a multi-field assignment is ~10x slower)
        out[name] = whole[name]
    return out


def _packed(rows: np.ndarray, narrow: np.dtype) -> np.ndarray:
    out = np.empty(len(rows), narrow)
    for name in narrow.names:
        out[name] = rows[name]
    return out


def _narrow(dt: np.dtype, fields: frozenset | None) -> np.dtype:
    """The record layout with only ``fields`` (packed), or the layout itself when it has no others."""
    if fields is None or all(n in fields for n in dt.names):
        return dt
    return np.dtype([(n, dt.fields[n][0]) for n in dt.names if n in fields])


def gather_kinds(chunks: list[RawChunk | None], kinds, *, fields: frozenset | None = None,
                 release: bool = False) -> dict[int, np.ndarray | None]:
    """Each kind's records from every chunk, gathered straight into one array per kind
    (np.concatenate of structured arrays copies field by field: most of the decode time).

    Chunk by chunk, every kind at once: with ``release`` each list entry is set to None once its
    records are gathered, so its bytes are freed there and then and the records are held once,
    not twice, at the peak. ``fields``: keep only these fields of each record (the decoder's
    EMITTED_FIELDS); None keeps CUPTI's whole layout."""
    kinds = tuple(kinds)
    layout: dict[int, np.dtype | None] = {}  # kind -> its one record layout, None where buffers differ
    count = dict.fromkeys(kinds, 0)
    for c in chunks:
        if c is None:
            continue
        for k in kinds:
            if k in c.dtypes:
                n = int(np.count_nonzero(c.kinds == k))
                if n:
                    count[k] += n
                    layout[k] = c.dtypes[k] if layout.get(k, c.dtypes[k]) == c.dtypes[k] else None
    out = {k: np.empty(count[k], _narrow(layout[k], fields)) if layout.get(k) is not None else None for k in kinds}
    pos = dict.fromkeys(kinds, 0)
    mixed: dict[int, list[np.ndarray]] = {k: [] for k in kinds if count[k] and layout.get(k) is None}
    for i, c in enumerate(chunks):
        if c is None:
            continue
        for k in kinds:
            if not count[k] or k not in c.dtypes:
                continue
            if k in mixed:  # layouts differ between buffers: field by field
                rows = c.rows([k])
                if rows is not None:
                    narrow = _narrow(rows.dtype, fields)
                    mixed[k].append(rows if narrow is rows.dtype else _packed(rows, narrow))
                continue
            offs = c.offsets_of([k])
            if len(offs):
                part = out[k][pos[k]:pos[k] + len(offs)]
                if part.dtype == layout[k]:
                    gather_rows(c.data, offs, layout[k], part)
                    c.to_epoch(part)
                else:  # only the fields read
                    gather_fields(c.data, offs, layout[k], part)
                    c.to_epoch(part)
                pos[k] += len(offs)
        if release:
            chunks[i] = None
    for k, parts in mixed.items():
        out[k] = np.concatenate(parts)
    return {k: v if v is not None and len(v) else None for k, v in out.items()}


# Every record field the emit stage reads, per the kinds it writes (a kernel record is 248 bytes; the
# fields read, 118): what ``gather_records`` keeps of CUPTI's layouts.
EMITTED_FIELDS = frozenset({
    "kind", "start", "end", "completed", "device_timestamp", "queued", "correlation_id", "device_id", "context_id",
    "stream_id", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_shared_memory", "dynamic_shared_memory", "graph_id", "graph_node_id", "channel_id", "channel_type",
    "priority", "copy_kind", "src_kind", "dst_kind", "bytes", "src_device_id", "dst_device_id", "src_context_id",
    "dst_context_id", "memory_kind", "cbid", "process_id", "thread_id", "type", "cuda_event_id", "event_id",
    "external_kind", "external_id", "overhead_kind", "object_kind", "object_id"})
EMITTED_KINDS = (KIND_KERNEL, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMCPY2, KIND_MEMSET, KIND_RUNTIME, KIND_DRIVER,
                 KIND_SYNCHRONIZATION, KIND_CUDA_EVENT, KIND_EXTERNAL_CORRELATION, KIND_OVERHEAD)


@dataclass
class CuptiRecords:
    """A session's records by activity kind (structured arrays of CUPTI's field names, None for a
    kind without records) and the kernel names behind the records' name pointers: what the emit
    stage (``emit.CudaEmitter``) reads."""

    by_kind: dict[int, np.ndarray | None] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # kernel name pointer -> name

    def get(self, kind: int) -> np.ndarray | None:
        return self.by_kind.get(kind)


def gather_records(chunks: list[RawChunk | None], *, fields: frozenset | None = EMITTED_FIELDS,
                   release: bool = False) -> CuptiRecords:
    """The records of every kind the emit stage writes, from every chunk (``gather_kinds``), with
    only ``fields`` of each record (None: CUPTI's whole layout). ``release``: as ``gather_kinds``."""
    names: dict[int, str] = {}
    for c in chunks:
        if c is not None:
            names.update(c.names)
    return CuptiRecords(gather_kinds(chunks, EMITTED_KINDS, fields=fields, release=release), names)


def _kinds_at(data: bytes, offsets: np.ndarray) -> np.ndarray:
    raw = np.frombuffer(data, np.uint8)
    return raw[offsets[:, None] + np.arange(4)].copy().view("<i4").reshape(-1)


def capture(records) -> RawChunk | None:
    """Copy a completion callback's records (cupti-python objects) into one chunk.

    cupti-python builds each record object with ``from_ptr`` and no owner, i.e. over a private
    copy of the record, so the objects' addresses are scattered over the heap rather than inside
    CUPTI's buffer: each record is copied from its own address, back to back.
    """
    n = len(records)
    if n == 0:
        return None
    size_of: dict[type, int] = {}
    sizes = np.empty(n, np.int64)
    for i, r in enumerate(records):
        cls = type(r)
        size = size_of.get(cls)
        if size is None:
            size = size_of[cls] = dtype_for_class(cls).itemsize
        sizes[i] = size
    data = own_pages(b"".join(map(ctypes.string_at, [r.ptr for r in records], sizes.tolist())))
    offsets = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=offsets[1:])
    kinds = _kinds_at(data, offsets)
    uniq, first = np.unique(kinds, return_index=True)
    dtypes = {int(k): dtype_for_class(type(records[int(i)])) for k, i in zip(uniq, first)}
    chunk = RawChunk(data, offsets, kinds, dtypes)
    for kind in (KIND_KERNEL, KIND_CONCURRENT_KERNEL):
        if kind in dtypes and "name" in dtypes[kind].names:
            idx = np.flatnonzero(kinds == kind)
            name_ptrs = chunk.rows([kind])["name"]
            ptr_u, ptr_first = np.unique(name_ptrs, return_index=True)
            for p, i in zip(ptr_u.tolist(), ptr_first.tolist()):
                if p not in chunk.names:  # the record object reads CUPTI's string while it is alive
                    chunk.names[p] = records[int(idx[i])].name or ""
    return chunk


def pack(rows_by_kind: list[np.ndarray], names: dict[int, str] | None = None, *, align: int = 8) -> RawChunk:
    """Lay structured record arrays out back to back like a CUPTI buffer (tests and replays)."""
    parts, offsets, kinds, dtypes, pos = [], [], [], {}, 0
    for rows in rows_by_kind:
        size = rows.dtype.itemsize
        stride = (size + align - 1) // align * align
        for rec in rows:
            kind = int(rec["kind"])
            dtypes[kind] = rows.dtype
            blob = rec.tobytes()
            parts.append(blob + b"\0" * (stride - size))
            offsets.append(pos)
            kinds.append(kind)
            pos += stride
    return RawChunk(b"".join(parts), np.asarray(offsets, np.int64), np.asarray(kinds, np.int32), dtypes,
                    dict(names or {}))
