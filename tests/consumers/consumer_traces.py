"""Traces the consumer tier feeds to the real tools (HTA, TensorBoard's plugin, Catapult's importer).

Each fixture writes traces the way a user gets them: the Python API with a schedule (so
``ProfilerStep#N`` ranges exist) and ``trace_handler`` (so the files carry torch's names), the sim
backend in a vendor flavour with the DEFAULT output options, two ranks through the launcher
variables (``distributedInfo``), per-kernel metrics and syncs; plus the CUDA decoder over
synthetic CUPTI records built with cupti-python's own record dtypes. Session-scoped: each trace is
written once and read by every tool.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import xpuprof

STEPS_RECORDED = 3
# Host range lengths per step: short ranges make launches outrun the device (queues fill), long ones
# let it drain. A long range with a short copy (the 9th range: a copy every 4th, a layernorm every 5th)
# is where the sim once started a kernel before its launch call (Catapult: flow_slice_ordering_error).
LAYER_NS = (300_000, 2_000, 5_000, 40_000, 2_000, 150_000, 20_000, 80_000)  # schedule(wait=0, warmup=1, active=3): steps 1..3 are in the trace


@dataclass
class TraceFacts:
    """What a trace says, counted from its JSON: the numbers every tool's answer is checked against."""

    path: Path
    events: list
    meta: dict
    queues_up: bool = False  # the workload launches faster than the device runs: queues reach 2+

    def slices(self, *cats):
        return [e for e in self.events if e.get("ph") == "X" and e.get("cat") in cats]

    def named(self, *names):
        return [e for e in self.events if e.get("ph") == "X" and e.get("name") in names]

    @property
    def kernels(self):
        return self.slices("kernel")

    @property
    def launched_kernels(self):
        """Kernel slices a runtime call launched (their correlation starts an ac2g flow): one per launch."""
        launched = {e["id"] for e in self.flows if e["ph"] == "s"}
        return [e for e in self.kernels if e.get("args", {}).get("correlation") in launched]

    @property
    def flows(self):
        return [e for e in self.events if e.get("cat") == "ac2g" and e.get("ph") in ("s", "f")]

    @property
    def counters(self):
        return [e for e in self.events if e.get("ph") == "C"]


def read_trace(path: Path) -> TraceFacts:
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)
    return TraceFacts(Path(path), data["traceEvents"], {k: v for k, v in data.items() if k != "traceEvents"})


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def profile_sim_run(out: Path, *, vendor: str, metrics=(), seed: int = 0, steps: int = STEPS_RECORDED + 1,
                    worker_name: str | None = None) -> TraceFacts:
    """One schedule cycle of the sim backend through the public API; returns the trace it wrote."""
    out.mkdir(parents=True, exist_ok=True)
    activities = ["cpu", "cuda" if vendor != "xpu" else "xpu"] + (["xpu_scope_profiler"] if metrics else [])
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, "sim_vendor": vendor})
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(activities=activities, backends=["sim"], config=cfg, experimental_config=exp,
                         schedule=xpuprof.schedule(wait=0, warmup=1, active=STEPS_RECORDED, repeat=1),
                         on_trace_ready=xpuprof.trace_handler(str(out), worker_name=worker_name)) as prof:
        for _ in range(steps):
            for i in range(len(LAYER_NS)):
                with xpuprof.record_function(f"layer{i}"):
                    _spin(LAYER_NS[i])
            prof.step()
    (path,) = sorted(out.glob("*.pt.trace.json"))
    facts = read_trace(path)
    facts.queues_up = True  # the 2 us and 5 us ranges launch faster than the device drains
    return facts


@pytest.fixture(scope="session")
def sim_cuda(tmp_path_factory) -> TraceFacts:
    """CUDA-flavoured sim, default options (vendor category names), schedule, syncs, one rank."""
    return profile_sim_run(tmp_path_factory.mktemp("sim_cuda"), vendor="cuda")


@pytest.fixture(scope="session")
def sim_hip(tmp_path_factory) -> TraceFacts:
    """HIP-flavoured sim (hipLaunchKernel, ... under cuda_runtime, as Kineto's ROCm path writes)."""
    return profile_sim_run(tmp_path_factory.mktemp("sim_hip"), vendor="hip")


