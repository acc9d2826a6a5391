"""A builder's slices as plain columns, for assertions (the package reads builders column by column)."""
from __future__ import annotations

import numpy as np

from xpuprof.activity import ActivityType, category_name

COLUMNS = ("name", "ts", "dur", "pid", "tid", "cat")


def slice_table(builder, cat: str | ActivityType | None = None) -> dict[str, np.ndarray]:
    """All slices (optionally of one category): name and cat as str objects, ts and dur as int64, pid and tid
    as objects."""
    builder.flush()
    want = None if cat is None else builder.strings.intern(category_name(cat) if isinstance(cat, ActivityType) else cat)
    parts = [b for b in builder.slices if want is None or (b.cat == want).any()]
    if not parts:
        return {k: np.array([], dtype=object if k in ("name", "cat") else np.int64) for k in COLUMNS}
    strings = np.array(builder.strings.strings, dtype=object)
    masks = [np.ones(len(b), bool) if want is None else b.cat == want for b in parts]
    return {
        "name": np.concatenate([strings[b.name[m]] for b, m in zip(parts, masks)]),
        "ts": np.concatenate([b.ts[m] for b, m in zip(parts, masks)]),
        "dur": np.concatenate([b.dur[m] for b, m in zip(parts, masks)]),
        "pid": np.concatenate([b.pid[m].astype(object) for b, m in zip(parts, masks)]),
        "tid": np.concatenate([b.tid[m].astype(object) for b, m in zip(parts, masks)]),
        "cat": np.concatenate([strings[b.cat[m]] for b, m in zip(parts, masks)]),
    }
