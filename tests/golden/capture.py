"""Captures the golden corpus: one builder snapshot per producer, and the JSON the writer makes of it.

    PYTHONPATH=$PWD python tests/golden/capture.py            # every producer
    PYTHONPATH=$PWD python tests/golden/capture.py sim_cuda   # some of them (names: --list)
    PYTHONPATH=$PWD python tests/golden/capture.py --json-only  # the JSON again from the stored snapshots

Each producer runs live once (its real code: the profiler front end, the sim backend, the C doubles of
the vendor libraries, torch, the collectors, plugins) and what it put into the builder is stored
(``snapshot.py``); the golden JSON is written from that snapshot. ``test_golden.py`` writes every
snapshot again and compares with the golden bytes, so the writers' output cannot drift unnoticed.

Re-capture a producer whose output changes on purpose (the sim's emit stages, say) and commit its
snapshot and JSON together: ``capture.py sim_xpu_metrics sim_cuda sim_hip merged`` (``merged`` is the
merge of two sim ranks, so it follows them).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
DATA = TESTS / "data" / "golden"
sys.path[:0] = [str(HERE), str(TESTS)]

import numpy as np  # noqa: E402

import snapshot  # noqa: E402

HOST = "golden-host"
TRACE_NAME = "golden/{name}.pt.trace.json"  # the trace's own name: fixed, wherever it is written


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _fixed_host(builder):
    builder.metadata["host_name"] = HOST
    return builder


# ----------------------------------------------------------------------------- producers
def host(tmp: Path):
    """Host ranges through the public API: args of every JSON kind, many distinct names, nested ranges,
    threads, asyncio tasks, instants, a named thread, steps of a schedule."""
    import xpuprof

    async def task(i):
        with xpuprof.record_function(f"task_{i}", args={"i": i}):
            await asyncio.sleep(0)
            with xpuprof.record_function("task_inner"):
                await asyncio.sleep(0)

    async def _gather(fn):
        await asyncio.gather(*(fn(i) for i in range(3)))

    def worker(k):
        xpuprof.set_thread_name(f"worker-{k}")
        for j in range(5):
            with xpuprof.record_function(f"worker_range_{k}_{j}", args={"k": k, "j": j}):
                pass

    with xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=0, warmup=0, active=2, repeat=1),
                         on_trace_ready=lambda p: None) as prof:
        for step in range(2):
            with xpuprof.record_function("outer", args={"step": step, "f": 1.5, "s": "text \"quoted\" \u00e9",
                                                        "nested": {"a": [1, 2, {"b": None}]}, "t": True,
                                                        "inf": float("inf"), "big": 2**62}):
                for i in range(40):
                    with xpuprof.record_function(f"range_{step}_{i}"):
                        with xpuprof.record_function("leaf", args={"i": i} if i % 3 else None):
                            pass
                xpuprof.instant("marker", args={"step": step})
                xpuprof.instant("global marker", scope="g")
                threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                asyncio.run(_gather(task))
            prof.step()
    return _fixed_host(prof.builder)


def _sim(vendor: str, metrics=(), seed: int = 0):
    import xpuprof

    cons = _module(TESTS / "consumers" / "consumer_traces.py", "golden_consumer_traces")
    activities = ["cpu", "cuda" if vendor != "xpu" else "xpu"] + (["xpu_scope_profiler"] if metrics else [])
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": seed, "sim_vendor": vendor})
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(activities=activities, backends=["sim"], config=cfg, experimental_config=exp,
                         schedule=xpuprof.schedule(wait=0, warmup=1, active=2, repeat=1),
                         on_trace_ready=lambda p: None) as prof:
        for _ in range(3):
            for i in range(4):
                with xpuprof.record_function(f"layer{i}"):
                    cons._spin(cons.LAYER_NS[i] // 4)
            prof.step()
    return _fixed_host(prof.builder)


def sim_xpu_metrics(tmp: Path):
    return _sim("xpu", metrics=("GpuTime", "XVE_ACTIVE"))


def sim_cuda(tmp: Path):
    return _sim("cuda")


def sim_hip(tmp: Path):
    return _sim("hip")


def sim_rank1(tmp: Path):
    """The second rank of a two-rank CUDA sim job (``merged`` merges it with ``sim_rank0``)."""
    return _ranked(1)


def sim_rank0(tmp: Path):
    return _ranked(0)


def _ranked(rank: int):
    env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return _sim("cuda", seed=rank)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def xpu_double(tmp: Path):
    """The XPU backend's records stage and emit stage over the PTI-ABI double (C, built here): kernels,
    copies, fills, runtime and driver calls, syncs, overhead, collectives, P2P copies."""
    conf = _module(TESTS / "xpu" / "conftest.py", "golden_xpu_conftest")
    from xpuprof._native import ptibuf

    d = conf.Double(conf.build_double(tmp))
    d.reset()
    ptibuf.reset()
    try:
        rc, api, builder, _trace, _ = conf._run_session(d, tmp, flags=d.P2P | d.COMMS)
        assert rc == 0
    finally:
        d.reset()
        ptibuf.reset()
    return _fixed_host(builder)


def xpu_stalls(tmp: Path):
    """EU stall sampling over the PTI double: per-kernel samples in args and the trace's metadata."""
    conf = _module(TESTS / "xpu" / "conftest.py", "golden_xpu_conftest")
    from xpuprof._native import ptibuf
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
    from xpuprof.clock import now_ns
    from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
    from xpuprof.trace.builder.builder import TraceBuilder
    import ctypes

    d = conf.Double(conf.build_double(tmp))
    d.reset()
    ptibuf.reset()
    try:
        d.c.xpd_set_version.argtypes = [ctypes.c_char_p]
        d.c.xpd_set_version(b"1.2.0")
        config = ProfilerConfig(experimental=ExperimentalConfig(stall_sampling=True))
        api = XpuptiActivityApi(conf.ALL, config, library=d.lib, device_uuids=[conf.UUID0])
        api.start()
        assert d.workload_holding_gil(6) == 0
        api.stop()
        builder = TraceBuilder()
        api.process(builder, ProcessWindow(api.start_ns - 1_000_000, now_ns()))
    finally:
        d.reset()
        ptibuf.reset()
    assert "xpu_stall_sampling" in builder.metadata, sorted(builder.metadata)
    return _fixed_host(builder)


