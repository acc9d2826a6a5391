"""The corpus every viewer check reads (issue 38): traces we write, each in a shape that used to lose slices
in a viewer, with the trace it was made from where there is one (its slices must all be there).

Each entry is written once per session (``corpus`` fixture): asyncio tasks with ranges across awaits,
tasks launching onto the sim device (launch arrows), threads launching onto one sim stream with per-kernel
metrics, one stream with back-to-back kernels and annotations of two threads, torch ops with
``with_stack=True`` and memory events, torch.profiler's own trace of an asyncio workload and HTA's test traces
through ``xpuprof convert``, an on-demand capture of asyncio tasks (``xpuprof trigger --embedded``), and merged
views of 6, 32 and 1,000 ranks.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import xpuprof

TESTS = Path(__file__).resolve().parents[1]
HTA = TESTS / "data" / "hta"
MERGED_RANKS = (6, 32, 1000)


@dataclass
class Entry:
    path: Path  # what we wrote
    source: object = None  # what it was made from (a builder or a trace file), whose slices it must hold
    flows: int | None = None  # flows Perfetto draws of ``source``, when not all of the file's do


def _spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


async def _task(i: int) -> None:
    with xpuprof.record_function(f"task{i}"):
        for k in range(2):
            with xpuprof.record_function(f"task{i}.step{k}"):
                _spin(5_000)
                await asyncio.sleep(0.0002 * (i % 3))


def asyncio_trace(out: Path, tasks: int, **kw) -> Entry:
    async def main():
        await asyncio.gather(*(_task(i) for i in range(tasks)))

    with xpuprof.profile(**kw) as prof:
        asyncio.run(main())
    return Entry(prof.export_chrome_trace(out), prof.builder)


def threads_on_one_stream(out: Path, threads: int = 4, per: int = 40) -> Entry:
    exp = xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime", "XVE_ACTIVE"])
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        for k in range(per):
            with xpuprof.record_function(f"thread{t}.op{k}"):
                _spin(2_000)
                with xpuprof.record_function(f"thread{t}.op{k}.inner"):
                    _spin(1_000 + 500 * t)

    with xpuprof.profile(activities=["cpu", "xpu", "xpu_scope_profiler"], backends=["sim"],
                         experimental_config=exp) as prof:
        running = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in running:
            th.start()
        for th in running:
            th.join()
    return Entry(prof.export_chrome_trace(out), prof.builder)


def device_lanes(out: Path) -> Entry:
    sys.path.insert(0, str(TESTS / "trace"))
    from test_layout import _device_builder
    from xpuprof.trace.write.chrome import write_chrome_trace

    b = _device_builder()
    return Entry(write_chrome_trace(b, out), b)


def torch_stack_memory(out: Path) -> Entry:
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    sys.path.insert(0, str(TESTS / "torch"))
    from resnet_like import ResNet18

    torch.manual_seed(0)
    model, x = ResNet18().eval(), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        model(x)
        with xpuprof.profile(activities=["cpu"], with_stack=True, profile_memory=True, record_shapes=True) as prof:
            model(x)
    return Entry(prof.export_chrome_trace(out), prof.builder)


TORCH_ASYNCIO = """
import asyncio, sys, torch
async def task(i, x):
    with torch.profiler.record_function(f"task{i}"):
        for k in range(2):
            with torch.profiler.record_function(f"task{i}.step{k}"):
                torch.mm(x, x)
                await asyncio.sleep(0.0005 * (i % 3))
async def main():
    x = torch.randn(16, 16)
    await asyncio.gather(*(task(i, x) for i in range(10)))
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    asyncio.run(main())
p.export_chrome_trace(sys.argv[1])
"""


def convert(src: Path, out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "xpuprof", "convert", str(src), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def torch_asyncio_converted(tmp: Path) -> Entry:
    """torch.profiler's own trace of asyncio tasks (its thread's row holds ranges that do not nest)."""
    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    src = tmp / "torch_asyncio.pt.trace.json"
    done = subprocess.run([sys.executable, "-c", TORCH_ASYNCIO, str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return Entry(convert(src, tmp / "torch_asyncio.laid.json"), src)


ONDEMAND_ASYNCIO = """
import asyncio, os, sys, time
import xpuprof
stop = sys.argv[1]
async def task(i):
    with xpuprof.record_function(f"task{i}"):
        for k in range(2):
            with xpuprof.record_function(f"task{i}.step{k}"):
                sum(range(3000))
                await asyncio.sleep(0.0002 * (i % 3))
