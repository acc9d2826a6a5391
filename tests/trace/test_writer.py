"""The Kineto-compatible writer: shapes, number formats, header, files; columnar == generic."""
import gzip
import json
import re
import threading
import zlib

import numpy as np
import orjson
import pytest

from xpuprof.activity import ActivityType
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import ArgColumn, TraceBuilder, load, write_chrome_trace
from xpuprof.trace.write import rows_native as rows_native_mod
from xpuprof.trace.write import chrome as chrome_mod
from xpuprof.trace.write import rows as rows_mod
from xpuprof.trace.write import rows_native as columnar_mod
from xpuprof.trace.write import sinks as sinks_mod
from xpuprof.trace.builder.columns import hex_column

pytestmark = pytest.mark.slow


def write(b, tmp_path, name="t.json", **kw):
    path = write_chrome_trace(b, tmp_path / name, **kw)
    return path, load(path)


LAYOUTS = ["fixed"] + (["compact"] if columnar_mod._rowfmt is not None else [])


@pytest.fixture(params=LAYOUTS)
def layout(request, monkeypatch):
    monkeypatch.setattr(columnar_mod, "LAYOUT", request.param)
    return request.param


@pytest.mark.parametrize("legacy", [False, True])
def test_columnar_output_equals_generic(mixed, tmp_path, legacy, layout):
    _, fast = write(mixed, tmp_path, "fast.json", vendor_categories=legacy)
    _, ref = write(mixed, tmp_path, "ref.json", vendor_categories=legacy, columnar=False)
    assert fast["traceEvents"] == ref["traceEvents"]
    assert len(fast["traceEvents"]) == mixed.event_count() + 9  # + 5 M rows, 3 span rows, window end


def test_columnar_equals_generic_large_multi_chunk(tmp_path, make_mixed, layout):
    b = make_mixed(n=70_000, seed=3)
    _, fast = write(b, tmp_path, "fast.json")
    _, ref = write(b, tmp_path, "ref.json", columnar=False)
    assert fast["traceEvents"] == ref["traceEvents"]


def test_long_strings_fall_back_and_keep_every_event(tmp_path, layout):
    b = TraceBuilder(pid=1)
    names = ["short", "L" * 5000, "mid" * 10] * 10
    b.add_slices(names=names, ts=BASE_TIME_NS + np.arange(30), dur=1, pid=0, tid=0, cat="kernel",
                 args={"s": ArgColumn("str", b.strings.intern_many(["x" * 3000] + ["y"] * 29))})
    _, fast = write(b, tmp_path, "f.json")
    _, ref = write(b, tmp_path, "r.json", columnar=False)
    key = lambda e: (e["ts"], e.get("name"), e["ph"])  # noqa: E731 - long rows are written after their chunk
    assert sorted(fast["traceEvents"], key=key) == sorted(ref["traceEvents"], key=key)


def test_ts_and_dur_exact_three_decimals(tmp_path, layout):
    b = TraceBuilder(pid=1)
    big = 7_889_238 * 10**9 - 1  # the largest offset inside one base-time bucket
    rel = np.array([0, 1, 999, 1000, 5_210_386_543, 4_000_000_000_000_123, big])
    b.add_slices(names=["n"] * len(rel), ts=BASE_TIME_NS + rel, dur=rel, pid=1, tid=1, cat="cpu_op")
    b.add_slices(names=["neg"], ts=[BASE_TIME_NS - 10**9], dur=[-5], pid=1, tid=1, cat="cpu_op")
    for columnar in (True, False):
        path, _ = write(b, tmp_path, f"t{columnar}.json", columnar=columnar)
        text = path.read_text()
        got = [(int(a), b_) for a, b_ in re.findall(r'"ts":\s*(\d+)\.(\d+),"dur"', text)]
        assert [f"{a}.{f}" for a, f in got] == [f"{v // 1000}.{v % 1000:03d}" for v in rel] + ["0.000"]
        durs = re.findall(r'"dur":\s*(\d+\.\d+)', text)
        assert durs == [f"{v // 1000}.{v % 1000:03d}" for v in rel] + ["0.000"]


