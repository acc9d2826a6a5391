"""``xpuprof report`` reads a trace in blocks (``trace.read.stream``): its memory is bounded by a block,
not the file, and what it gives equals the whole-document scan and the general reader exactly, wherever
the blocks cut the document."""
from __future__ import annotations

import gzip
import importlib
import json

import numpy as np
import pytest

from xpuprof.analysis import report as report_mod
from xpuprof.analysis.report import ReportError, build_report
from xpuprof.trace.read import scan as scan_mod
from xpuprof.trace.read import stream

from .conftest import make_rank_trace
from .test_report_scan import _general, _kineto_like, _result, _write

pytestmark = pytest.mark.skipif(scan_mod._native() is None,
                                reason="xpuprof._native.tracescan is not built (python setup.py build_ext --inplace)")

BLOCKS = [1, 97, 4096]  # bytes per block: every event cut somewhere, and blocks holding many events


def _texts(sc, ids):
    return [None if i < 0 else sc.strings[i] for i in ids.tolist()]


def _same_columns(path):
    """scan_stream's columns equal the whole-document scan's; the events it read whole are the picked ones."""
    whole = scan_mod.scan(path)
    got = stream.scan_stream(path, report_mod._read_whole)
    assert whole is not None and got is not None
    assert got.header == whole.header
    for col in ("ph", "kind", "num", "complex"):
        assert np.array_equal(getattr(got, col), getattr(whole, col)), col
    assert _texts(got, got.name) == _texts(whole, whole.name)
    assert _texts(got, got.cat) == _texts(whole, whole.cat)
    picked = np.flatnonzero(report_mod._read_whole(whole)).tolist()
    assert sorted(got.whole) == picked
    assert all(got.event(i) == whole.event(i) for i in picked)
    return got


def _same_report(monkeypatch, paths, **kw):
    fast = _result(paths, **kw)
    with monkeypatch.context() as m:
        _general(m)
        slow = _result(paths, **kw)
    assert fast == slow
    return fast


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("indent,gz", [(None, False), (1, False), (None, True)], ids=["one-line", "pretty", "gzip"])
def test_blocks_anywhere_give_the_whole_scans_columns(tmp_path, monkeypatch, block, indent, gz):
    doc = _kineto_like(np.random.default_rng(block))
    doc["after"] = {"keys": ["after", "the", "events"]}  # top-level keys on both sides of the array
    path = _write(tmp_path / ("k.json.gz" if gz else "k.json"), doc, indent=indent, gz=gz)
    monkeypatch.setattr(stream, "BLOCK", block)
    sc = _same_columns(path)
    assert sc.header["after"] == doc["after"] and len(sc) == len(doc["traceEvents"])
    fast = _same_report(monkeypatch, [path])
    assert fast[0]["tables"]["telemetry"]["rows"] and fast[0]["ranks"] == [3]
    _same_report(monkeypatch, [path], categories=["cpu_op", "user_annotation"])


@pytest.mark.parametrize("block", BLOCKS)
def test_builder_traces_with_metrics_in_blocks(tmp_path, monkeypatch, block):
    paths = [make_rank_trace(tmp_path / f"w.rank{r}.pt.trace.json", r, offset_ns=r * 5_000_000) for r in range(2)]
    monkeypatch.setattr(stream, "BLOCK", block)
    for p in paths:
        _same_columns(p)
    fast = _same_report(monkeypatch, paths, by_rank=True)
    assert fast[2]  # per-kernel metric units: the metric slices were read whole


def test_report_never_holds_the_whole_document(tmp_path, monkeypatch):
    """The report's reader does not read the file's bytes whole (its peak would grow with the file)."""
    paths = [make_rank_trace(tmp_path / "w.rank0.pt.trace.json", 0, offset_ns=0),
             _write(tmp_path / "k.json.gz", _kineto_like(np.random.default_rng(9)), gz=True)]
    expected = [_result([p]) for p in paths]
    monkeypatch.setattr(stream, "BLOCK", 4096)

    def whole_read(path):
        raise AssertionError(f"the whole document was read: {path}")

    monkeypatch.setattr(scan_mod, "read_bytes", whole_read)
    monkeypatch.setattr(importlib.import_module("xpuprof.trace.read.load"), "load", whole_read)  # imported at use
    assert [_result([p]) for p in paths] == expected


