"""Per-kernel metrics end to end through the PTI-ABI double (views + metrics scope in one library):
session -> PTI calls -> C callbacks -> decode -> TraceBuilder -> JSON -> summary."""
from __future__ import annotations

import os

import numpy as np
import pytest

import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.analysis.summary import KeyAverages
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu import metrics_scope as ms
from xpuprof.vendors import pti
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.backends.xpu.scope_api import XpuptiActivityScopeApi
from xpuprof.catalogs import MetricSelectionError
from xpuprof.clock import now_ns
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace

UUID0 = bytes(range(0xA0, 0xB0))
TYPES = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME, ActivityType.XPU_SCOPE_PROFILER})
KERNEL_DUR_NS = 2000  # the view double's kernels run 2 us


def _config(metrics=("GpuTime", "XVE_ACTIVE"), **exp):
    return ProfilerConfig(activities=TYPES, experimental=ExperimentalConfig(profiler_metrics=list(metrics), **exp))


def run_session(double, tmp_path, *, config=None, iterations=6, orphans=(), types=TYPES):
    config = config or _config()
    api = XpuptiActivityScopeApi(types, config, library=double.lib, device_uuids=[UUID0])
    for kernel_id in orphans:
        double.c.scope_double_add_orphan(kernel_id)
    api.start()
    assert double.workload(iterations) == 0
    api.stop()
    builder = TraceBuilder()
    api.process(builder, ProcessWindow(api.start_ns - 1_000_000, now_ns()))
    trace = load(write_chrome_trace(builder, tmp_path / "trace.json"))
    return api, builder, trace


def _x(trace, cat="kernel"):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


