"""torch's ``key_averages`` rules, on a trace's columns (``summary.KeyAverages`` is what users hold).

What torch does to its event list (``torch.autograd.profiler_util``), done here with numpy over the slices
of the trace, so the numbers are torch's for the same profile and no Python object is made per event:

- every host slice is a CPU event (ops, ranges, runtime and driver calls, Python functions); kernels,
  copies, fills, syncs and device ranges are device events; torch's utility ops
  (``profiler::_record_function_*``, ``aten::is_leaf``, ...) are left out, as ``_filter_name`` does;
- ``ProfilerStep#N`` is named ``ProfilerStep*`` (``_rewrite_name(with_wildcard=True)``);
- a host event's parent is the innermost host event around it on its thread; an event that is the only
  child of a parent of the same name merges into it, its children and kernels moving up
  (``_remove_dup_nodes``);
- self CPU time is an event's time minus its children's; an op's device time is the time of the device
  work whose ``External id`` is its own, its total adds its children's totals;
- an event's memory is every ``[memory]`` record (CPU and device bytes apart) from its start to its end,
  self memory that minus its children's; records inside no event become ``[memory]`` rows;
- averages group on (name, device type, user annotation) plus, when asked, the input shapes (``Input Dims``
  with tensor lists as ``[]``), the top ``n`` frames of the Python stack (the enclosing ``python_function``
  slices, innermost first) and the overload name; groups come in the order their first event starts.

Per-kernel hardware metrics (``metrics: <kernel>`` slices, ``"<metric>::<unit>"`` args) join the kernel
rows by name: xpuprof's addition, columns torch has no equivalent of.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..activity import category_spellings
from ..trace.builder.intervals import parents

STEP_PREFIX = "ProfilerStep#"
STEP_ROW = "ProfilerStep*"
MEMORY_ROW = "[memory]"
# torch's _filter_name: its own bookkeeping, never a row
FILTERED_NAMES = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                            "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                            "aten::is_leaf", "aten::output_nr", "aten::_version"})
# torch's _filter_stack_entry: frames of autograd's and the test harness's own plumbing
_FILTERED_FRAMES = (("autograd/__init__", "_make_grads"), ("autograd/__init__", "backward"),
                    ("torch/tensor", "backward"), ("_internal/common_utils", "prof_callable"),
                    ("_internal/common_utils", "prof_func_call"), ("_internal/common_utils", "prof_meth_call"))


def _spellings(*names: str) -> frozenset[str]:
    return frozenset(s for n in names for s in category_spellings(n))


DEVICE_CATEGORIES = _spellings("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
WORK_CATEGORIES = _spellings("kernel", "gpu_memcpy", "gpu_memset")  # device time an op is charged with
FRONTEND_CATEGORIES = _spellings("cpu_op", "user_annotation")  # what device work is linked to
ANNOTATION_CATEGORIES = _spellings("user_annotation", "gpu_user_annotation")
PYTHON_CATEGORIES = _spellings("python_function")
# slices that are no function: the trace's own rows (paused spans), CUPTI's overhead, metric carriers
# and the device's waits (syncs, events), which are no work of an op
NOT_EVENTS = frozenset({"Trace", "overhead", "gpu_pm_counter", "hardware_counters", "xpu_scope_profiler"}) | \
    _spellings("cuda_sync", "xpu_sync", "cuda_event")
METRICS_PREFIX = "metrics: "
# c10::DeviceType values in a [memory] record's "Device Type": host memory and device memory (torch's split)
CPU_MEMORY_TYPES = (0, 2, 5)  # CPU, MKLDNN, IDEEP
DEVICE_MEMORY_TYPES = (1, 6, 12, 20)  # CUDA, HIP, XPU, PrivateUse1


@dataclass
class Columns:
    """The slices and [memory] records of one or more traces (times in ns), as ``key_averages`` reads them."""

    name: np.ndarray  # object: each slice's name
    cat: np.ndarray  # object: its category as written
    thread: np.ndarray  # int64: one code per (pid, tid) row; -1 for a row that is no host thread
    ts: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    ext: np.ndarray  # int64 External id, 0 for none
    shapes: list | None = None  # per slice its "Input Dims" (None: not recorded)
    overload: list | None = None  # per slice its overload name (None: not recorded)
    flops: np.ndarray | None = None  # int64 per slice, 0 for none
    mem_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mem_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mem_type: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # c10::DeviceType
    metrics: dict = field(default_factory=dict)  # label -> (kernel names, values)


@dataclass
class Group:
    """One average: the sums torch's FunctionEventAvg holds (times in µs, as torch's)."""

    key: str
    category: str
    on_device: bool
    is_user_annotation: bool
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    device_memory_usage: int = 0
    self_device_memory_usage: int = 0
    flops: int = 0
    input_shapes: Any = ""
    stack: list = field(default_factory=list)
    overload_name: str = ""
    top_level: bool = True
    metrics: dict = field(default_factory=dict)  # label -> (mean, min, max)


def input_shapes(dims) -> list:
    """torch's ``FunctionEvent.input_shapes`` from the trace's ``Input Dims``: a tensor list is ``[]``."""
    if not isinstance(dims, list):
        return []
    return [[] if (isinstance(d, list) and d and all(isinstance(x, list) for x in d)) or not isinstance(d, list)
            else d for d in dims]


def _stack_entry_kept(entry: str) -> bool:
    return all(not (a in entry and b in entry) for a, b in _FILTERED_FRAMES)


def unique_inverse(values) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for an object column of a few distinct hashable
    values: one dict pass and a sort of the distinct values, not a sort of every row's object."""
    lst = values.tolist() if isinstance(values, np.ndarray) else list(values)
    index = dict.fromkeys(lst)  # distinct values in first-seen order, at C speed
    distinct = list(index)
    for i, v in enumerate(distinct):
        index[v] = i
    codes = np.fromiter(map(index.__getitem__, lst), np.int64, len(lst))
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    rank = np.empty(len(distinct), np.int64)
    rank[order] = np.arange(len(distinct))
    uniq = np.empty(len(distinct), dtype=object)
    uniq[:] = [distinct[i] for i in order]
    return uniq, rank[codes]


