"""Kernel resources (unitrace's ``-d``): SIMD width, SLM per work-group, private and spill memory,
register file size and JIT/AOT, read from Level Zero when each kernel is created.

PTI's kernel records do not carry them, so a tracer of the Level Zero loader's tracing layer
(``xpuprof._native.zekernels``, installed once per process by the first XPU session that records
kernels) writes one row per ``zeKernelCreate``. A kernel created before that tracer existed has no
row: such kernels are counted in the trace's ``xpu_kernel_resources`` metadata, never left out silently.

Rows join the trace's kernel slices by name: PTI's views write demangled names, the creation call
carries the mangled one. Each joined slice gets the args below; values the driver did not report
(the null driver reports none) are left out, not written as 0.
"""
from __future__ import annotations

import ctypes
import logging
from typing import Any, Callable

import numpy as np

from ... import diagnostics
from ...clock import now_ns
from ...trace.builder.columns import ArgColumn
from ...vendors import levelzero_tracing as zt
from ..demangle import demangle

log = logging.getLogger("xpuprof")

METADATA_KEY = "xpu_kernel_resources"
_U8, _I4, _U4 = "<u8", "<i4", "<u4"
ROW_DTYPE = np.dtype([("kernel", _U8), ("module", _U8), ("device", _U8), ("created_ns", _U8), ("format", _I4),
                      ("props_result", _I4), ("num_args", _U4), ("req_x", _U4), ("req_y", _U4), ("req_z", _U4),
                      ("req_num_subgroups", _U4), ("req_subgroup_size", _U4), ("max_subgroup_size", _U4),
                      ("max_num_subgroups", _U4), ("slm", _U4), ("private_mem", _U4), ("spill_mem", _U4),
                      ("register_file_size", _U4)])
# kernel arg -> row field (unitrace -d's columns; sizes in bytes, the register file in registers)
ARGS = (("simd width", "max_subgroup_size"), ("SLM per work-group (bytes)", "slm"),
        ("private memory per thread (bytes)", "private_mem"), ("spill memory per thread (bytes)", "spill_mem"),
        ("register file size", "register_file_size"), ("kernel args count", "num_args"))
COMPILED_ARG = "compiled"
METADATA_FIELDS = (("simd_width", "max_subgroup_size"), ("slm_bytes", "slm"), ("private_bytes", "private_mem"),
                   ("spill_bytes", "spill_mem"), ("register_file_size", "register_file_size"),
                   ("num_args", "num_args"))


class _Tracer:
    """The process's one tracer: installed once, its rows read by every later session."""

    installed_ns: int | None = None
    error: str | None = None


def _native():
    from ... import _native as c_parts

    try:
        zekernels = c_parts.load("zekernels", "kernel resources (Level Zero's tracing callbacks are C)")
    except c_parts.NativeUnavailable as exc:
        raise RuntimeError(str(exc)) from None
    if zekernels.row_size() != ROW_DTYPE.itemsize:
        raise RuntimeError(f"xpuprof._native.zekernels rows are {zekernels.row_size()} bytes, the Python mirror "
                           f"{ROW_DTYPE.itemsize}: rebuild xpuprof")
    return zekernels


def install(loader: ctypes.CDLL | None = None) -> str | None:
    """Install the tracer (once; again when ``loader`` is given). None when it runs, else why not."""
    if loader is None and _Tracer.installed_ns is not None:
        return None
    try:
        native = _native()
        if loader is None:
            from ...vendors import levelzero

            loader = levelzero.load_loader()
            levelzero.drivers(loader)  # zeInit: a tracer can only be created on an initialized loader
        addresses, missing = zt.function_addresses(loader)
        if missing:
            raise RuntimeError(f"the Level Zero loader lacks {', '.join(missing)} (its tracing layer API)")
        native.install(tuple(addresses.get(n, 0) for n in zt.TRACER_FUNCTIONS + zt.OPTIONAL_FUNCTIONS))
    except Exception as exc:  # resources are an addition to the trace: their absence is said, never fatal
        _Tracer.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, RuntimeError) else str(exc)
        return _Tracer.error
    _Tracer.installed_ns, _Tracer.error = now_ns(), None
    return None


def created_kernels() -> tuple[np.ndarray, list[str]]:
    """(rows as ROW_DTYPE, kernel names) of every kernel created since the tracer was installed."""
    raw, names = _native().rows()
    return np.frombuffer(raw, ROW_DTYPE), names


def _value(row, field: str) -> int | None:
    v = int(row[field])
    return None if v == zt.NOT_REPORTED else v


