"""Bad stores and bad traces get one clear line each (exit status 2); a bad input of convert does not
stop the others."""
from __future__ import annotations

import gzip
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xpuprof.cli import main
from xpuprof.trace.write.parquet import write_store

from storehelp import synthetic_rank


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    for r in (0, 1):
        write_store(synthetic_rank(r, steps=3), path)
    return path


def one_line(capsys, argv) -> str:
    rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", [["analyze", "{s}", "temporal"], ["report", "{s}"]])
def test_truncated_parquet_is_one_line(store, capsys, command):
    f = store / "rank=1" / "slices.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    line = one_line(capsys, [a.format(s=store) for a in command])
    assert "rank=1/slices.parquet" in line and "truncated" in line


def test_corrupt_parquet_inside_is_one_line(store, capsys):
    f = store / "rank=0" / "slices.parquet"
    raw = bytearray(f.read_bytes())
    raw[8:len(raw) // 2] = b"\x00" * (len(raw) // 2 - 8)  # magic bytes intact, pages zeroed
    f.write_bytes(bytes(raw))
    line = one_line(capsys, ["analyze", str(store), "temporal"])
    assert str(f) in line and "does not match the checksum written with it" in line  # checked before DuckDB reads


def test_wrong_schema_version_is_one_line(store, capsys):
    manifest = store / "xpuprof-store.json"
    manifest.write_text(json.dumps({"format": "xpuprof-store", "schema_version": 2}))
    line = one_line(capsys, ["analyze", str(store), "temporal"])
    assert "schema version 2" in line and "version 1" in line
    manifest.write_text(json.dumps({"format": "xpuprof-store", "schema_version": 1}))
    meta = store / "rank=1" / "rank.parquet"
    table = pq.read_table(meta)
    table = table.set_column(table.schema.get_field_index("schema_version"), "schema_version",
                             pa.array([3], pa.int32()))
    pq.write_table(table.replace_schema_metadata({b"xpuprof.schema_version": b"3"}), meta)
    line = one_line(capsys, ["report", str(store)])
    assert "rank=1/rank.parquet" in line and "schema version 3" in line


def test_mixed_ranks_is_one_line(store, capsys):
    os.rename(store / "rank=1", store / "rank=5")
    line = one_line(capsys, ["analyze", str(store), "kernels"])
    assert "rank=5" in line and "rank 1" in line and "mixed ranks" in line


def test_missing_table_and_stray_entry_are_one_line(store, capsys):
    (store / "rank=0" / "flows.parquet").unlink()
    line = one_line(capsys, ["analyze", str(store), "temporal"])
    assert "rank=0 is missing flows.parquet" in line
    shutil.rmtree(store / "rank=0")
    (store / "notes.txt").write_text("x")
    line = one_line(capsys, ["analyze", str(store), "temporal"])
    assert "'notes.txt'" in line and "no rank partition" in line


def test_neither_a_store_nor_traces_is_one_line(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    line = one_line(capsys, ["analyze", str(tmp_path / "d"), "temporal"])
    assert "not a trace store" in line and "*.json" in line
    assert "no such" in one_line(capsys, ["analyze", str(tmp_path / "nope"), "queue"])
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [')
    assert "t.json" in one_line(capsys, ["analyze", str(trace), "temporal"])


def test_a_store_is_given_alone_to_report(store, tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    line = one_line(capsys, ["report", str(store), str(trace)])
    assert "is a trace store" in line and "alone" in line


def test_an_option_the_analysis_does_not_take_is_one_line(store, capsys):
    line = one_line(capsys, ["analyze", str(store), "temporal", "--events"])
    assert "temporal takes no --events" in line and "--include-last-step" in line


def test_convert_says_each_bad_input_once_and_converts_the_rest(tmp_path, capsys):
    good = {"distributedInfo": {"rank": 0},
            "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}
    d = tmp_path / "in"
    d.mkdir()
    (d / "a_good.json").write_text(json.dumps(good))
    body = json.dumps({**good, "distributedInfo": {"rank": 1}}).encode()
    with gzip.open(d / "b_cut.json.gz", "wb") as f:
        f.write(body)
    (d / "b_cut.json.gz").write_bytes((d / "b_cut.json.gz").read_bytes()[:-12])
    (d / "c_invalid.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}')
    (d / "d_nokey.json").write_text('{"events": []}')
    (d / "e_notobject.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1}, 7]}')
    (d / "f_merged.json").write_text(json.dumps({"mergedRanks": {"ranks": [0, 1]}, **good}))
    (d / "g_cut.json").write_text(json.dumps(good)[:-40])
    (d / "h_empty.json").write_text("")
    (d / "i_good.json").write_text(json.dumps({**good, "distributedInfo": {"rank": 2}}))
    rc = main(["convert", str(d), str(tmp_path / "missing.json"), "-o", str(tmp_path / "s")])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    bad = {ln.split(": ", 2)[1] for ln in err if ln.startswith("xpuprof convert: ") and " <- " not in ln
           and " of " not in ln.split(": ", 1)[1][:12]}
    want = {"b_cut.json.gz", "c_invalid.json", "d_nokey.json", "e_notobject.json", "f_merged.json", "g_cut.json",
            "h_empty.json", "missing.json"}
    assert {os.path.basename(b) for b in bad} == want, err
    lines = {w: next(ln for ln in err if w in ln) for w in want}
    assert "gzip" in lines["b_cut.json.gz"] and "truncated" in lines["b_cut.json.gz"]
    assert "not valid JSON" in lines["c_invalid.json"]
    assert "no traceEvents" in lines["d_nokey.json"]
    assert "traceEvents[1]" in lines["e_notobject.json"] and "not an event object" in lines["e_notobject.json"]
    assert "merged view of ranks [0, 1]" in lines["f_merged.json"]
    assert "truncated" in lines["g_cut.json"] or "not valid JSON" in lines["g_cut.json"]
    assert "no such trace file" in lines["missing.json"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.name.startswith("rank=")) == ["rank=0", "rank=2"]
    assert any("2 of 9 trace(s)" in ln for ln in err)


def test_convert_applies_the_input_limit_to_the_file_and_to_what_gzip_holds(tmp_path, capsys, monkeypatch):
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(300)]
    d = tmp_path / "in"
    d.mkdir()
    (d / "a_small.json").write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events[:2]}))
    (d / "b_large.json").write_text(json.dumps({"distributedInfo": {"rank": 1}, "traceEvents": events}))
    with gzip.open(d / "c_bomb.json.gz", "wb") as f:  # a few KiB stored, more than the limit inside
        f.write(json.dumps({"distributedInfo": {"rank": 2}, "traceEvents": events * 20}).encode())
    assert (d / "c_bomb.json.gz").stat().st_size < 16 << 10
    monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", "16K")
    rc = main(["convert", str(d), "-o", str(tmp_path / "s")])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    large = next(ln for ln in err if "b_large.json" in ln)
    bomb = next(ln for ln in err if "c_bomb.json.gz" in ln)
    for line in (large, bomb):
        assert "16 KiB input limit" in line and "XPUPROF_MAX_INPUT_BYTES" in line, line
    assert "decompressed" in bomb
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.name.startswith("rank=")) == ["rank=0"]
