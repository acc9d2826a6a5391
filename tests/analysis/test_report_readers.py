"""``xpuprof report`` reads traces through the one Kineto JSON reader, whose two implementations - the C
scanner (event columns, no dict per event) and orjson over the whole document - must give exactly the
same report on every kind of trace; invalid input is one ReportError naming the file either way."""
from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from xpuprof.analysis.merge import merge_traces
from xpuprof.analysis.report import ReportError, build_report
from xpuprof.analysis.report_render import to_dict
from xpuprof.analysis.summary import unique_inverse
from xpuprof.trace.read import kineto_stream
from xpuprof.trace.read.kineto import read_trace

from .conftest import make_rank_trace

pytestmark = pytest.mark.skipif(kineto_stream.native() is None,
                                reason="xpuprof._native.tracescan is not built (python setup.py build_ext --inplace)")


def _general(monkeypatch):
    """The reader without its C part: orjson over the whole document."""
    monkeypatch.setattr(kineto_stream, "_native_module", None)


def _result(paths, **kw):
    r = build_report(paths, **kw)
    t = r.table
    cols = {f: getattr(t, f).tolist() for f in ("name", "cat", "ts_ns", "dur_ns", "rank", "rel_ns")}
    cols["metrics"] = {k: [None if math.isnan(x) else x for x in v.tolist()] for k, v in t.metrics.items()}
    return to_dict(r), cols, dict(t.units)


def _same_both_ways(monkeypatch, paths, **kw):
    fast = _result(paths, **kw)
    with monkeypatch.context() as m:
        _general(m)
        slow = _result(paths, **kw)
    assert fast == slow
    return fast


def _scanned_exactly(path):
    """The C scanner reads the file (the column path; orjson is only the fallback without it)."""
    assert kineto_stream.native() is not None
    assert read_trace(path) is not None


def _write(path, doc, *, indent=None, gz=False):
    text = json.dumps(doc, indent=indent, ensure_ascii=indent is None)
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_builder_traces_with_metrics_ranks_and_telemetry(tmp_path, monkeypatch):
    paths = [make_rank_trace(tmp_path / f"w.rank{r}.pt.trace.json", r, offset_ns=r * 5_000_000) for r in range(2)]
    for p in paths:
        _scanned_exactly(p)
    fast = _same_both_ways(monkeypatch, paths)
    assert fast[0]["tables"]["by_name"]["rows"] and fast[2]  # kernels with per-kernel metric units
    _same_both_ways(monkeypatch, paths, by_rank=True, sort_by="XVE_STALL::percent max")
    _same_both_ways(monkeypatch, paths, name="gemm|axpy", start_ms=0.001, end_ms=1e9, top=2)
    merged = tmp_path / "all.merged.json"
    merge_traces(paths, merged)
    _scanned_exactly(merged)
    _same_both_ways(monkeypatch, [merged], by_rank=True)


def test_a_profiled_run_with_host_ranges_and_spans(tmp_path, monkeypatch):
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(300):
            with xpuprof.record_function(f"op{i % 7}", {"i": i, "s": "x\"y\\z"}):
                pass
        with xpuprof.record_function("ProfilerStep#3"):
            pass
    for name in ("host.json", "host.json.gz"):
        path = prof.export_chrome_trace(tmp_path / name)
        _scanned_exactly(path)
        fast = _same_both_ways(monkeypatch, [path])
        assert sum(k["calls"] for k in fast[0]["tables"]["by_name"]["rows"]) == 301


def _kineto_like(rng: np.random.Generator) -> dict:
    """Hand-made events in the shapes other writers produce, including awkward ones."""
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    names = ["gemm", "caf\u00e9 \u2603 \U0001F600", 'quo"te\\back', "tab\tnew\nline", "ProfilerStep#12", "ProfilerStep#3",
             "metricsless", "\u0000nul"]
    for i in range(400):
        e = {"ph": "X", "cat": ["kernel", "gpu_memcpy", "cpu_op", "user_annotation", "kernel"][i % 5],
             "name": names[i % len(names)], "pid": int(rng.integers(0, 3)), "tid": int(rng.integers(1, 9)),
             "ts": float(np.round(rng.uniform(1e9, 2e9), 3)) if i % 3 else int(rng.integers(10**9, 2 * 10**9)),
             "dur": [float(np.round(rng.uniform(0, 50), 3)), int(rng.integers(0, 50)), None][i % 3],
             "args": {"External id": i, "nested": {"a": [1, 2.5e-3, -0.0, True, None, {"b": "c"}]},
                      "big": 2**70, "neg": -(2**63), "exp": 1.5e300}}
        if e["dur"] is None:
            del e["dur"]
        if i % 11 == 0:
            e["tid"] = f"stream {i % 4}"  # a string tid (read whole)
        if i % 13 == 0:
            e["pid"] = "Spans"
        if i % 17 == 0:
            e.pop("cat")
        if i % 19 == 0:
            e.pop("name")
        if i % 23 == 0:
            e["name"] = 42  # a non-string name: str() of it
        if i % 29 == 0:
            e["dur"] = 1.25  # (a dur spelled as a string is not a time: tests/reliability/test_hostile_inputs.py)
        ev.append(e)
    ev.append({"ph": "X", "cat": "kernel", "name": "bool ts", "ts": True, "dur": 1, "pid": 0, "tid": 1})
    ev.append({"ph": "X", "cat": "kernel", "name": "no ts", "dur": 1})
    ev.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 1.5e9})
    for k in range(20):  # telemetry counters of both kinds, plus one that is not telemetry
        ev.append({"ph": "C", "cat": "gpu_pm_counter", "name": "xpu", "pid": 0, "ts": 1e9 + k,
                   "args": {"GPU_BUSY": k * 1.5, "flag": True}})
        ev.append({"ph": "C", "cat": "host_counter", "name": "cpu", "pid": 7, "ts": 1e9 + k * 2, "args": {"util": k}})
    ev.append({"ph": "C", "cat": "other", "name": "x", "ts": 5, "args": {"v": 1}})
    order = rng.permutation(len(ev))
    return {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "deviceProperties": [],
            "distributedInfo": {"rank": 3}, "traceEvents": [ev[i] for i in order], "traceName": "t"}


