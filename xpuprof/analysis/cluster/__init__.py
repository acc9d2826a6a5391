"""Analyses over trace stores and trace files at any number of ranks (``xpuprof analyze``), each written
once in numpy over a rank group's TraceTable and run by an engine (``analysis.engines``). The HTA-named
ones give HTA 0.5's numbers on the same traces (``docs/store.md`` lists each definition); ``stragglers``
is xpuprof's own."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .result import FORMATS, AnalysisError, AnalysisResult


@dataclass(frozen=True)
class Analysis:
    name: str
    hta: str  # the HTA 0.5 method it matches ("" for none)
    entry: str  # "module:function" of this package, imported when the analysis runs
    options: frozenset[str]  # keyword options it takes
    help: str

    def run(self, engine, **options) -> AnalysisResult:
        module, function = self.entry.split(":")
        return getattr(importlib.import_module(f".{module}", __name__), function)(engine, **options)


_STEP = frozenset({"include_last_step"})
ANALYSES: dict[str, Analysis] = {a.name: a for a in (
    Analysis("temporal", "get_temporal_breakdown", "temporal:run", _STEP,
             "per rank: GPU idle / compute / non-compute time"),
    Analysis("kernels", "get_gpu_kernel_breakdown", "kernels:run",
             _STEP | {"by_rank", "top", "duration_ratio", "include_memory"},
             "per kernel type and name: calls, time, percentiles (--by-rank: HTA's per-rank table)"),
    Analysis("kernel-types", "get_gpu_kernel_breakdown", "kernels:run_types", _STEP | {"include_memory"},
             "time per kernel type and per overlap of types"),
    Analysis("idle", "get_idle_time_breakdown", "streams:run_idle", _STEP | {"consecutive_kernel_delay"},
             "per rank and stream: GPU idle time by cause (host wait, kernel wait, other)"),
    Analysis("overlap", "get_comm_comp_overlap", "launch:run_overlap", _STEP,
             "per rank: share of communication time overlapped by computation"),
    Analysis("queue", "get_queue_length_summary", "streams:run_queue", _STEP | {"extra_launch_names"},
             "per rank and stream: queue length statistics"),
    Analysis("launch", "get_cuda_kernel_launch_stats", "launch:run_launch",
             _STEP | {"events", "runtime_cutoff", "launch_delay_cutoff", "include_memory_events",
                      "extra_launch_names"},
             "per rank: CPU-to-GPU launch delays (--events: one row per launch)"),
    Analysis("memory-bw", "get_memory_bw_summary", "streams:run_memory_bw", _STEP,
             "per rank and copy kind: memory bandwidth statistics"),
    Analysis("stragglers", "", "stragglers:run", _STEP | {"threshold_pct", "min_us"},
             "per rank: what it waits in collectives against the others, step time and start lag; the ranks "
             "the others wait for, and in which steps"),
)}


def run_analysis(name: str, engine, **options: Any) -> AnalysisResult:
    analysis = ANALYSES.get(name)
    if analysis is None:
        raise AnalysisError(f"unknown analysis {name!r}; valid: {', '.join(ANALYSES)}")
    extra = sorted(k for k, v in options.items() if k not in analysis.options and v is not None)
    if extra:
        raise AnalysisError(f"{name} takes no {', '.join('--' + k.replace('_', '-') for k in extra)}; it takes "
                            + (", ".join("--" + k.replace("_", "-") for k in sorted(analysis.options)) or "no option"))
    result = analysis.run(engine, **{k: v for k, v in options.items() if v is not None})
    result.engine, result.nodes = engine.name, list(engine.nodes)
    return result


__all__ = ["ANALYSES", "FORMATS", "Analysis", "AnalysisError", "AnalysisResult", "run_analysis"]
