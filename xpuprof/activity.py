"""Accelerator-agnostic activity types, with Kineto's vendor names kept as aliases.

Canonical names follow Kineto PR #1212 (``runtime``, ``driver``, ``gpu_pm_counter``) plus the
types that landed on Kineto ``main`` after it (``xpu_scope_profiler``, ``xpu_sync``,
``hardware_counters``). Old vendor names are Python enum aliases: the same member.
"""
from __future__ import annotations

import enum
from functools import lru_cache


class ActivityType(enum.Enum):
    CPU_OP = "cpu_op"
    USER_ANNOTATION = "user_annotation"
    GPU_USER_ANNOTATION = "gpu_user_annotation"
    GPU_MEMCPY = "gpu_memcpy"
    GPU_MEMSET = "gpu_memset"
    CONCURRENT_KERNEL = "kernel"
    EXTERNAL_CORRELATION = "external_correlation"
    RUNTIME = "runtime"
    DRIVER = "driver"
    CPU_INSTANT_EVENT = "cpu_instant_event"
    PYTHON_FUNCTION = "python_function"
    OVERHEAD = "overhead"
    COLLECTIVE_COMM = "collective_comm"
    GPU_PM_COUNTER = "gpu_pm_counter"
    MTIA_INSIGHT = "mtia_insight"
    CUDA_SYNC = "cuda_sync"
    CUDA_EVENT = "cuda_event"
    CUDA_PROFILER_RANGE = "cuda_profiler_range"
    XPU_SCOPE_PROFILER = "xpu_scope_profiler"
    XPU_SYNC = "xpu_sync"
    HARDWARE_COUNTERS = "hardware_counters"

    # Deprecated vendor names are attached below (see _ALIASES) as aliases of the same member.

    @property
    def canonical_name(self) -> str:
        return self.value

    def __str__(self) -> str:  # what `cat` carries in the trace
        return self.value

    @classmethod
    def parse(cls, name: "str | ActivityType") -> "ActivityType":
        """Resolve a canonical or deprecated name, case-insensitively."""
        if isinstance(name, (ActivityType, PluginActivityType)):
            return name
        if not isinstance(name, str):
            raise TypeError(f"activity type must be a string or ActivityType, not {type(name).__name__}")
        key = name.strip().lower()
        member = _BY_NAME.get(key)
        if member is None:
            for resolve in _PLUGIN_RESOLVERS:  # activity types plugins declared (xpuprof.plugins.activity_types)
                plugin_type = resolve(key)
                if plugin_type is not None:
                    return plugin_type
            raise ValueError(_unknown_message(name))
        return member

    @classmethod
    def _missing_(cls, value):  # ActivityType("cuda_runtime") resolves aliases too
        if isinstance(value, str):
            return _BY_NAME.get(value.strip().lower())
        return None

    @classmethod
    def all_names(cls) -> tuple[str, ...]:
        """Every accepted spelling: canonical names first, then deprecated aliases."""
        return tuple(_BY_NAME)


_ALIASES: dict[str, str] = {
    # alias member name -> canonical member name
    "CUDA_RUNTIME": "RUNTIME",
    "MTIA_RUNTIME": "RUNTIME",
    "GLOW_RUNTIME": "RUNTIME",
    "HPU_OP": "RUNTIME",
    "XPU_RUNTIME": "RUNTIME",
    "PRIVATEUSE1_RUNTIME": "RUNTIME",
    "CUDA_DRIVER": "DRIVER",
    "XPU_DRIVER": "DRIVER",
    "PRIVATEUSE1_DRIVER": "DRIVER",
    "MTIA_CCP_EVENTS": "CONCURRENT_KERNEL",
    "MTIA_COUNTERS": "GPU_PM_COUNTER",
}

for _alias, _target in _ALIASES.items():
    # Register as a true enum alias: ActivityType.CUDA_RUNTIME is ActivityType.RUNTIME,
    # ActivityType["CUDA_RUNTIME"] works, iteration still yields canonical members only.
    ActivityType._member_map_[_alias] = ActivityType[_target]
    type.__setattr__(ActivityType, _alias, ActivityType[_target])

_BY_NAME: dict[str, ActivityType] = {m.value: m for m in ActivityType}
_BY_NAME.update({alias.lower(): ActivityType[target] for alias, target in _ALIASES.items()})

