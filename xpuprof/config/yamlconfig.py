"""YAML benchmark configs: load, validate (errors carry file and line), apply ``--set``
overrides and expand ``matrix:`` sweeps into one ``RunPoint`` per point.

The schema is documented in ``configs/README.md``; ``SCHEMA`` below is its executable form.
"""
from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from ..activity import parse_activity_types
from ..inputs import InputError, read_input
from .options import ExperimentalConfig, ProfilerConfig

Path_ = tuple[str, ...]


class ConfigError(ValueError):
    """A benchmark config that cannot be used; the message starts with ``file:line:``."""


# ----------------------------------------------------------------------------- schema
# key -> (kind, default, description). Kinds: "str", "int", "int+" (>= 1), "int0" (>= 0),
# "bool", "strlist", "map" (free mapping), or a nested dict (a section with its own keys).
WORKLOAD_KEYS: dict[str, tuple] = {
    "builtin": ("str", None, "built-in workload: " + ", ".join(["gemm", "elementwise"])),
    "library": ("str", "numpy", "library for a built-in: numpy, torch or dpnp"),
    "callable": ("str", None, "'module:function' called once per iteration with kwargs"),
    "factory": ("bool", False, "callable(**kwargs) returns the per-iteration callable"),
    "script": ("str", None, "Python script run as __main__ once per iteration"),
    "argv": ("strlist", [], "arguments for the script"),
    "kwargs": ("map", {}, "keyword arguments for the built-in or callable"),
}
SCHEDULE_KEYS: dict[str, tuple] = {
    "wait": ("int0", 0, "steps skipped at the start of each cycle"),
    "warmup": ("int0", 0, "steps traced but discarded"),
    "active": ("int+", 1, "steps recorded per cycle"),
    "repeat": ("int0", 1, "cycles (0 = until the loop ends)"),
    "skip_first": ("int0", 0, "steps skipped once before the first cycle"),
}
METRICS_KEYS: dict[str, tuple] = {
    "names": ("strlist", [], "metrics by name: per-kernel hardware metrics and collector metrics such as "
                             "cpu_utilization, gpu_power (see `xpuprof metrics`)"),
    "per_kernel": ("bool", True, "one value per kernel (false: per user scope)"),
    "max_scopes": ("int0", 0, "metric scopes to keep (0 = Kineto's default)"),
    "sampling_interval_us": ("int+", 1000, "CUPTI PM sampling period"),
    "device": ("int0", 0, "device whose metric groups are configured"),
    "interval_ms": ("int+", 10, "sampling interval of metric collectors (host and device telemetry)"),
}
STALL_SAMPLING_KEYS: dict[str, tuple] = {
    "enabled": ("bool", True, "XPU: sample EU stalls per kernel and instruction (PTI PC sampling; "
                              "`stall_sampling: true` is short for this)"),
    "period_ns": ("int0", 0, "sampling period in ns (0 = PTI's default, 100000)"),
}
KERNEL_FILTER_KEYS: dict[str, tuple] = {
    "include": ("patterns", [], "regexes: keep only kernels whose name matches one (unitrace's --include-kernels)"),
    "exclude": ("patterns", [], "regexes: drop kernels whose name matches one (unitrace's --exclude-kernels)"),
    "include_file": ("str", None, "file of include patterns (unitrace's --include-kernels-file)"),
    "exclude_file": ("str", None, "file of exclude patterns (unitrace's --exclude-kernels-file)"),
}
OUTPUT_KEYS: dict[str, tuple] = {
    "dir": ("str", None, "output directory (default: traces/<name>)"),
    "worker_name": ("str", None, "first part of trace file names (default: <host>_<pid>, as torch names workers)"),
    "compression": ("str", "none", "none or gzip (.pt.trace.json.gz)"),
    "format": ("str", "json", "json: Kineto JSON trace files; perfetto: Perfetto protobuf (.pftrace); parquet: a "
                              "trace store per trace, this rank's partition (<worker_name, else name>.store; docs/store.md)"),
    "legacy_categories": ("bool", False, "accepted for compatibility: Kineto main's vendor category names are the default"),
    "generic_categories": ("bool", False, "write the generic category names (runtime, driver) instead of the vendor ones"),
}
SCHEMA: dict[str, Any] = {
    "name": ("str", None, "run name (default: the file's stem)"),
    "description": ("str", "", "free text"),
    "workload": WORKLOAD_KEYS,
    "device": ("str", "auto", "auto, cpu, xpu[:i], cuda[:i], or a SYCL selector for dpnp"),
    "warmup": ("int0", 1, "iterations run before profiling starts (not profiled)"),
    "iterations": ("int+", 5, "profiled iterations; each ends with a profiler step"),
    "repeats": ("int+", 1, "profiled runs per matrix point (one trace each)"),
    "schedule": SCHEDULE_KEYS,
    "activities": ("strlist", None, "activity types (default: xpuprof's defaults)"),
    "record_shapes": ("bool", False, "record input shapes of ops"),
    "metrics": METRICS_KEYS,
    "stall_sampling": STALL_SAMPLING_KEYS,
    "kernels": KERNEL_FILTER_KEYS,
    "backends": ("strlist", None, "backends to use (default: every available one; sim only if listed)"),
    "custom": ("map", None, "backend-specific options, passed through (e.g. sim_vendor: cuda, sim_seed: 1)"),
    "output": OUTPUT_KEYS,
    "matrix": ("map", {}, "dotted key -> list of values; one run per combination"),
    "history": ("str", None, "run history directory each run appends to (xpuprof run --history; xpuprof gate "
                             "reads it)"),
}
REQUIRED_TOP = ("workload",)
COMPRESSIONS = ("none", "gzip")
OUTPUT_FORMATS = ("json", "perfetto", "parquet")


