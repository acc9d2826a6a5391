"""The store's rows: export_parquet (from the TraceBuilder's columns) and convert (from the JSON the
same builder writes) give the same tables, in any chunking; ranks come from where they should;
a store grows by ranks, refuses a rank it has, replaces one on request, and concurrent writers of
distinct ranks never clash."""
from __future__ import annotations

import gzip
import json
import multiprocessing
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.trace.read.store import open_store
from xpuprof.trace.store_schema import MANIFEST, TABLES
from xpuprof.trace.write.kineto_store import ConvertError, convert_trace
from xpuprof.trace.write.parquet import write_store

from storehelp import core_builders, synthetic_rank

META_FROM_SOURCE = {"writer", "sources", "header_json", "rank_source"}  # what differs by construction between the two paths


def tables(store, rank: int = 0) -> dict[str, pa.Table]:
    out = {}
    for t in TABLES:
        out[t] = pq.read_table(store / f"rank={rank}" / f"{t}.parquet").sort_by("idx")
    out["rank"] = pq.read_table(store / f"rank={rank}" / "rank.parquet")
    return out


def assert_same_rows(a: dict, b: dict) -> None:
    for name in a:
        ta, tb = a[name], b[name]
        assert ta.num_rows == tb.num_rows, name
        for col in ta.column_names:
            if name == "rank" and col in META_FROM_SOURCE:
                continue
            x, y = ta[col].to_pylist(), tb[col].to_pylist()
            same = [u == v or (isinstance(u, float) and isinstance(v, float) and u != u and v != v)
                    for u, v in zip(x, y)]
            assert all(same), (name, col, [(u, v) for u, v, s in zip(x, y, same) if not s][:3])


@pytest.mark.parametrize("chunk_bytes", [None, 997])
def test_export_parquet_equals_convert_of_the_json_it_would_write(tmp_path, chunk_bytes):
    b = core_builders().mixed_builder(300)
    write_store(b, tmp_path / "direct", rank=0)
    write_chrome_trace(b, tmp_path / "t.json.gz")
    convert_trace(tmp_path / "t.json.gz", tmp_path / "converted", rank=0, chunk_bytes=chunk_bytes)
    assert_same_rows(tables(tmp_path / "direct"), tables(tmp_path / "converted"))


@pytest.mark.parametrize("with_external_id", [False, True])
def test_row_args_from_one_blob_are_written_as_the_json_writer_writes_them(tmp_path, with_external_id):
    """Host ranges' args as the recorder hands them (RowArgs: one blob, a span per row; empty and {}
    mean none); an "External id" among them takes the generic path, which merges it."""
    import numpy as np

    from xpuprof.clock import BASE_TIME_NS
    from xpuprof.trace.builder.builder import TraceBuilder
    from xpuprof.trace.builder.columns import RowArgs

    objs = [b'{"i":1}', b"", b"{}", b'{"s":"x","v":[1,2]}', b'{"f":0.5}'] * 40
    if with_external_id:
        objs[7] = b'{"External id":77,"j":2}'
    blob = b"junk" + b"".join(objs)
    lens = np.array([len(o) for o in objs])
    starts = 4 + np.cumsum(lens) - lens
    b = TraceBuilder(pid=1)
    n = len(objs)
    b.add_slices(names=[f"range{i % 3}" for i in range(n)], ts=BASE_TIME_NS + 10**9 + np.arange(n) * 1000,
                 dur=np.full(n, 500), pid=1, tid=1, cat="user_annotation", external_id=np.arange(n) % 5,
                 row_args=RowArgs(blob, starts, lens))
    write_store(b, tmp_path / "direct", rank=0)
    write_chrome_trace(b, tmp_path / "t.json")
    convert_trace(tmp_path / "t.json", tmp_path / "converted", rank=0)
    direct = tables(tmp_path / "direct")
    assert_same_rows(direct, tables(tmp_path / "converted"))
    args = direct["slices"]["args"].to_pylist()
    assert args[0] == '{"i":1}' and args[1] is None and args[2] is None and json.loads(args[3]) == {"s": "x", "v": [1, 2]}


def test_profile_export_parquet_equals_convert(sim_metrics, tmp_path):
    prof, trace, store = sim_metrics
    convert_trace(trace, tmp_path / "c", rank=0)
    direct, converted = tables(store), tables(tmp_path / "c")
    assert_same_rows(direct, converted)
    assert direct["slices"].num_rows > 50 and direct["counters"].num_rows > 0 and direct["flows"].num_rows > 0
    # per-kernel metrics slices keep their args; kernels their typed columns
    kernels = direct["slices"].filter(pa.compute.equal(direct["slices"]["cat"].cast(pa.string()), "kernel"))
    assert kernels.num_rows and all(v is not None for v in kernels["correlation"].to_pylist())


def test_strings_are_dictionary_encoded_and_times_exact_ns(tmp_path):
    b = synthetic_rank(0)
    store = tmp_path / "s"
    write_store(b, store)
    schema = pq.read_schema(store / "rank=0" / "slices.parquet")
    assert pa.types.is_dictionary(schema.field("name").type) and pa.types.is_dictionary(schema.field("cat").type)
    pf = pq.ParquetFile(store / "rank=0" / "slices.parquet")
    assert "RLE_DICTIONARY" in str(pf.metadata.row_group(0).column(schema.get_field_index("name")).encodings)
    # 4400680850787.091 µs does not survive as a double: ts is exact from the text
    doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 4400680850787.091,
                            "dur": 2.113, "args": {"stream": 7, "correlation": 5}}]}
    path = tmp_path / "one.json"
    path.write_text(json.dumps(doc))
    convert_trace(path, tmp_path / "one", rank=0)
    row = pq.read_table(tmp_path / "one" / "rank=0" / "slices.parquet").to_pylist()[0]
    assert (row["ts"], row["dur"], row["stream"], row["correlation"]) == (4400680850787091, 2113, 7, 5)
    meta = open_store(tmp_path / "one").meta(0)
    assert meta["ts_kind"] == "float" and meta["rank_source"] == "given"


