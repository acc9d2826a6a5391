"""Kernel name filters (unitrace's --include-kernels/--exclude-kernels and -file variants) and kernel
submission intervals (unitrace's -s), in the XPU decode path over the PTI double."""
from __future__ import annotations

import argparse

import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu import kernel_columns
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.cli import build_parser, main
from xpuprof.clock import now_ns
from xpuprof.config.kernel_filter import KernelFilter, KernelFilterError, read_filter_file, split_filter_list
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace

from .conftest import ALL, UUID0


def trace_of(double, tmp_path, config, iterations=6, flags=0):
    api = XpuptiActivityApi(ALL, config, library=double.lib, device_uuids=[UUID0])
    api.start()
    assert double.workload_holding_gil(iterations, flags) == 0
    api.stop()
    b = TraceBuilder()
    # the double scripts its records up to (iterations + 1) * 10 us into the past
    api.process(b, ProcessWindow(api.start_ns - (iterations + 1) * 10_000 - 1_000_000, now_ns()))
    return api, load(write_chrome_trace(b, tmp_path / "trace.json"))


def slices(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


# ----------------------------------------------------------------------------- the syntax
def test_unitrace_list_syntax_and_files(tmp_path):
    assert split_filter_list('foo,"bar,with,comma",baz') == ["foo", "bar,with,comma", "baz"]
    assert split_filter_list(r'a\"b, c ,,') == ['a"b', "c"]
    with pytest.raises(KernelFilterError, match="unclosed"):
        split_filter_list('"open')
    f = tmp_path / "keep.txt"
    f.write_text('# kernels under study\ngemm,conv\n\n"x{1,3}"\n')
    assert read_filter_file(f) == ["gemm", "conv", "x{1,3}"]
    with pytest.raises(KernelFilterError, match="cannot read"):
        read_filter_file(tmp_path / "missing.txt")


def test_include_then_exclude_like_unitrace():
    f = KernelFilter(("gemm", "conv"), ("fp16",))
    assert [f.keep(n) for n in ("gemm_f32", "conv2d", "gemm_fp16", "relu")] == [True, True, False, False]
    assert KernelFilter((), ("^relu$",)).keep("relu_x") and not KernelFilter((), ("^relu$",)).keep("relu")
    assert KernelFilter.of((), ()) is None
    with pytest.raises(ValueError, match="'\\(bad' is not a valid regular expression"):
        ProfilerConfig(exclude_kernels=["(bad"])


# ----------------------------------------------------------------------------- the decode path
def test_exclude_drops_kernels_and_counts_them_in_the_metadata(pti_double, tmp_path):
    api, trace = trace_of(pti_double, tmp_path, ProfilerConfig(exclude_kernels=["relu"]))
    kernels = slices(trace, "kernel")
    assert {k["name"] for k in kernels} == {"gemm_kernel<float>"} and len(kernels) == 3
    md = trace["xpu_kernel_filter"]
    assert md["exclude"] == ["relu"] and md["kernels_kept"] == 3 and md["kernels_filtered"] == 3
    assert md["filtered"] == {"relu_kernel": 3}
    assert len(api.kernels) == 3  # what per-kernel metrics join on
    # the runtime calls stay; no flow ends on a kernel that is not in the trace
    assert len([r for r in slices(trace, "xpu_runtime") if r["name"] == "urEnqueueKernelLaunch"]) == 6
    ends = {(e["pid"], e["tid"], e["ts"]) for e in trace["traceEvents"] if e.get("ph") == "f"}
    rows = {(e["pid"], e["tid"], e["ts"]) for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert ends <= rows


def test_include_keeps_only_matching_kernels(pti_double, tmp_path):
    _, trace = trace_of(pti_double, tmp_path, ProfilerConfig(include_kernels=[r"relu_\w+"]))
    assert {k["name"] for k in slices(trace, "kernel")} == {"relu_kernel"}
    assert trace["xpu_kernel_filter"]["include"] == [r"relu_\w+"]


def test_no_filter_leaves_no_filter_key(pti_double, tmp_path):
    _, trace = trace_of(pti_double, tmp_path, ProfilerConfig())
    assert "xpu_kernel_filter" not in trace and len(slices(trace, "kernel")) == 6


def test_the_patterns_run_once_per_distinct_name_not_per_record(pti_double, tmp_path, monkeypatch):
    calls = []
    real = KernelFilter.keep

    def counting(self, name):
        calls.append(name)
        return real(self, name)

    monkeypatch.setattr(KernelFilter, "keep", counting)
    _, trace = trace_of(pti_double, tmp_path, ProfilerConfig(exclude_kernels=["kernel_1[0-9]<"]), iterations=2000,
                        flags=pti_double.MANY_NAMES)
    kept = slices(trace, "kernel")
    distinct = len({k["name"] for k in kept}) + trace["xpu_kernel_filter"]["names_filtered"]
    assert len(calls) == len(set(calls)) == distinct < 2000
    assert trace["xpu_kernel_filter"]["kernels_kept"] + trace["xpu_kernel_filter"]["kernels_filtered"] == 2000


def test_stall_samples_of_filtered_kernels_are_left_out_and_counted(pti_double, tmp_path):
    pti_double.c.xpd_set_version(b"1.2.0")
    cfg = ProfilerConfig(exclude_kernels=["gemm"], experimental=ExperimentalConfig(stall_sampling=True))
    _, trace = trace_of(pti_double, tmp_path, cfg)
    md = trace["xpu_stall_sampling"]
    assert [k["name"] for k in md["kernels"]] == ["relu_kernel"] and md["kernels_filtered"] == 1


def test_the_front_ends_take_filters(tmp_path, capsys):
    from xpuprof.commands.run import apply_xpu_flags
    from xpuprof.config.yamlconfig import ConfigError, parse_config

    kin = ProfilerConfig.from_kineto('XPUPTI_INCLUDE_KERNELS=gemm,"a{1,2}"\nXPUPTI_EXCLUDE_KERNELS=fp16')
    assert kin.include_kernels == ["gemm", "a{1,2}"] and kin.exclude_kernels == ["fp16"]
    with pytest.raises(ValueError, match="XPUPTI_EXCLUDE_KERNELS"):
        ProfilerConfig.from_kineto("XPUPTI_EXCLUDE_KERNELS=(x")
    (tmp_path / "skip.txt").write_text("debug\n")
    y = parse_config("workload: {builtin: gemm}\nkernels: {include: [gemm], exclude_file: skip.txt}\n",
                     base_dir=tmp_path).points[0].profiler_config()
    assert y.include_kernels == ["gemm"] and y.exclude_kernels == ["debug"]
    with pytest.raises(ConfigError, match="kernels.include"):
        parse_config("workload: {builtin: gemm}\nkernels: {include: ['(x']}\n")
    cfg = parse_config("workload: {builtin: gemm}\nkernels: {exclude: [test]}\n", base_dir=tmp_path)
    args = build_parser().parse_args(["run", "c.yaml", "--include-kernels", 'matmul,"conv,2d"', "--exclude-kernels-file",
                                      str(tmp_path / "skip.txt"), "--stall-sampling-period-ns", "20000"])
    apply_xpu_flags(cfg, args)
    pc = cfg.points[0].profiler_config()
    assert pc.include_kernels == ["matmul", "conv,2d"] and pc.exclude_kernels == ["test", "debug"]
    assert pc.experimental.stall_sampling and pc.experimental.stall_sampling_period_ns == 20000
    (tmp_path / "c.yaml").write_text("workload: {builtin: gemm}\n")
    assert main(["run", str(tmp_path / "c.yaml"), "--dry-run", "--exclude-kernels", "(x"]) == 2
    assert "not a valid regular expression" in capsys.readouterr().err


# ----------------------------------------------------------------------------- submission intervals
def test_submission_intervals_are_kernel_args_metadata_and_report_columns(pti_double, tmp_path, capsys):
    _, trace = trace_of(pti_double, tmp_path, ProfilerConfig())
    k = slices(trace, "kernel")[0]
    # the double: appended t0+1000, submitted t0+2000, started t0+4000, ended t0+6000 (ns)
    assert k["args"]["queued (us)"] == 1.0 and k["args"]["submit to start (us)"] == 2.0
    md = trace[kernel_columns.INTERVALS_METADATA_KEY]
    i = md["names"].index("gemm_kernel<float>")
    assert (md["queued"]["count"][i], md["queued"]["total"][i]) == (3, 3000)
    assert md["submit"]["total"][i] == 6000 and md["execute"]["total"][i] == 6000
    import orjson

    assert main(["report", "--format", "json", str(tmp_path / "trace.json")]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in doc["tables"]["by_name"]["rows"]}
    keys = [c["key"] for c in doc["tables"]["by_name"]["columns"]]
    assert {"queued_avg_ns", "submit_avg_ns"} <= set(keys)  # columns listed with their units (report schema)
    assert rows["gemm_kernel<float>"]["queued_avg_ns"] == 1000.0 and rows["gemm_kernel<float>"]["submit_avg_ns"] == 2000.0
    assert "queued_avg_ns" not in rows["Memset (0 -> Device)"]
    assert main(["report", str(tmp_path / "trace.json")]) == 0
    assert "Queued" in capsys.readouterr().out
    assert main(["report", "--format", "json", "--start", "0", str(tmp_path / "trace.json")]) == 0
    assert "queued_avg_ns" not in capsys.readouterr().out  # a window: the whole-trace sums are not shown


def test_patterns_that_name_their_groups_keep_their_meaning():
    f = KernelFilter((r"(a)\1", "b"), ())  # a backreference: searched one pattern at a time
    assert f.keep("xaax") and f.keep("b") and not f.keep("a")
    g = KernelFilter((), ("(?P<op>gemm)_(?P=op)", "relu"))
    assert not g.keep("gemm_gemm") and g.keep("gemm_conv") and not g.keep("relu6")