def _per_distinct(uniq: np.ndarray, codes: np.ndarray, test) -> np.ndarray:
    """``test`` of each row's value, computed once per distinct value."""
    return np.array([bool(test(v)) for v in uniq.tolist()], bool)[codes] if len(codes) else np.zeros(0, bool)


def averages(cols: Columns, *, use_device: str | None, group_by_input_shape: bool = False,
             group_by_stack_n: int = 0, group_by_overload_name: bool = False) -> list[Group]:
    """torch's key_averages of the slices in ``cols`` (module docstring), in torch's order."""
    n = len(cols.ts)
    name_u, name_i = unique_inverse(np.asarray(cols.name, dtype=object))
    cat_u, cat_i = unique_inverse(np.asarray(cols.cat, dtype=object))
    # torch's names: ProfilerStep#N as ProfilerStep*, decided per distinct name
    renamed_u, rename = np.unique(np.array([STEP_ROW if str(x).startswith(STEP_PREFIX) else str(x)
                                            for x in name_u.tolist()], dtype=object).astype(str), return_inverse=True)
    key_name = rename.reshape(-1)[name_i] if n else np.zeros(0, np.int64)
    flag = {k: _per_distinct(cat_u, cat_i, v.__contains__) for k, v in (
        ("device", DEVICE_CATEGORIES), ("work", WORK_CATEGORIES), ("frontend", FRONTEND_CATEGORIES), ("annotation", ANNOTATION_CATEGORIES),
        ("python", PYTHON_CATEGORIES), ("skip", NOT_EVENTS))}
    unusable = _per_distinct(name_u, name_i, lambda x: str(x).startswith(METRICS_PREFIX) or x in FILTERED_NAMES)
    thread = np.asarray(cols.thread, np.int64)
    usable = ~(unusable | flag["skip"])
    h = np.flatnonzero(usable & ~flag["device"] & (thread >= 0))
    d = np.flatnonzero(usable & flag["device"])
    ts, dur = np.asarray(cols.ts, np.int64), np.maximum(np.asarray(cols.dur, np.int64), 0)
    ext = np.asarray(cols.ext, np.int64)
    H = len(h)
    h_ts, h_dur = ts[h], dur[h]
    h_end = h_ts + h_dur
    parent, depth = parents(thread[h], h_ts, h_end)
    # Device work on the frontend event whose External id it carries (torch's linked correlation).
    w = d[flag["work"][d]]
    self_dev = _linked_time(ext[h], flag["frontend"][h], ext[w], dur[w]) if use_device else np.zeros(H)
    mem_cpu, mem_dev, covered = _memory(cols, h_ts, h_end)
    flops = np.asarray(cols.flops, np.int64)[h] if cols.flops is not None else np.zeros(H, np.int64)
    alive = _merge_only_children(parent, key_name[h], self_dev)
    has_parent = alive & (parent >= 0)
    p = parent[has_parent]

    def minus_children(values: np.ndarray) -> np.ndarray:
        return values - np.bincount(p, weights=values[has_parent], minlength=H)

    self_cpu = minus_children(h_dur.astype(np.float64))
    total_dev = self_dev.copy()
    for level in range(int(depth.max()) if H else 0, 1, -1):  # children before parents, one level at a time
        rows = np.flatnonzero((depth == level) & has_parent)
        np.add.at(total_dev, parent[rows], total_dev[rows])
    self_mem_cpu, self_mem_dev = minus_children(mem_cpu.astype(np.float64)), minus_children(mem_dev.astype(np.float64))

    # Every event that stays: host events kept, device events, [memory] records inside no event.
    hk = np.flatnonzero(alive)
    mem_alone = np.flatnonzero(~covered)
    m_ts = np.asarray(cols.mem_ts, np.int64)[mem_alone]
    m_bytes = np.asarray(cols.mem_bytes, np.int64)[mem_alone]
    m_type = np.asarray(cols.mem_type, np.int64)[mem_alone]
    kinds = (len(hk), len(d), len(mem_alone))
    src = np.repeat(np.arange(3, dtype=np.int8), kinds)
    row = np.concatenate([h[hk], d, np.full(len(mem_alone), -1, np.int64)])
    memory_code = len(renamed_u)  # "[memory]" rows: a name code of their own
    parts = [np.concatenate([key_name[h[hk]], key_name[d], np.full(len(mem_alone), memory_code, np.int64)]),
             (src == 1).astype(np.int64),
             np.concatenate([flag["annotation"][h[hk]], flag["annotation"][d], np.zeros(len(mem_alone), bool)])
             .astype(np.int64)]
    extras = _extra_keys(cols, h, hk, kinds, parent, flag, group_by_input_shape, group_by_stack_n,
                         group_by_overload_name)
    parts += [codes for codes, _ in extras]
    starts = np.concatenate([h_ts[hk], ts[d], m_ts])
    ends = np.concatenate([h_end[hk], ts[d] + dur[d], m_ts])
    E = len(starts)
    if not E:
        return []
    group, k = _group_codes(parts)
    order = np.lexsort((-ends, starts))  # torch's event order: by start, the enclosing event first
    first_seen = np.full(k, E, np.int64)
    np.minimum.at(first_seen, group[order], np.arange(E))
    rank = np.empty(k, np.int64)
    rank[np.argsort(first_seen, kind="stable")] = np.arange(k)
    group = rank[group]
    rep = np.empty(k, np.int64)  # each group's first event, in event order
    rep[group[order[np.sort(first_seen)]]] = order[np.sort(first_seen)]

    is_host, is_dev = src == 0, src == 1
    dev_ns = np.where(is_dev, np.concatenate([np.zeros(len(hk)), dur[d], np.zeros(len(mem_alone))]), 0.0) \
        if use_device else np.zeros(E)
    host_val = lambda v: np.concatenate([v[hk], np.zeros(len(d)), np.zeros(len(mem_alone))])  # noqa: E731
    mem_val = lambda types: np.concatenate([np.zeros(len(hk) + len(d)),  # noqa: E731
                                            np.where(np.isin(m_type, types), m_bytes, 0)])
    sums = {name: np.bincount(group, weights=values, minlength=k) for name, values in (
        ("cpu_time_total", host_val(h_dur.astype(np.float64))), ("self_cpu_time_total", host_val(self_cpu)),
        ("device_time_total", host_val(total_dev) + dev_ns), ("self_device_time_total", host_val(self_dev) + dev_ns),
        ("cpu_memory_usage", host_val(mem_cpu.astype(np.float64)) + mem_val(CPU_MEMORY_TYPES)),
        ("self_cpu_memory_usage", host_val(self_mem_cpu) + mem_val(CPU_MEMORY_TYPES)),
        ("device_memory_usage", host_val(mem_dev.astype(np.float64)) + mem_val(DEVICE_MEMORY_TYPES)),
        ("self_device_memory_usage", host_val(self_mem_dev) + mem_val(DEVICE_MEMORY_TYPES)),
        ("flops", host_val(flops.astype(np.float64))))}
    counts = np.bincount(group, minlength=k)
    cats = np.asarray(cols.cat, dtype=object)
    out = []
    for g in range(k):
        e = int(rep[g])
        r = int(row[e])
        memory = src[e] == 2
        grp = Group(MEMORY_ROW if memory else str(renamed_u[key_name[r]]),
                    "cpu_instant_event" if memory else str(cats[r]), bool(is_dev[e]), bool(parts[2][e]),
                    count=int(counts[g]), top_level=not (is_host[e] and has_parent[hk[e]]))
        for name, values in sums.items():
            v = float(values[g])
            setattr(grp, name, v / 1e3 if name.endswith("time_total") else int(round(v)))
        for _, fill in extras:
            fill(grp, e)
        out.append(grp)
    _attach_metrics([g for g in out if g.on_device], cols.metrics)
    return out


