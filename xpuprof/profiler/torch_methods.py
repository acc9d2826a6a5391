"""torch.profiler.profile's methods past the schedule: results (``events``, ``export_stacks``, ``export_memory_timeline``), metadata (``add_metadata_json``,
``preset_metadata_json``, trace ids) and ``toggle_collection_dynamic`` (pause/resume of the cycle's sources).
Mixed into ``xpuprof.profile``; the work is in ``events`` and ``cycle``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

from ..activity import parse_activity_types
from . import events as torch_events


class TorchResultsMethods:
    """The methods torch.profiler.profile has beyond starting, stepping and exporting the trace."""

    # set by profile.__init__ / its cycles
    _finished: "list[torch_events.FinishedCycle]"
    _trace_id: str
    _toggled_off: frozenset
    metadata: dict
    acc_events: bool
    post_processing_timeout_s: float | None
    custom_trace_id_callback: Callable[[], str] | None

    # ------------------------------------------------------------------ results
    def _last_cycle(self, what: str) -> "torch_events.FinishedCycle":
        if not self._finished:
            if getattr(self, "builder", None) is not None:  # a cycle completed, and the next one was prepared
                raise RuntimeError(f"{what}: the last cycle's results were released when the next cycle was "
                                   "prepared, as torch.profiler releases them: call it in on_trace_ready, or pass "
                                   "acc_events=True to keep every cycle's")
            raise RuntimeError(f"{what} needs a completed recording cycle: the profiler has not completed one yet")
        return self._finished[-1]

    def _release_last_results(self) -> None:
        """Called as the next cycle is prepared: torch.profiler drops the last cycle's results there, so we do
        too, and not at the next cycle's end, whose on_trace_ready the user waits for (freeing torch's result
        of a ResNet-18 training cycle takes 30-45 ms). The last trace itself stays exportable."""
        if not self.acc_events:
            self._finished = []

    def events(self):
        """torch's ``EventList`` of the last cycle (of every cycle with ``acc_events=True``): torch's ops and
        ranges, our ``record_function`` ranges, and the device work our backends recorded, each kernel also
        appended to the op that launched it (``device_time_total``)."""
        self._last_cycle("events()")
        cycles = self._finished if self.acc_events else self._finished[-1:]
        lists = [torch_events.build_event_list(c, timeout_s=self.post_processing_timeout_s) for c in cycles]
        if len(lists) == 1:
            return lists[0]
        from torch.autograd.profiler_util import EventList

        merged = EventList([e for lst in lists for e in lst], use_device=lists[-1]._use_device,
                           profile_memory=lists[-1]._profile_memory, with_flops=lists[-1]._with_flops)
        merged._tree_built = True  # each cycle's tree is built; the events keep their parents and children
        return merged

    def export_stacks(self, path, metric: str = "self_cpu_time_total") -> Path:
        """torch's flamegraph-collapsed stacks of the last cycle (needs ``with_stack=True``); ``metric``:
        ``self_cpu_time_total`` or the device's (``self_xpu_time_total``, ``self_cuda_time_total``)."""
        done = self._last_cycle("export_stacks()")
        return torch_events.export_stacks(self.events(), path, metric, done.config.with_stack)

    def export_memory_timeline(self, path, device: str | None = None) -> Path:
        """torch's memory timeline of the last cycle, by suffix: ``.html`` (a plot), ``.json``/``.json.gz``
        (times and sizes by category), ``.raw.json.gz`` (each memory event). Needs record_shapes,
        profile_memory and with_stack, as torch's does."""
        return torch_events.export_memory_timeline(self._last_cycle("export_memory_timeline()"), path, device)

    # ------------------------------------------------------------------ metadata
    def add_metadata_json(self, key: str, value: str) -> None:
        """A top-level key whose value is JSON text (torch's add_metadata_json), for every trace written."""
        try:
            self.metadata[str(key)] = json.loads(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"add_metadata_json({key!r}, ...): the value must be JSON text ({exc})") from None

    def preset_metadata_json(self, key: str, value: str) -> None:
        """torch's preset_metadata_json: as add_metadata_json (every cycle's trace gets it)."""
        self.add_metadata_json(key, value)

    def get_trace_id(self) -> str | None:
        """The current (or last) cycle's trace id: ``custom_trace_id_callback()``'s, else a random UUID."""
        return self._trace_id or None

    def set_custom_trace_id_callback(self, callback: Callable[[], str] | None) -> None:
        """The trace id generator, called when each cycle is prepared."""
        self.custom_trace_id_callback = callback

    # ------------------------------------------------------------------ pause / resume
    def toggle_collection_dynamic(self, enable: bool, activities: Iterable[Any]) -> None:
        """Pause (``enable=False``) or resume the collection of ``activities`` (torch's ProfilerActivity
        members, our names or groups): device groups pause the backends recording them, ``CPU`` torch's ops
        and our ranges. Paused intervals are marked in the trace; a pause lasts across cycles until resumed."""
        types = parse_activity_types(list(activities))
        if enable:
            self._toggled_off = self._toggled_off - types
        else:
            self._toggled_off = self._toggled_off | types
        cycle = self._recording
        if cycle.recording:
            (cycle.resume if enable else cycle.pause)(types)