def test_rank_comes_from_distributed_info_then_the_name_then_the_position(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "job.json").write_text(json.dumps({"distributedInfo": {"rank": 5}, "traceEvents": ev}))
    (tmp_path / "in" / "w.rank-7.pt.trace.json").write_text(json.dumps({"traceEvents": ev}))
    (tmp_path / "in" / "plain.json").write_text(json.dumps({"traceEvents": ev}))
    with gzip.open(tmp_path / "in" / "tail.json.gz", "wt") as f:  # distributedInfo after traceEvents
        f.write(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 9}}))
    done = subprocess.run([sys.executable, "-m", "xpuprof", "convert", str(tmp_path / "in"), "-o",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    st = open_store(tmp_path / "s")
    sources = {r: (st.meta(r)["rank_source"], st.meta(r)["sources"][0].rsplit("/", 1)[1]) for r in st.ranks}
    # sorted inputs: job.json (0), plain.json (1), tail.json.gz (2), w.rank-7 (3)
    assert sources == {5: ("distributedInfo", "job.json"), 1: ("position", "plain.json"),
                       9: ("distributedInfo", "tail.json.gz"), 7: ("file name", "w.rank-7.pt.trace.json")}
    assert any("position" in w for w in st.meta(1)["warnings"])


def test_a_store_grows_by_ranks_refuses_a_rank_it_has_and_replaces_on_request(tmp_path):
    store = tmp_path / "s"
    write_store(synthetic_rank(0), store)
    write_store(synthetic_rank(1), store)
    assert open_store(store).ranks == [0, 1]
    with pytest.raises(ValueError, match="already holds rank 1.*--replace"):
        write_store(synthetic_rank(1), store)
    before = pq.read_table(store / "rank=1" / "slices.parquet").num_rows
    write_store(synthetic_rank(1, steps=2), store, replace=True)
    after = pq.read_table(store / "rank=1" / "slices.parquet").num_rows
    assert after < before and open_store(store).ranks == [0, 1]
    assert not [p for p in store.iterdir() if p.name.startswith(".")]  # no temporary partition left


def test_two_inputs_with_one_rank_in_one_run_are_mixed_ranks(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps({"distributedInfo": {"rank": 3}, "traceEvents": ev}))
    taken: dict[int, str] = {}
    convert_trace(tmp_path / "a.json", tmp_path / "s", taken=taken, replace=True)
    with pytest.raises(ConvertError, match=r"b\.json: rank 3 .*a\.json.*mixed ranks"):
        convert_trace(tmp_path / "b.json", tmp_path / "s", taken=taken, replace=True)


def _write_rank(args) -> str:
    store, rank = args
    try:
        write_store(synthetic_rank(rank, steps=3), store, rank=rank)
        return "ok"
    except ValueError as exc:
        return str(exc)


@pytest.mark.slow  # writer processes
def test_concurrent_writers_of_distinct_ranks_never_clash_and_one_rank_is_written_once(tmp_path):
    store = tmp_path / "s"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        got = pool.map(_write_rank, [(store, r) for r in range(6)] + [(store, 6)] * 3)
    assert got[:6] == ["ok"] * 6
    assert got[6:].count("ok") == 1  # three writers of rank 6 at once: one wins, the others are told
    assert all("already holds rank 6" in g for g in got[6:] if g != "ok")
    st = open_store(store)
    assert st.ranks == list(range(7))
    assert {pq.read_table(st.partitions[r].file("slices")).num_rows for r in st.ranks} == {3 + 3 * 20 * 2}
    assert json.loads((store / MANIFEST).read_text())["schema_version"] == 1


def test_events_the_store_has_no_table_for_are_counted_and_said(tmp_path, caplog):
    ev = [{"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "pid": 1, "tid": 1, "ts": 2},
          {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
          {"ph": "C", "name": "c", "pid": 1, "ts": 3, "args": {"v": "many"}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    got = convert_trace(tmp_path / "t.json", tmp_path / "s", rank=0)
    assert got.not_stored == {"'B' events": 1, "'E' events": 1, "counter values that are not numbers": 1}
    meta = open_store(tmp_path / "s").meta(0)
    assert json.loads(meta["not_stored_json"]) == got.not_stored
    assert any("3 events not stored" in w for w in meta["warnings"])
    assert "not stored" in caplog.text


def test_streamed_reading_keeps_bounded_chunks(tmp_path):
    """A trace far larger than the chunk converts through many chunks with the same rows."""
    b = synthetic_rank(0, steps=40)
    write_chrome_trace(b, tmp_path / "t.json")
    size = (tmp_path / "t.json").stat().st_size
    convert_trace(tmp_path / "t.json", tmp_path / "small", rank=0, chunk_bytes=4096)
    convert_trace(tmp_path / "t.json", tmp_path / "big", rank=0)
    assert size > 50 * 4096
    a, c = tables(tmp_path / "small"), tables(tmp_path / "big")
    assert_same_rows(a, c)