async def main():
    await asyncio.gather(*(task(i) for i in range(8)))
print("ready", flush=True)
while not os.path.exists(stop):
    asyncio.run(main())
    xpuprof.step()
    time.sleep(0.002)
"""


def ondemand_asyncio(tmp: Path) -> Entry:
    """An on-demand capture: a process running asyncio tasks, traced by `xpuprof trigger --embedded` (the
    daemon's requests answered by trigger itself; no dynolog needed)."""
    import tempfile

    sys.path.insert(0, str(TESTS / "ondemand"))
    from odhelpers import Program, client_env, wait_for_file, write_program

    sockdir = Path(tempfile.mkdtemp(prefix="xv", dir="/tmp"))  # a socket path holds at most 107 bytes
    env = client_env(sockdir, trace_dir=tmp)
    prog = write_program(sockdir, ONDEMAND_ASYNCIO)
    p = Program([sys.executable, str(prog), str(sockdir / "stop")], env, sockdir, sockdir / "stop")
    try:
        p.out.wait("ready")
        done = subprocess.run([sys.executable, "-m", "xpuprof", "trigger", "--embedded", "--duration-ms", "300",
                               "--log-file", str(tmp / "od.json"), "--set", "ACTIVITIES_WARMUP_PERIOD_SECS=0"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        path = wait_for_file(tmp / f"od_{p.pid}.json")
        assert p.finish() == 0, p.err.text()[-2000:]
    finally:
        p.kill()
        import shutil

        shutil.rmtree(sockdir, ignore_errors=True)
    return Entry(path)


def merged_view(tmp: Path, ranks: int) -> Entry:
    sys.path.insert(0, str(TESTS / "commands"))
    from test_merge_ids import small_rank_trace

    d = tmp / f"ranks{ranks}"
    d.mkdir()
    paths = [small_rank_trace(d / f"w.rank{r}.pt.trace.json", r, ranks, events=12 if ranks > 100 else 60)
             for r in range(ranks)]
    out = tmp / f"job{ranks}.merged.json"
    done = subprocess.run([sys.executable, "-m", "xpuprof", "merge", str(d), "-o", str(out)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return Entry(out)


MAKERS = {
    "asyncio_tasks": lambda tmp: asyncio_trace(tmp / "asyncio.pt.trace.json", 20, activities=["cpu"]),
    "asyncio_sim_launches": lambda tmp: asyncio_trace(tmp / "asyncio_sim.pt.trace.json", 8, activities=["cpu", "xpu"],
                                                      backends=["sim"]),
    "threads_one_stream_metrics": lambda tmp: threads_on_one_stream(tmp / "threads.pt.trace.json"),
    "device_annotations_metrics": lambda tmp: device_lanes(tmp / "device.pt.trace.json"),
    "torch_stack_memory": lambda tmp: torch_stack_memory(tmp / "torch.pt.trace.json"),
    "torch_asyncio_converted": torch_asyncio_converted,
    "ondemand_asyncio": ondemand_asyncio,
    **{f"merged_{r}_ranks": (lambda tmp, r=r: merged_view(tmp, r)) for r in MERGED_RANKS},
}


class Corpus:
    """The corpus, each entry written the first time a test asks for it (``corpus[name]``), once a session."""

    def __init__(self, tmp_factory) -> None:
        self.tmp_factory = tmp_factory
        self.made: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        if name not in self.made:
            maker = MAKERS.get(name)
            if maker is None:
                maker = lambda tmp: hta_entry(tmp, name.removeprefix("hta:"))  # noqa: E731
            self.made[name] = maker(self.tmp_factory.mktemp(name.replace("/", "_").replace(":", "_")))
        return self.made[name]


def hta_entry(tmp: Path, name: str) -> Entry:
    """One of HTA's test traces (``HTA_TRACES``: its folder/file) through ``xpuprof convert``."""
    src = HTA / name
    return Entry(convert(src, tmp / f"{src.name.split('.')[0]}.laid.json"), src)


HTA_TRACES = sorted(str(p.relative_to(HTA)) for p in HTA.glob("*/*.json.gz"))
__all__ = ["MAKERS", "Corpus", "Entry", "HTA_TRACES", "MERGED_RANKS", "hta_entry"]
