"""PTI metrics scope (per-kernel hardware metrics): collection and decoding.

The ABI (structs, signatures, result hints) is ``vendors.pti_metrics``. ``MetricsScope``
runs the call sequence (enable → configure AUTO_KERNEL → size buffer → start/stop → metadata →
calculate per collection buffer → disable) and returns columns (kernel ids, queues, one
float64 array per metric); ``emit_scope_metrics`` writes them through the TraceBuilder.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ... import catalogs
from ...trace.builder.columns import ArgColumn
from ...vendors.pti_metrics import (METRICS_SCOPE_HINTS, MIN_COLLECTION_BUFFER, SCOPE_MODE_AUTO_KERNEL,
                                    SCOPE_RECORD_DTYPE, SCOPE_REQUIRED, SCOPE_SIGNATURES, VALUE_DTYPES,
                                    ZET_ENABLE_METRICS, MetricProperties, MetricsGroupProperties, PtiDeviceProperties,
                                    ScopeCollectionBufferProperties, ScopeRecordMetadata, bind_functions,
                                    missing_functions, sz, u32)
from ..base import BackendError


class MetricsScopeError(BackendError):
    """A metrics-scope step failed; the message names the PTI call, its result and what to do."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def bind_scope_functions(cdll: ctypes.CDLL) -> dict[str, object]:
    """Typed metrics-scope functions of a loaded PTI (or test double); raises naming missing symbols."""
    missing = missing_functions(cdll, SCOPE_REQUIRED)
    if missing:
        raise MetricsScopeError(f"{getattr(cdll, '_name', cdll)} lacks the PTI metrics-scope API "
                                f"({', '.join(missing)}); intel-pti >= 0.13 provides it")
    return bind_functions(cdll, SCOPE_SIGNATURES)


def ensure_metrics_env(environ=None, *, level_zero_loaded: bool | None = None) -> None:
    """Set ``ZET_ENABLE_METRICS=1`` for this process, or explain precisely why that is too late.

    Level Zero reads it once, in ``zeInit``. If the loader is already mapped into the process
    (torch.xpu/dpctl/PTI initialized it), setting it now has no effect on the driver.
    """
    env = os.environ if environ is None else environ
    if env.get(ZET_ENABLE_METRICS) == "1":
        return
    if level_zero_loaded is None:
        level_zero_loaded = _level_zero_mapped()
    if level_zero_loaded:
        raise MetricsScopeError(level_zero_too_early_message())
    env[ZET_ENABLE_METRICS] = "1"


def level_zero_too_early_message() -> str:
    """Why ZET_ENABLE_METRICS=1 comes too late here, naming who initialized Level Zero when xpuprof knows."""
    from ...vendors import levelzero
    from . import early_load

    head = ("per-kernel metrics need ZET_ENABLE_METRICS=1 before Level Zero initializes, and Level Zero reads it "
            "only then; but the Level Zero loader (libze_loader) is already loaded in this process: ")
    if levelzero.loaded_first_by_xpuprof():
        return (head + "xpuprof's own earlier XPU session in this process initialized it (listing the devices "
                "for PTI) without ZET_ENABLE_METRICS=1, so no later session of this process can collect per-kernel "
                "metrics. Start the process with ZET_ENABLE_METRICS=1 (e.g. `ZET_ENABLE_METRICS=1 python train.py`; "
                "`xpuprof run` does it when its config asks for metrics), or make the metrics session the first "
                "XPU session of the process (it sets the variable itself).")
    adapters = sorted(early_load.sycl_initialized(), key=lambda p: "level_zero" not in p)
    who = (f"the SYCL runtime initialized it ({adapters[0].rsplit('/', 1)[-1]} is loaded: torch.xpu, dpctl/dpnp "
           "or a SYCL queue started SYCL)" if adapters else
           "something outside xpuprof initialized it first (e.g. torch.xpu, dpctl or a SYCL queue)")
    return (head + who + ". Start the process with ZET_ENABLE_METRICS=1, e.g. `ZET_ENABLE_METRICS=1 python "
            "train.py`, or `xpuprof run`, which sets it before the workload starts when its config asks for metrics.")


def _level_zero_mapped() -> bool:
    from ...vendors.levelzero import loader_mapped

    return bool(loader_mapped())


