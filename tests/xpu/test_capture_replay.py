"""Raw capture from a live (double) session, replayed through the same decoder without PTI."""
from __future__ import annotations

import pytest

from xpuprof.backends.xpu import capture
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace



def _x_events(trace):
    return sorted((e["cat"], e["name"], e["ts"], e["dur"], e["pid"], e["tid"]) for e in trace["traceEvents"]
                  if e.get("ph") == "X")


def test_replay_reproduces_the_live_trace(pti_double, tmp_path, run_session):
    raw = tmp_path / "run.ptiraw"
    rc, api, builder, live, _ = run_session(pti_double, tmp_path, capture=raw)
    assert rc == 0 and raw.exists()
    b = TraceBuilder()
    result = capture.replay(raw, b, use_window=False)
    replayed = load(write_chrome_trace(b, tmp_path / "replayed.json"))
    assert _x_events(replayed) == _x_events(live)
    assert len(result.kernels) == 6
    assert replayed["xpupti_version"] == "0.99.0-xpuprof-double"


def test_bad_captures_give_clear_errors(tmp_path):
    with pytest.raises(capture.CaptureError, match="cannot read PTI capture"):
        capture.load(tmp_path / "missing.ptiraw")
    bad = tmp_path / "bad.ptiraw"
    bad.write_bytes(b"hello")
    with pytest.raises(capture.CaptureError, match="is not an xpuprof PTI capture"):
        capture.load(bad)
    bad.write_bytes(capture.MAGIC + b"{not json\n")
    with pytest.raises(capture.CaptureError, match="malformed capture header"):
        capture.load(bad)


def test_truncated_capture_is_rejected(pti_double, tmp_path, run_session):
    raw = tmp_path / "run.ptiraw"
    run_session(pti_double, tmp_path, capture=raw)
    data = raw.read_bytes()
    raw.write_bytes(data[:-10])
    with pytest.raises(capture.CaptureError, match="truncated or corrupt capture"):
        capture.load(raw)


def test_replay_command(pti_double, tmp_path, run_session, capsys):
    from xpuprof.cli import main

    raw = tmp_path / "run.ptiraw"
    run_session(pti_double, tmp_path, capture=raw)
    out = tmp_path / "out.json"
    assert main(["replay", str(raw), "-o", str(out), "--legacy-categories"]) == 0
    assert "6 kernel" in capsys.readouterr().out
    cats = {e.get("cat") for e in load(out)["traceEvents"]}
    assert {"kernel", "xpu_runtime", "xpu_driver", "gpu_memcpy"} <= cats
    bad = tmp_path / "bad.ptiraw"
    bad.write_bytes(b"nope")
    assert main(["replay", str(bad)]) == 2
    assert "is not an xpuprof PTI capture" in capsys.readouterr().err


def test_runtime_records_without_a_thread_are_placed_alike_live_and_replayed(pti_double, tmp_path, run_session):
    """The double writes runtime records as intel-pti 1.2.0 does (_thread_id 0): the kernel launches
    take the thread of the driver call sharing their correlation id, the copies and fills (no driver
    call) the thread of the range that pushed their External id; a replay places them identically."""
    import threading

    from xpuprof.backends.base import RangeThreads

    me = threading.get_native_id()  # the double's calls run on this thread
    raw = tmp_path / "run.ptiraw"
    rc, api, builder, live, _ = run_session(pti_double, tmp_path, flags=pti_double.RUNTIME_TID0, capture=raw,
                                            range_threads=RangeThreads.from_pairs([4242], [me]))
    assert rc == 0
    runtime = [e for e in live["traceEvents"] if e.get("cat") == "xpu_runtime"]
    assert len(runtime) == 18 and {e["tid"] for e in runtime} == {me}
    assert [f["tid"] for f in live["traceEvents"] if f.get("ph") == "s"] == [me] * 18  # arrows leave the row
    assert live["xpu_runtime_threads"] == {"records_without_thread": 18, "from_driver_calls": 6,
                                           "from_external_id": 12, "unknown": 0}
    b = TraceBuilder()
    capture.replay(raw, b, use_window=False)
    assert _x_events(load(write_chrome_trace(b, tmp_path / "replayed.json"))) == _x_events(live)


def test_replay_to_an_unwritable_output_is_one_line(pti_double, tmp_path, run_session, capsys):
    """-o naming a directory (or a full device): one line and status 1, never a traceback."""
    from xpuprof.cli import main

    raw = tmp_path / "run.ptiraw"
    run_session(pti_double, tmp_path, capture=raw)
    capsys.readouterr()
    assert main(["replay", str(raw), "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"xpuprof replay: cannot write output to {tmp_path}: it is a directory; name a file "
                                "(or a character device, a FIFO or /dev/stdout)"], err
