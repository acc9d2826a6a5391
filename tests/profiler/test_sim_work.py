"""The sim's launch rule without torch: innermost ranges launch one kernel named after them, sized by the
work their args give; deterministic under a seed."""
from __future__ import annotations

import json

import pytest

from slice_tables import slice_table
import xpuprof


def _launches():
    from xpuprof.backends.sim import launches
    return launches


def _kernels(prof):
    k = slice_table(prof.builder, "kernel")
    return k["name"].tolist(), k["dur"].tolist()


def _ranges(args_list, seed=0):
    cfg = xpuprof.ProfilerConfig(backends=["sim"], custom={"sim_seed": seed})
    with xpuprof.profile(config=cfg, activities=["user_annotation", "runtime", "kernel"]) as prof:
        for i, args in enumerate(args_list):
            with xpuprof.record_function("outer"):
                with xpuprof.record_function(f"work{i}", args):
                    pass
    return prof


def test_innermost_ranges_launch_one_kernel_named_after_them():
    prof = _ranges([None, None, None])
    names, _ = _kernels(prof)
    assert sorted(names) == ["sim_work0", "sim_work1", "sim_work2"]  # "outer" has ranges inside: no kernel
    assert prof.builder.metadata["simulated"] is True


def test_kernel_time_follows_the_work_in_the_ranges_args():
    small = 2 * 128 ** 3
    prof = _ranges([{"flops": small, "bytes": 3 * 128 * 128 * 4}, {"flops": 8 * small, "bytes": 3 * 256 * 256 * 4}])
    (_, d128), (_, d256) = sorted(zip(*_kernels(prof)))
    expect128 = _launches().work_ns(small, 3 * 128 * 128 * 4)
    expect256 = _launches().work_ns(8 * small, 3 * 256 * 256 * 4)
    assert abs(d128 - expect128) <= 0.05 * expect128 + 1 and abs(d256 - expect256) <= 0.05 * expect256 + 1
    assert d256 > 3 * d128


def test_the_same_host_activity_and_seed_give_the_same_kernels():
    work = [{"flops": 10 ** 7}, {"bytes": 10 ** 6}, None]
    a, b, c = _ranges(work, seed=3), _ranges(work, seed=3), _ranges(work, seed=4)
    assert _kernels(a)[1] == _kernels(b)[1]  # the jitter comes from the seed only
    assert _kernels(a)[1] != _kernels(c)[1]


def test_xpuprof_run_of_two_sizes_gives_kernels_sized_by_the_work(tmp_path):
    from xpuprof.cli import main

    durations = {}
    for n in (128, 256):
        cfg = tmp_path / f"c{n}.yaml"
        cfg.write_text(f"name: g{n}\nworkload: {{builtin: gemm, library: numpy, kwargs: {{n: {n}}}}}\n"
                       "backends: [sim]\niterations: 3\nactivities: [user_annotation, runtime, kernel]\n")
        assert main(["run", str(cfg), "--out", str(tmp_path / f"o{n}"), "--no-progress"]) == 0
        (trace,) = (tmp_path / f"o{n}").rglob("*.pt.trace.json")
        kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
        assert len(kernels) == 3
        durations[n] = [k["dur"] for k in kernels]
    assert min(durations[256]) > 4 * max(durations[128])  # 8x the FLOPs, 4x the bytes
    for n, durs in durations.items():  # the range's flops/bytes at the simulated device's rates
        expect_us = _launches().work_ns(2 * n ** 3, 3 * n * n * 4) / 1000
        assert all(abs(d - expect_us) <= 0.05 * expect_us + 0.01 for d in durs), (n, durs)


def test_collective_ranges_launch_communication_kernels_on_their_own_stream():
    cfg = xpuprof.ProfilerConfig(backends=["sim"], custom={"sim_vendor": "cuda"})
    with xpuprof.profile(config=cfg, activities=["user_annotation", "runtime", "kernel"]) as prof:
        with xpuprof.record_function("matmul", {"flops": 10 ** 8}):
            pass
        with xpuprof.record_function("nccl:all_reduce", {"bytes": 1 << 20}):
            pass
    k = slice_table(prof.builder, "kernel")
    by_name = dict(zip(k["name"].tolist(), k["tid"].tolist()))
    assert by_name["ncclKernel_AllReduce_RING_LL_Sum_float"] != by_name["sim_matmul"]