class ResourceJoin:
    """Created kernels by (demangled) name; records which trace kernel names it gave args to."""

    def __init__(self, rows: np.ndarray, names: list[str]) -> None:
        self.rows, self.names = rows, names
        self.by_name: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            for key in dict.fromkeys((name, demangle(name))):
                self.by_name.setdefault(key, []).append(i)
        self.launches: dict[str, int] = {}  # trace kernel name -> slices given resources
        self.without: dict[str, int] = {}  # trace kernel name with no creation seen -> slices

    def row_of(self, name: str) -> int | None:
        got = self.by_name.get(name) or self.by_name.get(demangle(name))
        return got[-1] if got else None  # the latest creation of that name

    def kernel_args(self, name_ids: np.ndarray, text_of: Callable[[int], str]) -> dict[str, Any]:
        if not len(name_ids):
            return {}
        uniq, inverse = np.unique(name_ids, return_inverse=True)
        inverse = inverse.reshape(-1)
        counts = np.bincount(inverse, minlength=len(uniq))
        rows = np.full(len(uniq), -1, np.int64)
        for j, nid in enumerate(uniq.tolist()):
            name = text_of(int(nid))
            r = self.row_of(name)
            book = self.without if r is None else self.launches
            book[name] = book.get(name, 0) + int(counts[j])
            rows[j] = -1 if r is None else r
        found = rows >= 0
        if not found.any():
            return {}
        picked = self.rows[np.where(found, rows, 0)]
        args: dict[str, Any] = {}
        for key, field in ARGS:
            vals = picked[field].astype(np.int64)
            ok = found & (picked[field] != zt.NOT_REPORTED)
            if ok.any():
                args[key] = ArgColumn("num", vals[inverse], ok[inverse])
        fmt = picked["format"]
        compiled = np.array([zt.MODULE_FORMATS.get(int(f), "") for f in fmt.tolist()], dtype=object)
        known = found & (compiled != "")
        if known.any():
            args[COMPILED_ARG] = ArgColumn("obj", [str(v) for v in compiled[inverse]], known[inverse])
        return args

    def metadata(self) -> dict[str, Any]:
        kernels = []
        seen: dict[str, dict] = {}
        for i, name in enumerate(self.names):
            row = self.rows[i]
            shown = demangle(name)
            entry = {"name": shown, "compiled": zt.MODULE_FORMATS.get(int(row["format"])),
                     **{key: _value(row, field) for key, field in METADATA_FIELDS},
                     "required_group_size": None if _value(row, "req_x") is None
                     else [int(row["req_x"]), int(row["req_y"]), int(row["req_z"])],
                     "properties_result": int(row["props_result"])}
            if shown != name:
                entry["mangled"] = name
            prev = seen.get(shown)
            if prev is not None:  # several kernel objects of one name: the latest wins, the count says so
                entry["variants"] = prev.get("variants", 1) + 1
                kernels[kernels.index(prev)] = entry
            else:
                kernels.append(entry)
            seen[shown] = entry
        for entry in kernels:
            entry["launches_in_trace"] = self.launches.get(entry["name"], 0) + (
                self.launches.get(entry.get("mangled", ""), 0))
        out: dict[str, Any] = {"source": "zeKernelGetProperties at zeKernelCreate (Level Zero tracing layer)",
                               "kernels": kernels}
        unreported = sum(1 for e in kernels if e["simd_width"] is None and e["slm_bytes"] is None)
        if unreported:
            out["not_reported_by_driver"] = unreported
        if self.without:
            out["kernels_without_resources"] = {
                "names": sorted(self.without), "launches": sum(self.without.values()),
                "why": "created before xpuprof's Level Zero tracer was installed (at the first XPU session of the "
                       "process): Level Zero gives a kernel's properties only at zeKernelCreate"}
        return out


class ResourcesPart:
    """One session's kernel resources: the process tracer's rows joined to the session's kernels."""

    def __init__(self, loader: ctypes.CDLL | None = None) -> None:
        self.error = install(loader)
        if self.error:
            diagnostics.warn_once(log, ("xpu-kernel-resources",), "xpuprof: kernel resources (SIMD width, SLM, "
                                  "spill, registers, JIT/AOT) are not recorded: %s", self.error)
        self.join: ResourceJoin | None = None

    def kernel_args(self, text_of: Callable[[int], str]):
        """An ``emit`` kernel-args source, or None without a tracer."""
        if self.error:
            return None
        self.join = ResourceJoin(*created_kernels())
        join = self.join
        return lambda records, name_ids: join.kernel_args(name_ids, text_of)

    def finish(self, builder) -> None:
        if self.error:
            builder.set_metadata(METADATA_KEY, {"unavailable": self.error})
        elif self.join is not None:
            builder.set_metadata(METADATA_KEY, self.join.metadata())
