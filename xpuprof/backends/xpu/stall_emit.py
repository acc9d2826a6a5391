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
from ...trace.builder.columns import ArgColumn
from ...trace.builder.keyindex import factorize
from ..demangle import demangle
from .stall_sampling import StallResults

log = logging.getLogger("xpuprof")

STALL_METADATA_KEY = "xpu_stall_sampling"
STALL_ERROR_KEY = "xpu_stall_sampling_error"
TOTAL_ARG = "stall samples"
REASON_ARG = "stall samples: {}"
SCOPE_NOTE = ("samples per kernel over all its launches (PTI's EU stall sampling has no timestamps); lines: the "
              "hottest source lines PTI mapped samples to; instructions: the hottest ones (offset in the kernel's binary, "
              "source file:line where PTI gives it, -1/0 where not)")
MAX_INSTRUCTIONS = 256  # instructions listed per kernel: the heaviest (every one counts in the kernel's totals)
MAX_LINES = 256  # source lines listed per kernel: the heaviest


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


def _top_rows(group: np.ndarray, weight: np.ndarray, keep: int) -> np.ndarray:
    """Row indices of the ``keep`` heaviest rows of each group (groups ascending, heaviest first): a
    selection per group (``argpartition``), never a sort of all the rows."""
    if not len(group):
        return np.zeros(0, np.int64)
    if (group[1:] >= group[:-1]).all():
        order = np.arange(len(group))
    else:  # a radix sort when the groups fit 16 bits
        small = len(group) and int(group.min()) >= 0 and int(group.max()) < 1 << 16
        order = np.argsort(group.astype(np.uint16) if small else group, kind="stable")
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    out = []
    for a, b in zip(starts.tolist(), np.r_[starts[1:], len(g)].tolist()):
        idx = order[a:b]
        if len(idx) > keep:
            idx = idx[np.argpartition(-weight[idx], keep - 1)[:keep]]
        out.append(idx[np.argsort(-weight[idx], kind="stable")])
    return np.concatenate(out)


def _lines(res: StallResults, row_total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The hottest source lines of each kernel (``MAX_LINES``), from the instructions PTI gave a source for:
    (kernel, file, line) per line (per kernel, heaviest first), its samples by reason, how many
    instructions it holds, and how many lines each kernel has. Linear: the keys packed into one integer
    and factorized, totals by ``bincount``; per-reason sums only for the lines kept."""
    src = np.flatnonzero((res.instr_file >= 0) & (res.instr_line > 0))
    nreasons, nk = len(res.reasons), len(res.kernel_names)
    if not len(src):
        return np.zeros((0, 3), np.int64), np.zeros((0, nreasons), np.int64), np.zeros(0, np.int64), np.zeros(nk, np.int64)
    kern, file, line = res.instr_kernel[src], res.instr_file[src].astype(np.int64), res.instr_line[src]
    if int(kern.max()) < 1 << 19 and int(file.max()) < 1 << 20 and int(line.max()) < 1 << 24:
        f = factorize((kern << 44) | (file << 24) | line)
        packed, codes = f.uniq.astype(np.int64), f.codes
        keys = np.column_stack([packed >> 44, (packed >> 24) & ((1 << 20) - 1), packed & ((1 << 24) - 1)])
    else:  # outside the packed ranges: a sort of the rows
        keys, codes = np.unique(np.column_stack([kern, file, line]), axis=0, return_inverse=True)
        codes = codes.reshape(-1)
    totals = np.bincount(codes, weights=row_total[src], minlength=len(keys))
    counts = np.bincount(codes, minlength=len(keys))
    hot = _top_rows(keys[:, 0], totals, MAX_LINES)
    slot = np.full(len(keys), -1, np.int64)
    slot[hot] = np.arange(len(hot))
    sel = slot[codes]
    rows = sel >= 0  # instructions of a kept line
    sel, samples = sel[rows], res.instr_samples[src[rows]]
    sums = np.zeros((len(hot), nreasons), np.int64)
    for r in range(nreasons):
        sums[:, r] = np.bincount(sel, weights=samples[:, r], minlength=len(hot)).astype(np.int64)
    return keys[hot], sums, counts[hot], np.bincount(keys[:, 0], minlength=nk)


def stall_metadata(join: StallJoin, device_index: Callable[[int], int] | None = None) -> dict[str, Any]:
    """The ``xpu_stall_sampling`` metadata: reasons, devices, files, and per kernel its mix, its hottest source
    lines (``MAX_LINES``) and instructions (``MAX_INSTRUCTIONS``, offset order), with how many were sampled.
    Built column-wise: a Python object per line and per listed instruction, never per sampled one."""
    res = join.results
    reasons = res.reasons
    total = res.instr_samples.sum(axis=1, dtype=np.int64) if len(res.instr_samples) else np.zeros(0, np.int64)
    line_keys, line_sums, line_counts, lines_per_kernel = _lines(res, total)
    line_bounds = np.searchsorted(line_keys[:, 0], np.arange(len(res.kernel_names) + 1)) if len(line_keys) else None
    top = _top_rows(res.instr_kernel, total, MAX_INSTRUCTIONS)
    top = top[np.lexsort((res.instr_offset[top], res.instr_kernel[top]))]  # per kernel, in offset order
    top_bounds = np.searchsorted(res.instr_kernel[top], np.arange(len(res.kernel_names) + 1))
    listed = {"offset": res.instr_offset[top].tolist(), "file": res.instr_file[top].tolist(),
              "line": res.instr_line[top].tolist(), "samples": res.instr_samples[top].astype(np.int64).tolist()}
    per_kernel = np.bincount(res.instr_kernel, minlength=len(res.kernel_names))
    kernels = []
    for k, name in enumerate(res.kernel_names):
        if not join.kept[k]:
            continue
        mix = res.kernel_samples[k]
        a, b = int(top_bounds[k]), int(top_bounds[k + 1])
        entry: dict[str, Any] = {
            "name": name,
            "handle": f"0x{int(res.kernel_handles[k]):x}",
            "device": device_index(int(res.kernel_devices[k])) if device_index else f"0x{int(res.kernel_devices[k]):x}",
            "samples": int(mix.sum()),
            "by_reason": {reasons[r]: int(mix[r]) for r in np.flatnonzero(mix).tolist()},
            "kernel_slices": join.matched.get(name, join.matched.get(demangle(name), 0)),
            "instructions_sampled": int(per_kernel[k]),
            "instructions": {key: col[a:b] for key, col in listed.items()},
        }
        if line_bounds is not None and line_bounds[k + 1] > line_bounds[k]:
            la, lb = int(line_bounds[k]), int(line_bounds[k + 1])
            entry["lines"] = {"file": line_keys[la:lb, 1].tolist(), "line": line_keys[la:lb, 2].tolist(),
                              "instructions": line_counts[la:lb].tolist(), "samples": line_sums[la:lb].tolist()}
            entry["lines_sampled"] = int(lines_per_kernel[k])
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
