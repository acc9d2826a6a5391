"""`xpuprof run` summarizes each trace from the builder it has just written instead of reading the file
back (that read-back was a third of the time a SIGINT took to finish). The numbers must be exactly what
reading the written traces gives - per-kernel metric slices included: the metric join reads the frozen
builder's table as it reads the file's (``EventTable.from_table``)."""
from __future__ import annotations

import pytest

from xpuprof.analysis.report import EventTable, build_report, kernel_stats
from xpuprof.config.yamlconfig import parse_config
from xpuprof.workloads import run_names
from xpuprof.workloads.runner import run_point

CONFIGS = {
    "host": "workload: {builtin: gemm, kwargs: {n: 16}}\nwarmup: 0\niterations: 7\nrepeats: 2\n"
            "schedule: {wait: 1, warmup: 1, active: 2, repeat: 0}\nactivities: [user_annotation]\n",
    "sim": "workload: {builtin: elementwise, kwargs: {size: 64}}\nwarmup: 0\niterations: 5\nbackends: [sim]\n"
           "activities: [user_annotation, runtime, kernel, gpu_memcpy, gpu_user_annotation]\n",
}


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_in_memory_summary_equals_reading_the_traces_back(tmp_path, which):
    cfg = parse_config(CONFIGS[which], str(tmp_path / f"{which}.yaml"), out_dir=tmp_path / "o", names=run_names())
    (point,) = cfg.points
    result = run_point(point)
    assert result.traces and len(result.tables) == len(result.traces)
    assert all(t is not None for t in result.tables)
    from_memory = [k.to_dict() for k in kernel_stats(EventTable.concat(result.tables))]
    from_files = [k.to_dict() for k in build_report(result.traces).stats]
    assert from_memory == from_files and from_memory


def test_metric_slices_are_joined_in_memory_as_read_back_from_the_trace(tmp_path):
    text = ("workload: {builtin: elementwise, kwargs: {size: 64}}\nwarmup: 0\niterations: 3\nbackends: [sim]\n"
            "activities: [user_annotation, runtime, kernel, xpu_scope_profiler]\nmetrics: {names: [XVE_STALL]}\n")
    (point,) = parse_config(text, str(tmp_path / "m.yaml"), out_dir=tmp_path / "o", names=run_names()).points
    result = run_point(point)
    assert result.tables and all(t is not None for t in result.tables)
    from_memory = [k.to_dict() for k in kernel_stats(EventTable.concat(result.tables))]
    from_files = [k.to_dict() for k in build_report(result.traces).stats]
    assert from_memory == from_files and all(k["metrics"] for k in from_memory)
