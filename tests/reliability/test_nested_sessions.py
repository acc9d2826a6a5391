"""Two profile() sessions at once must not lose data silently (an inner stop would uninstall the
one global recorder). The second start is refused with a clear error, before
anything changes, and the first session keeps everything in its window."""
from __future__ import annotations

import pytest

import xpuprof


def _names(prof):
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        trace = json.loads(prof.export_chrome_trace(Path(d) / "t.json").read_text())
    return {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}


def test_nested_profile_is_refused_and_the_outer_trace_is_complete():
    with xpuprof.profile(activities=["cpu"]) as outer:
        with xpuprof.record_function("before"):
            pass
        inner = xpuprof.profile(activities=["cpu"])
        with pytest.raises(RuntimeError, match="another xpuprof.profile\\(\\) is already running"):
            inner.start()
        inner.stop()  # stopping a session that never started is harmless
        with xpuprof.record_function("after"):
            pass
    assert {"before", "after"} <= _names(outer)


def test_interleaved_start_stop_is_refused_and_loses_nothing():
    a = xpuprof.profile(activities=["cpu"])
    b = xpuprof.profile(activities=["cpu"])
    a.start()
    with xpuprof.record_function("a1"):
        pass
    with pytest.raises(RuntimeError, match="already running"):
        b.start()
    with xpuprof.record_function("a2"):
        pass
    a.stop()
    assert {"a1", "a2"} <= _names(a)
    b.start()  # free again once the first stopped
    with xpuprof.record_function("b1"):
        pass
    b.stop()
    assert "b1" in _names(b) and "a1" not in _names(b)