@pytest.fixture(scope="session")
def sim_xpu_metrics(tmp_path_factory) -> TraceFacts:
    """The default (XPU-flavoured) sim with per-kernel metrics: counter tracks and metric args."""
    return profile_sim_run(tmp_path_factory.mktemp("sim_xpu_metrics"), vendor="xpu", metrics=["GpuTime", "XVE_ACTIVE"])


@pytest.fixture(scope="session")
def sim_yaml_cuda(tmp_path_factory) -> TraceFacts:
    """The repo's configs/sim.yaml through ``xpuprof run`` (every iteration a ProfilerStep, per-kernel
    metrics, gzip output) with ``custom: {sim_vendor: cuda}`` set in the YAML."""
    import yaml

    out = tmp_path_factory.mktemp("sim_yaml_cuda")
    cfg = yaml.safe_load((Path(__file__).parents[2] / "configs" / "sim.yaml").read_text())
    cfg["output"]["dir"] = str(out / "traces")
    cfg["custom"] = {"sim_vendor": "cuda"}
    (out / "sim_cuda.yaml").write_text(yaml.safe_dump(cfg))
    done = subprocess.run([sys.executable, "-m", "xpuprof", "run", str(out / "sim_cuda.yaml")],
                          capture_output=True, text=True, cwd=out, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = sorted((out / "traces").glob("*.pt.trace.json.gz"))
    return read_trace(path)


@pytest.fixture(scope="session")
def sim_two_ranks(tmp_path_factory) -> list[TraceFacts]:
    """Two ranks of a CUDA-flavoured sim job, rank and world size from torchrun's variables."""
    out = tmp_path_factory.mktemp("sim_two_ranks")
    facts = []
    with pytest.MonkeyPatch.context() as mp:
        for rank in (0, 1):
            mp.setenv("RANK", str(rank))
            mp.setenv("WORLD_SIZE", "2")
            mp.setenv("LOCAL_RANK", str(rank))
            mp.setenv("LOCAL_WORLD_SIZE", "2")
            sub = out / f"r{rank}"
            # each rank a process of its own in a real job: the default worker name <host>_<pid> differs
            worker = f"{socket.gethostname()}_{900000 + rank}"
            facts.append(profile_sim_run(sub, vendor="cuda", seed=rank, worker_name=worker))
    for f in facts:  # one logdir holding both ranks, as a job writes them
        (out / f.path.name).write_bytes(f.path.read_bytes())
    return [dataclasses.replace(read_trace(out / f.path.name), queues_up=True) for f in facts]


# --- the CUDA decoder over synthetic CUPTI records --------------------------------------------------

H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132, "maxThreadsPerMultiprocessor": 2048,
        "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerMultiprocessor": 233472,
        "maxBlocksPerMultiProcessor": 32, "computeMajor": 9, "computeMinor": 0, "totalGlobalMem": 80 << 30,
        "maxThreadsPerBlock": 1024, "regsPerBlock": 65536, "sharedMemPerBlock": 49152,
        "sharedMemPerBlockOptin": 232448}
CUDA_PID, CUDA_TID = 4321, 4321
CUDA_KERNELS_PER_STEP = 4
CUDA_STEPS = 3


