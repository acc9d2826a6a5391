"""``xpuprof report`` reads a trace in chunks (the one Kineto JSON reader's C path, ``trace.read.kineto_stream``):
its memory is bounded by a chunk, not the file, and what it gives equals one whole chunk and the reader
without its C part (orjson) exactly, wherever the chunks cut the document."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from xpuprof.analysis.report import ReportError, build_report
from xpuprof.trace.read import kineto_stream, load, source
from xpuprof.trace.read.kineto import read_trace
from xpuprof.trace.table.compare import differences

from .conftest import make_rank_trace
from .test_report_readers import _general, _kineto_like, _result, _write

pytestmark = pytest.mark.skipif(kineto_stream.native() is None,
                                reason="xpuprof._native.tracescan is not built (python setup.py build_ext --inplace)")

BLOCKS = [1, 97, 4096]  # bytes per chunk: every event cut somewhere, and chunks holding many events


def _same_columns(path):
    """The table read in the chunks set now equals the one read in one chunk."""
    got = read_trace(path)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kineto_stream, "CHUNK_BYTES", 1 << 30)
        whole = read_trace(path)
    assert differences(got, whole) == []
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
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", block)
    table = _same_columns(path)
    assert table.header()["after"] == doc["after"] and table.traces[0].events == len(doc["traceEvents"])
    fast = _same_report(monkeypatch, [path])
    assert fast[0]["tables"]["telemetry"]["rows"] and fast[0]["ranks"] == [3]
    _same_report(monkeypatch, [path], categories=["cpu_op", "user_annotation"])


@pytest.mark.parametrize("block", BLOCKS)
def test_builder_traces_with_metrics_in_blocks(tmp_path, monkeypatch, block):
    paths = [make_rank_trace(tmp_path / f"w.rank{r}.pt.trace.json", r, offset_ns=r * 5_000_000) for r in range(2)]
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", block)
    for p in paths:
        _same_columns(p)
    fast = _same_report(monkeypatch, paths, by_rank=True)
    assert fast[2]  # per-kernel metric units: the metric slices were read whole


def test_report_never_holds_the_whole_document(tmp_path, monkeypatch):
    """The report's reader does not read the file's bytes whole (its peak would grow with the file)."""
    paths = [make_rank_trace(tmp_path / "w.rank0.pt.trace.json", 0, offset_ns=0),
             _write(tmp_path / "k.json.gz", _kineto_like(np.random.default_rng(9)), gz=True)]
    expected = [_result([p]) for p in paths]
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 4096)

    def whole_read(*args, **kw):
        raise AssertionError(f"the whole document was read: {args}")

    monkeypatch.setattr(source, "read_document", whole_read)
    monkeypatch.setattr(load, "load", whole_read)
    monkeypatch.setattr(source.TraceInput, "read", lambda self, n=-1, _real=source.TraceInput.read:
                        _real(self, n) if n >= 0 else whole_read(self.path))
    assert [_result([p]) for p in paths] == expected


@pytest.mark.parametrize("text", [
    b'[{"ph": "X", "ts": 1}]',  # the bare-array form
    b'{"traceEvents": [{"ph": "X", "ts": 1}], "traceEvents": []}',  # twice
    b'{"meta": {"traceEvents": [{"ph": "X", "ts": 1}]}, "traceEvents": []}',  # nested first
    b'{"meta": {"traceEvents": [{"ph": "X", "ts": 1}]}}',  # nested only
    b'{"tr\\u0061ceEvents": [{"ph": "X", "name": "a", "ts": 1}]}',  # an escaped key
    b'{"note": "traceEvents", "traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}',  # the word as a value
])
def test_unusual_shapes_read_as_the_orjson_path_reads_them(tmp_path, monkeypatch, text):
    path = tmp_path / "odd.json"
    path.write_bytes(text)
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 3)
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
    if text.startswith(b'{"traceEvents": [{"ph": "X", "ts": 1}], "traceEvents"'):  # a repeated key: refused
        assert "two traceEvents keys" in fast
    else:
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
def test_invalid_documents_in_chunks_are_one_error_naming_the_file(tmp_path, monkeypatch, text, block):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", block)
    with pytest.raises(ReportError) as fast:
        build_report([path])
    with monkeypatch.context() as m:
        _general(m)
        with pytest.raises(ReportError) as slow:
            build_report([path])
    for err in (fast, slow):
        assert str(err.value).startswith(str(path)) and ("JSON" in str(err.value) or "truncated" in str(err.value))


def test_an_event_bigger_than_a_block_and_strings_that_look_like_brackets(tmp_path, monkeypatch):
    tricky = ['}]{[', '"}', "\\", "\\\"}", "a\\\\", "}" * 50]
    events = [{"ph": "X", "cat": "kernel", "name": t, "ts": i, "dur": 1, "pid": 0, "tid": 1,
               "args": {"k" + t: [t, {"x": t}]}} for i, t in enumerate(tricky)]
    events.append({"ph": "X", "cat": "kernel", "name": "big", "ts": 99, "dur": 1, "pid": 0, "tid": 1,
                   "args": {"blob": "x" * 10_000}})
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps({"traceEvents": events, "tail": "]}"}))
    for block in (1, 5, 333, 1 << 20):
        monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", block)
        assert len(_same_columns(path).slices) == len(events)
    _same_report(monkeypatch, [path])


def test_truncated_gzip_in_blocks(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": [{"ph": "X", "ts": i} for i in range(5000)]}).encode())
                     [:-40])
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 1000)
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
    monkeypatch.setattr(kineto_stream, "CHUNK_BYTES", 1000)
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
