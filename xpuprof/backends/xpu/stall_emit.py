"""EU stall samples (``stall_sampling.StallResults``) -> kernel args and the trace's metadata.

PTI aggregates samples per kernel object over all of its launches and gives no timestamps, so a
kernel's stall mix is written on every slice of that kernel name (args ``stall samples`` and
``stall samples: <reason>``, totals over all instances) and, with the per-instruction rows, in the
trace's ``xpu_stall_sampling`` metadata, which ``xpuprof report --stalls`` reads.

Kernel names are joined as PTI's views write them (demangled) and as its sampler does (either).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from ... import diagnostics
from ...trace.build.columns import ArgColumn
from ..demangle import demangle
from .stall_sampling import StallResults

log = logging.getLogger("xpuprof")

STALL_METADATA_KEY = "xpu_stall_sampling"
STALL_ERROR_KEY = "xpu_stall_sampling_error"
TOTAL_ARG = "stall samples"
REASON_ARG = "stall samples: {}"
SCOPE_NOTE = ("samples per kernel over all its launches (PTI's EU stall sampling has no timestamps); "
              "per instruction: offset in the kernel's binary, source file:line where PTI gives it")


class StallJoin:
    """Stall samples by kernel name, summed over the kernel objects (and devices) sharing a name."""

    def __init__(self, results: StallResults, keep: Callable[[str], bool] | None = None) -> None:
        self.results = results
        nreasons = len(results.reasons)
        self.rows: dict[str, np.ndarray] = {}
        self.kept = np.ones(len(results.kernel_names), bool)
        for i, name in enumerate(results.kernel_names):
            if keep is not None and not keep(name):
                self.kept[i] = False
                continue
            for key in dict.fromkeys((name, demangle(name))):
                acc = self.rows.setdefault(key, np.zeros(nreasons, np.uint64))
                acc += results.kernel_samples[i]
        self.matched: dict[str, int] = {}  # sampled kernel name -> kernel slices that carry its samples

    def samples_of(self, trace_name: str) -> np.ndarray | None:
        got = self.rows.get(trace_name)
        return got if got is not None else self.rows.get(demangle(trace_name))

    def kernel_args(self, name_ids: np.ndarray, text_of: Callable[[int], str]) -> dict[str, Any]:
        """Arg columns for kernel slices named ``name_ids`` (interned ids; ``text_of`` gives the text)."""
        if not len(name_ids) or not self.rows:
            return {}
        uniq, inverse = np.unique(name_ids, return_inverse=True)
        nreasons = len(self.results.reasons)
        per_name = np.zeros((len(uniq), nreasons), np.uint64)
        found = np.zeros(len(uniq), bool)
        counts = np.bincount(inverse.reshape(-1), minlength=len(uniq))
        for j, nid in enumerate(uniq.tolist()):
            name = text_of(int(nid))
            got = self.samples_of(name)
            if got is not None:
                per_name[j] = got
                found[j] = True
                self.matched[name] = self.matched.get(name, 0) + int(counts[j])
        if not found.any():
            return {}
        inverse = inverse.reshape(-1)
        present = found[inverse]
        args: dict[str, Any] = {TOTAL_ARG: ArgColumn("num", per_name.sum(axis=1).astype(np.int64)[inverse], present)}
        for r, reason in enumerate(self.results.reasons):
            col = per_name[:, r].astype(np.int64)
            if col.any():
                args[REASON_ARG.format(reason)] = ArgColumn("num", col[inverse], present & (col[inverse] > 0))
        return args


def stall_metadata(join: StallJoin, device_index: Callable[[int], int] | None = None) -> dict[str, Any]:
    """The ``xpu_stall_sampling`` metadata: reasons, devices, files and per kernel its mix and instructions."""
    res = join.results
    reasons = res.reasons
    kernels = []
    order = np.argsort(res.instr_kernel, kind="stable")
    bounds = np.searchsorted(res.instr_kernel[order], np.arange(len(res.kernel_names) + 1))
    for k, name in enumerate(res.kernel_names):
        if not join.kept[k]:
            continue
        rows = order[bounds[k]:bounds[k + 1]]
        mix = res.kernel_samples[k]
        entry: dict[str, Any] = {
            "name": name,
            "handle": f"0x{int(res.kernel_handles[k]):x}",
            "device": device_index(int(res.kernel_devices[k])) if device_index else f"0x{int(res.kernel_devices[k]):x}",
            "samples": int(mix.sum()),
            "by_reason": {reasons[r]: int(mix[r]) for r in np.flatnonzero(mix).tolist()},
            "kernel_slices": join.matched.get(name, join.matched.get(demangle(name), 0)),
            "instructions": {
                "offset": [int(v) for v in res.instr_offset[rows].tolist()],
                "file": [int(v) for v in res.instr_file[rows].tolist()],
                "line": [int(v) for v in res.instr_line[rows].tolist()],
                "samples": res.instr_samples[rows].astype(np.int64).tolist(),
            },
        }
        kernels.append(entry)
    out = {
        "period_ns": int(res.period_ns),
        "reasons": [{"name": n, "description": d} for n, d in zip(reasons, res.descriptions)],
        "devices": res.devices,
        "files": list(res.files),
        "samples": int(res.kernel_samples[join.kept].sum()) if len(res.kernel_names) else 0,
        "kernels": kernels,
        "note": SCOPE_NOTE,
    }
    filtered = int((~join.kept).sum())
    if filtered:
        out["kernels_filtered"] = filtered
    unmatched = [e["name"] for e in kernels if not e["kernel_slices"]]
    if unmatched:
        out["kernels_without_slices"] = len(unmatched)
    if res.warnings:
        out["warnings"] = list(res.warnings)
        for w in res.warnings:
            diagnostics.warn_once(log, ("xpu-stall-warning", w), "xpuprof: %s", w)
    return out