@dataclass
class ScopeMetadata:
    names: list[str]
    units: list[str]
    value_types: list[int]

    def unit_map(self) -> dict[str, str]:
        return dict(zip(self.names, self.units))


@dataclass
class ScopeResults:
    """Decoded scope records: one row per kernel (columns), plus the metadata."""

    kernel_ids: np.ndarray
    queues: np.ndarray
    kernel_names: list[str]
    values: dict[str, np.ndarray]
    metadata: ScopeMetadata
    group: str = ""
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kernel_ids)


def decode_calculated_buffer(buf: ctypes.Array | bytes, base_address: int, nrecords: int,
                             metadata: ScopeMetadata) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, np.ndarray]]:
    """Decode ``nrecords`` scope records of a calculated-metrics buffer that lives at ``base_address``.

    Value arrays and kernel names are pointers into the same buffer: turned into offsets and
    gathered with numpy (no per-record ctypes objects).
    """
    raw = np.frombuffer(buf, dtype=np.uint8)
    recs = np.frombuffer(raw[: nrecords * SCOPE_RECORD_DTYPE.itemsize].tobytes(), dtype=SCOPE_RECORD_DTYPE)
    n = len(recs)
    nmetrics = len(metadata.names)
    values: dict[str, np.ndarray] = {}
    if n:
        offs = recs["values"].astype(np.int64) - int(base_address)
        if ((offs < 0) | (offs + 8 * nmetrics > len(raw))).any():
            raise MetricsScopeError("calculated metrics buffer holds a value pointer outside the buffer")
        idx = offs[:, None] + 8 * np.arange(nmetrics, dtype=np.int64)[None, :]
        slots = raw[idx[..., None] + np.arange(8)].reshape(n, nmetrics, 8)
        for k, (name, vt) in enumerate(zip(metadata.names, metadata.value_types)):
            dt = VALUE_DTYPES.get(int(vt))
            if dt is None:  # STRING values have no numeric meaning on a counter track
                continue
            col = np.ascontiguousarray(slots[:, k, : dt.itemsize]).view(dt).reshape(n)
            values[name] = col.astype(np.float64)
    names = []
    name_offs = recs["kernel_name"].astype(np.int64) - int(base_address)
    data = bytes(raw)
    for p, o in zip(recs["kernel_name"].tolist(), name_offs.tolist()):
        if p == 0 or o < 0 or o >= len(data):
            names.append("")
        else:
            end = data.find(b"\0", o)
            names.append(data[o: end if end >= 0 else len(data)].decode("utf-8", "replace"))
    return recs["kernel_id"].astype(np.uint64), recs["queue"].astype(np.uint64), names, values