def test_header_key_order_base_time_and_distributed_info(tmp_path):
    b = TraceBuilder(pid=1)
    b.set_metadata("trace_id", "abc")
    b.set_distributed_info({"backend": "nccl", "rank": 3, "world_size": 8})
    b.add_device_properties({"id": 0, "name": "Sim GPU"})
    b.count_dropped("out_of_window", 2)
    path, data = write(b, tmp_path, "t.json")
    keys = list(data)
    assert keys[:2] == ["schemaVersion", "deviceProperties"]
    assert keys[-4:] == ["displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName"]
    assert keys.index("trace_id") < keys.index("distributedInfo") < keys.index("displayTimeUnit")
    assert data["schemaVersion"] == 1 and data["displayTimeUnit"] == "ms"
    assert data["baseTimeNanoseconds"] == BASE_TIME_NS and BASE_TIME_NS % (7_889_238 * 10**9) == 0
    assert data["dropped_records"] == {"out_of_window": 2}
    assert data["deviceProperties"] == [{"id": 0, "name": "Sim GPU"}]
    text = path.read_text()
    assert re.search(r'"rank":\s+(\d+)', text).group(1) == "3"  # HTA's regex
    assert text.index('"rank": 3') < text.index('"traceEvents"')
    assert data["traceName"] == str(tmp_path / "t.json")


def _by_ph(events, ph):
    return [e for e in events if e["ph"] == ph]


def test_event_shapes(mixed, tmp_path):
    path, data = write(mixed, tmp_path)
    evs = data["traceEvents"]
    x = _by_ph(evs, "X")
    assert list(x[0])[:7] == ["ph", "cat", "name", "pid", "tid", "ts", "dur"]
    with_ext = [e for e in x if "args" in e and "External id" in e["args"]]
    assert with_ext and all(next(iter(e["args"])) == "External id" for e in with_ext)
    assert all(e["args"]["External id"] != 0 for e in with_ext)
    assert any(e["cat"].endswith("runtime") and "args" not in e for e in x)  # no empty args on X
    assert all(e["dur"] >= 0 for e in x)
    c = _by_ph(evs, "C")
    assert all("args" in e for e in c) and any(e["args"] == {} for e in c)
    assert list(c[0]) == ["ph", "cat", "name", "pid", "tid", "ts", "args"]
    s, f = _by_ph(evs, "s"), _by_ph(evs, "f")
    assert s and f and all("bp" not in e for e in s) and all(e["bp"] == "e" for e in f)
    assert all(e["cat"] == e["name"] and isinstance(e["id"], int) for e in s + f)
    assert list(f[0]) == ["ph", "id", "pid", "tid", "ts", "cat", "name", "bp"]
    inst = [e for e in _by_ph(evs, "i") if e["name"] == "inst"][0]
    assert inst["s"] == "t" and inst["cat"] == "cpu_instant_event" and "args" not in inst
    m = _by_ph(evs, "M")
    assert all(list(e) == ["ph", "name", "ts", "pid", "tid", "args"] and len(e["args"]) == 1 for e in m)
    assert {"name": "thread", } == m[[e["name"] for e in m].index("thread_name")]["args"]
    assert m[[e["name"] for e in m].index("thread_name")]["tid"] == 5  # sanitizeTid
    assert all(e["tid"] >= 0 for e in evs if isinstance(e.get("tid"), int))
    last = evs[-1]
    assert last == {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 2_000_000.0}


def test_spans_rows(mixed, tmp_path):
    _, data = write(mixed, tmp_path)
    evs = data["traceEvents"]
    span = [e for e in evs if e.get("cat") == "Trace"][0]
    assert span["name"] == "PyTorch Profiler (0)" and span["pid"] == "Spans" and span["tid"] == "PyTorch Profiler"
    assert span["args"] == {"Op count": 3} and span["dur"] == 999_999.0 and span["ts"] == 1.0
    sort = [e for e in evs if e["ph"] == "M" and e["pid"] == "Spans"][0]
    assert sort["args"] == {"sort_index": 0x20000000}
    it = [e for e in evs if e.get("name") == "Iteration Start: PyTorch Profiler"][0]
    assert it["pid"] == "Traces" and it["tid"] == "Trace PyTorch Profiler" and it["s"] == "g" and "cat" not in it


