"""One bad args value must never lose the trace. Every good range recorded before
and after is kept; the bad one is kept too, with a note saying why its args could not be written,
and the trace's metadata counts them."""
from __future__ import annotations

import json

import pytest

import xpuprof


class StrRaises:
    def __str__(self):
        raise RuntimeError("no str for you")

    __repr__ = __str__


def _cyclic_dict():
    d = {}
    d["self"] = d
    return d


def _cyclic_list():
    v = []
    v.append(v)
    return {"v": v}


def _deep(n=2000):
    d = cur = {}
    for _ in range(n):
        cur["x"] = {}
        cur = cur["x"]
    return d


BAD = {
    "int >= 2**64": {"n": 2**64},
    "self-containing dict": _cyclic_dict(),
    "self-containing list": _cyclic_list(),
    "2000-deep dict": _deep(),
    "__str__ raises": {"obj": StrRaises()},
    "args as a list": [1, 2, 3],
    "args as a string": "abc",
}


@pytest.mark.parametrize("label", list(BAD))
def test_bad_args_keep_the_whole_trace(label, tmp_path):
    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("good before", {"i": 1}):
            pass
        with xpuprof.record_function("bad", BAD[label]):
            pass
        xpuprof.instant("bad instant", BAD[label]) if isinstance(BAD[label], dict) else None
        with xpuprof.record_function("good after"):
            pass
    assert prof.builder is not None, "the trace was lost"
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    by_name = {e["name"]: e for e in trace["traceEvents"] if e.get("ph") in ("X", "i")}
    assert by_name["good before"]["args"]["i"] == 1 and "good after" in by_name
    note = by_name["bad"]["args"]["xpuprof_invalid_args"]
    assert "could not be written" in note
    assert trace["invalid_args"] >= 1


@pytest.mark.parametrize("value", [2**64, -2**70, "cycle", "bad_str"])
def test_bad_metadata_value_never_loses_the_trace(tmp_path, value, caplog):
    """Found by the standing suite: add_metadata (or a backend's metadata) with a value JSON cannot hold
    made export raise and lose the whole trace; now the key holds a note and the trace is written."""
    import orjson

    class BadStr:
        def __str__(self):
            raise RuntimeError("no str")

    if value == "cycle":
        value = []
        value.append(value)
    elif value == "bad_str":
        value = BadStr()
    prof = xpuprof.profile(activities=["cpu"])
    with prof:
        with xpuprof.record_function("kept"):
            pass
        prof.add_metadata("odd", value)
        prof.add_metadata("distributedInfo", {"rank": 0, "odd": value})
    prof.builder.set_metadata("odd2", value)  # as a backend's metadata() would
    path = prof.export_chrome_trace(tmp_path / "t.json")
    data = orjson.loads(path.read_bytes())
    assert "xpuprof_invalid_metadata" in data["odd"] and "xpuprof_invalid_metadata" in data["odd2"]
    assert "xpuprof_invalid_metadata" in data["distributedInfo"]
    assert any(e.get("name") == "kept" for e in data["traceEvents"])
    assert "could not be written as JSON" in caplog.text


def test_instant_args_are_recorded_as_they_were_at_the_call(tmp_path):
    """instant() kept the caller's dict by reference: a change after the call changed the trace. The
    args are snapshotted at the call, as record_function's are (exact-size JSON bytes)."""
    from collections import OrderedDict

    d = {"v": 3}
    od = OrderedDict(w=1)
    nested = {"inner": [1]}
    with xpuprof.profile(activities=["cpu"]) as prof:
        xpuprof.instant("plain", d)
        d["v"] = 4
        xpuprof.instant("mapping", od)
        od["w"] = 2
        xpuprof.instant("nested", nested)
        nested["inner"].append(2)
        xpuprof.instant("huge", {"n": 2**64})  # JSON cannot hold it: a note, counted
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    args = {e["name"]: e.get("args") for e in trace["traceEvents"] if e.get("cat") == "cpu_instant_event"}
    assert args["plain"] == {"v": 3} and args["mapping"] == {"w": 1} and args["nested"] == {"inner": [1]}
    assert "could not be written" in args["huge"]["xpuprof_invalid_args"] and trace["invalid_args"] == 1
