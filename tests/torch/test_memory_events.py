"""profile_memory=True: torch's [memory] events in our trace, as torch writes them (same count, same args),
and torch's memory timeline exports."""
from __future__ import annotations

import collections
import gc
import gzip
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from slice_tables import slice_table
import xpuprof

pytestmark = pytest.mark.slow

MEMORY_ARGS = ("Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved")  # torch's

P = torch.profiler


def _loop():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(16, 32), torch.randn(16, 8)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    step()  # the first step's one-time allocations (optimizer state, grads) happen outside both profiles
    return step


def _memory(events):
    return [e for e in events if e.get("name") == "[memory]"]


def _torch_memory(tmp_path, step):
    gc.collect()  # frees of earlier objects would land in whichever profile runs first
    with P.profile(activities=[P.ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(3):
            step()
    path = tmp_path / "torch.json"
    prof.export_chrome_trace(str(path))
    return _memory(json.loads(path.read_text())["traceEvents"])


def _our_memory(tmp_path, step, **kw):
    gc.collect()
    with xpuprof.profile(activities=[P.ProfilerActivity.CPU], profile_memory=True, **kw) as prof:
        for _ in range(3):
            step()
    return prof, _memory(json.loads(prof.export_chrome_trace(tmp_path / "ours.json").read_text())["traceEvents"])


def _signature(events):
    """What must agree: per device, the sequence of allocation (+) and free (-) sizes from the window's first
    allocation on. (Before it, torch reports the free of a block allocated before its window only when the
    block's address was seen by an earlier profile: those leading frees differ between any two runs.)"""
    by = collections.defaultdict(list)
    for e in events:
        a = e["args"]
        seq = by[(a["Device Type"], a["Device Id"])]
        if seq or a["Bytes"] > 0:
            seq.append(a["Bytes"])
    return dict(by)


def test_memory_events_equal_torchs_on_the_same_loop(tmp_path):
    step = _loop()
    theirs = _torch_memory(tmp_path, step)
    step()  # this step's grads, freed by the next zero_grad, are allocated outside both profiles again
    prof, ours = _our_memory(tmp_path, step)
    assert len(theirs) > 50
    assert _signature(ours) == _signature(theirs)
    assert abs(len(ours) - len(theirs)) <= 4  # the leading frees of earlier blocks (see _signature)
    e = ours[0]
    assert e["ph"] == "i" and e["cat"] == "cpu_instant_event" and e["s"] == "t"
    assert set(e["args"]) == set(MEMORY_ARGS)  # torch's args; Kineto's Ev Idx / finished not carried
    assert prof.builder.metadata["memory_events"] == {"events": len(ours), "by_device": {"CPU": len(ours)}}
    window = prof.builder.window_start_ns, prof.builder.window_end_ns
    ts = prof.builder.instants[0].ts
    assert (window[0] <= ts).all() and (ts <= window[1]).all()  # on our clock


def test_memory_events_stay_out_without_profile_memory(tmp_path):
    step = _loop()
    with xpuprof.profile(activities=["cpu"]) as prof:
        step()
    data = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    assert not _memory(data["traceEvents"]) and "memory_events" not in data and "profile_memory" not in data


def test_memory_events_paused_by_toggle_are_counted(tmp_path):
    step = _loop()
    with xpuprof.profile(activities=[P.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
        prof.toggle_collection_dynamic(False, [P.ProfilerActivity.CPU])
        step()
        prof.toggle_collection_dynamic(True, [P.ProfilerActivity.CPU])
        step()
    meta = prof.builder.metadata
    assert meta["collection_paused"][0]["source"] == "host"
    ops = slice_table(prof.builder, "cpu_op")
    paused = meta["collection_paused"][0]
    from xpuprof.clock import BASE_TIME_NS
    start = BASE_TIME_NS + paused["ts"] * 1000
    inside = (ops["ts"] >= start) & (ops["ts"] < start + paused["dur"] * 1000)
    assert not inside.any()  # torch's ops paused by torch's own toggle


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".raw.json.gz", ".html"])
def test_export_memory_timeline_writes_what_torch_writes(tmp_path, suffix):
    if suffix == ".html":
        pytest.importorskip("matplotlib", reason="torch draws the HTML timeline with matplotlib (not installed)")
    step = _loop()
    kw = dict(record_shapes=True, profile_memory=True, with_stack=True)
    with xpuprof.profile(activities=[P.ProfilerActivity.CPU], **kw) as prof:
        step()
    with P.profile(activities=[P.ProfilerActivity.CPU], **kw) as tprof:
        step()
    ours, theirs = tmp_path / f"ours{suffix}", tmp_path / f"theirs{suffix}"
    with pytest.warns(FutureWarning):
        tprof.export_memory_timeline(str(theirs))
    prof.export_memory_timeline(ours)
    if suffix == ".html":
        assert "<img" in ours.read_text() and "<img" in theirs.read_text()
        return
    read = (lambda p: json.loads(gzip.open(p).read())) if suffix.endswith(".gz") else (lambda p: json.loads(p.read_text()))
    a, b = read(ours), read(theirs)
    if suffix == ".raw.json.gz":  # one [ts, action, bytes, category] per memory event (torch's layout)
        assert a and b and {len(r) for r in a} == {len(r) for r in b} == {4}
        assert {r[1] for r in a} <= {r[1] for r in b} | {0, 1, 2, 3, 4} and {8192, 2048} <= {r[2] for r in a}
    else:  # [times, sizes by category]
        assert len(a) == 2 and len(a[0]) == len(a[1]) > 0 and len(a[1][0]) == len(b[1][0])


def test_html_memory_timeline_without_matplotlib_is_one_clear_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kw):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kw)

    with xpuprof.profile(activities=["cpu"], record_shapes=True, profile_memory=True, with_stack=True) as prof:
        torch.ones(8) * 2
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(RuntimeError) as info:
        prof.export_memory_timeline(tmp_path / "m.html")
    assert "matplotlib" in str(info.value) and ".json" in str(info.value)
    assert not (tmp_path / "m.html").exists()