def _group_codes(parts: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """One code per row for its tuple of key codes (each column non-negative), and how many distinct tuples:
    the columns packed into one int64 (mixed radix) when their ranges allow, so one 1-D unique groups them
    (``np.unique(axis=0)`` sorts the rows as records, several times slower)."""
    code = np.zeros(len(parts[0]), np.int64)
    span = 1
    for col in parts:
        radix = int(col.max()) + 1 if len(col) else 1
        if span * radix >= 2**62:
            _, group = np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)
            group = group.reshape(-1)
            return group, int(group.max()) + 1 if len(group) else 0
        code = code * radix + col
        span *= radix
    distinct, group = np.unique(code, return_inverse=True)
    return group.reshape(-1), len(distinct)


def _extra_keys(cols: Columns, h: np.ndarray, hk: np.ndarray, kinds: tuple, parent: np.ndarray, flag: dict,
                by_shape: bool, stack_n: int, by_overload: bool) -> list:
    """The key columns torch's groupings add, each as (codes per event, fill(group, event) that sets the
    group's value from its first event). ``h``: the host rows, ``hk``: those kept (indexes into ``h``)."""
    n_host, n_dev, n_mem = kinds
    rows = h[hk].tolist()
    out = []

    def column(values: list, text, attr: str, empty):
        uniq, codes = unique_inverse(np.array([text(v) for v in values] + [text(empty)] * (n_dev + n_mem),
                                              dtype=object))

        def fill(g: Group, e: int) -> None:
            setattr(g, attr, values[e] if e < n_host else empty)
        return codes, fill

    if by_overload:
        names = [(cols.overload[r] or "") if cols.overload is not None else "" for r in rows]
        out.append(column(names, str, "overload_name", ""))
    if by_shape:
        shapes = [input_shapes(cols.shapes[r]) if cols.shapes is not None else [] for r in rows]
        out.append(column(shapes, str, "input_shapes", []))
    if stack_n > 0:
        names = np.asarray(cols.name, dtype=object)[h]
        stacks = _stacks(parent, flag["python"][h], flag["frontend"][h], names, stack_n)
        kept = [stacks[i] for i in hk.tolist()]
        out.append(column(kept, lambda v: "\x00".join(v), "stack", []))
    return out


