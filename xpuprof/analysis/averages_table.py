"""``KeyAverages.table()``: torch's ``_build_table`` (its columns, labels, number formats, sums and footer),
rendered by ``text.render_table`` so it fits the terminal: names wrap at torch's name width instead of being
cut with ``...``, and the columns torch always prints are left out first on a narrow terminal, with a line
naming them. Sorting (``sorted_rows``) is torch's: ``getattr(row, sort_by)`` with ``cuda``/``xpu`` read as
``device``, the largest first, ties in torch's order; per-kernel metric names sort too (xpuprof's columns).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

from .text import Column, format_value, render_table, terminal_width, wrapped

# "KeyAverages" / "KeyAverage" in the annotations are summary's classes: summary calls into this module, so it is
# not imported here (not even for type checking: the package has no import cycle).

# torch's attributes a table can be sorted by (its EventList.table docstring names most; every numeric
# FunctionEventAvg attribute works there), before cuda/xpu/privateuse1 are read as "device".
SORT_ATTRIBUTES = ("cpu_time", "device_time", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                   "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
                   "self_device_memory_usage", "count", "flops")
TORCH_SORT_KEYS = ("cpu_time", "cuda_time", "xpu_time", "cpu_time_total", "cuda_time_total", "xpu_time_total",
                   "self_cpu_time_total", "self_cuda_time_total", "self_xpu_time_total", "device_time_total",
                   "self_device_time_total", "cpu_memory_usage", "cuda_memory_usage", "xpu_memory_usage",
                   "self_cpu_memory_usage", "self_cuda_memory_usage", "self_xpu_memory_usage", "count")
_STATS = ("mean", "min", "max")
API_HINT = "table(wide=True) shows them"


def _device_attr(sort_by: str) -> str:
    return sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")


def sort_keys(avgs: "KeyAverages") -> list[str]:
    """Every valid ``sort_by``: torch's keys, then the per-kernel metrics (``<metric>`` and ``<metric> min|max``)."""
    keys = list(TORCH_SORT_KEYS) + [a for a in SORT_ATTRIBUTES if a not in TORCH_SORT_KEYS]
    for label in avgs.metric_units:
        short = label.split("::", 1)[0]
        keys += [short] + [f"{short} {s}" for s in ("min", "max")]
    return keys


def _metric_key(avgs: "KeyAverages", sort_by: str) -> tuple[str, int] | None:
    low = sort_by.strip().lower()
    for label in avgs.metric_units:
        short = label.split("::", 1)[0].lower()
        for i, stat in enumerate(_STATS):
            if low in (f"{label.lower()} {stat}", f"{short} {stat}", f"{label.lower()}.{stat}", f"{short}.{stat}"):
                return label, i
        if low in (label.lower(), short):
            return label, 0
    return None


def check_sort_key(avgs: "KeyAverages", sort_by: str | None) -> None:
    """``ValueError`` with the closest valid key for a ``sort_by`` no row can be sorted by."""
    if sort_by is None or _device_attr(str(sort_by)) in SORT_ATTRIBUTES or _metric_key(avgs, str(sort_by)):
        return
    import difflib

    valid = sort_keys(avgs)
    close = difflib.get_close_matches(str(sort_by), valid, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise ValueError(f"cannot sort by {sort_by!r}{hint} Valid: {', '.join(valid)}")


def sorted_rows(avgs: "KeyAverages", sort_by: str | None) -> list["KeyAverage"]:
    check_sort_key(avgs, sort_by)
    rows = list(avgs)
    if sort_by is None:
        return rows
    metric = _metric_key(avgs, str(sort_by)) if _device_attr(str(sort_by)) not in SORT_ATTRIBUTES else None
    if metric is not None:
        label, stat = metric
        have = [e for e in rows if label in e.metrics]
        return sorted(have, key=lambda e: e.metrics[label][stat], reverse=True) + [e for e in rows if label not in e.metrics]
    attr = _device_attr(str(sort_by))
    return sorted(rows, key=lambda e: getattr(e, attr), reverse=True)  # stable: ties keep torch's order


# ----------------------------------------------------------------------------- torch's formats
def _format_time(us: float, unit: str | None = None) -> str:
    if unit == "s":
        return f"{us / 1e6:.3f}s"
    if unit == "ms":
        return f"{us / 1e3:.3f}ms"
    if unit == "us":
        return f"{us:.3f}us"
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_share(part: float, total: float) -> str:
    if total == 0:
        return "NaN"
    return f"{part * 100.0 / total:.2f}%"


def _format_memory(nbytes: int) -> str:
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} KB"
    return f"{nbytes} B"


def _flops_scale(smallest: float) -> tuple[float, str]:
    names = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
    level = int(max(0, min(math.log10(smallest) / 3, float(len(names) - 1))))
    return 10.0 ** (-3 * level), names[level]


def _in_categories(rows: list, categories: Iterable[str] | None) -> list:
    if categories is None:
        return rows
    from ..activity import category_spellings

    wanted = {s for c in categories for s in category_spellings(str(c))}
    return [e for e in rows if e.category in wanted or (e.key == "[memory]" and "[memory]" in wanted)]


