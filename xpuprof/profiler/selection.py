"""Which sources a profile run uses, and why anything asked for is missing.

Backend choice (registry, explicit names, probes), the metric checks made before anything starts,
the metric-collector plan, and the explanations a trace carries when device work or requested
activities cannot be recorded ("why nothing ran").
"""
from __future__ import annotations

import logging

from .. import diagnostics
from ..activity import DEVICE_GROUP, ActivityType, default_activity_types, parse_activity_types
from ..backends import registry
from ..backends.base import Backend, BackendError, ProbeResult
from ..config.options import ProfilerConfig

log = logging.getLogger("xpuprof")

# Activities the profiler records itself; every other type needs a backend.
HOST_ACTIVITIES = frozenset({ActivityType.CPU_OP, ActivityType.USER_ANNOTATION, ActivityType.CPU_INSTANT_EVENT,
                             ActivityType.PYTHON_FUNCTION})
_DEVICE_ACTIVITIES = frozenset(ActivityType) - HOST_ACTIVITIES
# Activities that collect hardware metrics: they join a run only when metrics are requested.
METRIC_ACTIVITIES = frozenset({ActivityType.XPU_SCOPE_PROFILER, ActivityType.GPU_PM_COUNTER,
                               ActivityType.HARDWARE_COUNTERS})

# Plugin fault stages a session reports itself (its errors() reach backend_errors).
_SESSION_STAGES = frozenset({"start", "stop", "process", "events", "close", "device_properties", "metadata", "errors",
                             "dropped_records", "push_correlation_id", "pop_correlation_id"})


def with_metric_activities(config: ProfilerConfig) -> ProfilerConfig:
    """The one rule that turns a metrics request into metric collection on the device.

    Metric names left for the device backends (collector names are planned out before this) plus
    selected device work (explicitly, by group or by default) add the metric activity types, so each
    backend picks its metric session (XPU: the scope profiler; CUDA: PM sampling; sim: per-kernel
    counters). Metric activities without names stay as asked: the backend says that names are needed.
    """
    if not config.experimental.profiler_metrics:
        return config
    device_work = config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES)
    if not device_work or config.activities >= METRIC_ACTIVITIES:
        return config
    return config.with_changes(activities=config.activities | METRIC_ACTIVITIES)


def parse_activities(activities) -> frozenset[ActivityType]:
    """``parse_activity_types`` (names, aliases, group names, torch ProfilerActivity), None = the defaults."""
    if activities is None:
        return ProfilerConfig().activities
    out = parse_activity_types(activities)
    if not out:
        raise ValueError("activities is empty: name at least one activity type (or leave it None for the defaults)")
    return out


# ----------------------------------------------------------------------------- backend selection
def select_backends(config: ProfilerConfig, probes: dict[str, ProbeResult] | None = None) -> list[Backend]:
    """Instantiate the backends this run uses. Named backends must be available (or it raises).

    The candidates are probed all at once (``registry.probe_many``): starting a profile waits for the
    slowest probe, once per process. ``probes``, when given, receives each probe's result, so that
    ``explain_host_only`` says why without asking again."""
    disabled = set(registry.disabled_backends(config))  # config key + XPUPROF_DISABLE_BACKENDS + Kineto alias
    device_types = config.activities - HOST_ACTIVITIES
    if config.backends is not None:
        named: dict[str, type[Backend]] = {}
        for name in config.backends:
            if name in disabled:
                raise BackendError(f"backend {name!r} is both requested and in disabled_backends")
            named[name] = registry.get_backend_class(name, config)  # unknown name -> ValueError listing the known ones
        results = registry.probe_many(named)
        for name, probe in results.items():
            if isinstance(probe, Exception):
                raise probe
            if not probe.available:
                raise BackendError(f"backend {name!r} is not available here: {probe.reason}")
        return [cls() for cls in named.values()]
    if not device_types:
        return []  # host-only run: nothing to probe
    candidates: dict[str, type[Backend]] = {}
    for name in registry.backend_names(config):  # loads config.plugin_paths plugins on first use
        if name in registry.EXPLICIT_ONLY or name in disabled:
            continue
        try:
            cls = registry.get_backend_class(name)
            if cls.supported_activities() & device_types:
                candidates[name] = cls
        except Exception as exc:  # a broken backend must not stop the others
            _probe_failed(name, exc)
    chosen: list[Backend] = []
    for name, probe in registry.probe_many(candidates).items():
        if isinstance(probe, Exception):
            _probe_failed(name, probe)
            continue
        if probes is not None:
            probes[name] = probe
        if probe.available:
            chosen.append(candidates[name]())
        else:
            log.debug("backend %s not used: %s", name, probe.reason)
    return chosen


