"""ctypes binding of the C plugin ABI (``xpuprof/include/xpuprof_plugin.h``).

``load_c_plugin(path, origin)`` dlopens a shared library, calls its ``xpuprof_plugin_register``
to fill the versioned function table, queries its name and activity types and registers a
``CPluginBackend`` subclass for it. Its sessions hand the plugin an ``XpuprofTraceBuilderApi``
whose callbacks validate every item and write it into the ``TraceBuilder``; malformed items are
dropped, counted and reported once. Plugin errors (negative return codes) raise
``PluginCallError``; the isolation wrapper the registry adds turns those into faults.

Memory: strings the plugin passes are copied during the callback; buffers handed to the plugin
belong to xpuprof (ctypes string buffers); the plugin's handle is released only by its destroy.
"""
from __future__ import annotations

import ctypes
import math
import os
import threading
import weakref
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_uint32,
                    c_uint64, c_void_p)
from pathlib import Path

import numpy as np
import orjson

from ..activity import ActivityType
from ..backends.base import Backend, BackendError, ProbeResult, ProcessWindow, Session
from ..trace.build.columns import ArgColumn, encode_json
from . import faults

ABI_VERSION = 1
REGISTER_SYMBOL = "xpuprof_plugin_register"
OK, DECLINE = 0, 1
NAME_BUFFER = 256
MAX_TYPES = 64
MESSAGE_BUFFER = 1024
MAX_COUNTER_VALUES = 4096
# Keys the writer owns; a plugin may not set them as metadata.
RESERVED_METADATA_KEYS = frozenset({"schemaVersion", "deviceProperties", "traceEvents", "displayTimeUnit",
                                    "baseTimeNanoseconds", "traceName", "distributedInfo", "dropped_records"})

# XpuprofActivityType codes, fixed forever (the header's enum; tests compare the two).
ACTIVITY_CODES: dict[int, ActivityType] = {
    1: ActivityType.CPU_OP,
    2: ActivityType.USER_ANNOTATION,
    3: ActivityType.GPU_USER_ANNOTATION,
    4: ActivityType.GPU_MEMCPY,
    5: ActivityType.GPU_MEMSET,
    6: ActivityType.CONCURRENT_KERNEL,
    7: ActivityType.EXTERNAL_CORRELATION,
    8: ActivityType.RUNTIME,
    9: ActivityType.DRIVER,
    10: ActivityType.CPU_INSTANT_EVENT,
    11: ActivityType.PYTHON_FUNCTION,
    12: ActivityType.OVERHEAD,
    13: ActivityType.COLLECTIVE_COMM,
    14: ActivityType.GPU_PM_COUNTER,
    15: ActivityType.MTIA_INSIGHT,
    16: ActivityType.CUDA_SYNC,
    17: ActivityType.CUDA_EVENT,
    18: ActivityType.CUDA_PROFILER_RANGE,
    19: ActivityType.XPU_SCOPE_PROFILER,
    20: ActivityType.XPU_SYNC,
    21: ActivityType.HARDWARE_COUNTERS,
}
ACTIVITY_TO_CODE = {t: c for c, t in ACTIVITY_CODES.items()}
FLOW_CATEGORIES = {1: "fwdbwd", 2: "ac2g"}


class PluginLoadError(BackendError):
    """A shared library that is not a usable xpuprof plugin (the message says why)."""


class PluginCallError(BackendError):
    """A plugin function returned an error code."""


# ----------------------------------------------------------------------------- ABI structs
class XpuprofSlice(Structure):
    _fields_ = [("struct_size", c_size_t), ("activity_type", c_int32), ("reserved", c_int32),
                ("start_ns", c_int64), ("end_ns", c_int64), ("device_id", c_int64), ("resource_id", c_int64),
                ("external_id", c_int64), ("name", c_char_p), ("args_json", c_char_p)]