def test_vendor_categories_by_default_generic_on_request(tmp_path):
    """The default is what Kineto main / torch.profiler write (HTA keys on cuda_runtime)."""
    b = TraceBuilder(pid=1)
    b.add_slices(names=["cudaLaunchKernel"], ts=[BASE_TIME_NS], dur=[1], pid=1, tid=1, cat="cuda_runtime",
                 vendor="cuda")
    b.add_slice("zeDrv", BASE_TIME_NS, 1, 1, 1, cat="driver", vendor="xpu")
    cats = {e["cat"] for e in write(b, tmp_path, "a.json")[1]["traceEvents"] if e["ph"] == "X"}
    assert cats == {"cuda_runtime", "xpu_driver"}
    cats = {e["cat"] for e in write(b, tmp_path, "b.json", vendor_categories=False)[1]["traceEvents"]
            if e["ph"] == "X"}
    assert cats == {"runtime", "driver"}


def test_gzip_by_name_and_atomic_rename(mixed, tmp_path):
    path, data = write(mixed, tmp_path, "t.json.gz")
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert orjson.loads(gzip.decompress(raw))["traceEvents"] == data["traceEvents"]
    plain = write(mixed, tmp_path, "p.json")[0].read_bytes()
    assert plain[:1] == b"{" and json.loads(plain)["traceEvents"] == data["traceEvents"]  # stdlib json agrees
    assert not list(tmp_path.glob("*.tmp"))


