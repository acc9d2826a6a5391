"""Metric names -> sources: the one place a requested metric name is resolved.

Sources are the collectors (``registry``) and the device backends' own metrics (per-kernel XPU
scope metrics, CUDA PM sampling, ROCm counters), which a backend validates against its device or
the catalogs. A name may be qualified ``<collector>:<metric>`` to pick one collector.

- A name one collector offers goes to that collector.
- A name several collectors offer (``gpu_power``: NVML, amdsmi, Sysman) goes to the one that can
  run here; when none can, to all of them (each then says in the trace why it could not); when
  several can, it is ambiguous: one error listing the qualified spellings.
- Any other name is left to the device backends when the run records device activities;
  in a host-only run nothing could record it, so it is an error with close matches and the list
  of which collector offers what.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from .base import CollectorError, MetricInfo


@dataclass
class MetricPlan:
    collectors: dict[str, list[str]] = field(default_factory=dict)  # collector -> its metric names
    device: list[str] = field(default_factory=list)  # names for the device backends, in request order


def _offers_text(offered: Mapping[str, list[MetricInfo]]) -> str:
    parts = [f"{c}: {', '.join(m.name for m in ms)}" for c, ms in offered.items() if ms]
    return "; ".join(parts) if parts else "no collector offers any metric"


def _catalog_index() -> dict[str, list[tuple[str, str]]]:
    """Per-kernel metric name -> the (vendor, family) catalogs that list it."""
    try:
        from .. import catalogs
        index: dict[str, list[tuple[str, str]]] = {}
        for cat in catalogs.load_catalogs():
            for name in cat.all_metric_names():
                index.setdefault(name, []).append((cat.vendor, cat.family))
        return index
    except Exception:  # catalogs only improve the messages
        return {}


def _base_name(selector: str) -> str:
    """``GpuTime::ns`` / ``GpuTime[ns]`` -> ``GpuTime`` (a malformed selector stays as written)."""
    from ..catalogs import MetricSelectionError, parse_selector

    try:
        return parse_selector(selector)[0]
    except MetricSelectionError:
        return selector


def _needs_device_activities(name: str, where: list[tuple[str, str]], sampled_by: list[str]) -> str:
    """A per-kernel metric asked for in a run that selects no device activity: what it needs."""
    vendors = list(dict.fromkeys(v for v, _ in where))
    groups = " or ".join(f"activities=['cpu', {v!r}]" for v in vendors)
    sample = (f"; or, sampled device-wide over time instead of per kernel, ask for "
              f"{' or '.join(repr(f'{c}:{name}') for c in sampled_by)}" if sampled_by else "")
    return (f"metric {name!r} is a per-kernel device metric ({', '.join(f'{v}/{f}' for v, f in where)} "
            f"catalog{'s' if len(where) > 1 else ''}): it needs device activities selected, e.g. {groups} (or 'kernel'), and this run "
            f"records no device activity{sample}")


def resolve_metrics(names: Iterable[str], *, device_activities: bool, config=None,
                    offered: Mapping[str, list[MetricInfo]] | None = None,
                    available: Callable[[str], bool] | None = None,
                    qualified_only: Mapping[str, Callable[[str], bool]] | None = None) -> MetricPlan:
    """Split requested metric names between collectors and device backends (see module doc)."""
    from . import registry

    requested = [str(n).strip() for n in names if str(n).strip()]
    plan = MetricPlan()
    if not requested:
        return plan
    offered = registry.offered_metrics(config) if offered is None else offered
    # collectors whose names only resolve qualified ("xpu_metrics:XVE_ACTIVE"), with what they accept
    qualified_only = registry.qualified_only(config) if qualified_only is None else qualified_only
    by_metric: dict[str, list[str]] = {}
    for collector, infos in offered.items():
        if collector in qualified_only:
            continue
        for info in infos:
            by_metric.setdefault(info.name, []).append(collector)
    errors: list[str] = []
    probed: dict[str, bool] = {}
    device_catalogs: dict[str, list[tuple[str, str]]] | None = None  # loaded only for an unresolved name

    def can_run(collector: str) -> bool:
        if collector not in probed:
            if available is not None:
                probed[collector] = bool(available(collector))
            else:
                try:
                    probed[collector] = bool(registry.get_collector_class(collector).probe().available)
                except Exception:
                    probed[collector] = False
        return probed[collector]

    for name in requested:
        collector, sep, metric = name.partition(":")
        if sep and not metric.startswith(":") and collector in offered:  # "nvml:gpu_power"; "a::unit" is a selector
            accepts = qualified_only.get(collector)
            if metric not in {m.name for m in offered[collector]} and not (accepts and accepts(metric)):
                close = difflib.get_close_matches(metric, [m.name for m in offered[collector]], n=3, cutoff=0.5)
                hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
                errors.append(f"collector {collector!r} does not offer {metric!r}{hint}; it offers "
                              f"{', '.join(m.name for m in offered[collector])}")
                continue
            plan.collectors.setdefault(collector, []).append(metric)
            continue
        owners = by_metric.get(name, [])
        if len(owners) > 1:
            runnable = [c for c in owners if can_run(c)]
            if len(runnable) > 1:
                errors.append(f"metric {name!r} is ambiguous: collectors {', '.join(runnable)} can all record it "
                              f"here; ask for one of {', '.join(f'{c}:{name}' for c in runnable)}")
                continue
            for collector in runnable or owners:
                plan.collectors.setdefault(collector, []).append(name)
        elif owners:
            plan.collectors.setdefault(owners[0], []).append(name)
        elif device_activities:
            plan.device.append(name)
        else:
            device_catalogs = _catalog_index() if device_catalogs is None else device_catalogs
            base = _base_name(name)
            if base in device_catalogs:
                sampled_by = [c for c, accepts in qualified_only.items()
                              if base in {m.name for m in offered.get(c, [])} or (accepts and accepts(base))]
                errors.append(_needs_device_activities(base, device_catalogs[base], sampled_by))
                continue
            pool = [n for n in list(by_metric) + list(device_catalogs) if n != base]
            close = difflib.get_close_matches(base, pool, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            errors.append(f"unknown metric {name!r}: no collector offers it and this run records no device "
                          f"activity that could{hint}")
    if errors:
        raise CollectorError("; ".join(errors) + f". Collectors offer: {_offers_text(offered)} "
                             f"(`xpuprof metrics` lists every collector and catalog)")
    for collector in plan.collectors:
        plan.collectors[collector] = list(dict.fromkeys(plan.collectors[collector]))
    return plan
