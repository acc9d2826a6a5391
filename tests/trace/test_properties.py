"""Property tests: any names/args produce a file that parses, and columnar == generic."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpuprof.clock import BASE_TIME_NS
from xpuprof.trace import ArgColumn, TraceBuilder, load, write_chrome_trace
from xpuprof.trace.write import rows_native as columnar_mod
import pytest

pytestmark = pytest.mark.slow

LAYOUTS = ["fixed"] + (["compact"] if columnar_mod._rowfmt is not None else [])

text = st.one_of(st.text(max_size=40), st.binary(max_size=40))
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(), st.text(max_size=20))
json_val = st.recursive(json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                        max_leaves=8)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(names=st.lists(text, min_size=1, max_size=8), args=st.dictionaries(text, json_val, max_size=4),
       ts=st.integers(-10**12, 10**16), tid=st.integers(-2**63, 2**63 - 1))
def test_scalar_events_always_parse(tmp_path_factory, names, args, ts, tid):
    b = TraceBuilder(pid=1)
    for i, name in enumerate(names):
        b.add_slice(name, BASE_TIME_NS + ts + i, 1000, 1, tid, args=args, external_id=i)
        b.add_instant(name, BASE_TIME_NS + ts, 1, tid, args=args)
        b.set_thread_name(1, tid, name)
    b.set_metadata("m", args)
    path = write_chrome_trace(b, tmp_path_factory.mktemp("p") / "t.json")
    evs = load(path)["traceEvents"]
    assert [e["name"] for e in evs if e["ph"] == "X"] == [b.strings.strings[b.strings.intern(n)] for n in names]


@SETTINGS
@given(data=st.data(), n=st.integers(1, 40))
def test_bulk_columns_columnar_equals_generic(tmp_path_factory, data, n):
    ints = st.integers(-2**63, 2**63 - 1)
    b = TraceBuilder(pid=1)
    names = data.draw(st.lists(text, min_size=n, max_size=n))
    ts = np.array(data.draw(st.lists(st.integers(-10**15, 10**16), min_size=n, max_size=n)), dtype=np.int64)
    args = {
        "i": np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), dtype=np.int64),
        "f": np.array(data.draw(st.lists(st.floats(), min_size=n, max_size=n)), dtype=np.float64),
        "s": data.draw(st.lists(text, min_size=n, max_size=n)),
        "v": np.array(data.draw(st.lists(st.lists(ints, min_size=2, max_size=2), min_size=n, max_size=n)),
                      dtype=np.int64).reshape(n, 2),
        "p": ArgColumn("num", np.arange(n), np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))),
    }
    key = data.draw(text)
    args[key if isinstance(key, str) and key not in args and key != "External id" else "k"] = np.ones(n, bool)
    ext = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), dtype=np.int64)
    tids = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), dtype=np.int64)
    b.add_slices(names=names, ts=BASE_TIME_NS + ts, dur=ts, pid=0, tid=tids, cat="kernel", args=args,
                 external_id=ext)
    b.add_counters(name=data.draw(text), ts=BASE_TIME_NS + ts, pid=0, tid=tids, cat="gpu_pm_counter",
                   values={"a": args["f"]})
    b.add_flows(flow_ids=args["i"], ts=BASE_TIME_NS + ts, pid=0, tid=tids, start=args["p"].present)
    out = tmp_path_factory.mktemp("b")
    ref = load(write_chrome_trace(b, out / "r.json.gz", columnar=False))["traceEvents"]
    for layout in LAYOUTS:  # every vectorized layout parses to the reference events
        columnar_mod.LAYOUT = layout
        try:
            fast = load(write_chrome_trace(b, out / f"f-{layout}.json"))["traceEvents"]
        finally:
            columnar_mod.LAYOUT = None
        assert fast == ref, layout
    x = [e for e in fast if e["ph"] == "X"]
    assert [e.get("args", {}).get("External id", 0) for e in x] == ext.tolist()
    assert [e["ts"] for e in x] == [max(int(v), 0) / 1000 for v in ts]