def _linked_time(host_ext: np.ndarray, frontend: np.ndarray, dev_ext: np.ndarray, dev_dur: np.ndarray) -> np.ndarray:
    """Per host event, the time of the device work whose External id is its own (frontend events only)."""
    out = np.zeros(len(host_ext))
    linked = dev_ext > 0
    ids, inv = np.unique(dev_ext[linked], return_inverse=True)
    if not len(ids):
        return out
    per_id = np.bincount(inv.reshape(-1), weights=dev_dur[linked], minlength=len(ids))
    pos = np.minimum(np.searchsorted(ids, host_ext), len(ids) - 1)
    hit = frontend & (host_ext > 0) & (ids[pos] == host_ext)
    # one event per id takes it (the first), as torch's correlation map links one frontend event
    first = np.zeros(len(host_ext), bool)
    if hit.any():
        rows = np.flatnonzero(hit)
        _, keep = np.unique(host_ext[rows], return_index=True)
        first[rows[keep]] = True
    out[first] = per_id[pos[first]]
    return out


def _memory(cols: Columns, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CPU bytes, device bytes) of the [memory] records from each event's start to its end (both ends
    included, any thread: torch's MemRecordsAcc), and which records lie inside any event."""
    ts = np.asarray(cols.mem_ts, np.int64)
    if not len(ts):
        return np.zeros(len(start), np.int64), np.zeros(len(start), np.int64), np.zeros(0, bool)
    order = np.argsort(ts, kind="stable")
    sts = ts[order]
    b = np.asarray(cols.mem_bytes, np.int64)[order]
    kind = np.asarray(cols.mem_type, np.int64)[order]
    cum_cpu = np.concatenate([[0], np.cumsum(np.where(np.isin(kind, CPU_MEMORY_TYPES), b, 0))])
    cum_dev = np.concatenate([[0], np.cumsum(np.where(np.isin(kind, DEVICE_MEMORY_TYPES), b, 0))])
    lo = np.searchsorted(sts, start, "left")
    hi = np.searchsorted(sts, end, "right")
    covered = np.zeros(len(ts), bool)
    if len(start):  # inside the union of the events' intervals
        by_start = np.argsort(start, kind="stable")
        s, reach = start[by_start], np.maximum.accumulate(end[by_start])
        last = np.searchsorted(s, ts, "right") - 1
        covered = (last >= 0) & (reach[np.maximum(last, 0)] >= ts)
    return cum_cpu[hi] - cum_cpu[lo], cum_dev[hi] - cum_dev[lo], covered