def _probe_failed(name: str, exc: Exception) -> None:
    # a broken backend is reported once per process, not per run
    diagnostics.warn_once(log, ("backend-probe-failed", name),
                          "xpuprof: backend %s could not be probed: %s: %s", name, type(exc).__name__, exc)


def _plugin_failed(name: str) -> bool:
    """Whether backend ``name`` is a plugin with a recorded fault outside a session (probe,
    supported_activities, configure, a missed deadline): logged when it happened, in backend_errors."""
    origin = registry.plugin_origins().get(name)
    if origin is None:
        return False
    from ..plugins import faults as plugin_faults

    return plugin_faults.abandoned(origin) is not None or any(
        f.stage not in _SESSION_STAGES for f in plugin_faults.faults(origin))


def _check_metrics_collectable(config: ProfilerConfig, backends: list[Backend]) -> None:
    """Metric names left for the device, and no chosen backend that collects metrics: one clear error
    before anything starts (never a trace that silently lacks what was asked for)."""
    metrics = config.experimental.profiler_metrics
    collecting = [b for b in backends if type(b).supported_activities() & METRIC_ACTIVITIES]
    if not metrics:
        return
    if collecting:
        for b in collecting:  # names a backend can never collect fail here, with close matches
            type(b).check_metrics(metrics)
        return
    if backends:
        why = f"the backends in use ({', '.join(b.name for b in backends)}) collect no hardware metrics"
    elif not config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES):
        why = "no device activity is selected (add 'xpu', 'cuda' or 'gpu' to activities)"
    else:
        reasons = "; ".join(f"{name}: {reason}" for name, reason in _unavailable_reasons(config)) or "none is registered"
        why = f"no device backend can run here ({reasons})"
    unknown = _unknown_in_catalogs(metrics)  # no device checks the names here, so the catalogs do
    raise BackendError(f"{unknown}metrics {', '.join(map(repr, metrics))} were requested but nothing can collect "
                       f"them: {why}. `xpuprof devices` says which backends run here; `xpuprof metrics` lists the "
                       "metric names")


def _unknown_in_catalogs(metrics) -> str:
    """The names no catalog in metrics/ knows, with close matches (a paragraph ending in a newline; "" when
    every name is known or the catalogs cannot be read)."""
    from .. import catalogs

    try:
        index: dict[str, list[str]] = {}
        for cat in catalogs.load_catalogs():
            for name in [*cat.all_metric_names(), *cat.derived]:
                index.setdefault(name, []).append(f"{cat.vendor}/{cat.family}")
        names = [catalogs.parse_selector(m)[0] for m in metrics]
    except (catalogs.CatalogError, catalogs.MetricSelectionError, OSError) as exc:
        return f"(the metric names could not be checked against the catalogs: {exc})\n"
    lines = []
    for name in dict.fromkeys(n for n in names if n not in index):
        close = catalogs.close_matches(name, index)
        hint = "did you mean " + "; ".join(f"{c} ({', '.join(dict.fromkeys(index[c]))})" for c in close) + "?" \
            if close else "no similar metric in any catalog"
        lines.append(f"  {name!r}: {hint}")
    if not lines:
        return ""
    return ("unknown metric name(s), checked against the catalogs in metrics/ since no device here checks them "
            "(names are case-sensitive):\n" + "\n".join(lines) + "\n")


def _unavailable_reasons(config: ProfilerConfig, probes: dict[str, ProbeResult] | None = None) -> list[tuple[str, str]]:
    """(backend, probe reason or the switch that disabled it) for every auto-selectable backend that is not
    available. ``probes``: results already known (``select_backends``); the others are probed at once."""
    disabled = registry.disabled_backends(config)
    known = dict(probes or {})
    names = [n for n in registry.backend_names(config) if n not in registry.EXPLICIT_ONLY]
    failed: dict[str, str] = {}
    missing: dict[str, type[Backend]] = {}
    for name in names:
        if name in disabled or name in known:
            continue
        try:
            missing[name] = registry.get_backend_class(name)
        except Exception as exc:  # reported by select_backends already
            failed[name] = f"probe failed: {exc}"
    for name, probe in registry.probe_many(missing).items():
        if isinstance(probe, Exception):
            failed[name] = f"probe failed: {probe}"
        else:
            known[name] = probe
    out = []
    for name in names:
        if name in disabled:  # switched off is a reason too: all off must not read as "nothing is wrong"
            out.append((name, disabled[name]))
        elif name in failed:
            out.append((name, failed[name]))
        elif not known[name].available:
            out.append((name, known[name].reason))
    return out


