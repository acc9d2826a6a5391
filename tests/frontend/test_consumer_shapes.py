"""Issue 13: traces shaped as the consumers (HTA, TensorBoard, Catapult) need them.

- default categories are Kineto main's / torch.profiler's vendor names (HTA matches `^(.+)_runtime`
  and only `cuda_runtime` for launch analysis); the generic names on request;
- the sim writes a vendor's trace (`sim_vendor`: xpu, cuda, hip) and is physically plausible: no
  device work starts before the call that launched it (every flow's `f` at or after its `s`);
- per-kernel metrics never add a second `kernel` slice (TensorBoard would count every kernel twice).
"""
from __future__ import annotations

import json
import time

import pytest

import xpuprof
from xpuprof.backends.base import BackendError
from xpuprof.config.yamlconfig import parse_config


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _sim_trace(tmp_path, n=60, seed=0, metrics=(), **config):
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, **config.pop("custom", {})}, **config)
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(backends=["sim"], config=cfg, experimental_config=exp) as prof:
        for i in range(n):
            with xpuprof.record_function(f"step{i % 5}"):
                _spin(2_000 + 37_000 * (i % 9))  # ranges from 2 us to ~300 us: short copies, long spans
    return json.loads(prof.export_chrome_trace(tmp_path / f"t{seed}.json").read_text())["traceEvents"]


@pytest.mark.parametrize("vendor", ["xpu", "cuda", "hip"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_flow_runs_forward_in_time(tmp_path, vendor, seed):
    evs = _sim_trace(tmp_path, seed=seed, custom={"sim_vendor": vendor})
    starts = {e["id"]: e["ts"] for e in evs if e["ph"] == "s"}
    ends = {e["id"]: e["ts"] for e in evs if e["ph"] == "f"}
    assert ends and set(ends) <= set(starts)
    backwards = {i: (starts[i], ends[i]) for i in ends if ends[i] < starts[i]}
    assert not backwards, f"{len(backwards)} of {len(ends)} flows end before they start: {list(backwards.items())[:3]}"


def test_device_streams_serialize(tmp_path):
    evs = _sim_trace(tmp_path)
    for stream in {(e["pid"], e["tid"]) for e in evs if e.get("cat") in ("kernel", "gpu_memcpy")}:
        rows = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                      if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy") and (e["pid"], e["tid"]) == stream)
        assert all(b[0] >= a[1] - 1e-3 for a, b in zip(rows, rows[1:])), f"overlapping work on {stream}"


@pytest.mark.parametrize("vendor,runtime_cat,launch", [
    ("xpu", "xpu_runtime", "urEnqueueKernelLaunch"),
    ("cuda", "cuda_runtime", "cudaLaunchKernel"),
    ("hip", "cuda_runtime", "hipLaunchKernel"),  # Kineto's ROCm path writes cuda_runtime
])
def test_sim_vendor_flavour_names_and_default_vendor_categories(tmp_path, vendor, runtime_cat, launch):
    evs = _sim_trace(tmp_path, n=12, custom={"sim_vendor": vendor})
    runtime = [e for e in evs if e.get("ph") == "X" and e.get("cat") == runtime_cat]
    assert launch in {e["name"] for e in runtime}
    assert not [e for e in evs if e.get("cat") == "runtime"]


def test_generic_categories_on_request(tmp_path):
    evs = _sim_trace(tmp_path, n=12, generic_categories=True)
    assert {e["name"] for e in evs if e.get("cat") == "runtime"} >= {"urEnqueueKernelLaunch"}
    assert not [e for e in evs if str(e.get("cat", "")).endswith("_runtime")]


def test_unknown_sim_vendor_is_one_clear_error(tmp_path):
    with pytest.raises(BackendError, match=r"sim_vendor 'nvidia' is not known; valid: xpu, cuda, hip"):
        _sim_trace(tmp_path, n=1, custom={"sim_vendor": "nvidia"})


def test_per_kernel_metrics_add_no_second_kernel(tmp_path):
    evs = _sim_trace(tmp_path, n=20, metrics=["GpuTime"])
    kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == 20 and not [k for k in kernels if k["name"].startswith("metrics: ")]
    assert [e for e in evs if e.get("ph") == "C" and "GpuTime" in e.get("args", {})]  # still visible


def test_yaml_custom_reaches_the_backends():
    cfg = parse_config("workload: {builtin: gemm}\nbackends: [sim]\ncustom: {sim_vendor: cuda}\n"
                       "output: {generic_categories: true}\n")
    pc = cfg.points[0].profiler_config()
    assert pc.custom == {"sim_vendor": "cuda"} and pc.generic_categories


@pytest.mark.parametrize("seed", [0, 1])
def test_device_work_waits_only_for_its_own_stream(tmp_path, seed):
    """An item that starts well after its launch call waited for the item before it on ITS stream
    (the only dependency a trace without wait events can express; HTA's critical path follows it)."""
    evs = _sim_trace(tmp_path, seed=seed, custom={"sim_vendor": "cuda"})
    launch_end = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in evs if e.get("cat") == "cuda_runtime"}
    work = sorted((e for e in evs if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")),
                  key=lambda e: e["ts"])
    prev_end: dict = {}
    slack_us = 10.0  # launch latency plus queue gap
    for e in work:
        row = (e["pid"], e["tid"])
        waited = e["ts"] - launch_end[e["args"]["correlation"]] > slack_us
        assert not waited or abs(e["ts"] - prev_end.get(row, -1e18)) < slack_us, \
            f"{e['name']} (correlation {e['args']['correlation']}) waited for nothing on its stream"
        prev_end[row] = e["ts"] + e["dur"]
