"""A synchronous data-parallel job of many ranks, built with exact timestamps, for the HTML plots' tests: per
rank ``steps`` ProfilerStep ranges, runtime launches with correlation ids, compute kernels on one stream
and NCCL all-reduces on another, copies, per-kernel metrics and telemetry counters. One rank (``slow``)
computes longer in every step, so every other rank waits for it in the all-reduce (a straggler)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from xpuprof.clock import BASE_TIME_NS

COMPUTE = ("gemm_kernel<float, 128>", "elementwise_add_kernel", "softmax_kernel")
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
COPY = "Memcpy HtoD (Pageable -> Device)"


def job_builders(ranks: int = 32, *, steps: int = 6, slow: int = 13, seed: int = 7, scale: float = 1.0):
    """One TraceBuilder per rank (see the module docstring); ``scale`` stretches every compute kernel (a
    slower build of the same job: ``diff``'s other side)."""
    from xpuprof.trace import TraceBuilder

    rng = np.random.default_rng(seed)
    slow = slow if slow < ranks else ranks - 1
    t0 = BASE_TIME_NS + 2_000_000_000
    # per (rank, step, phase) compute durations; the slow rank 40 % longer
    base = np.array([900_000, 120_000, 260_000]) * scale
    jitter = rng.uniform(0.97, 1.05, (ranks, steps, len(COMPUTE)))
    compute = base[None, None, :] * jitter
    compute[slow] *= 1.4
    ready = compute.sum(axis=2) + 3 * 20_000  # when each rank reaches the all-reduce, from its step's start
    comm = 350_000  # the all-reduce itself, once every rank arrived
    step_len = ready.max(axis=0) + comm + 90_000  # every rank's step ends together, after its all-reduce
    step_start = t0 + np.concatenate([[0], np.cumsum(step_len)[:-1]]).astype(np.int64)
    builders = []
    for r in range(ranks):
        b = TraceBuilder(pid=5000 + r)
        host, dev = 5000 + r, 1_000_000 + r
        b.set_process_name(dev, f"GPU {r}")
        b.set_thread_name(host, 1, "thread 1 (MainThread)")
        corr = 1 + r * 100_000
        names, ts, dur, tid, corrs, launches = [], [], [], [], [], []
        for s in range(steps):
            start = int(step_start[s])
            b.add_slice(f"ProfilerStep#{s + 1}", start, int(step_len[s]) - 2_000, host, 1, cat="user_annotation")
            t = start + 20_000
            names.append(COPY), ts.append(t), dur.append(30_000), tid.append(9), corrs.append(corr)
            launches.append(t - 8_000)
            corr += 1
            t += 40_000
            for k, name in enumerate(COMPUTE):
                d = int(compute[r, s, k])
                names.append(name), ts.append(t), dur.append(d), tid.append(7), corrs.append(corr)
                launches.append(t - 12_000)
                corr += 1
                t += d + 20_000
            arrive = start + 60_000 + int(ready[r, s])
            done = start + 60_000 + int(ready[:, s].max()) + comm
            names.append(ALLREDUCE), ts.append(arrive), dur.append(done - arrive), tid.append(17), corrs.append(corr)
            launches.append(arrive - 15_000)
            corr += 1
        ts_a, dur_a = np.array(ts, np.int64), np.array(dur, np.int64)
        corr_a, launch_a = np.array(corrs, np.int64), np.array(launches, np.int64)
        b.add_slices(names=["cudaLaunchKernel"] * len(ts), ts=launch_a, dur=np.full(len(ts), 5_000), pid=host, tid=1,
                     cat="cuda_runtime", args={"correlation": corr_a})
        tids = np.array(tid, np.int64)
        for t_id in np.unique(tids).tolist():
            m = tids == t_id
            cat = "gpu_memcpy" if t_id == 9 else "kernel"
            args = {"correlation": corr_a[m], "stream": np.full(int(m.sum()), t_id), "device": np.full(int(m.sum()), r)}
            if t_id == 9:  # copies say their bandwidth, as Kineto's do
                args["memory bandwidth (GB/s)"] = rng.uniform(10.0, 14.0, int(m.sum()))
            b.add_slices(names=[n for n, keep in zip(names, m) if keep], ts=ts_a[m], dur=dur_a[m], pid=dev, tid=t_id,
                         cat=cat, args=args)
        kern = tids == 7
        knames = [n for n, keep in zip(names, kern) if keep]
        b.add_per_kernel_metrics(kernel_names=knames, start_ns=ts_a[kern], end_ns=ts_a[kern] + dur_a[kern], pid=dev,
                                 tid=7, metrics={"SM_ACTIVE": rng.normal(70, 6, len(knames)),
                                                 "DRAM_BYTES": rng.uniform(2e8, 6e8, len(knames))},
                                 units={"SM_ACTIVE": "percent", "DRAM_BYTES": "bytes"})
        sample_ts = t0 + np.arange(0, int(step_len.sum()), 100_000, dtype=np.int64)
        wave = np.sin(np.arange(len(sample_ts)) / 5.0)
        b.add_counters(name="gpu", ts=sample_ts, pid=dev, tid=0, cat="gpu_pm_counter",
                       values={"power": 250 + 60 * wave + rng.normal(0, 4, len(sample_ts)),
                               "sm_clock": 1410 + 20 * np.round(wave)})
        b.set_metadata("collectors", {"gpu": {"metrics": {"power": "W", "sm_clock": "MHz"}}})
        b.set_distributed_info({"rank": r, "world_size": ranks, "backend": "nccl"})
        b.set_window(t0 - 1_000, int(step_start[-1] + step_len[-1]))
        builders.append(b)
    return builders


def write_job(out: Path, ranks: int = 32, **kw) -> list[Path]:
    """The job's traces, ``out/host.<rank>.pt.trace.json`` (the one naming rule)."""
    from xpuprof.trace import write_chrome_trace

    out.mkdir(parents=True, exist_ok=True)
    return [write_chrome_trace(b, out / f"node{r // 8}_{100 + r}.rank{r}.pt.trace.json")
            for r, b in enumerate(job_builders(ranks, **kw))]
