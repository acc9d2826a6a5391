"""The trace-builder side of the C plugin ABI: the callbacks one ``process_events`` call hands a
plugin (``XpuprofTraceBuilderApi``), each validating what the plugin passes and writing it into the
``TraceBuilder``. A malformed item is dropped, counted and its first reason kept; an exception never
unwinds into C.
"""
from __future__ import annotations

import ctypes
import math
from ctypes import c_size_t, c_void_p

import numpy as np
import orjson

from ..activity import ActivityType
from ..backends.base import ProcessWindow
from ..trace.builder.columns import ArgColumn
from .c_structs import (ABI_VERSION, ACTIVITY_CODES, ADD_FN, ADD_MANY_FN, FLOW_CATEGORIES, MAX_BULK, MAX_COUNTER_VALUES,
                        RESERVED_METADATA_KEYS, SET_METADATA_FN, Malformed, XpuprofCounter, XpuprofDeviceRow, XpuprofFlow,
                        XpuprofResourceRow, XpuprofSlice, XpuprofTraceBuilderApi, checked_activity, checked_text,
                        checked_timestamp, read_struct, slice_dtype)

class BuilderBridge:
    """The callbacks of one ``process_events`` call, writing into one TraceBuilder."""

    def __init__(self, builder, window: ProcessWindow, vendor: str, enabled: frozenset[ActivityType],
                 plugin_name: str = "", codes: dict | None = None) -> None:
        self.codes = codes or ACTIVITY_CODES  # the plugin's codes: built-in ones plus its declared types
        self.builder = builder
        self.plugin_name = plugin_name
        self.vendor = vendor
        self.enabled = enabled
        self.malformed = 0
        self.first_reason = ""
        self.accepted = 0
        self._token = c_void_p(id(self))
        self._callbacks = {
            "add_slice": ADD_FN(self._guard(self._add_slice)),
            "add_counter": ADD_FN(self._guard(self._add_counter)),
            "add_flow": ADD_FN(self._guard(self._add_flow)),
            "add_device_row": ADD_FN(self._guard(self._add_device_row)),
            "add_resource_row": ADD_FN(self._guard(self._add_resource_row)),
            "set_metadata": SET_METADATA_FN(self._guard(self._set_metadata)),
            "add_slices": ADD_MANY_FN(self._guard(self._add_slices)),
        }
        self.api = XpuprofTraceBuilderApi(ctypes.sizeof(XpuprofTraceBuilderApi), self._token,
                                          int(window.start_ns), int(window.end_ns), **self._callbacks)

    def _guard(self, fn):
        # An exception must never unwind into C: every failure becomes a -1 and a count.
        hold = getattr(self.builder, "hold", None)  # a BuilderGate: nothing is written once it closed

        def call(handle, *args):
            try:
                if handle != self._token.value:
                    raise Malformed("the builder handle is not the one passed to process_events")
                if hold is None:
                    rc = fn(*args)
                else:
                    with hold():
                        rc = fn(*args)
            except Exception as exc:
                self._bad(1, f"{fn.__name__.lstrip('_')}: {exc}")
                return -1
            self.accepted += 1
            return rc or 0
        return call

    def _bad(self, n: int, reason: str) -> None:
        self.malformed += int(n)
        if not self.first_reason:
            self.first_reason = reason

    def _args(self, raw: bytes | None) -> dict | None:
        if raw is None:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise Malformed(f"args_json is not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise Malformed(f"args_json must be a JSON object, got {type(value).__name__}")
        return value

    def _add_slice(self, addr):
        s = read_struct(addr, XpuprofSlice, "XpuprofSlice")
        at = checked_activity(s.activity_type, "XpuprofSlice", self.codes)
        name = checked_text(s.name, "XpuprofSlice.name", strings=self.builder.strings)
        start = checked_timestamp(s.start_ns, "XpuprofSlice.start_ns")
        if s.end_ns < start:
            raise Malformed(f"XpuprofSlice.end_ns {s.end_ns} is before start_ns {start}")
        args = self._args(s.args_json)
        if at not in self.enabled:
            self.builder.count_dropped(f"plugin {self.plugin_name}: {at.value} not enabled")
            return
        self.builder.add_slice(name, start, s.end_ns - start, s.device_id, s.resource_id, cat=at, args=args,
                               external_id=s.external_id, vendor=self.vendor)

    def _add_slices(self, addr, count):
        """Bulk slices: validated and decoded as numpy columns, one builder batch per activity type."""
        if count == 0:
            return 0
        if not addr or count > MAX_BULK:
            self._bad(count, "add_slices: the slices pointer is NULL" if not addr else
                      f"add_slices: count {count} exceeds {MAX_BULK} slices per call")
            return -1
        stride = c_size_t.from_address(addr).value
        if stride < ctypes.sizeof(XpuprofSlice):
            self._bad(count, f"add_slices: slices[0].struct_size is {stride}, smaller than the ABI v{ABI_VERSION} "
                             f"size {ctypes.sizeof(XpuprofSlice)}")
            return -1
        # Copy out of the plugin's memory at once: it owns (and later frees) the array.
        raw = np.frombuffer(ctypes.string_at(addr, stride * count), dtype=slice_dtype(stride))
        types = raw["activity_type"]
        start, end = raw["start_ns"], raw["end_ns"]
        checks = [
            (raw["struct_size"] != stride, "struct_size differs from slices[0].struct_size"),
            (~np.isin(types, np.fromiter(self.codes, np.int32)), "activity_type is not an XpuprofActivityType"),
            (start <= 0, "start_ns is not epoch nanoseconds > 0"),
            (end < start, "end_ns is before start_ns"),
            (raw["name"] == 0, "name is NULL"),
        ]
        ok = np.ones(count, dtype=bool)
        for bad, reason in checks:
            bad &= ok
            if bad.any():
                self._bad(int(bad.sum()), f"add_slices: slices[{int(np.argmax(bad))}].{reason}")
                ok &= ~bad
        # Names: plugins pass few distinct pointers (string literals), so decode each pointer once.
        ptrs, inverse = np.unique(raw["name"], return_inverse=True)
        ids = np.zeros(len(ptrs), dtype=np.int32)
        for i, ptr in enumerate(ptrs.tolist()):
            if not ptr:
                continue
            ids[i] = self.builder.strings.intern(ctypes.string_at(ptr))  # invalid UTF-8: replaced and counted
        name_ids = ids[inverse]
        args: list = [None] * count
        for i in np.flatnonzero(ok & (raw["args_json"] != 0)).tolist():
            try:
                args[i] = self._args(ctypes.string_at(int(raw["args_json"][i])))
            except Malformed as exc:
                self._bad(1, f"add_slices: slices[{i}].{exc}")
                ok[i] = False
        for code in np.unique(types[ok]).tolist():
            at = self.codes[code]
            rows = np.flatnonzero(ok & (types == code))
            if at not in self.enabled:
                self.builder.count_dropped(f"plugin {self.plugin_name}: {at.value} not enabled", len(rows))
                continue
            self.builder.add_slices(names=None, name_ids=name_ids[rows], ts=start[rows], dur=end[rows] - start[rows],
                                    pid=raw["device_id"][rows], tid=raw["resource_id"][rows], cat=at,
                                    external_id=raw["external_id"][rows], args=_arg_columns([args[i] for i in rows]),
                                    vendor=self.vendor)
        return 0 if ok.all() else -1

    def _add_counter(self, addr):
        c = read_struct(addr, XpuprofCounter, "XpuprofCounter")
        at = checked_activity(c.activity_type, "XpuprofCounter", self.codes)
        name = checked_text(c.name, "XpuprofCounter.name", strings=self.builder.strings)
        ts = checked_timestamp(c.ts_ns, "XpuprofCounter.ts_ns")
        n = c.num_values
        if not 1 <= n <= MAX_COUNTER_VALUES:
            raise Malformed(f"XpuprofCounter.num_values is {n}, expected 1..{MAX_COUNTER_VALUES}")
        if not c.metric_names or not c.values:
            raise Malformed("XpuprofCounter.metric_names or .values is NULL")
        values = {}
        for i in range(n):
            metric = checked_text(c.metric_names[i], f"XpuprofCounter.metric_names[{i}]", strings=self.builder.strings)
            v = float(c.values[i])
            if not math.isfinite(v):
                raise Malformed(f"XpuprofCounter.values[{i}] ({metric}) is {v}, not a finite number")
            values[metric] = v
        if at not in self.enabled:
            self.builder.count_dropped(f"plugin {self.plugin_name}: {at.value} not enabled")
            return
        self.builder.add_counter(name, ts, values, c.device_id, c.resource_id, cat=at, vendor=self.vendor)

    def _add_flow(self, addr):
        f = read_struct(addr, XpuprofFlow, "XpuprofFlow")
        cat = FLOW_CATEGORIES.get(f.flow_type)
        if cat is None:
            raise Malformed(f"XpuprofFlow.flow_type {f.flow_type} is not XPUPROF_FLOW_FWD_BWD (1) or "
                            f"XPUPROF_FLOW_ASYNC_CPU_GPU (2)")
        ts = checked_timestamp(f.ts_ns, "XpuprofFlow.ts_ns")
        if f.flow_id >= 1 << 63:
            raise Malformed(f"XpuprofFlow.flow_id {f.flow_id} does not fit in int64")
        self.builder.add_flow(f.flow_id, ts, f.device_id, f.resource_id, start=bool(f.is_start), cat=cat)

    def _add_device_row(self, addr):
        r = read_struct(addr, XpuprofDeviceRow, "XpuprofDeviceRow")
        name = checked_text(r.name, "XpuprofDeviceRow.name", strings=self.builder.strings)
        label = checked_text(r.label, "XpuprofDeviceRow.label", required=False, strings=self.builder.strings)
        self.builder.set_process_name(r.device_id, name, label=label, sort_index=r.sort_index)

    def _add_resource_row(self, addr):
        r = read_struct(addr, XpuprofResourceRow, "XpuprofResourceRow")
        name = checked_text(r.name, "XpuprofResourceRow.name", strings=self.builder.strings)
        self.builder.set_thread_name(r.device_id, r.resource_id, name, sort_index=r.sort_index)

    def _set_metadata(self, key_raw, value_raw):
        key = checked_text(key_raw, "set_metadata key", strings=self.builder.strings)
        if not key or key in RESERVED_METADATA_KEYS:
            raise Malformed(f"set_metadata key {key!r} is empty or reserved ({', '.join(sorted(RESERVED_METADATA_KEYS))})")
        if value_raw is None:
            raise Malformed(f"set_metadata value for {key!r} is NULL")
        try:
            value = orjson.loads(value_raw)
        except orjson.JSONDecodeError as exc:
            raise Malformed(f"set_metadata value for {key!r} is not valid JSON ({exc})") from None
        self.builder.set_metadata(key, value)


def _arg_columns(rows: list) -> dict[str, ArgColumn]:
    """Per-row arg dicts (or None) as masked columns."""
    keys: dict[str, None] = {}
    for r in rows:
        if r:
            keys.update(dict.fromkeys(r))
    out = {}
    for k in keys:
        present = np.fromiter((r is not None and k in r for r in rows), dtype=bool, count=len(rows))
        out[k] = ArgColumn("obj", [r.get(k) if r else None for r in rows], present)
    return out
