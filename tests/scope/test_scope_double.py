import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

from slice_tables import slice_table
from xpuprof.activity import ActivityType
from xpuprof.backends.xpu import metrics_scope as ms
from xpuprof.config.options import ExperimentalConfig
from xpuprof.trace.builder.builder import TraceBuilder


def _run(lib, names, ids, values):
    scope = ms.MetricsScope(ms.bind_scope_functions(lib))
    scope.enable()
    scope.configure(names)
    size = scope.size_buffer(1500)
    scope.start()
    arr_ids = (ctypes.c_uint64 * len(ids))(*ids)
    flat = np.asarray(values, dtype=np.float64).ravel()
    lib.scope_double_script(len(ids), arr_ids, flat.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
    scope.stop()
    res = scope.collect()
    scope.disable()
    return res, size


def test_collect_decodes_records_metadata_and_value_types(scope_double):
    res, size = _run(scope_double, ["GpuTime", "XVE_ACTIVE"], [7, 9], [[1000, 12.5], [2000, 50.0]])
    assert size == scope_double.scope_double_buffer_size() == 1500 * 256
    assert res.metadata.names == ["GpuTime", "XVE_ACTIVE"] and res.metadata.units == ["ns", "percent"]
    assert res.metadata.value_types == [1, 2]
    assert res.kernel_ids.tolist() == [7, 9] and res.group == "ComputeBasic"
    assert res.values["GpuTime"].tolist() == [1000.0, 2000.0]
    assert res.values["XVE_ACTIVE"].tolist() == [12.5, 50.0]
    assert res.kernel_names == ["scripted_kernel"] * 2


@pytest.mark.parametrize("names,code", [(["GpuTme"], 151), (["GpuTime", "Counter5"], 152)])
def test_configure_errors_name_the_reason(scope_double, names, code):
    scope = ms.MetricsScope(ms.bind_scope_functions(scope_double))
    scope.enable()
    with pytest.raises(ms.MetricsScopeError) as err:
        scope.configure(names)
    assert err.value.code == code and ms.METRICS_SCOPE_HINTS[code] in str(err.value)
    scope.disable()


def _kernels():
    return ms.KernelTable(kernel_ids=np.array([7, 9], np.uint64), start_ns=np.array([1000, 5000]),
                          end_ns=np.array([2000, 7000]), pid=np.array([0, 0], dtype=object),
                          tid=np.array([3, 3], dtype=object), names=["gemm", "relu"])


def test_emit_counters_step_to_zero_and_metrics_slices(scope_double):
    res, _ = _run(scope_double, ["GpuTime", "XVE_ACTIVE"], [7, 9, 42], [[1000, 12.5], [2000, 50.0], [5, 1.0]])
    b = TraceBuilder(pid=1)
    unmatched = ms.emit_scope_metrics(b, res, _kernels())
    assert unmatched == 1
    assert b.dropped == {"xpu_scope_unmatched_kernel": 1}
    assert any("1 per-kernel metric record(s) had no matching kernel" in w for w in b.warnings)
    (cb,) = b.counters
    assert cb.ts.tolist()[:4] == [999, 2001, 4999, 7001]
    assert cb.values["GpuTime"].tolist()[:4] == [1000.0, 0.0, 2000.0, 0.0]
    assert cb.values["XVE_ACTIVE"].tolist()[:4] == [12.5, 0.0, 50.0, 0.0]
    assert b.strings.strings[cb.cat[0]] == ActivityType.XPU_SCOPE_PROFILER.value
    table = slice_table(b)
    assert table["name"].tolist() == ["metrics: gemm", "metrics: relu", "metrics: scripted_kernel"]
    assert table["ts"].tolist()[:2] == [999, 4999] and table["dur"].tolist()[:2] == [1002, 2002]
    # unmatched record: after the previous one, on device 0 / resource 0
    assert table["ts"][2] > 7000 and table["pid"][2] == 0 and table["tid"][2] == 0
    (sb,) = b.slices
    assert sb.args["GpuTime::ns"].values.tolist() == [1000.0, 2000.0, 5.0]
    assert sb.args["XVE_ACTIVE::percent"].values.tolist() == [12.5, 50.0, 1.0]
    assert sb.args["kernel_id"].values.tolist() == [7, 9, 42]


def test_kernel_x_event_args_for_matching_kernels(scope_double):
    res, _ = _run(scope_double, ["GpuTime", "XVE_STALL"], [9], [[2000, 3.0]])
    args = ms.kernel_metric_args(res, np.array([7, 9], np.uint64))
    assert args["GpuTime::ns"].present.tolist() == [False, True]
    assert args["GpuTime::ns"].values.tolist()[1] == 2000.0
    assert args["XVE_STALL::percent"].values.tolist()[1] == 3.0


def test_request_checks_and_kineto_defaults():
    assert ExperimentalConfig(profiler_metrics=["GpuTime"]).effective_max_scopes == 1500
    assert ExperimentalConfig(profiler_metrics=["GpuTime"], profiler_measure_per_kernel=False).effective_max_scopes == 10
    assert ExperimentalConfig(profiler_metrics=["GpuTime"], max_scopes=7).effective_max_scopes == 7
    assert ms.check_scope_request(ExperimentalConfig(profiler_metrics="GpuTime::ns, XVE_ACTIVE")) == ["GpuTime", "XVE_ACTIVE"]
    with pytest.raises(ms.MetricsScopeError, match="user-controlled metric scopes are not implemented"):
        ms.check_scope_request(ExperimentalConfig(profiler_metrics=["GpuTime"], profiler_measure_per_kernel=False))
    with pytest.raises(ms.MetricsScopeError, match="no metrics were requested"):
        ms.check_scope_request(ExperimentalConfig())


def test_offline_validation_uses_catalogs():
    assert ms.validate_offline(["GpuTime", "XVE_ACTIVE"], "Intel(R) Data Center GPU Max 1100") == "ComputeBasic"
    with pytest.raises(ValueError, match="different metric groups"):
        ms.validate_offline(["XVE_ACTIVE", "Counter5"], "Intel(R) Data Center GPU Max 1100")


def test_zet_enable_metrics_set_or_precise_error():
    env = {}
    ms.ensure_metrics_env(env, level_zero_loaded=False)
    assert env["ZET_ENABLE_METRICS"] == "1"
    with pytest.raises(ms.MetricsScopeError, match="already loaded in this process"):
        ms.ensure_metrics_env({}, level_zero_loaded=True)
    ms.ensure_metrics_env({"ZET_ENABLE_METRICS": "1"}, level_zero_loaded=True)  # already set: fine


@pytest.mark.parametrize("who", ["xpuprof", "sycl", "unknown"])
def test_too_late_for_zet_enable_metrics_names_who_initialized_level_zero(monkeypatch, who):
    """It always blamed "torch.xpu, dpctl or a SYCL queue", also when xpuprof's own earlier session had
    loaded Level Zero (the real-stack check: tests/xpu/test_real_sycl.py)."""
    from xpuprof.backends.xpu import early_load
    from xpuprof.vendors import levelzero

    monkeypatch.setattr(levelzero, "_loaded_first_by_xpuprof", [who == "xpuprof"])
    adapters = ["/opt/l/libur_adapter_opencl.so.0", "/opt/l/libur_adapter_level_zero.so.0"] if who == "sycl" else []
    monkeypatch.setattr(early_load, "sycl_initialized", lambda: adapters)
    with pytest.raises(ms.MetricsScopeError) as info:
        ms.ensure_metrics_env({}, level_zero_loaded=True)
    msg = str(info.value)
    assert "ZET_ENABLE_METRICS=1 python train.py" in msg
    if who == "xpuprof":
        assert "xpuprof's own earlier XPU session in this process initialized it" in msg
        assert "make the metrics session the first XPU session" in msg and "torch.xpu" not in msg
    elif who == "sycl":
        assert "the SYCL runtime initialized it (libur_adapter_level_zero.so.0 is loaded" in msg
    else:
        assert "something outside xpuprof initialized it first" in msg


def test_the_level_zero_loader_remembers_whether_xpuprof_loaded_it_first(monkeypatch, tmp_path):
    from xpuprof.vendors import levelzero

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build a stand-in Level Zero loader")
    lib = tmp_path / "libze_loader.so.1"
    (tmp_path / "l.c").write_text("int zeInit(int f) { (void)f; return 0; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "l.c")], check=True)
    for mapped_before, expected in (([], True), (["/usr/lib/libze_loader.so.1"], False)):
        monkeypatch.setattr(levelzero, "_loaded_first_by_xpuprof", [])
        monkeypatch.setattr(levelzero, "loader_mapped", lambda: list(mapped_before))
        levelzero.load_loader(str(lib))
        levelzero.load_loader(str(lib))  # the first load decides
        assert levelzero.loaded_first_by_xpuprof() is expected


def test_unmatched_records_chain_after_the_previous_one(scope_double):
    res, _ = _run(scope_double, ["GpuTime"], [42, 7, 43, 44], [[1], [2], [3], [4]])
    b = TraceBuilder(pid=1)
    assert ms.emit_scope_metrics(b, res, _kernels()) == 3
    table = slice_table(b)
    # 42: after all kernels (last end 7000); 7: its kernel (1000-2000); 43, 44: 2 ns after the previous end + 1
    assert table["ts"].tolist() == [7003, 999, 2002, 2006] and table["dur"].tolist() == [3, 1002, 3, 3]
    b2 = TraceBuilder(pid=1)
    assert ms.emit_scope_metrics(b2, res, ms.KernelTable.empty()) == 4
    assert slice_table(b2)["ts"].tolist() == [1, 5, 9, 13]
