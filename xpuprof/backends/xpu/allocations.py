"""Device allocations of programs without torch: Level Zero's ``zeMemAllocDevice``/``Host``/``Shared`` and
``zeMemFree``/``zeMemFreeExt``, seen through the loader's tracing layer (``xpuprof._native.zemem``), written
as the ``[memory]`` events torch writes for its allocators (host/torch_memory.py has the format).

PTI 1.2's views carry no allocation sizes, so this is the tracing layer's job. What it sees: every call to
those entry points in the process (SYCL's and oneMKL's USM allocations, a program's own Level Zero calls),
from the tracer's start; a free of memory allocated before that is counted, not written. Device and shared
allocations are ``Device Type`` 12 (XPU) with the device's index among Level Zero GPUs; host allocations are
``Device Type`` 0 (CPU), ``Device Id`` -1. ``Total Allocated`` counts from the tracer's start per device;
``Total Reserved`` equals it for device memory (nothing is cached at this level) and is 0 for host memory,
as torch writes it for the CPU. When torch's profiler reports allocations in the same cycle (``profile_memory``
with torch in use), torch's events are the ones written and these are counted as not written.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...clock import MONOTONIC_TO_EPOCH_NS
from ...vendors import levelzero

FIELDS = ("t", "tid", "kind", "addr", "bytes", "device", "context")
KIND_DEVICE, KIND_HOST, KIND_SHARED = 0, 1, 2
XPU_DEVICE_TYPE, CPU_DEVICE_TYPE = 12, 0  # c10::DeviceType values torch writes in "Device Type"
MEMORY_ARGS = ("Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved")


class AllocationTracerError(RuntimeError):
    """The tracing layer cannot report allocations here; the message says why."""


def _native():
    from ... import _native as c_parts

    try:
        return c_parts.load("zemem", "the XPU allocation tracer (Level Zero's tracing callbacks are C)")
    except c_parts.NativeUnavailable as exc:
        raise AllocationTracerError(str(exc)) from None


def _uuid(lib: ctypes.CDLL, handle: int) -> bytes | None:
    p = levelzero.ze_device_properties_t(stype=levelzero.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
    if lib.zeDeviceGetProperties(ctypes.c_void_p(handle), ctypes.byref(p)) != 0:
        return None
    return bytes(p.uuid) + p.name


def device_indices(lib: ctypes.CDLL) -> dict[int, int]:
    """Level Zero device handle -> index among GPU devices (the trace's device id), in enumeration order."""
    out: dict[int, int] = {}
    for drv in levelzero.drivers(lib):
        count = ctypes.c_uint32(0)
        if lib.zeDeviceGet(ctypes.c_void_p(drv), ctypes.byref(count), None) != 0 or not count.value:
            continue
        devs = (ctypes.c_void_p * count.value)()
        lib.zeDeviceGet(ctypes.c_void_p(drv), ctypes.byref(count), devs)
        for dev in devs:
            p = levelzero.ze_device_properties_t(stype=levelzero.ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
            if lib.zeDeviceGetProperties(ctypes.c_void_p(dev), ctypes.byref(p)) == 0 and \
                    p.type == levelzero.ZE_DEVICE_TYPE_GPU:
                out[int(dev)] = len(out)
    return out


class LevelZeroAllocations:
    """One cycle of allocation tracing: ``start``, ``stop``, then ``write`` the [memory] events."""

    def __init__(self, loader_path: str | None = None) -> None:
        self.loader_path = loader_path or levelzero.find_loader()
        if not self.loader_path:
            raise AllocationTracerError("no Level Zero loader (libze_loader.so.1) to trace allocations through")
        self.records = np.zeros((0, len(FIELDS)), np.int64)
        self.stats: dict[str, int] = {}
        self._devices: dict[int, int] | None = None
        self._lib: ctypes.CDLL | None = None

    def start(self) -> None:
        zemem = _native()
        lib = levelzero.load_loader(str(self.loader_path))
        # Device handles enumerated with the tracing layer off and on differ (the layer hands out its own):
        # a program may have taken either, so both name the same device index.
        before = device_indices(lib)
        try:
            zemem.start(str(self.loader_path))
        except RuntimeError as exc:
            raise AllocationTracerError(f"Level Zero's tracing layer cannot report allocations: {exc}") from None
        self._devices = {**before, **device_indices(lib)}
        self._lib = lib

    def stop(self) -> None:
        zemem = _native()
        zemem.stop()
        data, self.stats = zemem.drain()
        self.records = np.frombuffer(data, np.int64).reshape(-1, len(FIELDS)).copy()

    def columns(self, window=None) -> dict[str, np.ndarray]:
        """The events (epoch ns) inside ``window`` with torch's args as int64 columns."""
        r = self.records
        ts = r[:, 0] + MONOTONIC_TO_EPOCH_NS
        keep = np.asarray(window.contains(ts), bool) if window is not None else np.ones(len(r), bool)
        r, ts = r[keep], ts[keep]
        host = r[:, 2] == KIND_HOST
        devices = self._device_map(np.unique(r[~host, 5]).tolist())
        dev_id = np.array([devices.get(int(d), -1) for d in r[:, 5].tolist()], np.int64) if len(r) else \
            np.zeros(0, np.int64)
        dev_type = np.where(host, CPU_DEVICE_TYPE, XPU_DEVICE_TYPE)
        dev_id = np.where(host, -1, dev_id)
        total = np.zeros(len(r), np.int64)
        for key in set(zip(dev_type.tolist(), dev_id.tolist())):
            rows = np.flatnonzero((dev_type == key[0]) & (dev_id == key[1]))
            total[rows] = np.cumsum(r[rows, 4])
        return {"ts": ts, "tid": r[:, 1], "Device Type": dev_type, "Device Id": dev_id, "Addr": r[:, 3],
                "Bytes": r[:, 4], "Total Allocated": total, "Total Reserved": np.where(host, 0, total)}

    def _device_map(self, handles: list[int]) -> dict[int, int]:
        """Handle -> device index for ``handles``. A handle the enumeration did not hand out (drivers that give a
        new handle per zeDeviceGet, as the null driver does) is matched by the device's UUID and name."""
        known = dict(self._devices or {})
        unknown = [h for h in handles if h not in known]
        if unknown and getattr(self, "_lib", None) is not None:
            by_identity: dict[bytes, set[int]] = {}
            for handle, index in known.items():
                ident = _uuid(self._lib, handle)
                if ident is not None:
                    by_identity.setdefault(ident, set()).add(index)
            for h in unknown:
                match = by_identity.get(_uuid(self._lib, h) or b"", set())
                if len(match) == 1:
                    known[h] = next(iter(match))
        return known

    def write(self, builder, window, *, host_reports_memory: bool = False) -> dict[str, Any]:
        """The [memory] instants (unless the host reports memory); returns the trace's metadata entry."""
        cols = self.columns(window)
        n = len(cols["ts"])
        info: dict[str, Any] = {"source": "Level Zero tracing layer", "events": n}
        if self.stats.get("unknown_frees"):
            info["frees_of_earlier_allocations"] = int(self.stats["unknown_frees"])
        if self.stats.get("dropped"):
            info["not_recorded_out_of_memory"] = int(self.stats["dropped"])
        if host_reports_memory:
            return {**info, "events": 0, "not_written": n,
                    "why": "torch's profiler reported this cycle's allocations (its [memory] events are written)"}
        if not n:
            return info
        keys = [f'"{k}":'.encode() for k in MEMORY_ARGS]
        values = np.stack([cols[k] for k in MEMORY_ARGS], axis=1).tolist()
        row_args = [b"{" + b",".join(k + str(v).encode() for k, v in zip(keys, row)) + b"}" for row in values]
        name = builder.strings.intern("[memory]")
        builder.add_instants(name_ids=np.full(n, name, np.int32), ts=cols["ts"], pid=builder.pid, tid=cols["tid"],
                             cat="cpu_instant_event", scope=np.full(n, ord("t"), np.uint8), row_args=row_args)
        return info
