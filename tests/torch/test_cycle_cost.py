"""What ending an on_trace_ready cycle costs beside torch.profiler (issue 41): torch's ops render in C (no
parse and encode per op), and the last cycle's torch result is released when the next cycle is prepared, as
torch.profiler releases its own, not inside the next cycle's end."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

import orjson  # noqa: E402

import xpuprof  # noqa: E402
from xpuprof.trace.write import chrome as chrome_mod  # noqa: E402
from xpuprof.trace.write import rows_native  # noqa: E402

pytestmark = pytest.mark.slow
P = torch.profiler


def _step_fn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(2, 3, 8, 8)

    def step():
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


@pytest.mark.skipif(rows_native._rowfmt is None, reason="the C row renderer is not built")
def test_torch_ops_with_shapes_and_stacks_render_in_c(tmp_path, monkeypatch):
    step = _step_fn()
    generic = []
    real = chrome_mod.generic_slice_events
    monkeypatch.setattr(chrome_mod, "generic_slice_events",
                        lambda b, *a, **k: generic.append(len(b)) or real(b, *a, **k))
    with xpuprof.profile(record_shapes=True, with_stack=True, profile_memory=True) as prof:
        step()
    out = prof.export_chrome_trace(tmp_path / "t.json")
    assert generic == []  # before: every torch op row went through the generic (dict + orjson) path
    events = orjson.loads(out.read_bytes())["traceEvents"]
    conv = [e for e in events if e.get("name") == "aten::convolution"]
    assert conv and conv[0]["args"]["Input Dims"][0] == [2, 3, 8, 8] and conv[0]["args"]["External id"] > 0
    # the args are written as orjson writes them (compact), as they were before
    assert b'"Input Dims":[[2,3,8,8],' in out.read_bytes()


def test_the_last_cycle_s_results_are_released_when_the_next_cycle_is_prepared(tmp_path):
    step = _step_fn()
    seen = []

    def ready(prof):
        seen.append(len(prof.events()))  # inside on_trace_ready: the cycle's events are there
        prof.export_chrome_trace(tmp_path / f"c{len(seen)}.json")

    with xpuprof.profile(schedule=P.schedule(wait=1, warmup=1, active=1, repeat=2), on_trace_ready=ready) as prof:
        for i in range(4):
            step()
            prof.step()
            if i == 2:  # cycle 1 ended in this step(); the next one (to step 4, a warmup) prepares cycle 2
                assert len(prof.events()) > 0  # still there until then
        with pytest.raises(RuntimeError, match="released when the next cycle was prepared, as torch.profiler"):
            prof.events()
        assert prof.builder is not None  # the last trace itself can still be exported
        for _ in range(2):
            step()
            prof.step()
    assert len(seen) == 2 and all(seen)


def test_acc_events_keeps_every_cycle_s_results():
    step = _step_fn()
    with xpuprof.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=2), on_trace_ready=lambda p: None,
                         acc_events=True) as prof:
        for _ in range(5):
            step()
            prof.step()
    assert len(prof._finished) == 2 and len(prof.events()) > 0


TORCH_CYCLE = """
import os, sys, tempfile
import torch
import xpuprof
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
with xpuprof.profile(record_shapes=True, with_stack=True, profile_memory=True) as prof:
    with xpuprof.record_function("step"):
        model(torch.randn(2, 3, 8, 8)).sum().backward()
prof.export_chrome_trace(os.path.join(tempfile.mkdtemp(), "t.json"))
print("numpy.ma" in sys.modules)
"""


def test_a_torch_cycle_does_not_import_numpy_ma():
    """numpy 2's plain np.unique imports numpy.ma (40-120 ms of CPU) on its first call; torch does not import it,
    and neither does a cycle's stop, build and write of torch's ops and [memory] events (host.distinct)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", TORCH_CYCLE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
