"""TraceBuilder: the one meeting point of every producer (host code, backends, plugins).

Storage is columnar: each bulk call becomes one *batch* of numpy columns; scalar calls from
host code collect in small pending lists that turn into a batch every ``FLUSH_EVERY`` rows.
Strings (names, categories, string args) are interned once. Timestamps are int64 epoch ns.

Producers write; ``freeze()`` gives the trace as a ``TraceTable`` (``xpuprof.trace.table``), its segments
the builder's batches as they are, which the writers and the analyses read. The columns and batches
themselves are in ``columns``.
"""
from __future__ import annotations

import os
import socket
import threading
from typing import Any, Mapping

import numpy as np

from ...activity import ActivityType
from .columns import (_SCOPES, CounterBatch, FlowBatch, InstantBatch, RowArgs, SliceBatch, Span, _category_ids,
                      _constant, _encode_args, _external_id_column, _i64, _row_column, _to_arg_column, batch_nbytes)
from .dropped import DroppedRecords, drop_label
from .strings import StringTable, json_safe

FLUSH_EVERY = 65536


# ----------------------------------------------------------------------------- builder
class TraceBuilder:
    """Collects one trace. Thread-safe for the scalar (host) calls; bulk calls take the lock too."""

    def __init__(self, *, pid: int | None = None) -> None:
        self.strings = StringTable()
        self.pid = os.getpid() if pid is None else pid
        self.slices: list[SliceBatch] = []
        self.instants: list[InstantBatch] = []
        self.counters: list[CounterBatch] = []
        self.flows: list[FlowBatch] = []
        self.spans: list[Span] = []
        self.process_names: dict = {}
        self.process_labels: dict = {}
        self.process_sort: dict = {}
        self.thread_names: dict = {}
        self.thread_sort: dict = {}
        self.device_properties: list[dict] = []
        self.metadata: dict[str, Any] = {}
        self.distributed_info: dict | None = None
        self.window_start_ns: int = 0
        self.window_end_ns: int = 0
        self.dropped = DroppedRecords()
        self.warnings: list[str] = []
        self._lock = threading.RLock()
        self._pending_slices: list = []
        self._pending_instants: list = []
        self._pending_counters: list = []
        self._pending_flows: list = []
        self.metadata["host_name"] = socket.gethostname()

    # ------------------------------------------------------------------ slices
    def add_slice(self, name, ts_ns: int, dur_ns: int, pid, tid, cat="user_annotation", args: Mapping | None = None,
                  *, external_id: int = 0, vendor: str = "") -> None:
        """One complete event (host code). ``args`` is a dict of JSON-able values."""
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor)
        row = (self.strings.intern(name), int(ts_ns), int(dur_ns), pid, tid, cat_id, vendor_id, int(external_id or 0),
               _encode_args(args))
        with self._lock:
            self._pending_slices.append(row)
            if len(self._pending_slices) >= FLUSH_EVERY:
                self._flush_slices()

    def add_slices(self, *, names, ts, dur, pid, tid, cat, args: Mapping[str, Any] | None = None,
                   external_id=None, vendor: str = "", name_ids: np.ndarray | None = None,
                   row_args: list | RowArgs | None = None) -> None:
        """Bulk complete events. Every column has one row per event; ``pid``/``tid`` may be scalars.

        ``names``: sequence of str (interned here) or None with ``name_ids`` already interned
        through ``builder.strings``. ``args``: arg name -> column (see ``ArgColumn``); numeric
        numpy arrays, 2-D arrays (written as lists), sequences of str, or ``ArgColumn`` with a
        ``present`` mask for args only some rows carry. ``row_args``: per row, one JSON object
        already encoded (bytes, from ``encode_json``) or None; or a ``RowArgs`` (all of them in one blob).
        """
        ts = np.asarray(ts)
        n = len(ts)
        if n == 0:
            return
        if name_ids is None:
            name_ids = self.strings.intern_many(names)
        if len(name_ids) != n:
            raise ValueError(f"names has {len(name_ids)} rows, expected {n}")
        if row_args is not None and len(row_args) != n:
            raise ValueError(f"row_args has {len(row_args)} rows, expected {n}")
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor)
        batch = SliceBatch(
            ts=_i64(ts, n, "ts"),
            dur=np.maximum(_i64(dur, n, "dur"), 0),
            pid=_row_column(pid, n),
            tid=_row_column(tid, n),
            name=np.asarray(name_ids, dtype=np.int32),
            cat=_constant(cat_id, n, np.int32),
            vendor_cat=_constant(vendor_id, n, np.int32),
            external_id=_external_id_column(external_id, n),
            args={json_safe(k): _to_arg_column(v, n, self.strings) for k, v in (args or {}).items()},
            row_args=row_args,
        )
        with self._lock:
            self.slices.append(batch)

    def _flush_slices(self) -> None:
        rows = self._pending_slices
        if not rows:
            return
        self._pending_slices = []
        name, ts, dur, pid, tid, cat, vendor, ext, enc = zip(*rows)
        n = len(rows)
        self.slices.append(SliceBatch(
            ts=np.array(ts, dtype=np.int64), dur=np.maximum(np.array(dur, dtype=np.int64), 0),
            pid=_row_column(list(pid), n), tid=_row_column(list(tid), n),
            name=np.array(name, dtype=np.int32), cat=np.array(cat, dtype=np.int32),
            vendor_cat=np.array(vendor, dtype=np.int32), external_id=np.array(ext, dtype=np.int64),
            row_args=list(enc) if any(e is not None for e in enc) else None,
        ))

    # ------------------------------------------------------------------ instants
    def add_instant(self, name, ts_ns: int, pid, tid, cat="cpu_instant_event", args: Mapping | None = None,
                    *, scope: str = "t", vendor: str = "") -> None:
        if scope not in _SCOPES:
            raise ValueError(f"instant scope must be one of 't', 'g', 'p', not {scope!r}")
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor) if cat else (0, 0)
        row = (self.strings.intern(name), int(ts_ns), pid, tid, cat_id, vendor_id, _SCOPES[scope], _encode_args(args))
        with self._lock:
            self._pending_instants.append(row)
            if len(self._pending_instants) >= FLUSH_EVERY:
                self._flush_instants()

    def add_instants(self, *, name_ids: np.ndarray, ts, pid, tid, cat="cpu_instant_event", scope,
                     row_args: list | None = None, vendor: str = "") -> None:
        """Bulk instant events: ``name_ids`` interned through ``builder.strings``, ``scope`` one uint8
        code per row (ord of 't', 'p' or 'g'), ``row_args`` per row one JSON object already encoded or
        None. Columns as ``add_slices`` takes them (no Python object per event)."""
        ts = np.asarray(ts)
        n = len(ts)
        if n == 0:
            return
        if len(name_ids) != n or (row_args is not None and len(row_args) != n):
            raise ValueError(f"add_instants: every column needs {n} rows")
        scope = np.array(scope, dtype=np.uint8)  # a copy: never a view on a caller's buffer
        if not np.isin(scope, list(_SCOPES.values())).all():
            raise ValueError("instant scope codes must be ord('t'), ord('g') or ord('p')")
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor) if cat else (0, 0)
        batch = InstantBatch(ts=_i64(ts, n, "ts"), pid=_row_column(pid, n), tid=_row_column(tid, n),
                             name=np.asarray(name_ids, dtype=np.int32), cat=_constant(cat_id, n, np.int32),
                             vendor_cat=_constant(vendor_id, n, np.int32), scope=scope,
                             row_args=row_args if row_args is not None and any(a is not None for a in row_args)
                             else None)
        with self._lock:
            self._flush_instants()  # file order stays call order
            self.instants.append(batch)

    def _flush_instants(self) -> None:
        rows = self._pending_instants
        if not rows:
            return
        self._pending_instants = []
        name, ts, pid, tid, cat, vendor, scope, enc = zip(*rows)
        n = len(rows)
        self.instants.append(InstantBatch(
            ts=np.array(ts, dtype=np.int64), pid=_row_column(list(pid), n), tid=_row_column(list(tid), n),
            name=np.array(name, dtype=np.int32), cat=np.array(cat, dtype=np.int32),
            vendor_cat=np.array(vendor, dtype=np.int32), scope=np.array(scope, dtype=np.uint8),
            row_args=list(enc) if any(e is not None for e in enc) else None,
        ))

    # ------------------------------------------------------------------ counters
    def add_counter(self, name, ts_ns: int, values: Mapping[str, float], pid, tid=0, cat="gpu_pm_counter",
                    *, vendor: str = "") -> None:
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor)
        row = (self.strings.intern(name), int(ts_ns), pid, tid, cat_id, vendor_id,
               {json_safe(k): float(v) for k, v in values.items()})
        with self._lock:
            self._pending_counters.append(row)
            if len(self._pending_counters) >= FLUSH_EVERY:
                self._flush_counters()

    def add_counters(self, *, name, ts, pid, tid, cat, values: Mapping[str, Any], vendor: str = "") -> None:
        """Bulk "C" events: one row per timestamp, each carrying every metric in ``values``.

        ``name`` is one track name for all rows, or a sequence of names.
        """
        ts = np.asarray(ts)
        n = len(ts)
        if n == 0:
            return
        names = (_constant(self.strings.intern(name), n, np.int32) if isinstance(name, (str, bytes))
                 else self.strings.intern_many(name))
        cat_id, vendor_id = _category_ids(self.strings, cat, vendor)
        cols = {}
        for k, v in values.items():
            arr = np.asarray(v, dtype=np.float64)
            if arr.shape != (n,):
                raise ValueError(f"counter {k!r} has shape {arr.shape}, expected ({n},)")
            cols[json_safe(k)] = arr
        batch = CounterBatch(ts=_i64(ts, n, "ts"), pid=_row_column(pid, n), tid=_row_column(tid, n), name=names,
                             cat=_constant(cat_id, n, np.int32), vendor_cat=_constant(vendor_id, n, np.int32),
                             values=cols)
        with self._lock:
            self.counters.append(batch)

    def add_per_kernel_metrics(self, *, kernel_names, start_ns, end_ns, pid, tid, metrics: Mapping[str, Any],
                               units: Mapping[str, str] | None = None, counter_name: str = "xpu",
                               cat=ActivityType.XPU_SCOPE_PROFILER, extra_args: Mapping[str, Any] | None = None,
                               vendor: str = "") -> None:
        """The one output path for per-kernel hardware metrics, shared by every backend.

        For each kernel: a "C" event at start-1 ns carrying every metric, a "C" event at end+1 ns
        with every metric 0 (so the track steps with the kernel, Kineto's convention), and a
        ``metrics: <kernel>`` slice from start-1 to end+1 with ``"<metric>::<unit>"`` args. The slice
        carries the metric category, not ``kernel``: a second ``kernel`` slice per kernel doubles every
        consumer's kernel counts (TensorBoard's kernel table, HTA's breakdowns).
        """
        start = np.asarray(start_ns, dtype=np.int64)
        end = np.asarray(end_ns, dtype=np.int64)
        n = len(start)
        if n == 0:
            return
        units = units or {}
        cols = {k: np.asarray(v, dtype=np.float64) for k, v in metrics.items()}
        pid_col, tid_col = _row_column(pid, n), _row_column(tid, n)
        order = np.argsort(np.concatenate([start - 1, end + 1]), kind="stable")
        ts = np.concatenate([start - 1, end + 1])[order]
        zero = {k: np.concatenate([v, np.zeros(n)])[order] for k, v in cols.items()}
        self.add_counters(name=counter_name, ts=ts, pid=np.concatenate([pid_col, pid_col])[order],
                          tid=np.concatenate([tid_col, tid_col])[order], cat=cat, values=zero, vendor=vendor)
        names = [f"metrics: {json_safe(k)}" for k in kernel_names]
        args: dict[str, Any] = dict(extra_args or {})
        for k, v in cols.items():
            unit = units.get(k) or ""
            args[f"{k}::{unit}" if unit else k] = v
        self.add_slices(names=names, ts=start - 1, dur=(end - start) + 2, pid=pid_col, tid=tid_col,
                        cat=cat, args=args, vendor=vendor)

    def _flush_counters(self) -> None:
        rows = self._pending_counters
        if not rows:
            return
        self._pending_counters = []
        name, ts, pid, tid, cat, vendor, vals = zip(*rows)
        n = len(rows)
        self.counters.append(CounterBatch(
            ts=np.array(ts, dtype=np.int64), pid=_row_column(list(pid), n), tid=_row_column(list(tid), n),
            name=np.array(name, dtype=np.int32), cat=np.array(cat, dtype=np.int32),
            vendor_cat=np.array(vendor, dtype=np.int32), values={}, row_values=list(vals)))

    # ------------------------------------------------------------------ flows
    def add_flow(self, flow_id: int, ts_ns: int, pid, tid, *, start: bool, cat: str = "ac2g") -> None:
        row = (int(flow_id), int(ts_ns), pid, tid, self.strings.intern(cat), bool(start))
        with self._lock:
            self._pending_flows.append(row)
            if len(self._pending_flows) >= FLUSH_EVERY:
                self._flush_flows()

    def add_flows(self, *, flow_ids, ts, pid, tid, start, cat: str = "ac2g") -> None:
        """Bulk flow ends: ``start`` True writes "s", False writes "f" with "bp": "e"."""
        ts = np.asarray(ts)
        n = len(ts)
        if n == 0:
            return
        st = _constant(bool(start), n, bool) if np.isscalar(start) else np.asarray(start, dtype=bool)
        if len(st) != n:
            raise ValueError(f"start has {len(st)} rows, expected {n}")
        batch = FlowBatch(flow_id=_i64(flow_ids, n, "flow_ids"), ts=_i64(ts, n, "ts"), pid=_row_column(pid, n),
                          tid=_row_column(tid, n), cat=_constant(self.strings.intern(cat), n, np.int32), is_start=st)
        with self._lock:
            self.flows.append(batch)

    def _flush_flows(self) -> None:
        rows = self._pending_flows
        if not rows:
            return
        self._pending_flows = []
        fid, ts, pid, tid, cat, st = zip(*rows)
        n = len(rows)
        self.flows.append(FlowBatch(flow_id=np.array(fid, np.int64), ts=np.array(ts, np.int64),
                                    pid=_row_column(list(pid), n), tid=_row_column(list(tid), n),
                                    cat=np.array(cat, np.int32), is_start=np.array(st, bool)))

    # ------------------------------------------------------------------ rows and metadata
    def set_process_name(self, pid, name: str, *, label: str | None = None, sort_index: int | None = None) -> None:
        with self._lock:
            self.process_names[pid] = json_safe(name)
            if label is not None:
                self.process_labels[pid] = json_safe(label)
            if sort_index is not None:
                self.process_sort[pid] = int(sort_index)

    def set_thread_name(self, pid, tid, name: str, *, sort_index: int | None = None) -> None:
        with self._lock:
            self.thread_names[(pid, tid)] = json_safe(name)
            if sort_index is not None:
                self.thread_sort[(pid, tid)] = int(sort_index)

    def add_device_properties(self, props: Mapping[str, Any]) -> None:
        with self._lock:
            d = dict(props)
            if d not in self.device_properties:
                self.device_properties.append(d)

    def set_metadata(self, key: str, value: Any) -> None:
        with self._lock:
            self.metadata[json_safe(key)] = value

    def set_distributed_info(self, info: Mapping[str, Any]) -> None:
        with self._lock:
            self.distributed_info = dict(info)

    def add_span(self, name: str, start_ns: int, end_ns: int, *, op_count: int = 0, iteration: int = 0,
                 prefix: str = "") -> None:
        with self._lock:
            self.spans.append(Span(json_safe(name), int(start_ns), int(end_ns), int(op_count), int(iteration),
                                   json_safe(prefix)))

    def drop(self, source: str, reason: str, count: int = 1, *, kind: str = "") -> None:
        """Records of ``source`` lost or discarded for ``reason`` (``dropped.py``)."""
        with self._lock:
            self.dropped.add(drop_label(source, reason, kind), reason, count)

    def count_dropped(self, label: str, n: int = 1) -> None:
        """Records lost, under a label with no structured reason (reported as unexpected)."""
        with self._lock:
            self.dropped.add(label, label, n)

    def warn(self, message: str) -> None:
        with self._lock:
            self.warnings.append(json_safe(message))

    def set_window(self, start_ns: int, end_ns: int) -> None:
        self.window_start_ns, self.window_end_ns = int(start_ns), int(end_ns)

    # ------------------------------------------------------------------ reading
    def flush(self) -> None:
        """Turn pending scalar rows into batches (writers and readers call this first)."""
        with self._lock:
            self._flush_slices()
            self._flush_instants()
            self._flush_counters()
            self._flush_flows()

    def event_count(self) -> int:
        self.flush()
        return (sum(len(b) for b in self.slices) + sum(len(b) for b in self.instants)
                + sum(len(b) for b in self.counters) + sum(len(b) for b in self.flows))

    def freeze(self, *, vendor_categories: bool = True):
        """The trace so far as a ``TraceTable`` (``xpuprof.trace.table``): its batches become the table's
        segments as they are (no column is copied); rows added afterwards are not in it. The writers and
        the analyses read the table; ``vendor_categories`` picks the category spelling its rows carry
        (the writer's option of that name)."""
        from ..table.builder_view import builder_table

        with self._lock:
            self.flush()
            return builder_table(self, vendor_categories=vendor_categories)

    def nbytes(self) -> int:
        """Bytes held by the columns (for the memory-per-event benchmark); shared constants count once."""
        self.flush()
        return sum(batch_nbytes(b) for group in (self.slices, self.instants, self.counters, self.flows) for b in group)