class MetricsScope:
    """One metrics-scope collection on one device through ``fns`` (``bind_scope_functions``)."""

    def __init__(self, fns: dict, result_name=lambda code: f"PTI result {code}") -> None:
        self.fns = fns
        self.result_name = result_name
        self.handle = ctypes.c_void_p()
        self.enabled = False
        self.started = False

    def _call(self, func: str, *args) -> int:
        fn = self.fns.get(func)
        if fn is None:
            raise MetricsScopeError(f"{func} is not exported by the loaded PTI")
        code = int(fn(*args))
        return code

    def _check(self, func: str, code: int, context: str = "") -> None:
        if code != 0:
            hint = METRICS_SCOPE_HINTS.get(code, "")
            raise MetricsScopeError(f"{func} failed: {self.result_name(code)} ({code})"
                                    + (f" - {hint}" if hint else "") + (f" [{context}]" if context else ""), code)

    def devices(self) -> list[tuple[int, str]]:
        """(device handle, model name) per metrics-capable device."""
        n = u32(0)
        self._check("ptiMetricsGetDevices", self._call("ptiMetricsGetDevices", None, ctypes.byref(n)))
        arr = (PtiDeviceProperties * max(n.value, 1))()
        self._check("ptiMetricsGetDevices", self._call("ptiMetricsGetDevices", arr, ctypes.byref(n)))
        return [(int(arr[i]._handle or 0), (arr[i]._model_name or b"").decode("utf-8", "replace"))
                for i in range(n.value)]

    def device_groups(self, device_handle: int) -> dict[str, list[tuple[str, str]]]:
        """group name -> [(metric name, unit)] from the device (PTI metric groups/properties)."""
        n = u32(0)
        fn = "ptiMetricsGetMetricGroups"
        self._check(fn, self._call(fn, ctypes.c_void_p(device_handle), None, ctypes.byref(n)))
        groups = (MetricsGroupProperties * max(n.value, 1))()
        self._check(fn, self._call(fn, ctypes.c_void_p(device_handle), groups, ctypes.byref(n)))
        out: dict[str, list[tuple[str, str]]] = {}
        for i in range(n.value):
            g = groups[i]
            props = (MetricProperties * max(g._metric_count, 1))()
            self._check("ptiMetricsGetMetricsProperties",
                        self._call("ptiMetricsGetMetricsProperties", ctypes.c_void_p(g._handle), props))
            name = (g._name or b"").decode("utf-8", "replace")
            out.setdefault(name, []).extend(((props[j]._name or b"").decode(), (props[j]._units or b"").decode())
                                            for j in range(g._metric_count))
        return out

    def enable(self) -> None:
        self._check("ptiMetricsScopeEnable", self._call("ptiMetricsScopeEnable", ctypes.byref(self.handle)))
        self.enabled = True

    def configure(self, metric_names: Sequence[str], device_handles: Sequence[int] = (), *,
                  mode: int = SCOPE_MODE_AUTO_KERNEL) -> None:
        names = (ctypes.c_char_p * len(metric_names))(*[m.encode() for m in metric_names])
        devs = (ctypes.c_void_p * len(device_handles))(*device_handles) if device_handles else None
        self._check("ptiMetricsScopeConfigure",
                    self._call("ptiMetricsScopeConfigure", self.handle, mode, devs, len(device_handles), names,
                               len(metric_names)), f"metrics {', '.join(metric_names)}")

    def size_buffer(self, expected_scopes: int) -> int:
        size = sz(0)
        fn = "ptiMetricsScopeQueryCollectionBufferSize"
        self._check(fn, self._call(fn, self.handle, int(expected_scopes), ctypes.byref(size)))
        size_v = max(int(size.value), MIN_COLLECTION_BUFFER)
        self._check("ptiMetricsScopeSetCollectionBufferSize",
                    self._call("ptiMetricsScopeSetCollectionBufferSize", self.handle, size_v))
        return size_v

    def start(self) -> None:
        self._check("ptiMetricsScopeStartCollection", self._call("ptiMetricsScopeStartCollection", self.handle))
        self.started = True

    def stop(self) -> None:
        if self.started:
            self.started = False
            self._check("ptiMetricsScopeStopCollection", self._call("ptiMetricsScopeStopCollection", self.handle))

    def metadata(self) -> ScopeMetadata:
        md = ScopeRecordMetadata()
        md._struct_size = ctypes.sizeof(ScopeRecordMetadata)
        self._check("ptiMetricsScopeGetMetricsMetadata",
                    self._call("ptiMetricsScopeGetMetricsMetadata", self.handle, ctypes.byref(md)))
        n = int(md._metrics_count)
        return ScopeMetadata(names=[md._metric_names[i].decode("utf-8", "replace") for i in range(n)],
                             units=[(md._metric_units[i] or b"").decode("utf-8", "replace") for i in range(n)],
                             value_types=[int(md._value_types[i]) for i in range(n)])

    def collect(self) -> ScopeResults:
        """Read every collection buffer, calculate its metrics and decode them into columns."""
        meta = self.metadata()
        nbuf = sz(0)
        self._check("ptiMetricsScopeGetCollectionBuffersCount",
                    self._call("ptiMetricsScopeGetCollectionBuffersCount", self.handle, ctypes.byref(nbuf)))
        ids, queues, names, vals, warnings = [], [], [], {m: [] for m in meta.names}, []
        group = ""
        for i in range(nbuf.value):
            cbuf, cbsize = ctypes.c_void_p(), sz(0)
            self._check("ptiMetricsScopeGetCollectionBuffer",
                        self._call("ptiMetricsScopeGetCollectionBuffer", self.handle, i, ctypes.byref(cbuf),
                                   ctypes.byref(cbsize)))
            props = ScopeCollectionBufferProperties()
            props._struct_size = ctypes.sizeof(props)
            if self._call("ptiMetricsScopeGetCollectionBufferProperties", self.handle, cbuf, ctypes.byref(props)) == 0:
                group = group or (props._metric_group_name or b"").decode("utf-8", "replace")
            needed, nrec = sz(0), sz(0)
            code = self._call("ptiMetricsScopeQueryMetricsBufferSize", self.handle, cbuf, ctypes.byref(needed),
                              ctypes.byref(nrec))
            if code in (157, 158):  # partial / not finalized: what is there is still valid
                warnings.append(f"collection buffer {i}: {self.result_name(code)}")
            elif code != 0:
                self._check("ptiMetricsScopeQueryMetricsBufferSize", code)
            if needed.value == 0 or nrec.value == 0:
                continue
            mbuf = (ctypes.c_uint8 * needed.value)()
            code = self._call("ptiMetricsScopeCalculateMetrics", self.handle, cbuf, mbuf, needed.value,
                              ctypes.byref(nrec))
            if code in (157, 158):
                warnings.append(f"collection buffer {i}: {self.result_name(code)}")
            elif code != 0:
                self._check("ptiMetricsScopeCalculateMetrics", code)
            k, q, nm, v = decode_calculated_buffer(mbuf, ctypes.addressof(mbuf), int(nrec.value), meta)
            ids.append(k), queues.append(q), names.extend(nm)
            for m in meta.names:
                vals[m].append(v.get(m, np.full(len(k), np.nan)))
        cat = (lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt))
        return ScopeResults(kernel_ids=cat(ids, np.uint64), queues=cat(queues, np.uint64), kernel_names=names,
                            values={m: cat(p, np.float64) for m, p in vals.items()}, metadata=meta, group=group,
                            warnings=warnings)

    def disable(self) -> None:
        if self.enabled:
            self.enabled = False
            self._call("ptiMetricsScopeDisable", self.handle)