def test_kernels_counters_slices_and_args(full_double, tmp_path):
    api, builder, trace = run_session(full_double, tmp_path, orphans=(987654,))
    assert full_double.c.scope_double_buffer_size() == 1500 * 256  # sized from the default max_scopes
    events = trace["traceEvents"]
    kernels = [e for e in _x(trace) if not e["name"].startswith("metrics: ")]
    metric_slices = [e for e in _x(trace, "xpu_scope_profiler") if e["name"].startswith("metrics: ")]
    assert len(kernels) == 6 and len(metric_slices) == 7  # 6 kernels + 1 record without a kernel
    # the metrics slices are never a second "kernel" (consumers would count every kernel twice)
    assert not [e for e in _x(trace) if e["name"].startswith("metrics: ")]
    # the kernels' own X events carry the values (GpuTime = the kernel's duration in the double)
    for k in kernels:
        kid = k["args"]["kernel_id"]
        assert k["args"]["GpuTime::ns"] == KERNEL_DUR_NS == round(k["dur"] * 1000)
        assert k["args"]["XVE_ACTIVE::percent"] == 40.0 + 10.0 * (kid % 5)
    # "metrics: <kernel>" slices: kernel start - 1 ns to end + 1 ns on the kernel's row
    by_id = {k["args"]["kernel_id"]: k for k in kernels}
    for s in metric_slices[:6]:
        k = by_id[s["args"]["kernel_id"]]
        assert s["name"] == f"metrics: {k['name']}"
        assert (s["pid"], s["tid"]) == (k["pid"], k["tid"])
        assert s["ts"] == pytest.approx(k["ts"] - 0.001) and s["dur"] == pytest.approx(k["dur"] + 0.002)
        assert s["args"]["GpuTime::ns"] == KERNEL_DUR_NS and s["args"]["queue"].startswith("0x")
    orphan = metric_slices[6]
    assert orphan["args"]["kernel_id"] == 987654 and (orphan["pid"], orphan["tid"]) == (0, 0)
    assert orphan["name"] == "metrics: kernel_987654"
    assert trace["dropped_records"]["xpu_scope_unmatched_kernel"] == 1 and api.unmatched == 1
    # "C" counter track per device/queue: values at start - 1 ns, zeros at end + 1 ns
    counters = [e for e in events if e.get("ph") == "C" and e.get("cat") == "xpu_scope_profiler"]
    assert len(counters) == 14 and {c["name"] for c in counters} == {"xpu"}
    tracks = {}
    for c in counters:
        tracks.setdefault((c["pid"], c["tid"]), []).append(c)
    assert {(k["pid"], k["tid"]) for k in kernels} <= set(tracks)
    for (pid, tid), rows in tracks.items():
        rows.sort(key=lambda c: c["ts"])
        gpu = [r["args"]["GpuTime"] for r in rows]
        assert gpu[1::2] == [0.0] * (len(rows) // 2)  # every value step is followed by a step to zero
        assert all(v > 0 for v in gpu[0::2])
        for r in rows[1::2]:
            assert r["args"]["XVE_ACTIVE"] == 0.0
    first = next(k for k in kernels if (k["pid"], k["tid"]) == (counters[0]["pid"], counters[0]["tid"]))
    assert min(c["ts"] for c in tracks[(first["pid"], first["tid"])]) == pytest.approx(first["ts"] - 0.001)
    assert trace["xpu_scope_metric_group"] == "ComputeBasic"


def test_summary_has_metric_columns_sortable_by_any_metric(full_double, tmp_path):
    api, builder, trace = run_session(full_double, tmp_path, config=_config(("GpuTime", "XVE_ACTIVE", "XVE_STALL")))
    for summary in (KeyAverages.from_builder(builder, use_device="xpu"),
                    KeyAverages.from_events(trace["traceEvents"], use_device="xpu")):
        rows = {r.key: r for r in summary if r.category == "kernel"}
        assert set(rows) == {"gemm_kernel<float>", "relu_kernel"}
        assert rows["gemm_kernel<float>"].count == 3
        assert set(summary.metric_units) == {"GpuTime::ns", "XVE_ACTIVE::percent", "XVE_STALL::percent"}
        ids = {n: sorted(k["args"]["kernel_id"] for k in _x(trace) if k["name"] == n) for n in rows}
        for name, kids in ids.items():
            active = [40.0 + 10.0 * (i % 5) for i in kids]
            mean, lo, hi = rows[name].metrics["XVE_ACTIVE::percent"]
            assert (mean, lo, hi) == pytest.approx((np.mean(active), min(active), max(active)))
            assert rows[name].metrics["GpuTime::ns"] == (KERNEL_DUR_NS,) * 3
        for col, label, stat in (("XVE_ACTIVE max", "XVE_ACTIVE::percent", 2), ("XVE_STALL", "XVE_STALL::percent", 0),
                                 ("xve_stall min", "XVE_STALL::percent", 1), ("GpuTime::ns mean", "GpuTime::ns", 0)):
            ordered = [r.metrics[label][stat] for r in summary.sorted(col) if label in r.metrics]
            assert ordered == sorted(ordered, reverse=True)
        text = summary.table(sort_by="XVE_ACTIVE max", width=250)
        assert "XVE_ACTIVE" in text and "GpuTime" in text and " %" in text  # the unit in the cells
        with pytest.raises(ValueError, match="did you mean 'XVE_STALL'.*XVE_STALL max"):
            summary.sorted("XVE_STAL")


def test_xpuprof_report_shows_metric_columns(full_double, tmp_path, capsys):
    import csv
    import io

    from xpuprof.cli import main

    api, builder, trace = run_session(full_double, tmp_path, iterations=8)
    path = str(tmp_path / "trace.json")
    assert main(["report", path, "--sort", "XVE_ACTIVE max", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "XVE_ACTIVE max" in out and "kernel_id" not in out
    assert all(line.count(" %") >= 3 for line in out.splitlines() if line.startswith("│"))  # values with their unit
    assert main(["report", path, "--sort", "XVE_ACTIVE max"]) == 0
    assert "XVE_ACTIVE" in capsys.readouterr().out  # the sort column stays in a table fitted to the width
    assert main(["report", path, "--format", "csv", "--sort", "XVE_ACTIVE::percent min"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    kernels = [e for e in _x(trace) if not e["name"].startswith("metrics: ")]
    for row in rows:
        active = [k["args"]["XVE_ACTIVE::percent"] for k in kernels if k["name"] == row["kernel"]]
        assert float(row["XVE_ACTIVE::percent"]) == pytest.approx(np.mean(active))
        assert (float(row["XVE_ACTIVE min"]), float(row["XVE_ACTIVE max"])) == (min(active), max(active))
        assert float(row["GpuTime min"]) == float(row["GpuTime max"]) == KERNEL_DUR_NS
    mins = [float(r["XVE_ACTIVE min"]) for r in rows]
    assert mins == sorted(mins, reverse=True) and len(rows) == 2
    assert main(["report", path, "--sort", "XVE_ACTIV"]) == 2
    err = capsys.readouterr().err
    valid = err.split("valid: ", 1)[1]
    assert "'XVE_ACTIV'" in err and all(k in valid for k in ("total", "self", "calls", "XVE_ACTIVE::percent max"))


def test_small_max_scopes_spreads_records_over_buffers(full_double, tmp_path):
    api, builder, trace = run_session(full_double, tmp_path, config=_config(max_scopes=3), iterations=20)
    assert full_double.c.scope_double_buffer_size() == 2048  # PTI's minimum: 8 scopes per buffer here
    metric_slices = [e for e in _x(trace, "xpu_scope_profiler") if e["name"].startswith("metrics: ")]
    assert len(metric_slices) == 20 and api.unmatched == 0


def test_device_groups_validate_before_anything_starts(full_double):
    with pytest.raises(MetricSelectionError) as err:
        XpuptiActivityScopeApi(TYPES, _config(("GpuTme",)), library=full_double.lib)
    msg = str(err.value)
    assert "on Intel(R) Arc(TM) B580 Graphics" in msg and "GpuTime (group ComputeBasic)" in msg
    assert full_double.c.scope_double_started() == 0
    with pytest.raises(MetricSelectionError, match="different metric groups"):
        XpuptiActivityScopeApi(TYPES, _config(("GpuTime", "Counter5")), library=full_double.lib)
    with pytest.raises(ms.MetricsScopeError, match="metrics_device 3 does not exist: PTI lists 1"):
        XpuptiActivityScopeApi(TYPES, _config(metrics_device=3), library=full_double.lib)
    with pytest.raises(ms.MetricsScopeError, match="user-controlled metric scopes are not implemented"):
        XpuptiActivityScopeApi(TYPES, _config(profiler_measure_per_kernel=False), library=full_double.lib)


def test_profile_front_end_with_the_xpu_backend(full_double, tmp_path, monkeypatch):
    """The public API: xpuprof.profile -> XpuBackend (PTI = the double) -> scope session -> key_averages."""
    from xpuprof.backends.xpu.backend import XpuBackend

    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(full_double.path))
    monkeypatch.setattr(XpuBackend, "_probe_cache", None)
    exp = ExperimentalConfig(profiler_metrics=["GpuTime::ns", "XVE_STALL"], profiler_measure_per_kernel=True)
    with xpuprof.profile(activities=["kernel", "xpu_scope_profiler"], experimental_config=exp,
                         backends=["xpu"]) as prof:
        t0 = now_ns()
        while now_ns() - t0 < 2_000_000:  # the double dates its records up to 70 us back: stay inside the window
            pass
        assert full_double.workload(6) == 0
    trace = load(prof.export_chrome_trace(tmp_path / "prof.json"))
    kernels = [e for e in _x(trace) if not e["name"].startswith("metrics: ")]
    assert len(kernels) == 6 and all(k["args"]["GpuTime::ns"] == KERNEL_DUR_NS for k in kernels)
    assert len([e for e in trace["traceEvents"] if e.get("ph") == "C" and e.get("cat") == "xpu_scope_profiler"]) == 12
    rows = {r.key: r for r in prof.key_averages().sorted("XVE_STALL max") if r.category == "kernel"}
    assert rows["relu_kernel"].metrics["GpuTime::ns"] == (KERNEL_DUR_NS,) * 3
    assert os.environ["ZET_ENABLE_METRICS"] == "1"


def test_scope_profiler_without_metric_names_says_so_even_when_level_zero_is_loaded(full_double, monkeypatch):
    """The missing names are the user's first problem: said before the ZET_ENABLE_METRICS check, also when Level Zero
    is already loaded."""
    from xpuprof.backends.xpu.backend import XpuBackend

    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(full_double.path))
    monkeypatch.delenv("ZET_ENABLE_METRICS")
    monkeypatch.setattr(ms, "_level_zero_mapped", lambda: True)
    with pytest.raises(ms.MetricsScopeError, match="xpu_scope_profiler was selected but no metrics were requested"):
        XpuBackend().configure(TYPES, _config(metrics=()))
    with pytest.raises(ms.MetricsScopeError, match="no metrics were requested"):
        XpuBackend().configure(TYPES, None)


@pytest.mark.parametrize("level_zero_loaded", [False, True])
def test_backend_sets_zet_enable_metrics_before_level_zero(full_double, monkeypatch, level_zero_loaded):
    from xpuprof.backends.xpu.backend import XpuBackend

    monkeypatch.setenv(pti.PTI_LIBRARY_ENV, str(full_double.path))
    monkeypatch.delenv("ZET_ENABLE_METRICS")
    monkeypatch.setattr(ms, "_level_zero_mapped", lambda: level_zero_loaded)
    if level_zero_loaded:
        with pytest.raises(ms.MetricsScopeError, match="already loaded in this process"):
            XpuBackend().configure(TYPES, _config())
        assert "ZET_ENABLE_METRICS" not in os.environ
        return
    session = XpuBackend().configure(TYPES, _config())
    try:
        assert isinstance(session, XpuptiActivityScopeApi) and os.environ["ZET_ENABLE_METRICS"] == "1"
        plain = XpuBackend().configure(TYPES - {ActivityType.XPU_SCOPE_PROFILER}, _config())
        assert type(plain) is XpuptiActivityApi
        plain.disable()
    finally:
        session.scope.disable()
        session.disable()


def test_metrics_of_kernels_the_name_filter_dropped_are_not_orphans(full_double, tmp_path):
    config = ProfilerConfig(activities=TYPES, experimental=ExperimentalConfig(profiler_metrics=["GpuTime"]),
                            exclude_kernels=["relu"])
    api, builder, trace = run_session(full_double, tmp_path, config=config)
    kernels = [e for e in _x(trace) if not e["name"].startswith("metrics: ")]
    metric_slices = [e for e in _x(trace, "xpu_scope_profiler") if e["name"].startswith("metrics: ")]
    assert {k["name"] for k in kernels} == {"gemm_kernel<float>"}
    assert [s["name"] for s in metric_slices] == ["metrics: gemm_kernel<float>"] * 3
    assert api.unmatched == 0 and "xpu_scope_unmatched_kernel" not in trace.get("dropped_records", {})