# Vendor-specific category names that HTA and TensorBoard key on (the default; vendor_categories=False writes the generic ones).
_VENDOR_CATEGORY: dict[tuple[ActivityType, str], str] = {
    (ActivityType.RUNTIME, "cuda"): "cuda_runtime",
    (ActivityType.RUNTIME, "rocm"): "cuda_runtime",  # Kineto's ROCm path writes cuda_runtime
    (ActivityType.RUNTIME, "xpu"): "xpu_runtime",
    (ActivityType.RUNTIME, "mtia"): "mtia_runtime",
    (ActivityType.RUNTIME, "privateuse1"): "privateuse1_runtime",
    (ActivityType.DRIVER, "cuda"): "cuda_driver",
    (ActivityType.DRIVER, "rocm"): "cuda_driver",
    (ActivityType.DRIVER, "xpu"): "xpu_driver",
    (ActivityType.DRIVER, "privateuse1"): "privateuse1_driver",
    (ActivityType.GPU_PM_COUNTER, "cuda"): "hardware_counters",
    (ActivityType.GPU_PM_COUNTER, "mtia"): "mtia_counters",
    (ActivityType.CONCURRENT_KERNEL, "mtia"): "mtia_ccp_events",
}


class PluginActivityType(str):
    """An activity type a plugin declared at load: it is its name (so it is the event category and
    parses like a built-in name) and carries the id from the plugin's own range and the plugin."""

    type_id: int
    origin: str

    def __new__(cls, name: str, type_id: int, origin: str) -> "PluginActivityType":
        obj = super().__new__(cls, name)
        obj.type_id = int(type_id)
        obj.origin = origin
        return obj

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def canonical_name(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"PluginActivityType({self.value!r}, id={self.type_id:#x}, from {self.origin})"


# Functions name -> PluginActivityType | None, installed by xpuprof.plugins.activity_types (this
# module imports no plugin code).
_PLUGIN_RESOLVERS: list = []
_PLUGIN_NAMES: list = []  # callables returning the declared names, for error messages


def category_name(activity: ActivityType | str, vendor: str = "", vendor_spelling: bool = False) -> str:
    """The `cat` string for an activity: generic by default, Kineto `main`'s vendor names with vendor_spelling=True."""
    if isinstance(activity, PluginActivityType):
        return activity.value
    if isinstance(activity, str):
        try:
            activity = ActivityType.parse(activity)
        except ValueError:
            return activity  # a free-form category (e.g. "Trace", "ac2g") passes through
        if isinstance(activity, PluginActivityType):
            return activity.value
    if vendor_spelling:
        return _VENDOR_CATEGORY.get((activity, vendor.lower()), activity.value)
    return activity.value


def category_spellings(name: str) -> frozenset[str]:
    """Every ``cat`` string that names the same activity as ``name``, for filters over written traces:
    the generic name, its deprecated aliases and the vendor names Kineto writes (``runtime``,
    ``cuda_runtime``, ``xpu_runtime``, ...), case-insensitively. Names that share a spelling are one
    filter (``hardware_counters`` is CUDA's name for ``gpu_pm_counter`` and a type of its own). A name
    outside the activity model stands for itself."""
    try:
        member = ActivityType.parse(name)
    except (ValueError, TypeError):
        return frozenset({name})
    if isinstance(member, PluginActivityType):
        return frozenset({member.value})
    return _SPELLING_CLASSES[member]


def _spelling_classes() -> dict[ActivityType, frozenset[str]]:
    own = {m: {m.value} for m in ActivityType}
    for alias, target in _ALIASES.items():
        own[ActivityType[target]].add(alias.lower())
    for (member, _vendor), cat in _VENDOR_CATEGORY.items():
        own[member].add(cat)
    classes = {m: frozenset(names) for m, names in own.items()}
    merged = True
    while merged:  # join the classes that share a spelling
        merged = False
        for a in ActivityType:
            for b in ActivityType:
                if a is not b and classes[a] & classes[b] and classes[a] != classes[b]:
                    classes[a] = classes[b] = classes[a] | classes[b]
                    merged = True
    return classes


_SPELLING_CLASSES = _spelling_classes()


def _unknown_message(name: str) -> str:
    names = ActivityType.all_names() + tuple(n for names_of in _PLUGIN_NAMES for n in names_of())
    import difflib  # only for a misspelt name: not at `import xpuprof`

    close = difflib.get_close_matches(str(name).lower(), names + tuple(ACTIVITY_GROUPS), n=1, cutoff=0.0)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown activity type {name!r}{hint} Valid names: {', '.join(names)}. {_GROUPS_TEXT}"


_DEFAULT_TYPES = (
    ActivityType.CPU_OP,
    ActivityType.USER_ANNOTATION,
    ActivityType.GPU_USER_ANNOTATION,
    ActivityType.GPU_MEMCPY,
    ActivityType.GPU_MEMSET,
    ActivityType.CONCURRENT_KERNEL,
    ActivityType.EXTERNAL_CORRELATION,
    ActivityType.RUNTIME,
    ActivityType.DRIVER,
    ActivityType.CPU_INSTANT_EVENT,
    ActivityType.PYTHON_FUNCTION,
    ActivityType.OVERHEAD,
    ActivityType.MTIA_INSIGHT,
    ActivityType.CUDA_SYNC,
    ActivityType.CUDA_EVENT,
)


@lru_cache(maxsize=1)
def default_activity_types() -> frozenset[ActivityType]:
    """Kineto's default set (15 distinct types: PR #1212 keeps the defaults unchanged), computed once.

    ``gpu_pm_counter`` is not a default: it switches counter collection on, which only a metrics
    request should do (see ``profiler.with_metric_activities``)."""
    return frozenset(_DEFAULT_TYPES)


# torch.profiler's device groups (ProfilerActivity.CUDA / .XPU in torch's kineto_shim): kernels, copies,
# fills, runtime, driver, syncs, events, overhead and the external correlation that links them to host
# ranges. No metric collection: that needs metric names (ExperimentalConfig.profiler_metrics).
DEVICE_GROUP = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET,
                          ActivityType.RUNTIME, ActivityType.DRIVER, ActivityType.CUDA_SYNC, ActivityType.XPU_SYNC,
                          ActivityType.CUDA_EVENT, ActivityType.OVERHEAD, ActivityType.EXTERNAL_CORRELATION,
                          ActivityType.GPU_USER_ANNOTATION})