# ----------------------------------------------------------------------------- loading with positions
def _positions(node, path: Path_ = (), out: dict | None = None, source: str = "") -> dict[Path_, int]:
    """Every mapping key path -> 1-based line of its value. Duplicate keys are errors."""
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = ".".join((*path, key))
                raise ConfigError(f"{source}:{line}: duplicate key {where!r} (first set on line {seen[key]})")
            seen[key] = line
            _positions(value_node, (*path, key), out, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, (*path, str(i)), out, source)
    return out


MAX_EXPANDED_NODES = 100_000  # nodes aliases may add; a config's are a few hundred, alias bombs' billions
MAX_CONFIG_BYTES = 16 << 20  # a config file is kilobytes; its plain size bounds its nodes


def _check_expansion(root, source: str) -> None:
    """Refuse, at once, aliases that refer to themselves or add more than MAX_EXPANDED_NODES nodes.

    YAML aliases share nodes, so a few hundred bytes can stand for billions of nodes once anything
    walks the document (a 300-byte bomb took 11.75 s and 1.5 GB before). What is counted is the
    expansion - nodes beyond those written in the text - so a long alias-free list (bounded by the
    file's size) loads. Sizes are counted per shared node (memoized): one pass over the text's own nodes.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            children = node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
            total = 1 + sum(sizes[id(c)] for c in children)
            open_nodes.discard(key)
            # len(sizes) bounds the distinct nodes below this one, so a plain document is never refused,
            # and at the root this is the exact expansion.
            if total - len(sizes) > MAX_EXPANDED_NODES:
                line = node.start_mark.line + 1
                raise ConfigError(f"{source}:{line}: YAML aliases here expand to more than {MAX_EXPANDED_NODES:,} "
                                  "nodes; refusing the config (an alias bomb?)")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if not isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            sizes[key] = 1
            continue
        if key in open_nodes:
            raise ConfigError(f"{source}:{node.start_mark.line + 1}: a YAML alias refers to a node that contains "
                              "it (a recursive alias); refusing the config")
        open_nodes.add(key)
        stack.append((node, True))
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for kv in node.value for n in kv]
        for child in children:
            if id(child) in open_nodes:
                raise ConfigError(f"{source}:{child.start_mark.line + 1}: a YAML alias refers to a node that "
                                  "contains it (a recursive alias); refusing the config")
            if id(child) not in sizes:
                stack.append((child, False))


def load_yaml(text: str, source: str = "<string>") -> tuple[Any, dict[Path_, int]]:
    """``yaml.safe_load`` plus the line of every key; syntax errors become ``ConfigError``."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, source)
        positions = _positions(node, source=source) if node is not None else {}
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"{mark.line + 1}:{mark.column + 1}" if mark else "?"
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"{source}:{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, positions