# ----------------------------------------------------------------------------- metric collectors
def plan_collectors(config: ProfilerConfig) -> tuple[ProfilerConfig, dict[str, list[str]]]:
    """Resolve the requested metric names (``collectors.resolve``) before anything starts.

    Returns the config the backends see (their own metric names only) and collector -> metrics.
    Unknown or ambiguous names, and requests a collector rejects, raise ``CollectorError``.
    """
    names = config.experimental.profiler_metrics
    if not names:
        return config, {}
    from dataclasses import replace as _replace

    from ..collectors import registry as collector_registry
    from ..collectors.resolve import resolve_metrics

    plan = resolve_metrics(names, device_activities=bool(config.activities - HOST_ACTIVITIES), config=config)
    if not plan.collectors:
        return config, {}
    interval_s = config.experimental.metrics_interval_ms / 1e3
    for name, metrics in plan.collectors.items():
        collector_registry.get_collector_class(name, config)(metrics, interval_s)  # validate() before start
    config = config.with_changes(experimental=_replace(config.experimental, profiler_metrics=plan.device))
    return config, plan.collectors




# ----------------------------------------------------------------------------- why something is missing
def activities_not_collected(config: ProfilerConfig, backends: list[Backend],
                             served: set[ActivityType]) -> dict[str, str]:
    """Explicitly requested device activity groups (or single types outside the groups) that no backend
    in use records: warned once, listed in the trace. With no backend at all,
    ``device_backends_unavailable`` says why instead."""
    if not backends or config.activities == default_activity_types():
        return {}
    asked = config.activities - HOST_ACTIVITIES
    if config.activities >= default_activity_types():  # the defaults plus more: nobody named the defaults one by one
        asked -= default_activity_types()
    in_use = ", ".join(b.name for b in backends)
    failed = [b.name for b in backends if _plugin_failed(b.name)]
    why = f"no backend in use records it (in use: {in_use})"
    if failed:
        why += f"; failed: {', '.join(failed)} (see backend_errors)"
    out: dict[str, str] = {}
    work = asked & (DEVICE_GROUP - {ActivityType.GPU_USER_ANNOTATION, ActivityType.EXTERNAL_CORRELATION})
    if work and not work & served:
        out["device activities (" + ", ".join(sorted(t.value for t in work)) + ")"] = why
    metric = asked & METRIC_ACTIVITIES
    if metric and not metric & served:
        out["metric activities (" + ", ".join(sorted(t.value for t in metric)) + ")"] = why
    for t in sorted(asked - DEVICE_GROUP - METRIC_ACTIVITIES - served, key=lambda t: t.value):
        out[t.value] = why
    # When every backend in use failed, the failure (logged once where it happened) is the reason:
    # the trace lists what was not collected, the log does not say the same failure twice.
    if out and len(failed) < len(backends) and diagnostics.first("activities-not-collected", *sorted(out)):
        log.warning("xpuprof: requested activities that nothing in this run records: %s",
                    "; ".join(f"{k}: {v}" for k, v in out.items()))
    return out


def plugin_errors(config: ProfilerConfig, active: set[str]) -> dict[str, list[str]]:
    """Faults of plugin backends outside a session (probe, supported_activities, configure, a missed
    deadline) for the plugins this run could have used and that took no part: the trace says why."""
    from ..plugins import faults as plugin_faults

    named = config.backends
    if named is None and not config.activities - HOST_ACTIVITIES:
        return {}
    disabled = registry.disabled_backends(config)
    out: dict[str, list[str]] = {}
    for name, origin in registry.plugin_origins().items():
        if name in disabled or name in active or (named is not None and name not in named):
            continue
        msgs = [str(f) for f in plugin_faults.faults(origin) if f.stage not in _SESSION_STAGES]
        hung = plugin_faults.abandoned(origin)
        if hung:
            msgs.append(hung)
        if msgs:
            out[name] = msgs
    return out


def explain_host_only(config: ProfilerConfig, backends: list[Backend],
                      probes: dict[str, ProbeResult] | None = None) -> dict[str, str]:
    """Device activities were asked for (no backend named) and no backend can run: warn once per
    process with each probe's reason; the trace's metadata carries them too (never silent).
    ``probes``: the results ``select_backends`` already has."""
    if backends or config.backends is not None:
        return {}
    if not config.activities & (_DEVICE_ACTIVITIES - METRIC_ACTIVITIES - {ActivityType.GPU_USER_ANNOTATION}):
        return {}
    reasons = dict(_unavailable_reasons(config, probes))
    if not reasons:
        return {}
    explicit = config.activities != default_activity_types()  # the defaults alone do not warn
    if explicit and diagnostics.first("host-only", *sorted(reasons)):
        # A plugin's fault was logged when it happened: named here, not said again (the trace has both).
        said = {n: "plugin failed (see backend_errors)" if _plugin_failed(n) else r for n, r in reasons.items()}
        log.warning("xpuprof: device activities were requested but no device backend can run here, so the "
                    "trace holds host activity only: %s", "; ".join(f"{n}: {r}" for n, r in said.items()))
    return reasons