def cuda_decoder_trace(out: Path) -> TraceFacts:
    """A step-structured CUDA trace: per step one H2D copy, CUDA_KERNELS_PER_STEP kernel launches on
    stream 7 and a stream sync, each step inside a ``ProfilerStep#N``; CUPTI records laid out by
    cupti-python's own dtypes, decoded by our CudaEmitter, written by our writer."""
    c = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")
    from xpuprof.activity import ActivityType
    from xpuprof.backends.cuda import records
    from xpuprof.backends.cuda.emit import CudaEmitter, DecodeOptions
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder
    from xpuprof.trace.write.chrome import write_chrome_trace

    cbids = {211: "cudaLaunchKernel_v7000", 41: "cudaMemcpyAsync_v3020", 131: "cudaStreamSynchronize_v3020"}
    t0 = BASE_TIME_NS + 10**9
    step_ns = 400_000
    api_rows, kern_rows, copy_rows, sync_rows, steps = [], [], [], [], []
    corr = 0
    for s in range(CUDA_STEPS):
        base = t0 + s * step_ns
        steps.append((base, step_ns - 10_000))
        corr += 1  # the copy: 20 us call, 60 us on the copy engine, 5 us after the call starts
        api_rows.append((41, corr, base + 5_000, base + 25_000))
        copy_rows.append((corr, base + 10_000, base + 70_000))
        gpu_free = base + 70_000
        for k in range(CUDA_KERNELS_PER_STEP):
            corr += 1
            start = base + 30_000 + k * 15_000  # launches every 15 us; kernels 40 us: the queue grows
            api_rows.append((211, corr, start, start + 6_000))
            k_start = max(start + 8_000, gpu_free)
            kern_rows.append((corr, k_start, k_start + 40_000))
            gpu_free = k_start + 40_000
        corr += 1
        sync_start = base + 30_000 + CUDA_KERNELS_PER_STEP * 15_000
        api_rows.append((131, corr, sync_start, gpu_free + 3_000))
        sync_rows.append((corr, sync_start + 1_000, gpu_free + 1_000))

    def rows(dtype, n, **cols):
        arr = np.zeros(n, dtype=dtype)
        for key, val in cols.items():
            arr[key] = val
        return arr

    a = np.array(api_rows, dtype=np.int64)
    api = rows(c.activity_api_dtype, len(a), kind=records.KIND_RUNTIME, cbid=a[:, 0], correlation_id=a[:, 1],
               start=a[:, 2], end=a[:, 3], process_id=CUDA_PID, thread_id=CUDA_TID)
    kr = np.array(kern_rows, dtype=np.int64)
    kern = rows(c.activity_kernel13_dtype, len(kr), kind=records.KIND_CONCURRENT_KERNEL, device_id=0, context_id=1,
                stream_id=7, grid_x=1024, grid_y=1, grid_z=1, block_x=256, block_y=1, block_z=1,
                registers_per_thread=32, name=[0x1000 + (i % 2) for i in range(len(kr))],
                correlation_id=kr[:, 0], start=kr[:, 1], end=kr[:, 2])
    cr = np.array(copy_rows, dtype=np.int64)
    copy = rows(c.activity_memcpy6_dtype, len(cr), kind=records.KIND_MEMCPY, copy_kind=c.ActivityMemcpyKind.HTOD,
                src_kind=c.ActivityMemoryKind.PINNED, dst_kind=c.ActivityMemoryKind.DEVICE, bytes=1 << 20,
                device_id=0, context_id=1, stream_id=7, correlation_id=cr[:, 0], start=cr[:, 1], end=cr[:, 2])
    sr = np.array(sync_rows, dtype=np.int64)
    sync = rows(c.activity_synchronization2_dtype, len(sr), kind=records.KIND_SYNCHRONIZATION,
                type=c.ActivitySynchronizationType.STREAM_SYNCHRONIZE, correlation_id=sr[:, 0], start=sr[:, 1],
                end=sr[:, 2], context_id=1, stream_id=7)
    b = TraceBuilder(pid=CUDA_PID)
    b.add_device_properties(H100)
    CudaEmitter(lambda kind, cbid: cbids[cbid], options=DecodeOptions(device_props={0: H100})).write(
        b, None, records.gather_records([records.pack([api, kern, copy, sync],
                                                      names={0x1000: "_Z4gemmPfS_", 0x1001: "_Z4reluPf"})]))
    b.add_slices(names=[f"ProfilerStep#{i + 1}" for i in range(CUDA_STEPS)],
                 ts=np.array([t for t, _ in steps]), dur=np.array([d for _, d in steps]),
                 pid=CUDA_PID, tid=CUDA_TID, cat=ActivityType.USER_ANNOTATION, args={})
    b.set_distributed_info({"rank": 0, "world_size": 1})
    out.mkdir(parents=True, exist_ok=True)
    path = out / "worker0.4321.1.pt.trace.json"
    write_chrome_trace(b, path)
    facts = read_trace(path)
    facts.queues_up = True  # a launch every 15 us, 40 us kernels
    return facts


@pytest.fixture(scope="session")
def cuda_decoded(tmp_path_factory) -> TraceFacts:
    return cuda_decoder_trace(tmp_path_factory.mktemp("cuda_decoded"))