# ----------------------------------------------------------------------------- request checks
def check_scope_request(exp) -> list[str]:
    """Metric names (selectors stripped of units) after the mode checks every backend path shares."""
    if not exp.profiler_metrics:
        raise MetricsScopeError("xpu_scope_profiler was selected but no metrics were requested: set "
                                "ExperimentalConfig(profiler_metrics=[...]) or XPUPTI_PROFILER_METRICS=...")
    if not exp.profiler_measure_per_kernel:
        raise MetricsScopeError("user-controlled metric scopes are not implemented by Intel PTI "
                                "(PTI_METRICS_SCOPE_USER); XPUPTI_PROFILER_ENABLE_PER_KERNEL / "
                                "profiler_measure_per_kernel has to be set to 1 (true)")
    return [catalogs.parse_selector(m)[0] for m in exp.profiler_metrics]


def validate_offline(names: list[str], device_name: str = "") -> str:
    """Validate with the catalog of ``device_name`` (or, without one, every xpu catalog): the group."""
    if device_name:
        try:
            cat = catalogs.find_catalog(device_name, vendor="xpu")
        except catalogs.CatalogError:
            cat = None
        if cat is not None:
            group, _ = catalogs.validate_against_catalog(names, cat)
            return group or ""
    errors = []
    for cat in catalogs.load_catalogs("xpu"):
        try:
            group, _ = catalogs.validate_against_catalog(names, cat)
            return group or ""
        except catalogs.MetricSelectionError as exc:
            errors.append(str(exc))
    raise catalogs.MetricSelectionError(errors[0] if len(errors) == 1 else
                                        "no xpu metric catalog accepts these metrics:\n" + "\n".join(errors))



# ----------------------------------------------------------------------------- output
@dataclass
class KernelTable:
    """The session's kernels, as the activity processing saw them (for joining scope records)."""

    kernel_ids: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    names: list[str]

    @classmethod
    def empty(cls) -> "KernelTable":
        z = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.uint64), z, z, z.astype(object), z.astype(object), [])