class XpuprofCounter(Structure):
    _fields_ = [("struct_size", c_size_t), ("activity_type", c_int32), ("reserved", c_int32), ("ts_ns", c_int64),
                ("device_id", c_int64), ("resource_id", c_int64), ("name", c_char_p), ("num_values", c_size_t),
                ("metric_names", POINTER(c_char_p)), ("values", POINTER(c_double))]


class XpuprofFlow(Structure):
    _fields_ = [("struct_size", c_size_t), ("flow_id", c_uint64), ("ts_ns", c_int64), ("device_id", c_int64),
                ("resource_id", c_int64), ("flow_type", c_int32), ("is_start", c_int32)]


class XpuprofDeviceRow(Structure):
    _fields_ = [("struct_size", c_size_t), ("device_id", c_int64), ("sort_index", c_int64), ("name", c_char_p),
                ("label", c_char_p)]


class XpuprofResourceRow(Structure):
    _fields_ = [("struct_size", c_size_t), ("device_id", c_int64), ("resource_id", c_int64),
                ("sort_index", c_int64), ("name", c_char_p)]


ADD_FN = CFUNCTYPE(c_int, c_void_p, c_void_p)
ADD_MANY_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
SET_METADATA_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p)
MAX_BULK = 1 << 26


def _slice_dtype(itemsize: int) -> np.dtype:
    """XpuprofSlice as a numpy record (the bulk path decodes a plugin's array without a loop)."""
    formats = {"struct_size": np.uintp, "activity_type": np.int32, "reserved": np.int32, "start_ns": np.int64,
               "end_ns": np.int64, "device_id": np.int64, "resource_id": np.int64, "external_id": np.int64,
               "name": np.uintp, "args_json": np.uintp}
    return np.dtype({"names": list(formats), "formats": list(formats.values()),
                     "offsets": [getattr(XpuprofSlice, f).offset for f in formats], "itemsize": itemsize})


class XpuprofTraceBuilderApi(Structure):
    _fields_ = [("struct_size", c_size_t), ("builder", c_void_p), ("window_start_ns", c_int64),
                ("window_end_ns", c_int64), ("add_slice", ADD_FN), ("add_counter", ADD_FN), ("add_flow", ADD_FN),
                ("add_device_row", ADD_FN), ("add_resource_row", ADD_FN), ("set_metadata", SET_METADATA_FN),
                ("add_slices", ADD_MANY_FN)]


QUERY_FN = CFUNCTYPE(c_int, c_char_p, c_size_t, POINTER(c_int32), c_size_t, POINTER(c_size_t))
CREATE_FN = CFUNCTYPE(c_int, POINTER(c_int32), c_size_t, c_char_p, POINTER(c_void_p))
HANDLE_FN = CFUNCTYPE(c_int, c_void_p)
PROCESS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(XpuprofTraceBuilderApi))
PROBE_FN = CFUNCTYPE(c_int, c_char_p, c_size_t)
LAST_ERROR_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_size_t)


class XpuprofPluginInterface(Structure):
    _fields_ = [("struct_size", c_size_t), ("abi_version", c_uint32), ("reserved", c_uint32),
                ("query", QUERY_FN), ("create", CREATE_FN), ("destroy", HANDLE_FN), ("start", HANDLE_FN),
                ("stop", HANDLE_FN), ("process_events", PROCESS_FN), ("probe", PROBE_FN),
                ("last_error", LAST_ERROR_FN),
                # appended (ABI 1, minor 1): activity types the plugin declares
                ("declared_activity_types", ctypes.POINTER(ctypes.c_char_p)),
                ("num_declared_activity_types", c_size_t)]

# A plugin names its i-th declared activity type XPUPROF_DECLARED_TYPE(i) in query(), events
# and the enabled list create() receives (the header's macro).
DECLARED_TYPE_BASE = 0x40000000
MAX_DECLARED_TYPES = 256


