"""Raw capture from a live (double) session, replayed through the same decoder without PTI."""
from __future__ import annotations

import pytest

from xpuprof.backends.xpu import capture
from xpuprof.trace.builder import TraceBuilder
from xpuprof.trace.chrome import write_chrome_trace
from xpuprof.trace.load import load



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
    assert main(["replay", str(bad)]) == 1
    assert "is not an xpuprof PTI capture" in capsys.readouterr().err
