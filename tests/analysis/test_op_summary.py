"""Operators grouped by name (``key_averages(group_by="op")``, ``xpuprof report --by op``):
self/total host time from nesting on each thread, self/total device time from the kernels whose
External id is the op's. A hand-built trace with known numbers (no torch needed)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from xpuprof.analysis.ops import OpSummary
from xpuprof.cli import main
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

T = BASE_TIME_NS + 10**9


def _builder() -> TraceBuilder:
    b = TraceBuilder(pid=5)
    # thread 1: linear [0,100) > addmm [10,90) ; linear [200,300) > addmm [210,260) ; thread 2: mm [0,50)
    b.add_slices(names=["aten::linear", "aten::addmm", "aten::linear", "aten::addmm", "aten::mm"],
                 ts=T + np.array([0, 10, 200, 210, 0]) * 1000, dur=np.array([100, 80, 100, 50, 50]) * 1000,
                 pid=5, tid=np.array([1, 1, 1, 1, 2]), cat="cpu_op", external_id=np.array([11, 12, 13, 14, 15]))
    b.add_slices(names=["cudaLaunchKernel"] * 3, ts=T + np.array([20, 220, 5]) * 1000, dur=1000, pid=5,
                 tid=np.array([1, 1, 2]), cat="cuda_runtime", external_id=np.array([12, 14, 15]),
                 args={"correlation": np.array([1, 2, 3])})
    # kernels: 7 us and 3 us for the addmms, 4 us for mm, one unlinked (External id 0) kernel of 100 us
    b.add_slices(names=["gemm", "gemm", "mm_k", "other"], ts=T + np.array([30, 230, 10, 400]) * 1000,
                 dur=np.array([7, 3, 4, 100]) * 1000, pid=0, tid=7, cat="kernel",
                 external_id=np.array([12, 14, 15, 0]), args={"correlation": np.array([1, 2, 3, 9])})
    return b


def _check(ops: OpSummary) -> None:
    rows = {r.name: r for r in ops.rows()}
    assert set(rows) == {"aten::linear", "aten::addmm", "aten::mm"}
    lin, addmm, mm = rows["aten::linear"], rows["aten::addmm"], rows["aten::mm"]
    assert (lin.calls, addmm.calls, mm.calls) == (2, 2, 1)
    assert lin.host_total_ns == 200_000 and lin.self_host_ns == 200_000 - 130_000
    assert addmm.self_host_ns == addmm.host_total_ns == 130_000
    assert addmm.self_device_ns == addmm.device_total_ns == 10_000
    assert lin.self_device_ns == 0 and lin.device_total_ns == 10_000  # its nested addmm's kernels
    assert mm.self_device_ns == 4_000
    assert [r.name for r in ops.rows("self_cpu_time_total")][0] == "aten::addmm"  # torch's sort key names


def test_op_summary_from_the_builder_and_from_the_written_trace(tmp_path):
    b = _builder()
    _check(OpSummary.from_builder(b))
    path = write_chrome_trace(b, tmp_path / "w.pt.trace.json")
    _check(OpSummary.from_events(json.loads(path.read_bytes())["traceEvents"]))
    text = OpSummary.from_builder(b).table(sort_by="device_time_total")
    assert "Self Device" in text and "aten::addmm" in text and "Self host time total" in text
    with pytest.raises(ValueError, match="cannot sort ops by 'bogus'. Valid: name, calls"):
        OpSummary.from_builder(b).rows("bogus")


def test_report_by_op_cli(tmp_path, capsys):
    path = write_chrome_trace(_builder(), tmp_path / "w.pt.trace.json")
    assert main(["report", str(path), "--by", "op", "--format", "json", "--sort", "self_cuda_time_total"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["aten::addmm", "aten::mm", "aten::linear"]
    assert rows[0]["self_device_ns"] == 10_000
    assert main(["report", str(path), "--by", "op"]) == 0
    assert "aten::linear" in capsys.readouterr().out
    assert main(["report", str(path), "--by", "op", "--name", "x"]) == 2
    assert "--name apply to the kernel report" in capsys.readouterr().err


def test_key_averages_group_by_is_checked():
    import xpuprof

    with xpuprof.profile(activities=["user_annotation"]) as prof:
        with xpuprof.record_function("r"):
            pass
    assert "r" in prof.key_averages(group_by="op").table()
    with pytest.raises(ValueError, match="valid values are 'name' and 'op'"):
        prof.key_averages(group_by="shape")


def test_an_only_child_of_the_same_name_merges_into_its_parent_as_in_torch():
    # div_ > div_ > div_ > mul (chain of only children) and a div_ with two children (kept apart)
    names = ["aten::div_", "aten::div_", "aten::div_", "aten::mul", "aten::div_", "aten::div_", "aten::add"]
    ts = np.array([0, 1, 2, 3, 100, 101, 150]) * 1000
    dur = np.array([50, 40, 30, 10, 100, 20, 10]) * 1000
    ext = np.arange(1, 8)
    ops = OpSummary(names, np.ones(7, np.int64), ts, dur, ext, np.array([3, 4]), np.array([5_000, 2_000]))
    rows = {r.name: r for r in ops.rows()}
    assert rows["aten::div_"].calls == 3  # the chain is one div_, then the two-child div_ and its child
    assert rows["aten::div_"].self_device_ns == 5_000  # the innermost div_'s kernel lifted to the top
    assert rows["aten::mul"].self_device_ns == rows["aten::mul"].device_total_ns == 2_000
    assert rows["aten::div_"].host_total_ns == (50 + 100 + 20) * 1000
    # self host: chain top 50 - mul 10; 100 - (20 + 10); 20
    assert rows["aten::div_"].self_host_ns == (40 + 70 + 20) * 1000


def test_a_program_without_torch_is_unchanged_and_never_imports_it():
    import subprocess
    import sys

    # a device backend too: the torch.profiler conflict guard is not set up (nor torch imported) without torch
    code = ("import sys, xpuprof\n"
            "from xpuprof.activity import ActivityType\n"
            "from xpuprof.backends import registry\n"
            "from xpuprof.backends.base import Backend, ProbeResult, Session\n"
            "class S(Session):\n"
            "    def start(self): pass\n"
            "    def stop(self): pass\n"
            "    def process(self, builder, window): pass\n"
            "class B(Backend):\n"
            "    name, vendor = 'fakecuda', 'cuda'\n"
            "    @classmethod\n"
            "    def probe(cls): return ProbeResult.ok('test')\n"
            "    @classmethod\n"
            "    def supported_activities(cls): return frozenset({ActivityType.RUNTIME})\n"
            "    def configure(self, types, config): return S()\n"
            "registry.register(B)\n"
            "with xpuprof.profile(activities=['cpu', 'cuda'], backends=['fakecuda']) as prof:\n"
            "    with xpuprof.record_function('r'):\n        pass\n"
            "print('torch' in sys.modules, 'torch_ops' in prof.builder.metadata,"
            " 'torch_ops_not_recorded' in prof.builder.metadata, prof.builder.metadata['backends'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False", "False", "['fakecuda']"]