@pytest.mark.parametrize("text", [
    b'[{"ph": "X", "ts": 1}]',  # the bare-array form
    b'{"traceEvents": [{"ph": "X", "ts": 1}], "traceEvents": []}',  # twice
    b'{"meta": {"traceEvents": [{"ph": "X", "ts": 1}]}, "traceEvents": []}',  # nested first
    b'{"meta": {"traceEvents": [{"ph": "X", "ts": 1}]}}',  # nested only
    b'{"tr\\u0061ceEvents": [{"ph": "X", "name": "a", "ts": 1}]}',  # an escaped key
    b'{"note": "traceEvents", "traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}',  # the word as a value
])
def test_unusual_shapes_go_to_the_whole_scan(tmp_path, monkeypatch, text):
    path = tmp_path / "odd.json"
    path.write_bytes(text)
    monkeypatch.setattr(stream, "BLOCK", 3)
    assert stream.scan_stream(path, report_mod._read_whole) is None
    try:
        fast = _result([path])
    except ReportError as exc:
        fast = str(exc)
    with monkeypatch.context() as m:
        _general(m)
        try:
            slow = _result([path])
        except ReportError as exc:
            slow = str(exc)
    assert fast == slow


@pytest.mark.parametrize("text", [
    b'{"traceEvents": [{"ph": "X", "ts": 1} {"ph": "X", "ts": 2}]}',  # no comma between events
    b'{"traceEvents": [{"ph": "X", "ts": 1},, {"ph": "X", "ts": 2}]}',
    b'{"traceEvents": [{"ph": "X", "ts": 1}, ]}',
    b'{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "name": "a\\"}"}',  # truncated in a string
    b'{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "args": {"a": [1}}]}',
    b'{"traceEvents": [{"ph": "X", "ts": 1}]} trailing',
    b'{"traceEvents": [{"ph": "X", "ts": 1}], "x": }',
])
@pytest.mark.parametrize("block", [1, 7, 4096])
def test_invalid_documents_in_blocks_get_the_general_readers_error(tmp_path, monkeypatch, text, block):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    monkeypatch.setattr(stream, "BLOCK", block)
    assert stream.scan_stream(path, report_mod._read_whole) is None
    with pytest.raises(ReportError) as fast:
        build_report([path])
    with monkeypatch.context() as m:
        _general(m)
        with pytest.raises(ReportError) as slow:
            build_report([path])
    assert str(fast.value) == str(slow.value)


def test_an_event_bigger_than_a_block_and_strings_that_look_like_brackets(tmp_path, monkeypatch):
    tricky = ['}]{[', '"}', "\\", "\\\"}", "a\\\\", "}" * 50]
    events = [{"ph": "X", "cat": "kernel", "name": t, "ts": i, "dur": 1, "pid": 0, "tid": 1,
               "args": {"k" + t: [t, {"x": t}]}} for i, t in enumerate(tricky)]
    events.append({"ph": "X", "cat": "kernel", "name": "big", "ts": 99, "dur": 1, "pid": 0, "tid": 1,
                   "args": {"blob": "x" * 10_000}})
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps({"traceEvents": events, "tail": "]}"}))
    for block in (1, 5, 333, 1 << 20):
        monkeypatch.setattr(stream, "BLOCK", block)
        assert len(_same_columns(path)) == len(events)
    _same_report(monkeypatch, [path])


def test_truncated_gzip_in_blocks(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": [{"ph": "X", "ts": i} for i in range(5000)]}).encode())
                     [:-40])
    monkeypatch.setattr(stream, "BLOCK", 1000)
    with pytest.raises(ReportError, match="not a readable gzip file"):
        build_report([path])


@pytest.mark.parametrize("case", ["over-limit", "gzip-bomb", "trailing-garbage", "two-members"])
def test_input_limits_and_gzip_oddities_read_as_the_whole_reader_does(tmp_path, monkeypatch, case):
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 5}", "ts": i, "dur": 1, "pid": 0, "tid": 1}
              for i in range(2000)]
    text = json.dumps({"traceEvents": events}).encode()
    path = tmp_path / ("t.json" if case == "over-limit" else "t.json.gz")
    if case == "over-limit":
        path.write_bytes(text)
        monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", "4K")
    elif case == "gzip-bomb":
        path.write_bytes(gzip.compress(text))
        monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", str(len(gzip.compress(text)) + 100))
    elif case == "trailing-garbage":
        path.write_bytes(gzip.compress(text) + b"garbage after the member")
    else:
        half = len(text) // 2
        path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    monkeypatch.setattr(stream, "BLOCK", 1000)
    if case in ("over-limit", "gzip-bomb"):
        assert stream.scan_stream(path, report_mod._read_whole) is None
    try:
        fast = _result([path])
    except ReportError as exc:
        fast = str(exc)
    with monkeypatch.context() as m:
        _general(m)
        try:
            slow = _result([path])
        except ReportError as exc:
            slow = str(exc)
    assert fast == slow
    if case in ("over-limit", "gzip-bomb"):
        assert "input limit" in fast
    else:
        assert fast[0]["tables"]["by_name"]["rows"]