def test_zlib_fallback_when_isal_missing(mixed, tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_isal(name, *a, **k):
        if name == "isal" or name.startswith("isal."):
            raise ImportError("no isal")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_isal)
    path = write_chrome_trace(mixed, tmp_path / "z.json.gz")
    assert orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_failed_write_leaves_no_file(mixed, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(chrome_mod, "span_events", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        write_chrome_trace(mixed, tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == []


def test_streams_in_chunks(tmp_path, monkeypatch, make_mixed, layout):
    b = make_mixed(n=5000)
    sizes = []
    real = sinks_mod.ChunkSink._write
    monkeypatch.setattr(sinks_mod.ChunkSink, "_write", lambda self, d: (sizes.append(len(d)), real(self, d)))
    monkeypatch.setattr("xpuprof.trace.write.rows.MAX_CHUNK_ROWS", 1000)
    monkeypatch.setattr("xpuprof.trace.write.rows.MIN_CHUNK_ROWS", 1000)
    path = write_chrome_trace(b, tmp_path / "t.json", threads=1)
    assert len(sizes) > 20 and max(sizes) < path.stat().st_size / 4


def test_hostile_strings_stay_valid(tmp_path, layout):
    b = TraceBuilder(pid=1)
    nasty = ['"', "\\", "\n\r\t\x00\x1f", b"\xff\xfe bad utf8", "lone \ud800 surrogate", "x" * 200_000, "é€😀"]
    for i, s in enumerate(nasty):
        b.add_slice(s, BASE_TIME_NS + i, 1, 1, 1, args={s if isinstance(s, str) else "k": s, "n": float("nan")})
    b.add_slices(names=nasty, ts=BASE_TIME_NS + np.arange(len(nasty)), dur=1, pid=1, tid=1, cat="kernel",
                 args={"a": nasty})
    b.set_metadata("weird \ud800", "v\x00")
    for columnar in (True, False):
        _, data = write(b, tmp_path, f"h{columnar}.json", columnar=columnar)
        names = [e["name"] for e in data["traceEvents"] if e["ph"] == "X"]
        assert names[2] == "\n\r\t\x00\x1f" and names[0] == '"' and names[1] == "\\"
        assert "\ufffd" in names[3] and len(names[5]) < 70_000


def test_load_errors(tmp_path):
    from xpuprof.trace import TraceLoadError

    with pytest.raises(TraceLoadError, match="no such trace file"):
        load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(TraceLoadError, match="not valid JSON"):
        load(tmp_path / "bad.json")
    (tmp_path / "arr.json").write_text("[]")
    assert load(tmp_path / "arr.json") == {"traceEvents": []}


def test_compact_layout_is_compact_and_reuses_buffers(tmp_path, make_mixed, monkeypatch):
    if columnar_mod._rowfmt is None:
        pytest.skip("xpuprof._native.rowfmt is not built")
    b = make_mixed(n=5000, seed=5)
    monkeypatch.setattr(rows_mod, "MAX_CHUNK_ROWS", 1000)
    monkeypatch.setattr(rows_mod, "MIN_CHUNK_ROWS", 1000)
    first = write_chrome_trace(b, tmp_path / "a.json").read_bytes()
    again = write_chrome_trace(b, tmp_path / "b.json").read_bytes()  # pooled buffers, same text
    assert first.replace(b"a.json", b"b.json") == again
    rows = [ln for ln in first.split(b"\n") if ln.startswith(b'{"ph":"X"')]
    assert rows and not any(b"  " in ln for ln in rows)  # no fixed-width padding
    monkeypatch.setattr(columnar_mod, "LAYOUT", "fixed")
    fixed = write_chrome_trace(b, tmp_path / "c.json").read_bytes()
    assert len(first) < len(fixed)
    assert orjson.loads(first)["traceEvents"] == orjson.loads(fixed)["traceEvents"]


def test_layout_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown trace layout 'wide'; valid: compact, fixed"):
        columnar_mod.make_writer([], False, "wide")
    monkeypatch.setattr(columnar_mod, "_rowfmt", None)
    with pytest.raises(RuntimeError, match="needs the C part xpuprof._native.rowfmt"):
        columnar_mod.make_writer([], False, "compact")
    assert isinstance(columnar_mod.make_writer([], False), columnar_mod.FixedWidthWriter)


def test_rowfmt_rejects_bad_segments():
    rowfmt = columnar_mod._rowfmt
    if rowfmt is None:
        pytest.skip("xpuprof._native.rowfmt is not built")
    offs = np.array([0, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="token id 1 outside the table of 1"):
        rowfmt.render(2, [(rowfmt.TOKENS, 0, b"", b'"a"', offs, np.array([0, 1]), None, 0)])
    with pytest.raises(ValueError, match="ids column has 2 values for 3 rows"):
        rowfmt.render(3, [(rowfmt.TOKENS, 0, b"", b'"a"', offs, np.array([0, 0]), None, 0)])
    with pytest.raises(ValueError, match="fewer tokens than rows"):
        rowfmt.render(2, [(rowfmt.FLOAT, 0, b"", b"[1.0]", np.array([1.0, 2.0]), None, None, 0)])
    with pytest.raises(ValueError, match="unknown segment kind 99"):
        rowfmt.render(1, [(99, 0, b"", None, None, None, None, 0)])
    assert rowfmt.render(2, [(rowfmt.INT, 0, b"v", np.array([-2**63, 7]), None, None, None, 0)]) == \
        b"v-9223372036854775808v7"
    lit = [(rowfmt.LIT, 0, b"x", None, None, None, None, 0)]
    need = -rowfmt.render(1, lit, bytearray(0))  # too small: the size it needs (with the copy slack)
    assert need > 1
    buf = bytearray(need)
    assert rowfmt.render(1, lit, buf) == 1 and buf[:1] == b"x"


def test_microsecond_floats_render_in_c_as_orjson_writes_them():
    """Floats on the 0.001 grid below 2^43 (µs times and intervals from whole ns) are written by C,
    byte for byte as orjson writes them; anything else is left to orjson."""
    rowfmt = columnar_mod._rowfmt
    if rowfmt is None:
        pytest.skip("xpuprof._native.rowfmt is not built")
    rng = np.random.default_rng(7)
    ks = np.concatenate([rng.integers(-10**4, 10**4, 20_000), rng.integers(-10**12, 10**12, 20_000),
                         rng.integers(4 * 10**15, 8_796_093_022_207_999, 20_000),
                         [0, 1, -1, 10, 100, 999, 1000, 1001, 8_796_093_022_207_999, -8_796_093_022_207_999]])
    values = ks / 1000.0
    fixed = rowfmt.fixed3(values)
    assert fixed is not None and (np.frombuffer(fixed, np.int64) == ks).all()
    text = rowfmt.render(len(values), [(rowfmt.FIXED3, 0, b",", np.frombuffer(fixed, np.int64), None, None, None, 0)])
    assert text == b"," + orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]  # "," + each value
    for off_grid in ([0.0005], [1.0, 0.1 + 0.2], [-0.0], [float("nan")], [float("inf")], [2.0 ** 43], [1e-7]):
        assert rowfmt.fixed3(np.array(off_grid)) is None, off_grid
    with pytest.raises(TypeError, match="float64"):
        rowfmt.fixed3(np.zeros(3, np.int64))


def test_float_args_write_the_same_bytes_through_c_and_orjson(tmp_path, monkeypatch):
    b = TraceBuilder()
    n = 5000
    ns = np.arange(n, dtype=np.int64) * 1_237 + BASE_TIME_NS
    b.add_slices(names=["k"] * n, ts=ns, dur=np.full(n, 1000), pid=np.zeros(n, np.int64), tid=np.ones(n, np.int64),
                 cat=ActivityType.CONCURRENT_KERNEL, args={"on grid": ArgColumn("num", (ns - BASE_TIME_NS) / 1000.0),
                       "rel": ArgColumn("num", -(np.arange(n) + 1) / 1000.0),
                       "off grid": ArgColumn("num", np.arange(n) / 3.0)})
    write_chrome_trace(b, tmp_path / "c.json")

    real = columnar_mod._rowfmt

    class OrjsonOnly:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def fixed3(values):
            return None

    monkeypatch.setattr(columnar_mod, "_rowfmt", OrjsonOnly())
    write_chrome_trace(b, tmp_path / "o.json", trace_name=str(tmp_path / "c.json"))
    assert (tmp_path / "c.json").read_bytes() == (tmp_path / "o.json").read_bytes()


def test_float_columns_may_be_strided_views():
    """A counter column sliced from a wider array (every other sample) is not C-contiguous; orjson
    refuses those, and a host-telemetry trace failed to write now and then because of it."""
    from xpuprof.trace.write.value_text import float_matrix

    wide = np.arange(10, dtype=np.float64) / 4
    assert not wide[::2].flags.c_contiguous
    assert len(float_matrix(wide[::2])) == 5


def _many_chunks(monkeypatch, rows=700):
    monkeypatch.setattr(rows_mod, "MAX_CHUNK_ROWS", rows)
    monkeypatch.setattr(rows_mod, "MIN_CHUNK_ROWS", rows)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_threaded_rendering_writes_the_same_bytes(tmp_path, make_mixed, monkeypatch, layout, name):
    """Chunks render on several threads (and a .gz compresses on several): the file holds the same
    bytes as one thread writes, in the same order, over many chunk boundaries."""
    b = make_mixed(n=20_000, seed=11)
    b.add_slices(names=["é\"\\\x07" * (i % 5) for i in range(3000)], ts=BASE_TIME_NS + np.arange(3000) * 7,
                 dur=3, pid=2, tid=np.arange(3000) % 3, cat="cpu_op", args={"s": ["\u2028x", "y"] * 1500})
    _many_chunks(monkeypatch)
    one = write_chrome_trace(b, tmp_path / "one" / name, threads=1).read_bytes()
    rendered_on = []
    real = columnar_mod._Segments.render
    monkeypatch.setattr(columnar_mod._Segments, "render",
                        lambda self, *a: (rendered_on.append(threading.current_thread().name), real(self, *a))[1])
    many = write_chrome_trace(b, tmp_path / "many" / name, threads=4).read_bytes()
    if layout == "compact":  # chunks really were rendered on the worker threads, not the caller's
        assert len(rendered_on) > 30 and all(t.startswith("xpuprof-render-") for t in rendered_on)
    if name.endswith(".gz"):
        # one gzip member (zlib reads only the first), its CRC and size right, the same text inside
        one, many = gzip.decompress(one), zlib.decompress(many, 31)
    assert one.replace(b"/one/", b"/many/") == many
    assert orjson.loads(many)["traceEvents"]


def test_a_chunk_failing_on_a_render_thread_fails_the_write_and_leaves_no_file(tmp_path, make_mixed, monkeypatch):
    if columnar_mod._rowfmt is None:
        pytest.skip("xpuprof._native.rowfmt is not built")
    b = make_mixed(n=20_000, seed=12)
    _many_chunks(monkeypatch)
    real = columnar_mod._Segments.render
    calls = []

    def render(self, n, pool=None):
        calls.append(n)
        if len(calls) == 5:
            raise MemoryError("render thread out of memory")
        return real(self, n, pool)

    monkeypatch.setattr(columnar_mod._Segments, "render", render)
    with pytest.raises(MemoryError, match="render thread out of memory"):
        write_chrome_trace(b, tmp_path / "t.json", threads=3)
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("xpuprof-render")]


def test_writer_threads_follow_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.setattr(chrome_mod.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert chrome_mod.writer_threads() == 1
    monkeypatch.setattr(chrome_mod.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert chrome_mod.writer_threads() == chrome_mod.MAX_WRITER_THREADS


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_trace_written_from_an_atexit_handler_uses_the_render_threads(tmp_path, name):
    """Scripts export at exit; a ThreadPoolExecutor refuses work once the interpreter shuts down
    ("cannot schedule new futures after interpreter shutdown"), which lost the whole trace."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / name
    script = f"""
import atexit
import numpy as np
import xpuprof.trace.write.chrome as chrome
import xpuprof.trace.write.rows as columnar
from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import TraceBuilder
chrome.writer_threads = lambda events=None: 3
columnar.MAX_CHUNK_ROWS = columnar.MIN_CHUNK_ROWS = 500
b = TraceBuilder(pid=1)
b.add_slices(names=["a", "b"] * 5000, ts=BASE_TIME_NS + np.arange(10000), dur=1, pid=1, tid=1, cat="cpu_op")
atexit.register(lambda: print(chrome.write_chrome_trace(b, {str(out)!r})))
"""
    root = Path(chrome_mod.__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    raw = out.read_bytes()
    events = orjson.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 10000


def test_columns_never_pin_the_records_they_came_from():
    """A field of a structured record array is a strided view: stored as is, it would keep every
    record (all 184 bytes of a kernel dispatch) alive as long as the trace. Columns that hold one
    value are stored once."""
    rows = np.zeros(1000, [("start", "<u8"), ("queue", "<u8"), ("device", "<u8"), ("pad", "u1", (40,))])
    rows["start"] = np.arange(1000) * 10
    rows["queue"] = 0xBEEF + np.arange(1000) % 3
    rows["device"] = 2
    b = TraceBuilder()
    b.add_slices(names=["k"] * 1000, ts=rows["start"], dur=np.ones(1000, np.int64), pid=rows["device"],
                 tid=rows["queue"], cat="kernel", args={"queue": hex_column(rows["queue"]), "device": rows["device"],
                                                        "grid": np.tile([256, 1, 1], (1000, 1))},
                 external_id=rows["queue"])
    s = b.slices[0]
    for col in (s.ts, s.tid, s.external_id, s.args["queue"].values):
        assert col.flags.c_contiguous and not np.shares_memory(col, rows)
    for col in (s.pid, s.args["device"].values, s.args["grid"].values):
        assert col.strides[0] == 0  # one value for every row, stored once
    assert s.args["grid"].values.tolist() == [[256, 1, 1]] * 1000 and s.pid.tolist() == [2] * 1000


def test_writer_threads_leave_the_cpus_other_tasks_are_running_on(monkeypatch):
    """Sized to the CPUs free now: two CPUs with one other task ready to run leave one thread; an
    idle machine all of them (at most MAX_WRITER_THREADS); a fixed count by XPUPROF_WRITER_THREADS."""
    from xpuprof import cpus

    monkeypatch.delenv(cpus.WRITER_THREADS_ENV, raising=False)
    monkeypatch.setattr(cpus, "cgroup_cpu_quota", lambda: None)
    monkeypatch.setattr(chrome_mod.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(chrome_mod.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpus, "busy_elsewhere", lambda: 1)
    assert chrome_mod.writer_threads() == 1
    monkeypatch.setattr(cpus, "busy_elsewhere", lambda: 0)
    assert chrome_mod.writer_threads() == 2
    # 8 of 64 CPUs, 32 tasks busy machine wide: about 4 of them on this process's CPUs
    monkeypatch.setattr(chrome_mod.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(chrome_mod.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(cpus, "busy_elsewhere", lambda: 32)
    assert chrome_mod.writer_threads() == 4
    monkeypatch.setattr(cpus, "busy_elsewhere", lambda: 60)
    assert chrome_mod.writer_threads() == 1
    monkeypatch.setenv(cpus.WRITER_THREADS_ENV, "3")
    assert chrome_mod.writer_threads() == 3


def test_a_small_trace_is_written_by_the_calling_thread(monkeypatch, tmp_path):
    """Render threads cost more than they save on a small trace (a training cycle's 20 k events took 5.6 ms on
    one thread, 7-12 ms on two): under SMALL_TRACE_EVENTS one thread writes, whatever CPUs are free."""
    from xpuprof import cpus
    from xpuprof.trace.write import sinks

    monkeypatch.delenv(cpus.WRITER_THREADS_ENV, raising=False)
    monkeypatch.setattr(chrome_mod, "free_cpus", lambda: 4)
    assert chrome_mod.writer_threads(chrome_mod.SMALL_TRACE_EVENTS - 1) == 1
    assert chrome_mod.writer_threads(chrome_mod.SMALL_TRACE_EVENTS) == 4
    assert chrome_mod.writer_threads() == 4
    monkeypatch.setenv(cpus.WRITER_THREADS_ENV, "3")
    assert chrome_mod.writer_threads(10) == 3  # a fixed count is kept
    monkeypatch.delenv(cpus.WRITER_THREADS_ENV)
    seen = []
    real = sinks.ChunkSink.__init__

    def spy(self, dest, threads, *a, **k):
        seen.append(threads)
        real(self, dest, threads, *a, **k)

    monkeypatch.setattr(sinks.ChunkSink, "__init__", spy)
    for n in (1000, chrome_mod.SMALL_TRACE_EVENTS):
        b = TraceBuilder(pid=1)
        b.add_slices(names=["a"] * n, ts=BASE_TIME_NS + np.arange(n) * 2, dur=1, pid=1, tid=1, cat="cpu_op")
        write_chrome_trace(b, tmp_path / f"t{n}.json")
    assert seen == [1, 4]


def test_a_bad_writer_threads_setting_is_said_once_and_the_trace_still_written(monkeypatch, caplog, tmp_path):
    from xpuprof import cpus, diagnostics

    diagnostics.reset()
    monkeypatch.setenv(cpus.WRITER_THREADS_ENV, "many")
    with caplog.at_level("WARNING", logger="xpuprof"):
        assert 1 <= chrome_mod.writer_threads() <= chrome_mod.MAX_WRITER_THREADS
        chrome_mod.writer_threads()
    said = [r.getMessage() for r in caplog.records if cpus.WRITER_THREADS_ENV in r.getMessage()]
    assert len(said) == 1 and "'many'" in said[0] and ">= 1" in said[0]
    b = TraceBuilder(pid=1)
    b.add_slice("x", BASE_TIME_NS, 1, 1, 1)
    assert [e["name"] for e in load(write_chrome_trace(b, tmp_path / "t.json"))["traceEvents"] if e["ph"] == "X"] == ["x"]


def test_one_free_cpu_writes_on_the_calling_thread_alone(tmp_path, make_mixed, monkeypatch):
    b = make_mixed(n=20_000, seed=3)
    _many_chunks(monkeypatch)
    started = []
    real_start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(self.name), real_start(self))[1])
    one = write_chrome_trace(b, tmp_path / "one.json", threads=1).read_bytes()
    assert not [n for n in started if n.startswith("xpuprof-")]
    two = write_chrome_trace(b, tmp_path / "two.json", threads=2).read_bytes()
    assert len([n for n in started if n.startswith("xpuprof-render-")]) == 2
    assert one.replace(b"one.json", b"two.json") == two


def test_cgroup_cpu_quotas_cap_the_usable_cpus(tmp_path, monkeypatch):
    from xpuprof import cpus

    v2 = tmp_path / "v2"
    (v2 / "job" / "step").mkdir(parents=True)
    (v2 / "cpu.max").write_text("max 100000\n")
    (v2 / "job" / "cpu.max").write_text("250000 100000\n")  # 2.5 CPUs for the job ...
    (v2 / "job" / "step" / "cpu.max").write_text("max 100000\n")  # ... its step unlimited by itself
    (tmp_path / "cg2").write_text("0::/job/step\n")
    assert cpus.cgroup_cpu_quota(str(tmp_path / "cg2"), str(v2)) == 2.5
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "docker" / "abc").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("150000\n")
    (v1 / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cg1").write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cpus.cgroup_cpu_quota(str(tmp_path / "cg1"), str(v1)) == 1.5
    (tmp_path / "none").write_text("0::/\n")
    assert cpus.cgroup_cpu_quota(str(tmp_path / "none"), str(tmp_path / "empty")) is None
    monkeypatch.setattr(cpus, "cgroup_cpu_quota", lambda: 1.5)
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert cpus.usable_cpus() == 2


def test_a_kernel_thread_waking_for_a_moment_does_not_take_the_writers_second_thread(monkeypatch):
    """One read of /proc/loadavg is a snapshot: on an idle 2-CPU VM a quarter of them counted a kernel thread
    (DAMON, kworkers) that ran for microseconds, and the writer then rendered on one thread. The least of three
    reads in a row counts only what stays runnable."""
    from xpuprof import cpus

    reads = iter(["0.1 0.2 0.3 2/148 1\n", "0.1 0.2 0.3 1/148 1\n", "0.1 0.2 0.3 2/148 1\n"])
    monkeypatch.setattr(cpus, "_read", lambda path: next(reads))
    assert cpus.busy_elsewhere() == 0
    busy = iter(["0.1 0.2 0.3 3/148 1\n", "0.1 0.2 0.3 2/148 1\n", "0.1 0.2 0.3 3/148 1\n"])
    monkeypatch.setattr(cpus, "_read", lambda path: next(busy))
    assert cpus.busy_elsewhere() == 1  # a task runnable in every read counts


def test_busy_elsewhere_reads_the_runnable_count(tmp_path):
    from xpuprof import cpus

    (tmp_path / "loadavg").write_text("7.83 7.58 6.84 7/148 15969\n")
    assert cpus.busy_elsewhere(str(tmp_path / "loadavg")) == 6
    (tmp_path / "bad").write_text("garbage\n")
    assert cpus.busy_elsewhere(str(tmp_path / "bad")) == 0
    assert cpus.busy_elsewhere(str(tmp_path / "missing")) == 0


@pytest.mark.skipif(rows_native_mod._rowfmt is None, reason="xpuprof._native.rowfmt is not built")
def test_rowfmt_integers_at_every_digit_count_and_the_extremes():
    """Every decimal length (each power of ten and the number before it), both signs, int64 and uint64
    limits: the C rows spell them as Python does."""
    fmt = rows_native_mod._rowfmt
    ints = [0, -1, 2**63 - 1, -2**63] + [s * v for k in range(19) for v in (10**k - 1, 10**k, 10**k + 1) for s in (1, -1)]
    uints = [0, 2**64 - 1, 2**63] + [v for k in range(20) for v in (10**k - 1, 10**k) if v < 2**64]
    for kind, values, dtype in ((fmt.INT, ints, np.int64), (fmt.UINT, uints, np.uint64)):
        col = np.array(values, dtype=dtype)
        out = fmt.render(len(col), [(kind, 0, b"[", col, None, None, None, 0), (fmt.LIT, 0, b"]\n", None, None, None,
                                                                             None, 0)])
        assert [int(line[1:-1]) for line in out.decode().splitlines()] == values
        assert out.decode().splitlines() == [f"[{v}]" for v in values]


@pytest.mark.skipif(rows_native_mod._rowfmt is None, reason="xpuprof._native.rowfmt is not built")
def test_rowfmt_hex_handles_are_16_digits_of_every_byte():
    fmt = rows_native_mod._rowfmt
    values = [0, 1, 0xFF, 0x100, 0x0123456789ABCDEF, 0xFEDCBA9876543210, 2**64 - 1] + [1 << k for k in range(64)]
    col = np.array(values, dtype=np.uint64)
    out = fmt.render(len(col), [(fmt.HEX, 0, b"", col, None, None, None, 0), (fmt.LIT, 0, b"\n", None, None, None,
                                                                           None, 0)])
    assert out.decode().splitlines() == [f'"0x{v:016x}"' for v in values]
