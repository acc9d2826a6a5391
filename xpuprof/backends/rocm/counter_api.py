"""RocprofCounterApi: per-kernel hardware counters through rocprofiler-sdk dispatch counting.

The counting service is configured inside the tool's ``initialize`` (with the tracing): one
counter config per GPU agent holding the requested counters, chosen per dispatch by the C
callback in ``rocbuf``. Records come back as a DISPATCH_HEADER (dispatch id, correlation,
timestamps, kernel) followed by VALUE records (one per counter instance, e.g. per XCC/SE);
instances are summed per counter, like rocprofv3. Output goes through
``TraceBuilder.add_per_kernel_metrics`` exactly like the XPU scope profiler.

Requested names are validated offline against the ``metrics/rocm`` catalogs first (a typo fails
before any GPU work), then against the agent's own counter list. Dispatch counting serialises
kernels (rocprofiler-sdk docs).
"""
from __future__ import annotations

import ctypes
import difflib
from typing import Any

import numpy as np

from ..base import BackendError
from ...vendors import rocprofiler as rocprof
from ..common import count_dropped
from .activity_api import RocprofActivityApi, _check
from .emit import VENDOR
from .records import RocmRecords, rows_of

def validate_offline(requested: list[str]) -> None:
    """Names no rocm catalog knows are rejected when every catalog is complete; else left to the device."""
    from ...catalogs import load_catalogs

    catalogs = load_catalogs("rocm")
    if not catalogs:
        return
    known = {name for c in catalogs for name in c.all_metric_names()}
    bad = [n for n in requested if n not in known]
    if bad and all(c.complete for c in catalogs):
        hints = [f"{n!r}" + (f" (did you mean {', '.join(m)}?)" if (m := difflib.get_close_matches(n, sorted(known), 3))
                             else "") for n in bad]
        raise BackendError(f"unknown ROCm counter(s): {'; '.join(hints)}. Known counters: "
                           f"`xpuprof metrics --vendor rocm`")


def _first(lib, names: tuple[str, ...], what: str):
    for n in names:
        if hasattr(lib, n):
            return getattr(lib, n)
    raise BackendError(f"this rocprofiler-sdk has no {what} ({' / '.join(names)})")


class RocprofCounterApi(RocprofActivityApi):
    """Tracing plus per-kernel counters (ExperimentalConfig.profiler_metrics)."""

    def __init__(self, activity_types, config: Any = None, *, library=None) -> None:
        metrics = [m.strip() for m in (config.experimental.profiler_metrics if config is not None else []) if m.strip()]
        if not metrics:
            raise BackendError("per-kernel ROCm counters need at least one counter name "
                               "(ExperimentalConfig.profiler_metrics)")
        validate_offline(metrics)
        self.metrics = list(dict.fromkeys(metrics))
        self.counter_names: dict[int, str] = {}  # counter id -> name
        self.counter_setup = self._setup
        super().__init__(activity_types, config, library=library)

    def _setup(self, reg) -> None:
        """Runs inside rocprofiler's initialize: configs per GPU agent + the dispatch counting service."""
        lib = reg.lib
        create = _first(lib, rocprof.CONFIG_FUNCTIONS, "counter config function")
        configure = _first(lib, rocprof.COUNTING_FUNCTIONS, "dispatch counting service")
        pairs = []
        for agent in reg.agents:
            available = rocprof.agent_counters(lib, agent)
            bad = [m for m in self.metrics if m not in available]
            if bad:
                hints = [f"{m!r}" + (f" (did you mean {', '.join(c)}?)"
                                     if (c := difflib.get_close_matches(m, sorted(available), 3)) else "") for m in bad]
                raise BackendError(f"GPU agent {agent:#x} does not offer counter(s) {'; '.join(hints)}; it offers "
                                   f"{len(available)} counters")
            ids = (ctypes.c_uint64 * len(self.metrics))(*[available[m] for m in self.metrics])
            cfg = ctypes.c_uint64()
            _check(lib, create(ctypes.c_uint64(agent), ids, ctypes.c_size_t(len(ids)), ctypes.byref(cfg)),
                   f"{create.__name__} for agent {agent:#x} (too many counters for one pass?)")
            pairs.append((agent, cfg.value))
            self.counter_names.update({available[m]: m for m in self.metrics})
        reg.rocbuf.set_agent_configs(pairs)
        _check(lib, configure(ctypes.c_uint64(reg.context), ctypes.c_uint64(reg.buffer),
                              ctypes.c_void_p(reg.rocbuf.callback_addresses(reg.layout)["dispatch_counting"]), None),
               configure.__name__)
        reg.counter_names = self.counter_names

    def process_counters(self, builder, window, rec: RocmRecords, groups: dict) -> None:
        cat = rocprof.CATEGORY_COUNTERS
        hdr_blob = groups.get((cat, rocprof.COUNTER_RECORD_DISPATCH_HEADER))
        val_blob = groups.get((cat, rocprof.COUNTER_RECORD_VALUE))
        if not hdr_blob or not val_blob:
            return
        headers = self.to_epoch(rows_of(hdr_blob, "dispatch counting"))
        values = rows_of(val_blob, rocprof.CounterRecord)  # fixed size (no size field; set_fixed_size)
        names = getattr(self.reg, "counter_names", self.counter_names)
        inst, inv = np.unique(values["id"], return_inverse=True)
        cid = np.empty(len(inst), np.int64)
        out = ctypes.c_uint64()
        for i, instance in enumerate(inst.tolist()):  # one call per distinct instance, not per record
            self.lib.rocprofiler_query_record_counter_id(ctypes.c_uint64(instance), ctypes.byref(out))
            cid[i] = out.value
        counter_of = cid[inv.reshape(-1)]
        info = headers["dispatch_info"]
        order = np.argsort(info["dispatch_id"])
        pos = np.searchsorted(info["dispatch_id"][order], values["dispatch_id"])
        pos = np.minimum(pos, len(order) - 1)
        matched = info["dispatch_id"][order][pos] == values["dispatch_id"]
        row = order[pos]
        count_dropped(builder, VENDOR, "without a dispatch header", int((~matched).sum()), kind="counter values")
        metrics = {}
        for counter, name in names.items():
            m = matched & (counter_of == counter)
            metrics[name] = np.bincount(row[m], weights=values["counter_value"][m], minlength=len(headers))
        self.emitter.write_counters(builder, window, rec, headers, metrics)
