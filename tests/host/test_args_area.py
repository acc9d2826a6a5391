"""A range's dict args are encoded as JSON at the call, in C, into one contiguous area of the recorder
(``hostrec.ArgsArea``); stop hands that area to the trace as it is (``RowArgs``), and the writer copies
each row's text from it: no Python object per range at the call, at stop or at export."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpuprof
from xpuprof.host import recorder
from xpuprof.profiler import assemble
from xpuprof.trace import load, write_chrome_trace
from xpuprof.trace.builder.columns import RowArgs
from xpuprof.trace.write import rows as rows_mod
from xpuprof.trace.write import rows_native

needs_c = pytest.mark.skipif(not recorder.FAST_PATH, reason="the C record_function (xpuprof._native.hostrec) "
                             "is not built")


def _entries(area) -> list[bytes]:
    blob, ends = recorder.area_arrays(area)
    starts = np.concatenate([[0], ends[:-1]])
    return [blob[s:e].tobytes() for s, e in zip(starts.tolist(), ends.tolist())]


def _as_orjson_reads(d: dict):
    """What the same dict reads back as through orjson (non-finite floats as null)."""
    return orjson.loads(orjson.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                      for k, v in d.items()}))


# ----------------------------------------------------------------------------- the encoder
plain_values = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
plain_dicts = st.dictionaries(st.text(max_size=12), plain_values, max_size=6)


@needs_c
@settings(max_examples=300, deadline=None)
@given(plain_dicts)
def test_the_c_encoder_writes_what_orjson_reads_back(d):
    area = recorder.ArgsArea()
    k = area.encode(d)
    assert k == 0
    text = _entries(area)[0]
    assert orjson.loads(text) == _as_orjson_reads(d)
    if not any(isinstance(v, float) for v in d.values()):  # byte for byte what orjson writes
        assert text == orjson.dumps(d)


@needs_c
def test_the_c_encoder_leaves_what_is_not_plain_to_the_caller():
    area = recorder.ArgsArea()
    for d in ({"nested": {"a": 1}}, {"list": [1]}, {1: "int key"}, {"big": 2**64}, {"small": -2**63 - 1},
              {"s": "lone \ud800"}, {"\udfff": 1}, {"np": np.int64(3)}, {"sub": type("S", (str,), {})("x")}):
        assert area.encode(d) is None, d
    from collections import OrderedDict

    assert area.encode(OrderedDict(a=1)) is None  # a dict subclass: its own methods may matter
    assert len(area) == 0 and len(bytes(memoryview(area))) == 0  # nothing half-written


@needs_c
def test_the_area_refuses_entries_while_read_and_counts_them():
    area = recorder.ArgsArea()
    assert area.encode({"a": 1}) == 0
    view = memoryview(area)
    assert area.encode({"a": 2}) < 0 and area.add(b'{"b":1}') < 0
    assert area.refused == 2
    view.release()
    assert area.encode({"a": 3}) == 1
    assert _entries(area) == [b'{"a":1}', b'{"a":3}']


# ----------------------------------------------------------------------------- recording and stop
def _record(rf, n: int):
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(n):
            with rf("step", {"i": i, "phase": "fwd", "lr": 0.5, "note": 'q"\n'}):
                pass
    return prof


@pytest.mark.parametrize("rf", [recorder.record_function, recorder.PurePythonRecordFunction],
                         ids=["C", "pure-Python"])
def test_dict_args_go_into_one_area_at_the_call_not_one_object_each(rf, monkeypatch):
    seen = {}
    real_build = assemble.build_trace

    def build(cycle, *a, **k):
        seen["objects"], seen["entries"] = list(cycle.recorder.args), len(cycle.recorder.args_area)
        return real_build(cycle, *a, **k)

    monkeypatch.setattr(assemble, "build_trace", build)
    prof = _record(rf, 500)
    assert seen == {"objects": [], "entries": 500}
    (batch,) = [b for b in prof.builder.slices if b.row_args is not None]
    assert isinstance(batch.row_args, RowArgs) and len(batch.row_args) == 500
    assert orjson.loads(batch.row_args[7]) == {"i": 7, "phase": "fwd", "lr": 0.5, "note": 'q"\n'}


@needs_c
def test_stop_hands_the_area_to_the_trace_without_copying_it(monkeypatch):
    areas = []
    real_build = assemble.build_trace
    monkeypatch.setattr(assemble, "build_trace",
                        lambda cycle, *a, **k: (areas.append(cycle.recorder.args_area), real_build(cycle, *a, **k))[1])
    prof = _record(recorder.record_function, 1000)
    (batch,) = [b for b in prof.builder.slices if b.row_args is not None]
    assert np.shares_memory(batch.row_args.blob, np.frombuffer(areas[0], np.uint8))


@pytest.mark.parametrize("layout", ["compact", "fixed"])
def test_export_reads_the_rows_from_the_area_without_a_python_object_each(layout, tmp_path, monkeypatch):
    if layout == "compact" and rows_native._rowfmt is None:
        pytest.skip("xpuprof._native.rowfmt is not built")
    prof = _record(xpuprof.record_function, 3000)
    monkeypatch.setattr(rows_native, "LAYOUT", layout)
    monkeypatch.setattr(rows_mod, "MAX_CHUNK_ROWS", 700)
    monkeypatch.setattr(rows_mod, "MIN_CHUNK_ROWS", 700)

    def per_row(*a):
        raise AssertionError("the writer took a row's args one by one")

    monkeypatch.setattr(RowArgs, "__getitem__", per_row)
    monkeypatch.setattr(RowArgs, "__iter__", per_row)
    events = load(prof.export_chrome_trace(tmp_path / "t.json"))["traceEvents"]
    steps = [e for e in events if e.get("name") == "step"]
    assert len(steps) == 3000
    assert steps[2999]["args"] == {"External id": steps[2999]["args"]["External id"], "i": 2999, "phase": "fwd",
                                   "lr": 0.5, "note": 'q"\n'}


def test_args_the_area_cannot_hold_are_kept_as_objects_and_written_at_stop(tmp_path):
    from collections import OrderedDict

    with xpuprof.profile(activities=["cpu"]) as prof:
        for args in ({"a": 1}, OrderedDict(b=2), {"c": {"nested": [1, 2]}}, {"d": 2**70}, {}, [("e", 5)]):
            with xpuprof.record_function("r", args):
                pass
    got = [e.get("args", {}) for e in load(prof.export_chrome_trace(tmp_path / "t.json"))["traceEvents"]
           if e.get("name") == "r"]
    got = [{k: v for k, v in a.items() if k != "External id"} for a in got]
    assert got[:3] == [{"a": 1}, {"b": 2}, {"c": {"nested": [1, 2]}}]
    assert "xpuprof_invalid_args" in got[3] and got[4] == {} and got[5] == {"e": 5}


def test_row_args_with_the_writers_own_key_take_the_generic_path(tmp_path):
    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("r", {"External id": "mine", "x": 1}):
            pass
    (e,) = [e for e in load(prof.export_chrome_trace(tmp_path / "t.json"))["traceEvents"] if e.get("name") == "r"]
    assert e["args"]["x"] == 1 and e["args"]["External id"] == "mine"  # merged as the generic path does


def test_the_pure_python_recorder_fills_its_own_area_the_same_way(tmp_path):
    """Without the C part (a stale hostrec is refused), the Python path stores the same entries."""
    code = (
        "import sys, types, warnings, orjson\n"
        "sys.modules['xpuprof._native.hostrec'] = types.ModuleType('xpuprof._native.hostrec')\n"
        "warnings.simplefilter('ignore')\n"
        "import xpuprof\n"
        "from xpuprof.host import recorder\n"
        "assert not recorder.FAST_PATH\n"
        "with xpuprof.profile(activities=['cpu']) as prof:\n"
        "    for i in range(50):\n"
        "        with xpuprof.record_function('s', {'i': i}):\n"
        "            pass\n"
        f"path = prof.export_chrome_trace({str(tmp_path / 'p.json')!r})\n"
        "args = [e['args']['i'] for e in orjson.loads(open(path, 'rb').read())['traceEvents'] if e.get('name') == 's']\n"
        "assert args == list(range(50)), args\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_row_args_read_like_the_list_they_replace():
    blob = b'{"a":1}{}{"b":"x"}'
    ra = RowArgs(blob, np.array([0, 7, 9, 0]), np.array([7, 2, 9, 0]))
    assert list(ra) == [b'{"a":1}', None, b'{"b":"x"}', None] and len(ra) == 4
    inner_blob, starts, lens = ra.inner()
    assert [bytes(inner_blob[s:s + n]) for s, n in zip(starts.tolist(), lens.tolist()) if n] == [b'"a":1', b'"b":"x"']
    with pytest.raises(ValueError, match="3 starts for 2 lengths"):
        RowArgs(blob, np.array([0, 1, 2]), np.array([1, 1]))