# torch.profiler.ProfilerActivity-style group names, accepted next to activity type names wherever an
# activity list is parsed (profile(), ProfilerConfig, YAML configs of `xpuprof run`, Kineto config files).
ACTIVITY_GROUPS: dict[str, frozenset[ActivityType]] = {
    "cpu": frozenset({ActivityType.CPU_OP, ActivityType.USER_ANNOTATION, ActivityType.CPU_INSTANT_EVENT,
                      ActivityType.PYTHON_FUNCTION}),
    "gpu": DEVICE_GROUP,
    "xpu": DEVICE_GROUP,
    "cuda": DEVICE_GROUP,
    "rocm": DEVICE_GROUP,
}
_GROUPS_TEXT = f"Group names: {', '.join(ACTIVITY_GROUPS)} (torch.profiler.ProfilerActivity members too)"


def parse_activity_types(items) -> frozenset[ActivityType]:
    """Parse an iterable of names, group names ("cpu", "xpu", ...), members or torch ProfilerActivity
    members (or a comma string), and torch's ``{ProfilerActivity: [type names]}`` filters; one error names
    every bad word."""
    if isinstance(items, (str, ActivityType)):
        items = [items]
    words: list = []
    for item in items:
        if isinstance(item, dict):
            # torch.profiler's activity filters, {ProfilerActivity.CUDA: ["GPU_MEMCPY", "CUDA_RUNTIME"]}: only the
            # named types of that group ({CUDA: []} collects nothing for it)
            for names in item.values():
                words.extend([names] if isinstance(names, str) else list(names))
            continue
        if not isinstance(item, (str, ActivityType)) and hasattr(item, "name"):
            item = str(item.name)  # torch.profiler.ProfilerActivity.CPU and friends
        if isinstance(item, str):
            words.extend(w for w in (p.strip() for p in item.split(",")) if w)
        else:
            words.append(item)
    result, bad = set(), []
    for word in words:
        if isinstance(word, str) and word.lower() in ACTIVITY_GROUPS:
            result |= ACTIVITY_GROUPS[word.lower()]
            continue
        try:
            result.add(ActivityType.parse(word))
        except (ValueError, TypeError):
            bad.append(word)
    if bad:
        if len(bad) == 1:
            raise ValueError(_unknown_message(bad[0]))
        valid = ActivityType.all_names() + tuple(n for names_of in _PLUGIN_NAMES for n in names_of())
        raise ValueError(f"unknown activity types {bad!r}. Valid names: {', '.join(valid)}. {_GROUPS_TEXT}")
    return frozenset(result)
