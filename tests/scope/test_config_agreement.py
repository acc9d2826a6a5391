"""The three ways of asking for per-kernel metrics (Python, Kineto config text, YAML) mean the same
session: same names, mode and max_scopes (Kineto's 1500 / 10 defaults only when unset)."""
from __future__ import annotations

import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends.xpu import metrics_scope as ms
from xpuprof.backends.xpu.scope_api import XpuptiActivityScopeApi
from xpuprof.catalogs import MetricSelectionError
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.config.yamlconfig import parse_config

TYPES = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.XPU_SCOPE_PROFILER})


def python_config(names, per_kernel=True, max_scopes=0):
    return ProfilerConfig(activities=TYPES, experimental=ExperimentalConfig(
        profiler_metrics=list(names), profiler_measure_per_kernel=per_kernel, max_scopes=max_scopes))


def kineto_config(names, per_kernel=True, max_scopes=None):
    lines = ["ACTIVITY_TYPES=kernel,xpu_scope_profiler", f"XPUPTI_PROFILER_METRICS={','.join(names)}",
             f"XPUPTI_PROFILER_ENABLE_PER_KERNEL={'true' if per_kernel else 'false'}"]
    if max_scopes is not None:
        lines.append(f"XPUPTI_PROFILER_MAX_SCOPES={max_scopes}")
    return ProfilerConfig.from_kineto("\n".join(lines))


def yaml_config(names, per_kernel=True, max_scopes=None):
    block = f"metrics:\n  names: [{', '.join(names)}]\n  per_kernel: {'true' if per_kernel else 'false'}\n"
    if max_scopes is not None:
        block += f"  max_scopes: {max_scopes}\n"
    text = "workload: {builtin: gemm}\nactivities: [kernel, xpu_scope_profiler]\n" + block
    return parse_config(text).points[0].profiler_config()


def _key(cfg: ProfilerConfig):
    exp = cfg.experimental
    return (sorted(a.value for a in cfg.activities & TYPES), exp.profiler_metrics, exp.profiler_measure_per_kernel,
            exp.effective_max_scopes)


@pytest.mark.parametrize("per_kernel,max_scopes,expected", [(True, None, 1500), (False, None, 10), (True, 7, 7),
                                                            (False, 7, 7)])
def test_three_front_ends_agree_including_kineto_defaults(per_kernel, max_scopes, expected):
    names = ["GpuTime", "XVE_ACTIVE"]
    configs = [python_config(names, per_kernel, max_scopes or 0), kineto_config(names, per_kernel, max_scopes),
               yaml_config(names, per_kernel, max_scopes)]
    keys = [_key(c) for c in configs]
    assert keys[0] == keys[1] == keys[2]
    assert keys[0] == (["kernel", "xpu_scope_profiler"], names, per_kernel, expected)
    assert all(c.experimental.max_scopes == (max_scopes or 0) for c in configs)  # the default stays "unset"


@pytest.mark.parametrize("make", [python_config, kineto_config, yaml_config])
def test_each_front_end_drives_the_same_session(make, full_double):
    api = XpuptiActivityScopeApi(TYPES, make(["GpuTime::ns", "XVE_STALL"], True, 40), library=full_double.lib)
    try:
        assert api.metric_names == ["GpuTime", "XVE_STALL"] and api.max_scopes == 40
        assert full_double.c.scope_double_buffer_size() == 40 * 256 and api.metric_group == "ComputeBasic"
    finally:
        api.stop()
        api.scope.disable()


@pytest.mark.parametrize("make", [python_config, kineto_config, yaml_config])
def test_bad_name_and_mixed_groups_fail_the_same_way(make, full_double):
    with pytest.raises(MetricSelectionError, match="'XVE_ACTIV': did you mean XVE_ACTIVE \\(group ComputeBasic\\)"):
        XpuptiActivityScopeApi(TYPES, make(["GpuTime", "XVE_ACTIV"]), library=full_double.lib)
    with pytest.raises(MetricSelectionError, match="different metric groups"):
        XpuptiActivityScopeApi(TYPES, make(["GpuTime", "Counter5"]), library=full_double.lib)


@pytest.mark.parametrize("make", [python_config, kineto_config, yaml_config])
def test_user_scope_mode_is_a_clear_error(make, full_double):
    with pytest.raises(ms.MetricsScopeError, match="user-controlled metric scopes are not implemented by Intel PTI"):
        XpuptiActivityScopeApi(TYPES, make(["GpuTime"], per_kernel=False), library=full_double.lib)


def test_kineto_per_kernel_defaults_off_like_kineto():
    cfg = ProfilerConfig.from_kineto("ACTIVITY_TYPES=kernel,xpu_scope_profiler\nXPUPTI_PROFILER_METRICS=GpuTime")
    assert cfg.experimental.profiler_measure_per_kernel is False and cfg.experimental.effective_max_scopes == 10
    with pytest.raises(ms.MetricsScopeError, match="XPUPTI_PROFILER_ENABLE_PER_KERNEL"):
        ms.check_scope_request(cfg.experimental)


def test_scope_profiler_without_metrics_is_a_clear_error(full_double):
    with pytest.raises(ms.MetricsScopeError, match="no metrics were requested"):
        XpuptiActivityScopeApi(TYPES, python_config([]), library=full_double.lib)