def render(avgs: "KeyAverages", *, sort_by: str | None = None, row_limit: int | None = 100,
           max_src_column_width: int | None = 75, max_name_column_width: int | None = 55,
           max_shapes_column_width: int | None = 80, header: str | None = None, top_level_events_only: bool = False,
           time_unit: str | None = None, width: int | None = None, wide: bool = False,
           categories: Iterable[str] | None = None, widen_hint: str = API_HINT) -> str:
    """torch's table of ``avgs`` (see the module docstring)."""
    check_sort_key(avgs, sort_by)
    if time_unit not in (None, "s", "ms", "us"):
        raise ValueError(f"time_unit must be one of 's', 'ms', 'us' or None, not {time_unit!r}")
    width = None if wide else (width or terminal_width())
    events = _in_categories(list(avgs), categories)
    if not events:
        what = f"no {', '.join(map(str, categories))} events" if categories is not None else "no events"
        return wrapped(f"({what} in this trace)", width)
    use_device = avgs._use_device
    dev = use_device.upper() if use_device else "None"
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    has_device_mem = any(e.self_device_memory_usage > 0 for e in events)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    has_overload = any(e.overload_name for e in events)
    has_stack = any(e.stack for e in events)
    flops = [e.flops for e in events if e.flops > 0] if avgs._with_flops else []
    labels = [m for m in avgs.metric_units if any(m in e.metrics for e in events)]
    sum_cpu = sum(e.self_cpu_time_total for e in events)
    sum_dev = sum(e.self_device_time_total for e in events if e._on_device and not e.is_user_annotation)

    sort_attr = _device_attr(sort_by) if sort_by else None
    header_of_sort = {"self_cpu_time_total": "Self CPU", "cpu_time_total": "CPU total", "cpu_time": "CPU time avg",
                      "self_device_time_total": f"Self {dev}", "device_time_total": f"{dev} total",
                      "device_time": f"{dev} time avg", "cpu_memory_usage": "CPU Mem",
                      "self_cpu_memory_usage": "Self CPU Mem", "device_memory_usage": f"{dev} Mem",
                      "self_device_memory_usage": f"Self {dev} Mem"}.get(sort_attr or "", "# of Calls")
    name_w = max_name_column_width or None
    spec: list[tuple[Column, object]] = [(Column("Name", "left", wrap=True, min_width=16, max_width=name_w),
                                          lambda e: e.key)]
    if has_overload:
        spec.append((Column("Overload Name", "left", wrap=True, min_width=12, max_width=name_w),
                     lambda e: e.overload_name))
    spec += [(Column("Self CPU %", optional=3), lambda e: _format_share(e.self_cpu_time_total, sum_cpu)),
             (Column("Self CPU"), lambda e: _format_time(e.self_cpu_time_total, time_unit)),
             (Column("CPU total %", optional=5), lambda e: _format_share(e.cpu_time_total, sum_cpu)),
             (Column("CPU total", optional=2), lambda e: _format_time(e.cpu_time_total, time_unit)),
             (Column("CPU time avg", optional=4), lambda e: _format_time(e.cpu_time, time_unit))]
    if has_device_time:
        spec += [(Column(f"Self {dev}"), lambda e: _format_time(e.self_device_time_total, time_unit)),
                 (Column(f"Self {dev} %", optional=3), lambda e: _format_share(e.self_device_time_total, sum_dev)),
                 (Column(f"{dev} total", optional=2), lambda e: _format_time(e.device_time_total, time_unit)),
                 (Column(f"{dev} time avg", optional=4), lambda e: _format_time(e.device_time, time_unit))]
    if avgs._profile_memory:
        spec += [(Column("CPU Mem", optional=6), lambda e: _format_memory(e.cpu_memory_usage)),
                 (Column("Self CPU Mem", optional=6), lambda e: _format_memory(e.self_cpu_memory_usage))]
        if use_device and has_device_mem:
            spec += [(Column(f"{dev} Mem", optional=6), lambda e: _format_memory(e.device_memory_usage)),
                     (Column(f"Self {dev} Mem", optional=6), lambda e: _format_memory(e.self_device_memory_usage))]
    spec.append((Column("# of Calls"), lambda e: str(e.count)))
    if has_shapes:
        spec.append((Column("Input Shapes", "left", wrap=True, min_width=12, max_width=max_shapes_column_width or None),
                     lambda e: str(e.input_shapes)))
    if flops:
        scale, flops_head = _flops_scale(min(flops))
        spec.append((Column(f"Total {flops_head}", optional=7),
                     lambda e: f"{e.flops * scale:.3f}" if e.flops > 0 else "--"))
    if has_stack:
        spec.append((Column("Source Location", "left", wrap=True, min_width=16, max_width=max_src_column_width or None),
                     lambda e: list(e.stack)))
    for label in labels:
        metric, _, unit = label.partition("::")
        spec.append((Column(metric if unit else f"{metric} [no unit]", optional=8),
                     lambda e, m=label, u=unit: format_value(e.metrics[m][0], u) if m in e.metrics else ""))
    # the column the rows are sorted by stays, whatever the width
    metric = _metric_key(avgs, str(sort_by)) if sort_by and sort_attr not in SORT_ATTRIBUTES else None
    if metric is not None:
        name, _, unit = metric[0].partition("::")
        header_of_sort = name if unit else f"{name} [no unit]"
    spec = [(replace(c, optional=0) if c.header == header_of_sort else c, f) for c, f in spec]

    rows = []
    shown = {id(e) for e in events}
    for e in sorted_rows(avgs, sort_by):
        if id(e) not in shown:
            continue
        if row_limit is not None and row_limit >= 0 and len(rows) == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        rows.append([f(e) for _, f in spec])
    footer = [f"Self CPU time total: {_format_time(sum_cpu, time_unit)}"]
    if has_device_time:
        footer.append(f"Self {dev} time total: {_format_time(sum_dev, time_unit)}")
    title = header
    if top_level_events_only:
        title = ((header + "\n") if header else "") + "This report only display top-level ops statistics"
    return render_table([c for c, _ in spec], rows, title=title, width=width, widen_hint=widen_hint, notes=footer)