@pytest.mark.parametrize("indent", [None, 1], ids=["one-line", "pretty"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hand_made_traces_of_other_writers(tmp_path, monkeypatch, indent, seed):
    doc = _kineto_like(np.random.default_rng(seed))
    path = _write(tmp_path / "k.json", doc, indent=indent)
    _scanned_exactly(path)  # the odd events are read whole; the file still takes the column path
    fast = _same_both_ways(monkeypatch, [path])
    assert fast[0]["tables"]["telemetry"]["rows"] and fast[0]["ranks"] == [3]
    _same_both_ways(monkeypatch, [path], categories=["cpu_op", "user_annotation"])
    _same_both_ways(monkeypatch, [path], categories=["nonexistent"])


def test_spellings_the_columns_do_not_hold_are_read_whole(tmp_path, monkeypatch):
    base = [{"ph": "X", "cat": "kernel", "name": "a", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 1}]
    # An escaped key that spells "ph", and a name spelled with escapes: same values, other bytes.
    text = json.dumps({"traceEvents": base})[:-2] + (
        ', {"p\\u0068": "X", "cat": "kernel", "name": "\\u0061", "ts": 3, "dur": 1, "pid": 1, "tid": 1}'
        ', {"ph": "\\u0058", "cat": "kernel", "name": "a", "ts": 5, "dur": 1, "pid": 1, "tid": 1}]}')
    path = tmp_path / "esc.json"
    path.write_text(text)
    fast = _same_both_ways(monkeypatch, [path])
    assert fast[0]["tables"]["by_name"]["rows"][0]["calls"] == 3
    bare = _write(tmp_path / "bare.json", base * 3)  # the bare-array form
    _scanned_exactly(bare)
    _same_both_ways(monkeypatch, [bare])
    empty = _write(tmp_path / "empty.json", {"traceEvents": []})
    _same_both_ways(monkeypatch, [empty])


@pytest.mark.parametrize("text", [
    b'{"traceEvents": [{"ph": "X", "ts": 1,}]}',  # trailing comma
    b'{"traceEvents": [{"ph": "X", "ts": 01}]}',  # leading zero
    b'{"traceEvents": [{"ph": "X", "name": "\\ud800", "ts": 1}]}',  # lone surrogate escape
    b'{"traceEvents": [{"ph": "X", "name": "\xff", "ts": 1}]}',  # invalid UTF-8
    b'{"traceEvents": [{"ph": "X", "args": {"a": [1, 2}, "ts": 1}]}',  # bad nesting in skipped args
    b'{"traceEvents": [{"ph": "X", "ts": 1}]} trailing',
    b'{"traceEvents": [1, 2]}',  # events that are not objects
    b'{"traceEvents": {"ph": "X"}}',
    b'{"other": []}',
    b'{"traceEvents": [{"ph": "X", "ts": 1}',  # truncated
    b'',
])
def test_invalid_input_gets_the_general_readers_error(tmp_path, monkeypatch, text):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    with pytest.raises(ReportError) as fast:
        build_report([path])
    with monkeypatch.context() as m:
        _general(m)
        with pytest.raises(ReportError) as slow:
            build_report([path])
    for err in (fast, slow):  # one line naming the file, whichever implementation read it
        assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


def test_truncated_gzip_gets_the_general_readers_error(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}' * 100)[:30])
    with pytest.raises(ReportError, match="not a readable gzip file"):
        build_report([path])


def test_unique_inverse_equals_numpy():
    rng = np.random.default_rng(5)
    words = np.array([f"k{int(i)}" for i in rng.integers(0, 300, 5000)] + ["", "é", "Z"], dtype=object)
    uniq, inv = unique_inverse(words)
    u2, i2 = np.unique(words, return_inverse=True)
    assert uniq.tolist() == u2.tolist() and inv.tolist() == i2.reshape(-1).tolist()
