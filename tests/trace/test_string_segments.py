"""Strings handed to the trace in bulk (a recorder's NameTable): read back by id, JSON-escaped exactly as
orjson escapes them, by the C escaper when it is built (the per-string fallback kept ~4 KB per name)."""
from __future__ import annotations

import os

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xpuprof.trace.builder.strings import StringTable, native_escaper

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


def _segment(table: StringTable, texts: list[str]) -> int:
    enc = [t.encode() for t in texts]
    ends = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(e) for e in enc], out=ends[1:])
    return table.add_segment(np.frombuffer(b"".join(enc), np.uint8), ends)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(before=st.lists(TEXT, max_size=5), seg=st.lists(TEXT, min_size=1, max_size=40), after=st.lists(TEXT, max_size=5))
def test_segment_strings_read_back_and_escape_as_orjson(before, seg, after):
    table = StringTable()
    for t in before:
        table.intern(t)
    first = _segment(table, seg)
    for t in after:
        table.intern(t)
    assert [table.lookup(first + i) for i in range(len(seg))] == seg
    assert list(table.strings) == [table.lookup(i) for i in range(len(table))]
    ids = np.arange(len(table), dtype=np.int64)[::2]
    blob, offsets = table.json_tokens(ids, lambda sid: orjson.dumps(table.lookup(sid)))
    assert [blob[offsets[k]:offsets[k + 1]] for k in range(len(ids))] == [orjson.dumps(table.lookup(int(i)))
                                                                          for i in ids]


def test_the_c_escaper_is_found_when_built():
    from xpuprof import _native

    built = any(n.startswith("rowfmt.") and n.endswith((".so", ".pyd")) for n in os.listdir(_native.__path__[0]))
    if not built:
        pytest.skip("xpuprof._native.rowfmt is not built here (no C compiler)")
    assert native_escaper() is not None


def test_a_trace_of_distinct_names_holds_every_name_as_recorded(tmp_path):
    """More distinct names than a chunk has rows: the writer makes each chunk's tokens on its own."""
    import json

    import xpuprof

    n = 150_000
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(n):
            with xpuprof.record_function(f'step {i} "q" \\ \u00e9\n'):
                pass
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    names = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sorted(names) == sorted(f'step {i} "q" \\ \u00e9\n' for i in range(n))