# The smallest table a v1 plugin may fill: everything up to process_events is required.
REQUIRED_TABLE_SIZE = XpuprofPluginInterface.process_events.offset + ctypes.sizeof(PROCESS_FN)
_REQUIRED = ("query", "create", "destroy", "start", "stop", "process_events")
# Room behind the table so a plugin that ignores struct_size and writes a bigger table cannot
# corrupt memory; it is then refused.
_TABLE_SLACK = 4096


def _field_present(table: XpuprofPluginInterface, name: str) -> bool:
    f = getattr(XpuprofPluginInterface, name)
    return table.struct_size >= f.offset + f.size and bool(getattr(table, name))


class Malformed(ValueError):
    pass


def _read_struct(addr: int | None, struct_type, what: str):
    """Copy a plugin struct honouring its struct_size (fields past it read as zero)."""
    if not addr:
        raise Malformed(f"{what} pointer is NULL")
    size = c_size_t.from_address(addr).value
    full = ctypes.sizeof(struct_type)
    if size < full:  # every v1 field is required; later versions only append
        raise Malformed(f"{what}.struct_size is {size}, smaller than the ABI v{ABI_VERSION} size {full}")
    out = struct_type()
    ctypes.memmove(ctypes.addressof(out), addr, full)
    return out


def _text(raw: bytes | None, what: str, *, required: bool = True, strings=None) -> str | None:
    """A string the plugin passed. Invalid UTF-8 is replaced with U+FFFD (never a lost event) and counted
    in ``strings.invalid_utf8`` (written as invalid_utf8_names), as Python names are."""
    if raw is None:
        if required:
            raise Malformed(f"{what} is NULL")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if strings is not None:
            strings.invalid_utf8 += 1
        return raw.decode("utf-8", "replace")


def _activity(code: int, what: str, codes: dict | None = None) -> ActivityType:
    at = (codes or ACTIVITY_CODES).get(code)
    if at is None:
        raise Malformed(f"{what}.activity_type {code} is not an XpuprofActivityType (1..{max(ACTIVITY_CODES)}) "
                        f"nor a type the plugin declared")
    return at


def _timestamp(ns: int, what: str) -> int:
    if ns <= 0:
        raise Malformed(f"{what} is {ns}; timestamps are epoch nanoseconds > 0")
    return ns


# ----------------------------------------------------------------------------- trace builder side
class _BuilderBridge:
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
        s = _read_struct(addr, XpuprofSlice, "XpuprofSlice")
        at = _activity(s.activity_type, "XpuprofSlice", self.codes)
        name = _text(s.name, "XpuprofSlice.name", strings=self.builder.strings)
        start = _timestamp(s.start_ns, "XpuprofSlice.start_ns")
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
        raw = np.frombuffer(ctypes.string_at(addr, stride * count), dtype=_slice_dtype(stride))
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
        c = _read_struct(addr, XpuprofCounter, "XpuprofCounter")
        at = _activity(c.activity_type, "XpuprofCounter", self.codes)
        name = _text(c.name, "XpuprofCounter.name", strings=self.builder.strings)
        ts = _timestamp(c.ts_ns, "XpuprofCounter.ts_ns")
        n = c.num_values
        if not 1 <= n <= MAX_COUNTER_VALUES:
            raise Malformed(f"XpuprofCounter.num_values is {n}, expected 1..{MAX_COUNTER_VALUES}")
        if not c.metric_names or not c.values:
            raise Malformed("XpuprofCounter.metric_names or .values is NULL")
        values = {}
        for i in range(n):
            metric = _text(c.metric_names[i], f"XpuprofCounter.metric_names[{i}]", strings=self.builder.strings)
            v = float(c.values[i])
            if not math.isfinite(v):
                raise Malformed(f"XpuprofCounter.values[{i}] ({metric}) is {v}, not a finite number")
            values[metric] = v
        if at not in self.enabled:
            self.builder.count_dropped(f"plugin {self.plugin_name}: {at.value} not enabled")
            return
        self.builder.add_counter(name, ts, values, c.device_id, c.resource_id, cat=at, vendor=self.vendor)

    def _add_flow(self, addr):
        f = _read_struct(addr, XpuprofFlow, "XpuprofFlow")
        cat = FLOW_CATEGORIES.get(f.flow_type)
        if cat is None:
            raise Malformed(f"XpuprofFlow.flow_type {f.flow_type} is not XPUPROF_FLOW_FWD_BWD (1) or "
                            f"XPUPROF_FLOW_ASYNC_CPU_GPU (2)")
        ts = _timestamp(f.ts_ns, "XpuprofFlow.ts_ns")
        if f.flow_id >= 1 << 63:
            raise Malformed(f"XpuprofFlow.flow_id {f.flow_id} does not fit in int64")
        self.builder.add_flow(f.flow_id, ts, f.device_id, f.resource_id, start=bool(f.is_start), cat=cat)

    def _add_device_row(self, addr):
        r = _read_struct(addr, XpuprofDeviceRow, "XpuprofDeviceRow")
        name = _text(r.name, "XpuprofDeviceRow.name", strings=self.builder.strings)
        label = _text(r.label, "XpuprofDeviceRow.label", required=False, strings=self.builder.strings)
        self.builder.set_process_name(r.device_id, name, label=label, sort_index=r.sort_index)

    def _add_resource_row(self, addr):
        r = _read_struct(addr, XpuprofResourceRow, "XpuprofResourceRow")
        name = _text(r.name, "XpuprofResourceRow.name", strings=self.builder.strings)
        self.builder.set_thread_name(r.device_id, r.resource_id, name, sort_index=r.sort_index)

    def _set_metadata(self, key_raw, value_raw):
        key = _text(key_raw, "set_metadata key", strings=self.builder.strings)
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


