"""``xpuprof.trace.read.load`` on files that are not (whole) Chrome traces: one clear TraceLoadError each."""
import gzip

import pytest

from xpuprof.trace.read.load import TraceLoadError, load


def test_truncated_gzip_is_a_load_error(tmp_path):
    whole = gzip.compress(b'{"traceEvents": [' + b'{"ph": "i", "name": "x", "ts": 1},' * 2000 + b"{}]}")
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceLoadError, match=r"t\.pt\.trace\.json\.gz: is not a readable gzip file"):
        load(path)


def test_corrupt_gzip_is_a_load_error(tmp_path):
    path = tmp_path / "c.json.gz"
    path.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(TraceLoadError, match="not a readable gzip file"):
        load(path)


@pytest.mark.parametrize("text, where", [("[1, 2]", r"traceEvents\[0\].* is not an event object"),
                                         ('{"traceEvents": [{"ph": "X"}, "oops"]}', r"traceEvents\[1\].* is not an event object")])
def test_events_that_are_not_objects_are_a_load_error(tmp_path, text, where):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(TraceLoadError, match=where):
        load(path)


def test_bare_array_of_events_still_loads(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('[{"ph": "i", "name": "x", "ts": 1}]')
    assert load(path) == {"traceEvents": [{"ph": "i", "name": "x", "ts": 1}]}