# ----------------------------------------------------------------------------- results
@dataclass
class WorkloadSpec:
    kind: str  # "builtin" | "callable" | "script"
    target: str  # built-in name, "module:function" or the script path
    library: str = "numpy"
    kwargs: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    factory: bool = False
    base_dir: Path | None = None


@dataclass(frozen=True)
class RunNames:
    """The names of the runtime parts (built-in workloads, libraries, backends) a config is checked
    against. Whoever assembles the run passes them in (``xpuprof.workloads.run_names()``), so parsing a
    config needs no workload or backend code. Without them those names are not checked here."""

    builtins: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    # (builtin, {kwarg: value}) -> None, raising ValueError naming what is wrong with a kwarg
    check_builtin_kwarg: Callable[[str, dict], None] | None = None


@dataclass
class OutputSpec:
    dir: Path
    worker_name: str | None  # None: trace_file_name's default, <host>_<pid>
    compression: str = "none"
    legacy_categories: bool = False
    generic_categories: bool = False
    format: str = "json"

    @property
    def use_gzip(self) -> bool:
        return self.compression == "gzip"


@dataclass
class RunPoint:
    """One fully resolved run (a matrix point): everything ``xpuprof run`` needs."""

    index: int
    params: dict[str, Any]  # matrix values by dotted key (empty without a matrix)
    label: str  # "n=128 dtype=float32" (or the run name)
    slug: str  # file-system safe label: "000_n-128_dtype-float32"
    name: str
    workload: WorkloadSpec
    device: str
    warmup: int
    iterations: int
    repeats: int
    schedule: dict[str, int] | None
    activities: list[str] | None
    record_shapes: bool
    experimental: ExperimentalConfig
    backends: list[str] | None
    output: OutputSpec
    custom: dict[str, Any] = field(default_factory=dict)
    include_kernels: list[str] = field(default_factory=list)
    exclude_kernels: list[str] = field(default_factory=list)

    def profiler_config(self) -> ProfilerConfig:
        kwargs: dict[str, Any] = dict(experimental=self.experimental, record_shapes=self.record_shapes,
                                      backends=self.backends, custom=dict(self.custom),
                                      include_kernels=list(self.include_kernels),
                                      exclude_kernels=list(self.exclude_kernels),
                                      legacy_categories=self.output.legacy_categories,
                                      generic_categories=self.output.generic_categories)
        if self.activities:
            kwargs["activities"] = parse_activity_types(self.activities)
        return ProfilerConfig(**kwargs)


@dataclass
class BenchmarkConfig:
    source: str
    data: dict[str, Any]  # after --set overrides, before matrix expansion
    points: list[RunPoint]

    @property
    def name(self) -> str:
        return self.points[0].name if self.points else ""

    @property
    def history(self) -> str | None:
        """The ``history:`` directory (None: the run keeps no history)."""
        value = self.data.get("history")
        return str(value) if value not in (None, "") else None



