"""The real TensorBoard profiler plugin (torch-tb-profiler) reads the CUDA decoder's kernel args:
``blocks per SM`` and ``est. achieved occupancy %`` feed its kernel table and GPU occupancy figure."""
from __future__ import annotations

import numpy as np
import pytest

c = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")
pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (.ci/run installs it)")

from xpuprof.activity import ActivityType  # noqa: E402
from xpuprof.backends.cuda import records  # noqa: E402
from xpuprof.backends.cuda.emit import CudaEmitter, DecodeOptions  # noqa: E402
from xpuprof.clock import BASE_TIME_NS  # noqa: E402
from xpuprof.trace.builder.builder import TraceBuilder  # noqa: E402
from xpuprof.trace.write.chrome import write_chrome_trace  # noqa: E402

H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132, "maxThreadsPerMultiprocessor": 2048,
        "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerMultiprocessor": 233472,
        "maxBlocksPerMultiProcessor": 32, "computeMajor": 9, "computeMinor": 0, "totalGlobalMem": 80 << 30,
        "maxThreadsPerBlock": 1024, "regsPerBlock": 65536, "sharedMemPerBlock": 49152,
        "sharedMemPerBlockOptin": 232448}


def test_tensorboard_plugin_reads_occupancy_from_our_kernels(tmp_path):
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    t0 = BASE_TIME_NS + 10**9
    n = 3
    k = np.zeros(n, c.activity_kernel13_dtype)
    k["kind"], k["device_id"], k["context_id"], k["stream_id"], k["name"] = records.KIND_CONCURRENT_KERNEL, 0, 1, 7, 1
    k["grid_x"], k["grid_y"], k["grid_z"] = [1024, 64, 2048], 1, 1
    k["block_x"], k["block_y"], k["block_z"] = [256, 128, 512], 1, 1
    k["registers_per_thread"] = [32, 64, 40]
    k["start"] = t0 + np.arange(n) * 10_000
    k["end"] = k["start"] + 5000
    k["correlation_id"] = np.arange(1, n + 1)
    api = np.zeros(n, c.activity_api_dtype)
    api["kind"], api["cbid"], api["process_id"], api["thread_id"] = records.KIND_RUNTIME, 211, 99, 4242
    api["correlation_id"] = np.arange(1, n + 1)
    api["start"] = k["start"] - 2000
    api["end"] = api["start"] + 500
    b = TraceBuilder(pid=99)
    b.add_device_properties(H100)
    CudaEmitter(lambda kind, cbid: "cudaLaunchKernel_v7000", options=DecodeOptions(device_props={0: H100})).write(
        b, None, records.gather_records([records.pack([k, api], names={1: "_Z4gemmv"})]))
    b.add_slices(names=["ProfilerStep#1"], ts=np.array([t0 - 5000]), dur=np.array([50_000]), pid=99, tid=4242,
                 cat=ActivityType.CPU_OP, args={})
    path = tmp_path / "worker0.1.pt.trace.json"
    write_chrome_trace(b, path)

    prof = RunProfileData.parse("worker0", "1", str(path), str(tmp_path))
    gm = prof.gpu_metrics_parser
    assert gm.has_occupancy
    # duration-weighted mean of 97 %, 3 %, 75 % (equal durations)
    assert gm.avg_occupancy_per_device[0] == pytest.approx((97 + 3 + 75) / 3, abs=0.01)
    table = RunGenerator("worker0", "1", prof)._generate_kernel_table()
    names = [col["name"] for col in table["data"]["columns"]]
    assert "Mean Blocks Per SM" in names and any("Occupancy" in nm for nm in names)
    (row,) = table["data"]["rows"]  # one kernel name
    assert row[names.index("Calls")] == 3
    assert row[names.index("Mean Blocks Per SM")] == pytest.approx(np.mean([1024, 64, 2048]) / 132, abs=0.01)