# ----------------------------------------------------------------------------- plugin side
class CPlugin:
    """A loaded library and its filled function table."""

    def __init__(self, path: Path, lib: ctypes.CDLL, table: XpuprofPluginInterface, table_buffer,
                 origin: str = "") -> None:
        self.path = path
        self.lib = lib  # kept for the life of the process: its code must never be unmapped
        self.table = table
        self._table_buffer = table_buffer
        self.lock = threading.Lock()
        self.codes: dict = dict(ACTIVITY_CODES)
        self.origin = origin or f"C plugin {path}"
        self._declare()
        self.to_code = {t: c for c, t in self.codes.items()}
        self.name, self.supported = self._query()

    def _declare(self) -> None:
        """The activity types the plugin declares (appended table fields; absent in older plugins)."""
        f = XpuprofPluginInterface.num_declared_activity_types
        if self.table.struct_size < f.offset + f.size or not self.table.num_declared_activity_types:
            return
        n = int(self.table.num_declared_activity_types)
        if n > MAX_DECLARED_TYPES or not self.table.declared_activity_types:
            raise PluginLoadError(f"num_declared_activity_types is {n}: at most {MAX_DECLARED_TYPES}, with a non-NULL "
                                  f"declared_activity_types array")
        names = []
        for i in range(n):
            raw = self.table.declared_activity_types[i]
            if not raw:
                raise PluginLoadError(f"declared_activity_types[{i}] is NULL")
            names.append(raw.decode("utf-8", "replace"))
        from . import activity_types

        try:
            declared = activity_types.declare(self.origin, names)
        except activity_types.ActivityTypeClash as exc:
            raise PluginLoadError(str(exc)) from None
        for i, t in enumerate(declared):
            self.codes[DECLARED_TYPE_BASE + i] = t

    def message(self, handle) -> str:
        if not _field_present(self.table, "last_error"):
            return "the plugin gives no error message (no last_error)"
        buf = ctypes.create_string_buffer(MESSAGE_BUFFER)
        try:
            self.table.last_error(handle, buf, MESSAGE_BUFFER)
        except Exception as exc:  # pragma: no cover - ctypes raises only on argument errors
            return f"last_error failed: {exc}"
        return buf.value.decode("utf-8", "replace") or "no message"

    def call(self, fn_name: str, *args, handle=None) -> int:
        rc = getattr(self.table, fn_name)(*args)
        if rc < 0:
            raise PluginCallError(f"{fn_name}() returned {rc}: {self.message(handle)}")
        return rc

    def _query(self) -> tuple[str, frozenset[ActivityType]]:
        name_buf = ctypes.create_string_buffer(NAME_BUFFER)
        types = (c_int32 * MAX_TYPES)()
        count = c_size_t(0)
        self.call("query", name_buf, NAME_BUFFER, types, MAX_TYPES, ctypes.byref(count))
        name = name_buf.value.decode("utf-8", "replace")
        if count.value > MAX_TYPES:
            raise PluginLoadError(f"query() reported {count.value} activity types, more than the {MAX_TYPES} it "
                                  f"was given room for")
        bad = [types[i] for i in range(count.value) if types[i] not in self.codes]
        if bad:
            raise PluginLoadError(f"query() returned unknown activity type code(s) {bad}")
        return name, frozenset(self.codes[types[i]] for i in range(count.value))


