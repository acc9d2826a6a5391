"""``profile.key_averages()``: torch's averages of the last trace, with torch's names, numbers and table.

``KeyAverages`` is a list of ``KeyAverage`` (torch's ``FunctionEventAvg`` attributes: ``key``, ``count``,
``cpu_time_total``, ``self_cpu_time_total``, ``device_time_total``, ``cpu_memory_usage``, ``input_shapes``,
``stack``, ... in µs and bytes as torch's), in torch's order; ``table(sort_by=..., row_limit=...)`` is torch's
table with torch's column labels, fitted to the terminal. The rules are torch's (``averages``), run on the
trace's columns: the same numbers whether torch is installed or not, from a TraceTable whichever made it: a
live profile (``from_builder``: its frozen builders) or trace files (``from_table``, ``xpuprof report --by op``).
"""
from __future__ import annotations

import enum
import sys
import warnings
from typing import Any, Iterable, Mapping

from .averages import Columns, Group, averages, unique_inverse  # noqa: F401  (unique_inverse: re-exported)
from .text import format_ns  # noqa: F401  (re-exported: the commands format times with it)



class DeviceType(enum.IntEnum):
    """torch's ``torch.autograd.DeviceType`` members an average can have (``str()`` as torch's); torch's own
    enum is used instead when torch is imported."""

    CPU = 0
    CUDA = 1
    XPU = 12
    PrivateUse1 = 20

    def __str__(self) -> str:
        return f"DeviceType.{self.name}"


def _device_type(on_device: bool, use_device: str | None):
    name = "CPU" if not on_device else {"cuda": "CUDA", "xpu": "XPU"}.get(str(use_device), "PrivateUse1")
    torch = sys.modules.get("torch")
    try:
        return getattr(torch.autograd.DeviceType, name) if torch is not None else DeviceType[name]
    except AttributeError:
        return DeviceType[name]


def _format_time(us: float) -> str:
    """torch's ``_format_time``: ``83.995us``, ``1.082ms``, ``1.000s``."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class KeyAverage:
    """One row of ``key_averages()``: torch's ``FunctionEventAvg`` attributes (times in µs, memory in bytes),
    plus ``category`` (the trace category of its events) and ``metrics`` (per-kernel hardware metrics:
    label -> (mean, min, max), device rows only)."""

    def __init__(self, g: Group, use_device: str | None, parent: str | None = None) -> None:
        self.key: str = g.key
        self.count: int = g.count
        self.node_id: int = -1
        self.is_async = False
        self.is_remote = False
        self.is_legacy = False
        self.use_device = use_device
        self.cpu_time_total: float = g.cpu_time_total
        self.self_cpu_time_total: float = g.self_cpu_time_total
        self.device_time_total: float = g.device_time_total
        self.self_device_time_total: float = g.self_device_time_total
        self.cpu_memory_usage: int = g.cpu_memory_usage
        self.self_cpu_memory_usage: int = g.self_cpu_memory_usage
        self.device_memory_usage: int = g.device_memory_usage
        self.self_device_memory_usage: int = g.self_device_memory_usage
        self.input_shapes: Any = g.input_shapes
        self.overload_name: str = g.overload_name
        self.stack: list = list(g.stack)
        self.scope: int = 0
        self.flops: int = g.flops
        self.is_user_annotation: bool = g.is_user_annotation
        self.device_type = _device_type(g.on_device, use_device)
        self.cpu_parent = parent  # torch: the first event's parent; here its name (None: a top-level event)
        self.cpu_children: list = []
        self.category: str = g.category
        self.metrics: dict[str, tuple[float, float, float]] = dict(g.metrics)
        self._on_device = g.on_device

    @property
    def cpu_time(self) -> float:
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    @property
    def cuda_time(self) -> float:  # torch's deprecated name
        warnings.warn("`cuda_time` is deprecated, please use `device_time` instead.", FutureWarning, stacklevel=2)
        return self.device_time

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    device_time_str = property(lambda self: _format_time(self.device_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    self_device_time_total_str = property(lambda self: _format_time(self.self_device_time_total))

    def to_dict(self) -> dict[str, Any]:
        """The numbers as data: torch's attribute names (µs, bytes)."""
        d = {k: getattr(self, k) for k in ("key", "count", "cpu_time_total", "self_cpu_time_total",
                                           "device_time_total", "self_device_time_total", "cpu_memory_usage",
                                           "self_cpu_memory_usage", "device_memory_usage",
                                           "self_device_memory_usage", "flops", "is_user_annotation")}
        d.update(device_type=str(self.device_type).split(".")[-1], category=self.category)
        if self.input_shapes != "":
            d["input_shapes"] = self.input_shapes
        if self.stack:
            d["stack"] = self.stack
        if self.metrics:
            d["metrics"] = {k: dict(zip(("mean", "min", "max"), v)) for k, v in self.metrics.items()}
        return d

    def __repr__(self) -> str:
        dev = self.use_device or "cuda"
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str}  self_{dev}_time={self.self_device_time_total_str} "
                f"{dev}_time={self.device_time_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage} {dev}_memory_usage={self.device_memory_usage}>")


