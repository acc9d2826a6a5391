"""EU stall sampling (PTI PC sampling) over the PTI double: the ABI mirror, the data path into kernel
args and the trace's metadata, every refusal (unknown layouts, unsupported machines, PTI misuse codes)
and the configuration front ends."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu import stall_sampling
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.backends.xpu.stall_sampling import StallSamplingError, explain_refusal
from xpuprof.clock import now_ns
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.vendors import pti_pc_sampling as pcs

from .conftest import ALL, UUID0

REASONS = ["Active", "ControlStall", "PipeStall", "SendStall", "DistStall", "SbidStall", "SyncStall",
           "InstrFetchStall", "OtherStall"]
MODE_SUPPORTED, MODE_UNSUPPORTED, MODE_FUTURE_SIZE, MODE_DROPPED = range(4)


@pytest.fixture
def double(pti_double):
    c = pti_double.c
    c.pcs_double_sizeof.argtypes = [ctypes.c_char_p]
    c.pcs_double_sizeof.restype = ctypes.c_size_t
    c.pcs_double_offset.argtypes = [ctypes.c_char_p]
    c.pcs_double_offset.restype = ctypes.c_size_t
    c.pcs_double_sample.argtypes = [ctypes.c_size_t] * 3
    c.pcs_double_sample.restype = ctypes.c_uint64
    c.pcs_double_period.restype = ctypes.c_uint32
    c.pcs_double_set_instructions.argtypes = [ctypes.c_size_t]
    c.pcs_double_script.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    c.xpd_set_version.argtypes = [ctypes.c_char_p]
    c.xpd_set_version(b"1.2.0")
    return pti_double


def session(double, period_ns=0, **cfg):
    config = ProfilerConfig(experimental=ExperimentalConfig(stall_sampling=True, stall_sampling_period_ns=period_ns),
                            **cfg)
    return XpuptiActivityApi(ALL, config, library=double.lib, device_uuids=[UUID0])


def run(double, tmp_path, api, iterations=6):
    api.start()
    assert double.workload_holding_gil(iterations) == 0
    api.stop()
    builder = TraceBuilder()
    api.process(builder, ProcessWindow(api.start_ns - 1_000_000, now_ns()))
    return builder, load(write_chrome_trace(builder, tmp_path / "trace.json"))


def expected_mix(double, k, ninstr=6):
    return [sum(double.c.pcs_double_sample(k, i, r) for i in range(ninstr)) for r in range(len(REASONS))]


# ----------------------------------------------------------------------------- the ABI mirror
def test_ctypes_mirror_matches_the_header_layout_compiled_by_the_c_compiler(double):
    for name, struct in pcs.STRUCTS.items():
        assert ctypes.sizeof(struct) == pcs.KNOWN_LAYOUTS[(1, 2)][name] == double.c.pcs_double_sizeof(name.encode())
    for c_name, struct, fields in [
        ("reason_info_t", pcs.StallReasonInfo, ("_name", "_description")),
        ("source_info_t", pcs.SourceInfo, ("_file_line",)),
        ("instruction_t", pcs.Instruction, ("_source_info",)),
        ("kernel_info_t", pcs.KernelInfo, ("_device", "_kernel_handle", "_kernel_name", "_reason_count",
                                           "_instructions_with_samples_count", "_aggregated_samples")),
        ("device_status_t", pcs.DeviceStatus, ("_device", "_samples_dropped", "_total_sample_count",
                                               "_total_pc_count")),
    ]:
        for f in fields:
            assert getattr(struct, f).offset == double.c.pcs_double_offset(f"{c_name}.{f}".encode()), (c_name, f)
    assert pcs.INSTRUCTION_DTYPE.itemsize == ctypes.sizeof(pcs.Instruction)
    assert pcs.INSTRUCTION_DTYPE.fields["source_info"][1] == pcs.Instruction._source_info.offset


@pytest.mark.parametrize("version", ["1.3.0", "2.0.1", "0.99.0-xpuprof-double", ""])
def test_a_pti_release_whose_layout_is_unknown_is_refused_before_any_call(double, version):
    double.c.xpd_set_version(version.encode())
    with pytest.raises(StallSamplingError) as err:
        session(double)
    msg = str(err.value)
    assert "1.2" in msg and "not a layout xpuprof knows" in msg
    assert double.c.pcs_double_state() == 0  # PTI was never asked to enable


def test_a_struct_size_pti_writes_back_that_no_layout_has_loses_the_samples_not_the_trace(double, tmp_path):
    double.c.pcs_double_set_mode(MODE_FUTURE_SIZE)
    builder, trace = run(double, tmp_path, session(double))
    assert "xpu_stall_sampling" not in trace
    err = trace["xpu_stall_sampling_error"]
    assert "_struct_size 64" in err and "56" in err
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel") == 6  # the kernels are all there
    assert double.c.pcs_double_state() == 0  # collection disabled


# ----------------------------------------------------------------------------- the data path
def test_samples_reach_kernel_args_and_the_trace_metadata(double, tmp_path):
    api = session(double, period_ns=20_000)
    assert double.c.pcs_double_period() == 20_000
    builder, trace = run(double, tmp_path, api)
    assert api.errors() == []
    md = trace["xpu_stall_sampling"]
    assert md["period_ns"] == 20_000
    assert [r["name"] for r in md["reasons"]] == REASONS and md["reasons"][5]["description"].startswith("Stalled")
    by_name = {k["name"]: k for k in md["kernels"]}
    assert set(by_name) == {"gemm_kernel<float>", "relu_kernel"}
    for k, name in enumerate(["gemm_kernel<float>", "relu_kernel"]):
        mix = expected_mix(double, k)
        entry = by_name[name]
        assert entry["samples"] == sum(mix)
        assert entry["by_reason"] == {r: v for r, v in zip(REASONS, mix) if v}
        assert entry["kernel_slices"] == 3
        ins = entry["instructions"]
        assert ins["offset"] == [0x100 + 0x10 * i for i in range(6)]
        # two of every three instructions have source info, two per line; the third none (-1, line 0)
        assert ins["line"] == [10, 10, 0, 11, 12, 0]
        assert [md["files"][f] if f >= 0 else None for f in ins["file"]] == [
            ["/src/kernels/gemm.cpp", "/src/kernels/relu.cpp"][k]] * 2 + [None] + [
            ["/src/kernels/gemm.cpp", "/src/kernels/relu.cpp"][k]] * 2 + [None]
        assert ins["samples"][3] == [double.c.pcs_double_sample(k, 3, r) for r in range(len(REASONS))]
    assert md["devices"] == [{"handle": "0x1000", "samples": md["samples"], "pcs": 12, "samples_dropped": False}]
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels:
        k = 0 if e["name"] == "gemm_kernel<float>" else 1
        mix = expected_mix(double, k)
        assert e["args"]["stall samples"] == sum(mix)
        for reason, v in zip(REASONS, mix):
            assert e["args"].get(f"stall samples: {reason}") == (v or None)


def test_period_zero_is_ptis_default(double, tmp_path):
    api = session(double)
    assert double.c.pcs_double_period() == pcs.PTI_PC_SAMPLING_DEFAULT_PERIOD_NS
    _, trace = run(double, tmp_path, api)
    assert trace["xpu_stall_sampling"]["period_ns"] == 100_000


def test_dropped_samples_are_said_in_the_metadata(double, tmp_path):
    double.c.pcs_double_set_mode(MODE_DROPPED)
    _, trace = run(double, tmp_path, session(double))
    md = trace["xpu_stall_sampling"]
    assert md["devices"][0]["samples_dropped"] is True
    assert any("dropped" in w for w in md["warnings"])


def test_a_kernel_pti_sampled_but_the_window_dropped_is_kept_and_counted(double, tmp_path):
    api = session(double)
    api.start()
    double.workload_holding_gil(4)
    api.stop()
    builder = TraceBuilder()
    api.process(builder, ProcessWindow(now_ns() + 10**9, now_ns() + 2 * 10**9))  # a window with no record in it
    md = builder.metadata["xpu_stall_sampling"]
    assert {k["name"] for k in md["kernels"]} == {"gemm_kernel<float>", "relu_kernel"}
    assert md["kernels_without_slices"] == 2 and all(k["kernel_slices"] == 0 for k in md["kernels"])


def test_decode_handles_many_instructions_and_kernels(double):
    double.c.pcs_double_script(40, 500)
    api = session(double)
    api.start()
    api.stop()
    api.stall.collect()
    res = api.stall.results
    assert len(res.kernel_names) == 40 and len(res.instr_offset) == 40 * 500
    assert res.instr_samples.shape == (20_000, 9)
    k, i = 17, 251
    row = np.flatnonzero((res.instr_kernel == k))[i]
    assert res.instr_samples[row].tolist() == [double.c.pcs_double_sample(k, i, r) for r in range(9)]
    assert (res.kernel_samples == np.add.reduceat(res.instr_samples, np.arange(0, 20_000, 500))).all()
    api.stall.abandon()


# ----------------------------------------------------------------------------- refusals and misuse
def test_an_unsupported_machine_is_one_error_at_configure_naming_what_to_do(double, monkeypatch, capfd):
    monkeypatch.delenv("ZE_ENABLE_NULL_DRIVER", raising=False)
    monkeypatch.delenv("ZET_ENABLE_METRICS", raising=False)
    double.c.pcs_double_set_mode(MODE_UNSUPPORTED)
    with pytest.raises(StallSamplingError) as err:
        session(double)
    msg = str(err.value)
    assert "PTI_ERROR_PC_SAMPLING_UNSUPPORTED (257)" in msg
    assert "ZET_ENABLE_METRICS=1" in msg and "does not support EU stall sampling" in msg
    assert "EuStallSampling" in capfd.readouterr().err  # PTI's own reason stays visible
    assert double.c.xpd_view_enabled(1) == 0  # the views enabled before it were disabled again


@pytest.mark.parametrize("paranoid, expect", [
    ({"/proc/sys/dev/xe/observation_paranoid": "1"}, "sudo sysctl dev.xe.observation_paranoid=0"),
    ({"/proc/sys/dev/i915/perf_stream_paranoid": "1", "/proc/sys/dev/xe/observation_paranoid": "0"},
     "sudo sysctl dev.i915.perf_stream_paranoid=0"),
])
def test_refusal_names_the_paranoid_setting_that_blocks_sampling(paranoid, expect):
    msg = explain_refusal(257, "PTI_ERROR_PC_SAMPLING_UNSUPPORTED", device_names=["Intel(R) Data Center GPU Max 1550"],
                          environ={"ZET_ENABLE_METRICS": "1"}, paranoid=paranoid)
    assert expect in msg and "ZET_ENABLE_METRICS" not in msg.split("paranoid")[0]
    assert "observation_paranoid is 0" not in msg


def test_refusal_on_the_null_device_names_it():
    msg = explain_refusal(257, "PTI_ERROR_PC_SAMPLING_UNSUPPORTED", device_names=["Null Device"], environ={},
                          paranoid={})
    assert "null driver's test device" in msg and "Intel GPU" in msg


def test_a_second_collection_in_one_process_takes_over_from_an_abandoned_one(double, tmp_path):
    first = session(double)  # configured, never processed (an aborted profile)
    first.disable()
    second = session(double)
    _, trace = run(double, tmp_path, second)
    assert trace["xpu_stall_sampling"]["kernels"]
    assert first.stall.sampler.enabled is False


def test_a_pti_without_the_api_is_refused():
    with pytest.raises(StallSamplingError) as err:
        stall_sampling.StallSampler({name: None for name in pcs.SIGNATURES}, version="1.2.0")
    assert "ptiPcSamplingEnable" in str(err.value) and "intel-pti 1.2" in str(err.value)


# ----------------------------------------------------------------------------- configuration
def test_the_front_ends_ask_for_stall_sampling():
    from xpuprof.config.yamlconfig import ConfigError, parse_config

    kin = ProfilerConfig.from_kineto("XPUPTI_STALL_SAMPLING=1\nXPUPTI_STALL_SAMPLING_PERIOD_NS=50000")
    assert kin.experimental.stall_sampling and kin.experimental.stall_sampling_period_ns == 50_000
    assert not ProfilerConfig.from_kineto("ACTIVITIES_DURATION_MSECS=5").experimental.stall_sampling
    y = parse_config("workload: {builtin: gemm}\nstall_sampling: true\n").points[0].profiler_config()
    assert y.experimental.stall_sampling and y.experimental.stall_sampling_period_ns == 0
    y = parse_config("workload: {builtin: gemm}\nstall_sampling: {period_ns: 2000}\n").points[0].profiler_config()
    assert y.experimental.stall_sampling and y.experimental.stall_sampling_period_ns == 2000
    with pytest.raises(ConfigError, match="stall_sampling.period_ns"):
        parse_config("workload: {builtin: gemm}\nstall_sampling: {period_ns: -1}\n")
    with pytest.raises(ValueError, match="XPUPTI_STALL_SAMPLING_PERIOD_NS"):
        ProfilerConfig.from_kineto("XPUPTI_STALL_SAMPLING_PERIOD_NS=-5")
    with pytest.raises(ValueError, match="stall_sampling_period_ns"):
        ExperimentalConfig(stall_sampling=True, stall_sampling_period_ns=1 << 33)


def test_the_metadata_lists_each_kernels_hottest_lines_and_instructions_with_exact_sums(double):
    import numpy as np

    from xpuprof.backends.xpu import stall_emit
    from xpuprof.backends.xpu.stall_emit import StallJoin, stall_metadata

    double.c.pcs_double_script(3, 2000)
    api = session(double)
    api.start()
    api.stop()
    api.stall.collect()
    res = api.stall.results
    md = stall_metadata(StallJoin(res))
    api.stall.abandon()
    for k, entry in enumerate(md["kernels"]):
        rows = np.flatnonzero(res.instr_kernel == k)
        total = res.instr_samples[rows].sum(axis=1)
        ins = entry["instructions"]
        assert entry["instructions_sampled"] == 2000 and len(ins["offset"]) == stall_emit.MAX_INSTRUCTIONS
        assert ins["offset"] == sorted(ins["offset"])
        listed = {o: sum(s) for o, s in zip(ins["offset"], ins["samples"])}
        # the listed instructions are the heaviest: none left out weighs more than the lightest listed
        left_out = [int(t) for o, t in zip(res.instr_offset[rows].tolist(), total) if o not in listed]
        assert max(left_out) <= min(listed.values())
        lines = entry["lines"]
        assert entry["lines_sampled"] == 1000 and len(lines["line"]) == stall_emit.MAX_LINES  # line 10 + i//2
        # a line's samples are the sum of its instructions' (one or two per line in the double)
        line_no, samples = lines["line"][0], lines["samples"][0]
        on_line = rows[(res.instr_line[rows] == line_no)]
        assert samples == res.instr_samples[on_line].sum(axis=0).tolist() and lines["instructions"][0] == len(on_line)
        sums = [sum(s) for s in lines["samples"]]
        assert sums == sorted(sums, reverse=True)