def cuda_decoder(tmp: Path):
    """The CUDA backend's emit stage (CuptiDecoder) over CUPTI records laid out by cupti-python's dtypes."""
    cons = _module(TESTS / "consumers" / "consumer_traces.py", "golden_consumer_traces")
    from xpuprof.trace.write import chrome

    got = []
    real = chrome.write_chrome_trace

    def keep(b, path, **kw):
        got.append(b)
        return real(b, path, **kw)

    chrome.write_chrome_trace = keep
    try:
        cons.cuda_decoder_trace(tmp / "cuda")
    finally:
        chrome.write_chrome_trace = real
    return _fixed_host(got[0])


def rocm_decoder(tmp: Path):
    """The ROCm backend's emit stage (RocprofDecoder) over records packed to rocprofiler-sdk's layouts:
    kernels, copies, HIP API calls, event record/wait/sync, stream and device syncs."""
    dec = _module(TESTS / "rocm" / "test_rocprof_decode.py", "golden_rocm_decode")
    from xpuprof.backends.base import ProcessWindow
    from xpuprof.backends.rocm.emit import RocprofDecoder
    from xpuprof.trace.builder.builder import TraceBuilder

    rec = dec._seeded_records(7)
    b = TraceBuilder(pid=4321)
    RocprofDecoder(pid=4321).process(b, ProcessWindow(dec.T0, dec.T0 + 10**9), rec)
    return _fixed_host(b)


def torch_ops(tmp: Path):
    """torch 2.13's ops (CPU) recorded through xpuprof's drop-in profiler: cpu_op rows with Kineto's
    args, shapes, torch's own ranges, memory events, beside our host ranges."""
    import torch

    import xpuprof

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(8, 16), torch.randn(8, 4)
    with xpuprof.profile(record_shapes=True, profile_memory=True) as prof:
        with torch.profiler.record_function("my_range"):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            opt.step()
    return _fixed_host(prof.builder)


def telemetry(tmp: Path):
    """The host collector's counter tracks (psutil) and a registered Collector's, through the public API."""
    import xpuprof
    from xpuprof import Collector, ExperimentalConfig, MetricInfo

    seen = threading.Event()

    class Gate(Collector):
        name = "golden_gate"
        scope = "host"
        calls = 0

        @classmethod
        def metrics(cls):
            return [MetricInfo("gate_calls", "1", "read() calls so far")]

        def read(self):
            type(self).calls += 1
            if type(self).calls >= 6:
                seen.set()
            return [float(type(self).calls)]

    xpuprof.register_collector(Gate)
    prof = xpuprof.profile(activities=["cpu"], experimental_config=ExperimentalConfig(
        profiler_metrics=["cpu_utilization", "process_rss", "gate_calls"]))
    with prof:
        with xpuprof.record_function("sampled"):
            assert seen.wait(30), "the sampling thread never sampled"
    return _fixed_host(prof.builder)