def kernel_metric_args(results: ScopeResults, kernel_ids: np.ndarray) -> dict[str, ArgColumn]:
    """Args for the kernels' own X events: ``"<metric>::<unit>"`` columns, present where measured."""
    if results is None or not len(results) or not len(kernel_ids):
        return {}
    order = np.argsort(results.kernel_ids, kind="stable")
    sorted_ids = results.kernel_ids[order]
    pos = np.searchsorted(sorted_ids, np.asarray(kernel_ids, dtype=np.uint64))
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    present = sorted_ids[pos_c] == np.asarray(kernel_ids, dtype=np.uint64)
    if not present.any():
        return {}
    units = results.metadata.unit_map()
    out = {}
    for m, v in results.values.items():
        col = np.where(present, v[order][pos_c], 0.0)
        out[metric_key(m, units.get(m, ""))] = ArgColumn("num", col, present)
    return out


def metric_key(name: str, unit: str) -> str:
    return f"{name}::{unit}" if unit else name


def emit_scope_metrics(builder, results: ScopeResults, kernels: KernelTable, *, vendor: str = "xpu") -> int:
    """Write counters/slices for every scope record; returns how many had no matching kernel.

    A record whose kernel id has no kernel is still written (Kineto): just after the previous
    one on device 0 / resource 0, with a warning and a count.
    """
    n = len(results)
    if n == 0:
        return 0
    kid = np.asarray(kernels.kernel_ids, dtype=np.uint64)
    order = np.argsort(kid, kind="stable")
    sorted_ids = kid[order]
    pos = np.minimum(np.searchsorted(sorted_ids, results.kernel_ids), max(len(sorted_ids) - 1, 0))
    matched = (sorted_ids[pos] == results.kernel_ids) if len(sorted_ids) else np.zeros(n, bool)
    src = order[pos] if len(sorted_ids) else np.zeros(n, np.int64)
    # An unmatched record goes just after the previous record (Kineto): 1 ns wide, 2 ns after the
    # previous end + 1. In a run of k unmatched records after an anchor (the last matched record,
    # or the end of all kernels) that is anchor + 4k - 2 .. anchor + 4k - 1, so no Python loop.
    kend = np.asarray(kernels.end_ns, np.int64)
    idx = np.arange(n)
    last = np.maximum.accumulate(np.where(matched, idx, -1))
    anchor0 = int(kend.max()) + 2 if len(kend) else 0
    anchor = np.where(last >= 0, kend[src[np.maximum(last, 0)]] + 1 if len(kend) else 0, anchor0)
    k = idx - last
    start = np.where(matched, np.asarray(kernels.start_ns, np.int64)[src] if len(kend) else 0, anchor + 4 * k - 2)
    end = np.where(matched, kend[src] if len(kend) else 0, anchor + 4 * k - 1)
    pid = _rows(np.where(matched, np.asarray(kernels.pid, dtype=object)[src] if len(kend) else 0, 0))
    tid = _rows(np.where(matched, np.asarray(kernels.tid, dtype=object)[src] if len(kend) else 0, 0))
    knames = np.asarray(kernels.names, dtype=object)
    names = [str(knames[j]) if m else (results.kernel_names[i] or f"kernel_{int(results.kernel_ids[i])}")
             for i, (m, j) in enumerate(zip(matched.tolist(), src.tolist()))]
    units = results.metadata.unit_map()
    builder.add_per_kernel_metrics(
        kernel_names=names, start_ns=start, end_ns=end, pid=pid, tid=tid, metrics=results.values,
        units=units, counter_name="xpu", vendor=vendor,
        extra_args={"kernel_id": results.kernel_ids.astype(np.int64),
                    "queue": ArgColumn("hex", results.queues.astype(np.uint64))})
    unmatched = int((~matched).sum())
    if unmatched:
        builder.warn(f"{unmatched} per-kernel metric record(s) had no matching kernel record; "
                     f"placed on device 0 / resource 0")
        builder.count_dropped("xpu_scope_unmatched_kernel", unmatched)  # the label Kineto's users know
    for w in results.warnings:
        builder.warn(f"metrics scope: {w}")
    return unmatched


def _rows(col: np.ndarray) -> np.ndarray:
    vals = col.tolist()
    if all(isinstance(v, (int, np.integer)) for v in vals):
        return np.asarray(vals, dtype=np.int64)
    return np.asarray(vals, dtype=object)