# ----------------------------------------------------------------------------- overrides
def parse_override(text: str) -> tuple[Path_, Any]:
    """``key.sub=value`` -> (("key", "sub"), value parsed as YAML: 3 -> int, [a, b] -> list)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", key):
        raise ConfigError(f"--set {text!r}: expected key=value with a dotted key, e.g. --set iterations=10 "
                          "or --set workload.kwargs.n=1024")
    # The guarded loader, as for config files: an alias bomb or a recursive alias in a --set value is one
    # ConfigError at once (plain safe_load ran 203 s / 10 GB, or raised RecursionError).
    value = load_yaml(raw, source=f"--set {key}")[0] if raw.strip() else ""
    return tuple(key.split(".")), value


def _assign(data: dict, path: Path_, value: Any, what: str) -> Path_:
    """Set ``path`` to ``value``; returns the shortest prefix of ``path`` this created (the whole path
    when only the leaf is new or replaced), so errors about a created key name ``what``, not a YAML line."""
    node = data
    created: Path_ | None = None
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
            created = created or path[:i + 1]
        if not isinstance(child, dict):
            raise ConfigError(f"{what}: {'.'.join(path[:i + 1])} is a {type(child).__name__}, not a mapping")
        node = child
    if created is None and path[-1] not in node:
        created = path
    node[path[-1]] = value
    return created or path


# ----------------------------------------------------------------------------- validation
class _Checker:
    def __init__(self, source: str, positions: dict[Path_, int], origins: dict[Path_, str]):
        self.source, self.positions, self.origins = source, positions, origins

    def where(self, path: Path_) -> str:
        for i in range(len(path), -1, -1):
            if path[:i] in self.origins:
                return self.origins[path[:i]]
            if path[:i] in self.positions:
                return f"{self.source}:{self.positions[path[:i]]}"
        return self.source

    def fail(self, path: Path_, message: str):
        key = ".".join(path)
        raise ConfigError(f"{self.where(path)}: {key + ': ' if key else ''}{message}")

    def section(self, data: Any, keys: Mapping[str, Any], path: Path_) -> dict[str, Any]:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.fail(path, f"must be a mapping with keys {', '.join(keys)}, not {type(data).__name__}")
        for key in data:
            if key not in keys:
                close = difflib.get_close_matches(str(key), list(keys), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ";"
                self.fail((*path, str(key)), f"unknown key{hint} Valid keys here: {', '.join(keys)}")
        out = {}
        for key, spec in keys.items():
            sub = (*path, key)
            if isinstance(spec, dict):
                out[key] = self.section(data.get(key), spec, sub) if key in data else None
            else:
                kind, default, _ = spec
                out[key] = self.value(data[key], kind, sub) if key in data else default
        return out

    def value(self, value: Any, kind: str, path: Path_) -> Any:
        if kind == "str":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                self.fail(path, f"must be a string, not {type(value).__name__}")
            if "\x00" in str(value):  # names and paths: the OS refuses NUL (a traceback at mkdir before)
                self.fail(path, f"must not contain a NUL character: {str(value)[:80]!r}")
            return str(value)
        if kind in ("int", "int0", "int+"):
            if isinstance(value, bool) or not isinstance(value, int):
                self.fail(path, f"must be an integer, not {value!r}")
            low = {"int": None, "int0": 0, "int+": 1}[kind]
            if low is not None and value < low:
                self.fail(path, f"must be >= {low}, got {value}")
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                self.fail(path, f"must be true or false, not {value!r}")
            return value
        if kind == "strlist":
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
                self.fail(path, f"must be a list of strings, not {value!r}"[:300])
            if any("\x00" in str(v) for v in value):
                self.fail(path, "must not contain a NUL character")
            return [str(v) for v in value]
        if kind == "patterns":
            from .kernel_filter import KernelFilter, KernelFilterError, normalize_patterns

            try:
                patterns = normalize_patterns(value, "a kernel filter")
                KernelFilter(tuple(patterns))
            except KernelFilterError as exc:
                self.fail(path, str(exc))
            return patterns
        if kind == "map":
            if value is None:
                return {}
            if not isinstance(value, dict):
                self.fail(path, f"must be a mapping, not {type(value).__name__}")
            return dict(value)
        raise AssertionError(kind)


def _check_workload(ck: _Checker, w: dict, base_dir: Path | None, names: RunNames | None) -> WorkloadSpec:
    chosen = [k for k in ("builtin", "callable", "script") if w.get(k) is not None]
    if len(chosen) != 1:
        builtins = f" ({', '.join(names.builtins)})" if names else ""
        ck.fail(("workload",), f"give exactly one of builtin{builtins}, "
                "callable ('module:function') or script (path)"
                + (f"; got {', '.join(chosen)}" if chosen else ""))
    kind = chosen[0]
    target = w[kind]
    if kind == "builtin":
        if names is not None:
            if w["library"] not in names.libraries:
                ck.fail(("workload", "library"), f"unknown library {w['library']!r}; valid: {', '.join(names.libraries)}")
            if target not in names.builtins:
                ck.fail(("workload", "builtin"),
                        f"unknown built-in workload {target!r}; valid: {', '.join(names.builtins)}")
            if names.check_builtin_kwarg is not None:
                for key in w["kwargs"]:
                    try:
                        names.check_builtin_kwarg(target, {key: w["kwargs"][key]})
                    except ValueError as exc:
                        ck.fail(("workload", "kwargs", str(key)), str(exc))
    elif kind == "callable":
        if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", target):
            ck.fail(("workload", "callable"), f"{target!r} must be written 'module:function'")
    else:
        script = Path(target)
        if not script.is_absolute() and base_dir is not None:
            script = base_dir / script
        if not script.is_file():
            ck.fail(("workload", "script"), f"script {target!r} not found (looked at {script})")
        target = str(script)
    if kind != "script" and w["argv"]:
        ck.fail(("workload", "argv"), "argv only applies to a script workload")
    return WorkloadSpec(kind, target, w["library"], dict(w["kwargs"]), list(w["argv"]), bool(w["factory"]), base_dir)


def _slug(index: int, params: Mapping[str, Any]) -> str:
    parts = [f"{k.rsplit('.', 1)[-1]}-{v}" for k, v in params.items()]
    text = "_".join([f"{index:03d}", *parts])
    return re.sub(r"[^A-Za-z0-9_.\-=]+", "-", text)


def _build_point(ck: _Checker, data: dict, index: int, params: dict, base_dir: Path | None,
                 default_name: str, names: RunNames | None) -> RunPoint:
    if isinstance(data, dict) and isinstance(data.get("stall_sampling"), bool):
        data = {**data, "stall_sampling": {"enabled": data["stall_sampling"]}}  # `stall_sampling: true`
    top = ck.section(data, SCHEMA, ())
    if top["workload"] is None:
        ck.fail(("workload",), "missing: every config needs a workload (builtin, callable or script)")
    workload = _check_workload(ck, top["workload"], base_dir, names)

    if top["activities"]:
        try:
            parse_activity_types(top["activities"])
        except ValueError as exc:
            ck.fail(("activities",), str(exc))
    if top["backends"] and names is not None:
        known = names.backends
        for i, name in enumerate(top["backends"]):
            if name not in known:
                from ..suggest import did_you_mean

                ck.fail(("backends", str(i)), f"unknown backend {name!r}{did_you_mean(name, known) or ';'} known "
                        f"backends: {', '.join(known)}")

    metrics = top["metrics"] or {k: spec[1] for k, spec in METRICS_KEYS.items()}
    experimental = ExperimentalConfig(profiler_metrics=metrics["names"],
                                      profiler_measure_per_kernel=metrics["per_kernel"],
                                      max_scopes=metrics["max_scopes"],
                                      pm_sampling_interval_us=metrics["sampling_interval_us"],
                                      metrics_device=metrics["device"],
                                      metrics_interval_ms=metrics.get("interval_ms", 10),
                                      **_stall_fields(top["stall_sampling"]))
    include, exclude = _kernel_filters(ck, top["kernels"], base_dir)

    name = top["name"] or default_name
    out = top["output"] or {k: spec[1] for k, spec in OUTPUT_KEYS.items()}
    if out["compression"] not in COMPRESSIONS:
        ck.fail(("output", "compression"), f"unknown compression {out['compression']!r}; valid: {', '.join(COMPRESSIONS)}")
    fmt = out.get("format") or "json"
    if fmt not in OUTPUT_FORMATS:
        ck.fail(("output", "format"), f"unknown output format {fmt!r}; valid: {', '.join(OUTPUT_FORMATS)}")
    if fmt in ("parquet", "perfetto") and out["compression"] != "none":
        ck.fail(("output", "compression"), f"compression applies to json traces; a {fmt} "
                                           f"{'store' if fmt == 'parquet' else 'trace'} is compact already: remove "
                                           "output.compression or use output.format: json")
    output = OutputSpec(Path(out["dir"] or Path("traces") / name), out["worker_name"] or None, out["compression"],
                        out["legacy_categories"], out.get("generic_categories", False), fmt)

    label = " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in params.items()) or name
    return RunPoint(index=index, params=dict(params), label=label, slug=_slug(index, params), name=name,
                    workload=workload, device=top["device"], warmup=top["warmup"], iterations=top["iterations"],
                    repeats=top["repeats"], schedule=top["schedule"], activities=top["activities"],
                    record_shapes=top["record_shapes"], experimental=experimental, backends=top["backends"],
                    custom=dict(top["custom"] or {}), include_kernels=include, exclude_kernels=exclude,
                    output=output)


def _stall_fields(section: dict | None) -> dict[str, Any]:
    if not section:
        return {}
    return {"stall_sampling": bool(section["enabled"]), "stall_sampling_period_ns": int(section["period_ns"])}


def _kernel_filters(ck: _Checker, section: dict | None, base_dir: Path | None) -> tuple[list[str], list[str]]:
    """(include, exclude) patterns: the lists plus the patterns of their files (read now, checked now)."""
    from .kernel_filter import KernelFilter, KernelFilterError, read_filter_file

    if not section:
        return [], []
    out = []
    for key in ("include", "exclude"):
        patterns = list(section[key])
        name = section[f"{key}_file"]
        if name:
            path = Path(name)
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            try:
                more = read_filter_file(path)
                KernelFilter(tuple(more))
            except KernelFilterError as exc:
                ck.fail(("kernels", f"{key}_file"), str(exc))
            patterns += more
        out.append(patterns)
    return out[0], out[1]


def parse_config(text: str, source: str = "<string>", *, base_dir: Path | None = None,
                 overrides: Iterable[str] = (), out_dir: str | Path | None = None,
                 names: RunNames | None = None) -> BenchmarkConfig:
    """Validate a config's text and expand it into run points (workload/backend names checked against
    ``names`` when given: see ``RunNames``)."""
    data, positions = load_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: a benchmark config must be a mapping (keys: {', '.join(SCHEMA)}), "
                          f"not {type(data).__name__}")
    origins: dict[Path_, str] = {}
    for text_override in overrides:
        path, value = parse_override(text_override)
        created = _assign(data, path, value, f"--set {text_override}")
        origins[path] = origins[created] = f"--set {text_override}"
    if out_dir is not None:
        _assign(data, ("output", "dir"), str(out_dir), "--out")
        origins[("output", "dir")] = "--out"

    ck = _Checker(source, positions, origins)
    matrix = data.get("matrix") or {}
    if not isinstance(matrix, dict):
        ck.fail(("matrix",), f"must be a mapping of dotted key -> list of values, not {type(matrix).__name__}")
    axes: list[tuple[str, list]] = []
    for key, values in matrix.items():
        key = str(key)
        if not isinstance(values, list) or not values:
            ck.fail(("matrix", key), "must be a non-empty list of values")
        if key.split(".", 1)[0] not in SCHEMA or key.startswith("matrix"):
            ck.fail(("matrix", key), f"{key!r} does not name a config key; top-level keys: "
                    f"{', '.join(k for k in SCHEMA if k != 'matrix')}")
        axes.append((key, values))

    default_name = Path(source).stem if source and not source.startswith("<") else "run"
    base = {k: v for k, v in data.items() if k != "matrix"}
    points = []
    for index, combo in enumerate(itertools.product(*[vals for _, vals in axes])):
        point_data = _deep_copy(base)
        params = {}
        for (key, _), value in zip(axes, combo):
            path = tuple(key.split("."))
            _assign(point_data, path, value, f"matrix.{key}")
            # Errors in a swept value point at the matrix entry that supplied it.
            ck.origins.setdefault(path, ck.where(("matrix", key)))
            params[key] = value
        points.append(_build_point(ck, point_data, index, params, base_dir, default_name, names))
    return BenchmarkConfig(source=source, data=data, points=points)


def _deep_copy(value):
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def load_config(path, *, overrides: Iterable[str] = (), out_dir: str | Path | None = None,
                names: RunNames | None = None) -> BenchmarkConfig:
    """Read and validate a benchmark config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        text = read_input(path, "config file", limit=MAX_CONFIG_BYTES).decode("utf-8")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config ({exc})") from None
    return parse_config(text, str(path), base_dir=path.resolve().parent, overrides=overrides, out_dir=out_dir,
                        names=names)