class KeyAverages(list):
    """torch's ``EventList`` of averages: iterate it (``for e in prof.key_averages(): e.key, e.self_cpu_time_total``),
    index it, and print ``table(sort_by=..., row_limit=...)``."""

    def __init__(self, rows: Iterable[KeyAverage] = (), *, use_device: str | None = None,
                 profile_memory: bool = False, with_flops: bool = False, metric_units: Mapping[str, str] | None = None):
        super().__init__(rows)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops
        self.metric_units = dict(metric_units or {})

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_columns(cls, cols: Columns, *, use_device: str | None, profile_memory: bool = False,
                     with_flops: bool = False, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> "KeyAverages":
        groups = averages(cols, use_device=use_device, group_by_input_shape=group_by_input_shape,
                          group_by_stack_n=group_by_stack_n, group_by_overload_name=group_by_overload_name)
        units = {}
        for label in cols.metrics:
            metric, _, unit = str(label).partition("::")
            units[label] = unit
        return cls((KeyAverage(g, use_device) for g in groups), use_device=use_device, profile_memory=profile_memory,
                   with_flops=with_flops, metric_units=units)

    @classmethod
    def from_table(cls, table, *, use_device: str | None = "", profile_memory: bool | None = None,
                   with_flops: bool | None = None, **group_by) -> "KeyAverages":
        """From a TraceTable (``TraceBuilder.freeze()``, ``trace.read``: every trace of it together);
        ``use_device`` "" guesses it from the traces' categories and backends; ``profile_memory`` and
        ``with_flops`` None: as the last trace's metadata says."""
        from .trace_columns import columns_of_table, guess_use_device

        cols = columns_of_table(table, shapes=bool(group_by.get("group_by_input_shape")),
                                overloads=bool(group_by.get("group_by_overload_name")))
        meta = table.traces[-1].header if table.traces else {}
        if use_device == "":  # a plugin backend's device work: torch's name for the device of its category
            use_device = guess_use_device(cols, meta)
        return cls.from_columns(cols, use_device=use_device,
                                profile_memory=bool(meta.get("profile_memory")) if profile_memory is None else profile_memory,
                                with_flops=bool(meta.get("with_flops")) if with_flops is None else with_flops, **group_by)

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]], *, use_device: str | None = "", metadata=None,
                    **options) -> "KeyAverages":
        """From Chrome trace events (dicts, ``ts``/``dur`` in µs; ``metadata``: the trace's top-level keys), read
        by the rules a trace file's events follow (``trace.read.kineto.read_document``)."""
        from ..trace.read.kineto import read_document

        doc = {**{k: v for k, v in (metadata or {}).items() if k != "traceEvents"}, "traceEvents": list(events)}
        return cls.from_table(read_document(doc), use_device=use_device, **options)

    @classmethod
    def from_builder(cls, builders, *, use_device: str | None = None, **options) -> "KeyAverages":
        """From one ``TraceBuilder`` or several (``acc_events``: every cycle's events together)."""
        from ..trace.table.model import TraceTable

        builders = builders if isinstance(builders, (list, tuple)) else [builders]
        return cls.from_table(TraceTable.concat(b.freeze() for b in builders),
                              use_device="" if use_device is None else use_device, **options)

    # ------------------------------------------------------------------ torch's EventList methods
    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def total_average(self) -> KeyAverage:
        """Every row summed into one named ``Total`` (torch's ``EventList.total_average``)."""
        g = Group("Total", "", False, False, count=sum(e.count for e in self))
        for attr in ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
                     "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage",
                     "flops"):
            setattr(g, attr, sum(getattr(e, attr) for e in self))
        return KeyAverage(g, self._use_device)

    def sort_keys(self) -> list[str]:
        from .averages_table import sort_keys

        return sort_keys(self)

    def sorted(self, sort_by: str | None) -> list[KeyAverage]:
        """The rows by ``sort_by`` (torch's attribute names, ``cuda``/``xpu`` for the device's; a per-kernel
        metric's name), the largest first, ties in torch's order; ``None``: torch's order."""
        from .averages_table import sorted_rows

        return sorted_rows(self, sort_by)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None, *, width: int | None = None,
              wide: bool = False, categories: Iterable[str] | None = None) -> str:
        """torch's ``EventList.table``: its columns, labels and number formats, fitted to ``width`` (default:
        the terminal's): names wrap at ``max_name_column_width`` instead of being cut, and columns torch
        always prints are left out first when the terminal is too narrow, with a line naming them (``wide=True``
        keeps every column whatever the width). ``categories``: only rows of these trace categories."""
        from .averages_table import render

        return render(self, sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
                      max_name_column_width=max_name_column_width, max_shapes_column_width=max_shapes_column_width,
                      header=header, top_level_events_only=top_level_events_only, time_unit=time_unit, width=width,
                      wide=wide, categories=categories)

    def to_dicts(self, sort_by: str | None = None) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.sorted(sort_by)]

    def __str__(self) -> str:
        return self.table()
