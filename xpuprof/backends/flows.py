"""ac2g flows between host calls and the device rows they launched (CUDA and ROCm decoders).

Each decoder collects, per batch of rows it wrote, the columns (correlation id, ts, pid, tid).
A flow is drawn only where both ends are in the trace. Columns that hold one value (one process,
one device) stay one value here, so the flows cost no more memory than their distinct columns.
"""
from __future__ import annotations

import numpy as np

from ..trace.build.columns import stored_once


def _one_value(col: np.ndarray) -> bool:
    return col.ndim == 1 and len(col) > 0 and col.strides[0] == 0


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """One column from its parts; parts that all hold the same single value stay one value."""
    total = sum(len(p) for p in parts)
    if all(_one_value(p) for p in parts) and len({p[0].item() for p in parts}) == 1:
        return np.broadcast_to(parts[0][:1], (total,))
    return np.concatenate(parts)


def _kept(col: np.ndarray, keep: np.ndarray, n_kept: int) -> np.ndarray:
    if n_kept == len(col):
        return col
    return np.broadcast_to(col[:1], (n_kept,)) if _one_value(col) else col[keep]


def add_flow_ends(builder, device_parts: list[tuple], host_parts: list[tuple]) -> None:
    """``s`` on each host call and ``f`` on each device row sharing a correlation id."""
    if not device_parts or not host_parts:
        return
    d_corr = np.concatenate([p[0] for p in device_parts])
    h_corr = np.concatenate([p[0] for p in host_parts])
    d_keep, h_keep = np.isin(d_corr, h_corr), np.isin(h_corr, d_corr)
    for parts, corr, keep, start in ((host_parts, h_corr, h_keep, True), (device_parts, d_corr, d_keep, False)):
        n = int(np.count_nonzero(keep))
        if not n:
            continue
        ts, pid, tid = (stored_once(_joined([p[i] for p in parts])) for i in (1, 2, 3))
        builder.add_flows(flow_ids=_kept(corr, keep, n), ts=_kept(ts, keep, n), pid=_kept(pid, keep, n),
                          tid=_kept(tid, keep, n), start=start)