def load_c_plugin(path: Path, origin: str) -> str:
    """Load, check and register one C plugin; returns its backend name. Raises PluginLoadError."""
    from .registry import register_backend

    path = Path(path)
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        raise PluginLoadError(f"cannot load the shared library: {exc}") from None
    try:
        register = getattr(lib, REGISTER_SYMBOL)
    except AttributeError:
        raise PluginLoadError(f"missing symbol {REGISTER_SYMBOL!r}: the library does not export the xpuprof "
                              f"plugin entry point (see xpuprof/include/xpuprof_plugin.h)") from None
    register.restype = c_int
    register.argtypes = [c_void_p]
    host_size = ctypes.sizeof(XpuprofPluginInterface)
    buffer = ctypes.create_string_buffer(host_size + _TABLE_SLACK)
    table = XpuprofPluginInterface.from_buffer(buffer)
    table.struct_size = host_size
    rc = register(ctypes.addressof(table))
    if rc != 0:
        raise PluginLoadError(f"{REGISTER_SYMBOL}() returned {rc}")
    if table.abi_version != ABI_VERSION:
        raise PluginLoadError(f"plugin ABI version {table.abi_version} is not supported; this xpuprof implements "
                              f"XPUPROF_PLUGIN_ABI_VERSION {ABI_VERSION}")
    if table.struct_size > host_size:
        raise PluginLoadError(f"the plugin filled {table.struct_size} bytes of a {host_size}-byte table; it must fill "
                              f"at most table->struct_size bytes")
    if table.struct_size < REQUIRED_TABLE_SIZE:
        raise PluginLoadError(f"table struct_size {table.struct_size} is smaller than the {REQUIRED_TABLE_SIZE} bytes "
                              f"ABI v{ABI_VERSION} requires")
    missing = [f for f in _REQUIRED if not getattr(table, f)]
    if missing:
        raise PluginLoadError(f"the table lacks required function(s): {', '.join(missing)}")
    try:
        plugin = CPlugin(path, lib, table, buffer, origin)
    except BackendError as exc:
        raise PluginLoadError(str(exc)) from None
    cls = type(f"CPluginBackend_{plugin.name}", (CPluginBackend,), {
        "name": plugin.name, "description": f"C plugin {path}", "plugin": plugin, "__module__": __name__})
    try:
        register_backend(cls, origin=origin)
    except (TypeError, ValueError) as exc:
        raise PluginLoadError(str(exc)) from None
    return plugin.name


