"""Two steps of the XPU emit stage on kernel record columns, kept apart from what each kind writes:

- ``filter_kernels``: the kernel name filter (``ProfilerConfig.include_kernels``/``exclude_kernels``,
  unitrace's ``--include-kernels``/``--exclude-kernels``). The keep/drop decision is made once per
  distinct name pointer (``factorize``), its text read once and the patterns run once per distinct
  text; the rows then take their name's decision in one gather. What it dropped is counted in the
  trace's ``xpu_kernel_filter`` metadata.
- ``submission_args`` / ``submission_summary``: unitrace's ``-s`` intervals per kernel from PTI's
  timestamps: queued (append -> submit) and submit -> start (the execution is the slice itself), as
  kernel args and, per kernel name (columns: count and total; 0 where a name has no value), the
  trace's ``xpu_submission_intervals`` metadata (what ``xpuprof report`` shows beside each kernel).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...trace.builder.columns import ArgColumn
from ...trace.builder.keyindex import factorize

FILTER_METADATA_KEY = "xpu_kernel_filter"
INTERVALS_METADATA_KEY = "xpu_submission_intervals"
QUEUED_ARG = "queued (us)"  # submitted - appended: waiting in the command list
SUBMIT_ARG = "submit to start (us)"  # start - submitted: submitted, not yet running
MAX_NAMES_LISTED = 100


class KernelNameFilter:
    """A ``config.kernel_filter.KernelFilter`` applied to kernel record columns, with its counts."""

    def __init__(self, kernel_filter) -> None:
        self.filter = kernel_filter
        self._decided: dict[str, bool] = {}  # name text -> keep (the patterns run once per name)
        self.kept = self.dropped = 0
        self.dropped_names: dict[str, int] = {}

    def keep(self, name: str) -> bool:
        got = self._decided.get(name)
        if got is None:
            got = self._decided[name] = self.filter.keep(name)
        return got

    def mask(self, name_ptrs: np.ndarray, text_of: Callable[[int], str]) -> np.ndarray | None:
        """Rows to keep (None: all of them), one decision per distinct name pointer."""
        if not len(name_ptrs):
            return None
        f = factorize(name_ptrs)
        texts = [text_of(p) for p in f.uniq.tolist()]
        keep_uniq = np.fromiter((self.keep(t) for t in texts), bool, len(texts))
        counts = np.bincount(f.codes, minlength=len(texts))
        for t, k, n in zip(texts, keep_uniq.tolist(), counts.tolist()):
            if not k:
                self.dropped_names[t] = self.dropped_names.get(t, 0) + int(n)
        mask = keep_uniq[f.codes]
        dropped = int(counts[~keep_uniq].sum())
        self.dropped += dropped
        self.kept += len(name_ptrs) - dropped
        return None if not dropped else mask

    def metadata(self) -> dict:
        listed = sorted(self.dropped_names.items(), key=lambda kv: (-kv[1], kv[0]))
        return {**self.filter.describe(), "kernels_kept": self.kept, "kernels_filtered": self.dropped,
                "names_filtered": len(listed),
                "filtered": {name: n for name, n in listed[:MAX_NAMES_LISTED]}}


def filter_kernels(writer, kern, name_filter: KernelNameFilter | None):
    """``kern`` without the rows the filter drops (the same object when it drops none)."""
    if name_filter is None:
        return kern
    mask = name_filter.mask(kern["_name"], writer.ctx.strings)
    writer.b.set_metadata(FILTER_METADATA_KEY, name_filter.metadata())
    return kern if mask is None else kern[mask]


def _interval(later: np.ndarray, earlier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """later - earlier in ns (int64; negative where PTI's clocks disagree), and where both were recorded."""
    present = (later != 0) & (earlier != 0)
    if later.dtype == earlier.dtype == np.uint64:  # wraps, and the int64 view reads it back signed: no copies
        return (later - earlier).view(np.int64), present
    return later.astype(np.int64, copy=False) - earlier.astype(np.int64, copy=False), present


def submission_args(k, name_ids=None) -> dict:
    """``queued (us)`` and ``submit to start (us)`` per kernel, where PTI gave both timestamps (a
    ``XpuEmitter`` kernel-args source)."""
    args = {}
    for key, later, earlier in ((QUEUED_ARG, "_submit_timestamp", "_append_timestamp"),
                                (SUBMIT_ARG, "_start_timestamp", "_submit_timestamp")):
        ns, present = _interval(k[later], k[earlier])
        if present.any():
            args[key] = ArgColumn("num", ns / 1000.0, present)  # whole ns: already the 3-decimal µs value
    return args


def submission_summary(k, name_ids: np.ndarray, text_of: Callable[[int], str]) -> dict | None:
    """Per kernel name, columns: ``names``, and per interval (``queued``, ``submit``, ``execute``) its
    ``count`` and ``total`` in ns (None without timestamps): ``bincount`` over the names' codes, linear."""
    queued, q_ok = _interval(k["_submit_timestamp"], k["_append_timestamp"])
    submit, s_ok = _interval(k["_start_timestamp"], k["_submit_timestamp"])
    if not (q_ok.any() or s_ok.any()):
        return None
    execute, _ = _interval(k["_end_timestamp"], k["_start_timestamp"])
    f = factorize(name_ids)
    n = len(f.uniq)
    out: dict = {"unit": "ns", "names": [text_of(int(nid)) for nid in f.uniq.tolist()]}
    for key, vals, ok in (("queued", queued, q_ok), ("submit", submit, s_ok), ("execute", execute, None)):
        codes, v = (f.codes, vals) if ok is None or ok.all() else (f.codes[ok], vals[ok])
        total = np.bincount(codes, weights=v.astype(np.float64), minlength=n)
        out[key] = {"count": np.bincount(codes, minlength=n).tolist(),
                    "total": np.rint(total).astype(np.int64).tolist()}
    return out
