"""The one C scanner (tracescan), on a document streamed in chunks or held whole, reads ordinary events as
columns; only what the columns cannot hold goes to the per-event path (a string pid, an integer beyond int64)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from xpuprof.trace.read.kineto_stream import KinetoStream

EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.25, "args": {"stream": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 12, "ts": 3, "dur": 4, "id": 9},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 12, "tid": 12, "ts": 3, "bp": "e"},
    {"ph": "i", "s": "g", "name": "mark", "pid": 12, "tid": 12, "ts": 3.25},
    {"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "t", "ts": 1, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "big", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "id": 2 ** 70},
]


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    return path


def test_stream_scanner_reads_ordinary_events_as_columns(trace):
    (chunk,) = list(KinetoStream(trace).chunks())
    assert chunk.complex.tolist() == [False, False, False, False, True, True]
    assert bytes(chunk.aux[2:4]).decode() == "eg"
    assert chunk.exact[0].tolist() == [1500, 2250] and chunk.exact[1].tolist() == [3000, 4000]


def test_the_scanner_over_a_whole_document_reads_ordinary_events_as_columns(trace):
    from xpuprof.trace.read.scan import scan

    sc = scan(trace)
    assert sc is not None and np.flatnonzero(sc.complex).tolist() == [4, 5]