def plugins(tmp: Path):
    """A C plugin (the C ABI's bulk and scalar calls), a broken C plugin and the example Python plugin
    (counter tracks) in one profile run."""
    helpers = _module(TESTS / "plugins" / "plugintest_helpers.py", "golden_plugintest_helpers")
    from xpuprof import profiler

    plugin_dir = tmp / "plugins"
    plugin_dir.mkdir()
    os.chmod(plugin_dir, 0o755)
    helpers.build_plugin(helpers.HERE / "fault_plugin.c", plugin_dir / "libsynth.so", 'PLUGIN_NAME="synth"')
    helpers.build_plugin(helpers.HERE / "fault_plugin.c", plugin_dir / "libsynthbad.so", 'PLUGIN_NAME="synthbad"',
                         'FAULT_STAGE="process"', "FAULT_MALFORMED")
    shutil.copy(helpers.EXAMPLES / "host_memory_plugin.py", plugin_dir)
    (plugin_dir / "host_memory_plugin.py").chmod(0o644)
    helpers.reset_plugins()
    os.environ["XPUPROF_PLUGIN_PATH"] = str(plugin_dir)
    try:
        with profiler.profile(activities=["cpu", "kernel", "runtime", "gpu_pm_counter"],
                              backends=["synth", "synthbad", "host_memory"]) as prof:
            from xpuprof.host.recorder import record_function
            with record_function("user block"):
                sum(range(1000))
    finally:
        os.environ.pop("XPUPROF_PLUGIN_PATH", None)
        helpers.reset_plugins()
    return _fixed_host(prof.builder)


PRODUCERS = {f.__name__: f for f in (host, sim_xpu_metrics, sim_cuda, sim_hip, sim_rank0, sim_rank1, xpu_double,
                                     xpu_stalls, cuda_decoder, rocm_decoder, torch_ops, telemetry, plugins)}
MERGED = "merged"  # xpuprof merge of sim_rank0 and sim_rank1
GZIPPED = "sim_cuda"  # also written as .json.gz (compared decompressed)


# ----------------------------------------------------------------------------- the JSON of a snapshot
def write_golden(name: str, out_dir: Path = DATA) -> Path:
    """The golden JSON of one snapshot, written by this checkout's writer."""
    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.write.chrome import write_chrome_trace

    b = snapshot.load(out_dir / f"{name}.snap.npz", BASE_TIME_NS)
    return write_chrome_trace(b, out_dir / f"{name}.pt.trace.json", trace_name=TRACE_NAME.format(name=name))


def write_merged(src: Path = DATA, into: Path | None = None) -> Path:
    """The merged view of the rank traces in ``src`` (``xpuprof merge``), merged in a directory of its own
    under relative names, so the paths the view records are the same wherever it runs."""
    import warnings

    from xpuprof.analysis.merge import MergeWarning, merge_traces

    tmp = Path(tempfile.mkdtemp(prefix="golden-merge-"))
    cwd = os.getcwd()
    try:
        for r in (0, 1):
            shutil.copy(src / f"sim_rank{r}.pt.trace.json", tmp / f"sim_rank{r}.pt.trace.json")
        os.chdir(tmp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MergeWarning)
            merge_traces([f"sim_rank{r}.pt.trace.json" for r in (0, 1)], "merged.json")
        out = (into or DATA) / f"{MERGED}.json"
        shutil.copy(tmp / "merged.json", out)
        return out
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)


def _write_live(b, path: Path, name: str) -> bytes:
    from xpuprof.trace.write.chrome import write_chrome_trace

    return write_chrome_trace(b, path, trace_name=TRACE_NAME.format(name=name)).read_bytes()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="producers to capture (default: all)")
    ap.add_argument("--json-only", action="store_true", help="only write the JSON from the stored snapshots")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join([*PRODUCERS, MERGED]))
        return 0
    names = args.names or [*PRODUCERS, MERGED]
    unknown = [n for n in names if n not in PRODUCERS and n != MERGED]
    if unknown:
        ap.error(f"unknown producers {unknown}; valid: {', '.join([*PRODUCERS, MERGED])}")
    from xpuprof.clock import BASE_TIME_NS

    DATA.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name == MERGED:
            continue
        if not args.json_only:
            with tempfile.TemporaryDirectory() as tmp:
                b = PRODUCERS[name](Path(tmp))
                snapshot.dump(b, DATA / f"{name}.snap.npz", BASE_TIME_NS)
                live = _write_live(b, Path(tmp) / "live.json", name)
                path = write_golden(name)
                if live != path.read_bytes():  # the snapshot must hold everything the writer reads
                    raise SystemExit(f"{name}: the snapshot's JSON differs from the live builder's")
        path = write_golden(name)
        print(f"{name}: {path.stat().st_size:,} bytes of JSON, snapshot "
              f"{(DATA / f'{name}.snap.npz').stat().st_size:,} bytes")
    if MERGED in names or "sim_rank0" in names or "sim_rank1" in names:
        print(f"{MERGED}: {write_merged().stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
