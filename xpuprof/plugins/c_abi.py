"""Loading and running C plugins (the ABI of ``xpuprof/include/xpuprof_plugin.h``; its structs in
``c_structs``, the callbacks that write into the trace in ``c_builder``).

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
import os
import threading
import weakref
from ctypes import c_int, c_int32, c_size_t, c_void_p
from pathlib import Path

from ..activity import ActivityType
from ..backends.base import Backend, BackendError, ProbeResult, ProcessWindow, Session
from ..trace.builder.columns import encode_json
from . import faults
from .c_builder import BuilderBridge
from .c_structs import (ABI_VERSION, ACTIVITY_CODES, DECLARED_TYPE_BASE, DECLINE, MAX_DECLARED_TYPES, MAX_TYPES,
                        MESSAGE_BUFFER, NAME_BUFFER, OK, REGISTER_SYMBOL, REQUIRED_FUNCTIONS, REQUIRED_TABLE_SIZE,
                        TABLE_SLACK, PluginCallError, PluginLoadError, XpuprofPluginInterface, field_present)
from .isolation import destroy_c_handle

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
        if not field_present(self.table, "last_error"):
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
    buffer = ctypes.create_string_buffer(host_size + TABLE_SLACK)
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
    missing = [f for f in REQUIRED_FUNCTIONS if not getattr(table, f)]
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
        if not field_present(plugin.table, "probe"):
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


class CPluginSession(Session):
    def __init__(self, plugin: CPlugin, handle: int, enabled: frozenset[ActivityType], vendor: str) -> None:
        self.plugin = plugin
        self.handle = handle
        self.enabled = enabled
        self.vendor = vendor
        self._state: dict = {}
        self._errors: list[str] = []
        # destroy exactly once: after process, or when the session is dropped unprocessed.
        self._finalizer = weakref.finalize(self, destroy_c_handle, plugin, handle, self._state)

    def _call(self, fn_name: str, *args) -> None:
        with self.plugin.lock:
            self.plugin.call(fn_name, self.handle, *args, handle=self.handle)

    def start(self) -> None:
        self._call("start")

    def stop(self) -> None:
        self._call("stop")

    def process(self, builder, window: ProcessWindow) -> None:
        bridge = BuilderBridge(builder, window, self.vendor, self.enabled, self.plugin.name, self.plugin.codes)
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