def test_export_memory_timeline_needs_torchs_three_options(tmp_path):
    with xpuprof.profile(activities=["cpu"], profile_memory=True) as prof:
        torch.ones(8) * 2
    with pytest.raises(ValueError) as info:
        prof.export_memory_timeline(tmp_path / "m.json")
    assert "record_shapes=True" in str(info.value) and "with_stack=True" in str(info.value)


def test_without_torch_and_without_device_allocations_the_trace_says_why(tmp_path):
    code = (
        "import json, sys, xpuprof\n"
        "with xpuprof.profile(activities=['cpu'], profile_memory=True) as p:\n"
        "    with xpuprof.record_function('x'): pass\n"
        "print(json.dumps({k: v for k, v in p.builder.metadata.items() if k.startswith('memory')}))\n"
        "assert 'torch' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    meta = json.loads(out.stdout.strip().splitlines()[-1])
    assert "torch is not in use" in meta["memory_events_not_recorded"]
    assert "profile_memory=True" in out.stderr  # said once in the log


@pytest.fixture(scope="module")
def memory_profile():
    with xpuprof.profile(activities=["cpu"], record_shapes=True, profile_memory=True, with_stack=True) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    return prof


def _said(prof, target) -> str:
    with pytest.raises(OSError) as info:
        prof.export_memory_timeline(target)
    return str(info.value)


def test_export_memory_timeline_to_a_full_device_names_it(memory_profile):
    """Before: ``OSError: [Errno 28] No space left on device`` - no path at all."""
    said = _said(memory_profile, "/dev/full")
    assert said == "cannot write /dev/full: No space left on device"


def test_export_memory_timeline_errors_name_the_output_never_a_temporary_file(memory_profile, tmp_path, monkeypatch):
    """Before: a name the file system cannot hold failed inside torch's writer, in xpuprof's private directory,
    and the error named that directory's file (``/tmp/xpuprof-export-…/aaa….json``)."""
    long = tmp_path / ("a" * 260 + ".json")
    said = _said(memory_profile, long)
    assert said.startswith(f"cannot write {long}: ") and "File name too long" in said and "xpuprof-export-" not in said
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    def full_tmpdir(self, path, device):  # torch's writer in a full TMPDIR
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(MemoryProfileTimeline, "export_memory_timeline", full_tmpdir)
    said = _said(memory_profile, tmp_path / "m.json")
    assert said.startswith(f"cannot write {tmp_path / 'm.json'}: ") and "No space left on device" in said
    assert "xpuprof-export-" not in said and not (tmp_path / "m.json").exists()
