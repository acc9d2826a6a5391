"""gpu_user_annotation: the host's user annotations drawn again on the device rows.

Kineto synthesizes one ``gpu_user_annotation`` slice per (device, stream, annotation) for device
ops whose correlation maps to a user annotation, spanning the first op's start to the last op's
end (moved 1 ns earlier and 2 ns longer so it visibly encloses them). Here every backend's device
ops carry the enclosing ``record_function``'s id as ``External id``, so one vendor-neutral pass
over the builder's columns does it for XPU, CUDA, ROCm, plugins and the simulator alike.
"""
from __future__ import annotations

import numpy as np

from ...activity import ActivityType
from .builder import TraceBuilder

DEVICE_CATEGORIES = (ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET)


def _int_rows(col: np.ndarray) -> bool:
    return col.dtype.kind in "iu"


def add_gpu_user_annotations(builder: TraceBuilder) -> int:
    """Add the gpu_user_annotation slices; returns how many were added."""
    builder.flush()
    strings = builder.strings
    ann_cat = strings.intern(ActivityType.USER_ANNOTATION.value)
    dev_cats = np.array([strings.intern(c.value) for c in DEVICE_CATEGORIES], np.int32)

    ann_ext, ann_name = [], []
    dev = {"ext": [], "start": [], "end": [], "pid": [], "tid": []}
    for b in builder.slices:
        is_ann = (b.cat == ann_cat) & (b.external_id != 0)
        if is_ann.any():
            ann_ext.append(b.external_id[is_ann])
            ann_name.append(b.name[is_ann])
        is_dev = np.isin(b.cat, dev_cats) & (b.external_id != 0)
        if is_dev.any() and _int_rows(b.pid) and _int_rows(b.tid):
            dev["ext"].append(b.external_id[is_dev])
            dev["start"].append(b.ts[is_dev])
            dev["end"].append(b.ts[is_dev] + b.dur[is_dev])
            dev["pid"].append(b.pid[is_dev])
            dev["tid"].append(b.tid[is_dev])
    if not ann_ext or not dev["ext"]:
        return 0

    ann_ext_all, ann_name_all = np.concatenate(ann_ext), np.concatenate(ann_name)
    order = np.argsort(ann_ext_all, kind="stable")
    ann_ext_all, ann_name_all = ann_ext_all[order], ann_name_all[order]
    ext, start, end, pid, tid = (np.concatenate(dev[k]) for k in ("ext", "start", "end", "pid", "tid"))

    # Keep only device ops whose External id is a user annotation's id.
    pos = np.clip(np.searchsorted(ann_ext_all, ext), 0, len(ann_ext_all) - 1)
    linked = ann_ext_all[pos] == ext
    if not linked.any():
        return 0
    ext, start, end, pid, tid, pos = ext[linked], start[linked], end[linked], pid[linked], tid[linked], pos[linked]

    # One slice per (device, stream, annotation): min start .. max end.
    order = np.lexsort((ext, tid, pid))
    ext, start, end, pid, tid, pos = ext[order], start[order], end[order], pid[order], tid[order], pos[order]
    new_group = np.ones(len(ext), bool)
    new_group[1:] = (ext[1:] != ext[:-1]) | (tid[1:] != tid[:-1]) | (pid[1:] != pid[:-1])
    first = np.flatnonzero(new_group)
    g_start = np.minimum.reduceat(start, first)
    g_end = np.maximum.reduceat(end, first)
    builder.add_slices(names=None, name_ids=ann_name_all[pos[first]], ts=g_start - 1, dur=(g_end - g_start) + 2,
                       pid=pid[first], tid=tid[first], cat=ActivityType.GPU_USER_ANNOTATION,
                       external_id=ext[first])
    return len(first)