class CPluginBackend(Backend):
    """A backend served by a C plugin (one subclass per loaded library)."""

    vendor = "privateuse1"
    plugin: CPlugin

    @classmethod
    def probe(cls) -> ProbeResult:
        plugin = cls.plugin
        if not _field_present(plugin.table, "probe"):
            return ProbeResult.ok("C plugin (always available)", path=str(plugin.path))
        buf = ctypes.create_string_buffer(MESSAGE_BUFFER)
        rc = plugin.call("probe", buf, MESSAGE_BUFFER)
        reason = buf.value.decode("utf-8", "replace")
        if rc == 1:
            return ProbeResult.ok(reason or "available", path=str(plugin.path))
        return ProbeResult.unavailable(reason or "the plugin's probe said it cannot run here", path=str(plugin.path))

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return cls.plugin.supported

    def configure(self, activity_types, config) -> Session | None:
        plugin = self.plugin
        enabled = frozenset(activity_types) & plugin.supported
        if not enabled:
            return None
        codes = sorted(plugin.to_code[t] for t in enabled)
        arr = (c_int32 * len(codes))(*codes)
        cfg = encode_json(_config_json(config, enabled))
        handle = c_void_p()
        with plugin.lock:
            rc = plugin.call("create", arr, len(codes), cfg, ctypes.byref(handle))
        if rc == DECLINE:
            return None
        if rc != OK:
            raise PluginCallError(f"create() returned {rc}, expected 0 (OK) or 1 (DECLINE)")
        if not handle.value:
            raise PluginCallError("create() succeeded but returned a NULL handle")
        return CPluginSession(plugin, handle.value, enabled, self.vendor)


def _config_json(config, enabled) -> dict:
    if config is None:
        return {"activities": sorted(t.value for t in enabled)}
    return {
        "activities": sorted(t.value for t in enabled),
        "devices": getattr(config, "devices", None),
        "trace_id": getattr(config, "trace_id", ""),
        "custom": getattr(config, "custom", {}) or {},
    }


def _destroy(plugin: CPlugin, handle: int, state: dict) -> None:
    if state.get("destroyed"):
        return
    state["destroyed"] = True
    if faults.abandoned(plugin.origin):
        return  # a call of this plugin hung: it may still run on its handle, so the handle is leaked
    from ..deadline import deadline_or_default_s

    # Bounded: this also runs from the garbage collector and at exit, which must never hang on a plugin
    # (nor raise: a bad XPUPROF_PLUGIN_DEADLINE_S set meanwhile is reported where a run starts).
    if not plugin.lock.acquire(timeout=deadline_or_default_s()):
        faults.report(plugin.origin, "destroy", "not called: another call of the plugin still holds it")
        return
    try:
        rc = plugin.table.destroy(handle)
    finally:
        plugin.lock.release()
    if rc < 0:
        faults.report(f"C plugin {plugin.path}", "destroy", f"destroy() returned {rc}")


class CPluginSession(Session):
    def __init__(self, plugin: CPlugin, handle: int, enabled: frozenset[ActivityType], vendor: str) -> None:
        self.plugin = plugin
        self.handle = handle
        self.enabled = enabled
        self.vendor = vendor
        self._state: dict = {}
        self._errors: list[str] = []
        # destroy exactly once: after process, or when the session is dropped unprocessed.
        self._finalizer = weakref.finalize(self, _destroy, plugin, handle, self._state)

    def _call(self, fn_name: str, *args) -> None:
        with self.plugin.lock:
            self.plugin.call(fn_name, self.handle, *args, handle=self.handle)

    def start(self) -> None:
        self._call("start")

    def stop(self) -> None:
        self._call("stop")

    def process(self, builder, window: ProcessWindow) -> None:
        bridge = _BuilderBridge(builder, window, self.vendor, self.enabled, self.plugin.name, self.plugin.codes)
        try:
            self._call("process_events", ctypes.byref(bridge.api))
        finally:
            if bridge.malformed:
                origin = f"C plugin {self.plugin.path}"
                fault = faults.report(origin, "events", f"{bridge.malformed} malformed item(s) dropped; first: "
                                                        f"{bridge.first_reason}")
                self._errors.append(str(fault))
                builder.count_dropped(f"plugin {self.plugin.name}: malformed", bridge.malformed)
            self._finalizer()

    def close(self) -> None:
        """Destroy the plugin's handle now (idempotent; process() does it too)."""
        self._finalizer()

    def errors(self) -> list[str]:
        return list(self._errors)
