"""Profile a torch matmul on an NVIDIA GPU with xpuprof's cuda backend (CUPTI via cupti-python).

    pip install 'xpuprof[cuda]' torch
    python examples/cuda_torch_matmul.py --out cuda_matmul.json [--metrics sm__cycles_elapsed.sum]

Do not run it under torch.profiler or Nsight Systems: CUPTI allows one client per process and
xpuprof says so instead of collecting nothing.
"""
from __future__ import annotations

import argparse

from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.cuda.backend import CudaBackend
from xpuprof.clock import now_ns
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="cuda_matmul.json")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--metrics", default="", help="comma-separated CUPTI PM sampling metrics")
    args = ap.parse_args()

    probe = CudaBackend.probe()
    if not probe:
        raise SystemExit(f"cuda backend unavailable: {probe.reason}")
    types = {ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET, ActivityType.RUNTIME,
             ActivityType.DRIVER, ActivityType.CUDA_SYNC, ActivityType.CUDA_EVENT, ActivityType.OVERHEAD,
             ActivityType.EXTERNAL_CORRELATION}
    if args.metrics:
        types.add(ActivityType.GPU_PM_COUNTER)
    config = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=args.metrics))
    session = CudaBackend().configure(types, config)

    import torch  # after the session exists: CUPTI must be claimed before other clients

    a = torch.randn(args.size, args.size, device="cuda")
    b = torch.randn(args.size, args.size, device="cuda")
    side = torch.cuda.Stream()
    start = now_ns()
    session.start()
    for step in range(5):
        session.push_correlation_id(step + 1)
        c = a @ b
        done = torch.cuda.Event()
        done.record()  # cudaEventRecord on the default stream
        with torch.cuda.stream(side):
            side.wait_event(done)  # cudaStreamWaitEvent: an inter-stream dependency
            d = c.relu()
        session.pop_correlation_id()
    d.cpu()  # DtoH copy + sync
    torch.cuda.synchronize()
    session.stop()
    end = now_ns()

    builder = TraceBuilder()
    builder.set_window(start, end)
    session.process(builder, ProcessWindow(start, end))
    for p in session.device_properties():
        builder.add_device_properties(p)
    path = write_chrome_trace(builder, args.out)
    print(f"wrote {path}; dropped: {builder.dropped or 'none'}; errors: {session.errors() or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