def _merge_only_children(parent: np.ndarray, codes: np.ndarray, self_dev: np.ndarray) -> np.ndarray:
    """torch's ``_remove_dup_nodes``: an event that is the only child of a parent of the same name merges
    into it; its children move up and its device time replaces the parent's. Updates ``parent`` and
    ``self_dev`` in place; returns the mask of events kept."""
    alive = np.ones(len(parent), bool)
    while len(parent):
        has_parent = alive & (parent >= 0)
        nchild = np.bincount(parent[has_parent], minlength=len(parent))
        p = np.where(has_parent, parent, 0)
        dup = has_parent & (codes[p] == codes) & (nchild[p] == 1)
        dup &= ~dup[p]  # a chain of same-named events merges one link per pass (its top stays)
        if not dup.any():
            break
        gone = np.flatnonzero(dup)
        self_dev[parent[gone]] = self_dev[gone]  # torch: parent.kernels = child.kernels
        alive[gone] = False
        up = np.full(len(parent), -1, np.int64)
        up[gone] = parent[gone]
        moved = (parent >= 0) & dup[np.maximum(parent, 0)]  # children of a merged event now hang on its parent
        parent[moved] = up[parent[moved]]
    return alive


def _stacks(parent: np.ndarray, is_python: np.ndarray, frontend: np.ndarray, names: np.ndarray, n: int) -> list:
    """Per host event, the Python frames around it (its enclosing python_function slices, innermost first,
    torch's plumbing frames left out) up to ``n``: torch's FunctionEvent.stack. Ops and ranges only."""
    out: list = [[] for _ in range(len(parent))]
    text = names.tolist()
    for i in np.flatnonzero(frontend).tolist():
        frames, j = [], int(parent[i])
        while j >= 0 and len(frames) < n:
            if is_python[j] and _stack_entry_kept(str(text[j])):
                frames.append(str(text[j]))
            j = int(parent[j])
        out[i] = frames
    return out


def _attach_metrics(device_groups: list[Group], samples: dict) -> None:
    """mean/min/max of every per-kernel metric on the device rows of the same name."""
    if not samples:
        return
    by_name: dict[str, list[Group]] = {}
    for g in device_groups:
        by_name.setdefault(g.key, []).append(g)
    for label, (kernel_names, values) in samples.items():
        vals = np.asarray(values, np.float64)
        kn = np.asarray(kernel_names, dtype=object)
        ok = np.isfinite(vals)
        if not ok.any():
            continue
        uniq, inv = np.unique(kn[ok].astype(str), return_inverse=True)
        v = vals[ok]
        counts = np.bincount(inv, minlength=len(uniq))
        sums = np.bincount(inv, weights=v, minlength=len(uniq))
        lo, hi = np.full(len(uniq), np.inf), np.full(len(uniq), -np.inf)
        np.minimum.at(lo, inv, v)
        np.maximum.at(hi, inv, v)
        for name, c, s, a, b in zip(uniq.tolist(), counts.tolist(), sums.tolist(), lo.tolist(), hi.tolist()):
            for g in by_name.get(name, ()):
                g.metrics[label] = (s / c, a, b)
