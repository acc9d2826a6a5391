import threading

import pytest

from slice_tables import slice_table
import xpuprof


def _workload(prof=None):
    def worker():
        xpuprof.set_thread_name("loader")
        for i in range(3):
            with xpuprof.record_function(f"load{i}"):
                pass

    t = threading.Thread(target=worker, name="loader-thread")
    t.start()
    t.join()
    for i in range(12):
        with xpuprof.record_function("forward", {"step": i}):
            with xpuprof.record_function(["matmul", "add", "softmax"][i % 3]):
                pass
        if prof is not None:
            prof.step()


@pytest.fixture
def sim_trace(tmp_path, load_trace):
    cfg = xpuprof.ExperimentalConfig(profiler_metrics=["GpuTime", "XVE_ACTIVE"])
    with xpuprof.profile(backends=["sim"], experimental_config=cfg) as prof:
        _workload()
    path = prof.export_chrome_trace(tmp_path / "sim.pt.trace.json")
    return prof, load_trace(path)


def test_trace_metadata_names_the_sim_backend(sim_trace):
    _, data = sim_trace
    assert data["backend"] == "sim" and data["backends"] == ["sim"]
    assert data["deviceProperties"][0]["name"] == "xpuprof simulated accelerator"


def test_user_annotations_sit_on_named_threads(sim_trace):
    _, data = sim_trace
    ev = data["traceEvents"]
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    assert len(ann) == 3 + 24
    for e in ann:
        label = thread_names[(e["pid"], e["tid"])]
        assert label.startswith(f"thread {e['tid']} (")
    loader = {e["tid"] for e in ann if e["name"].startswith("load")}
    assert len(loader) == 1 and thread_names[(ann[0]["pid"], loader.pop())].endswith("(loader)")
    fwd = [e for e in ann if e["name"] == "forward"]
    assert sorted(e["args"]["step"] for e in fwd) == list(range(12))


def test_kernels_link_to_their_record_function(sim_trace):
    _, data = sim_trace
    ev = data["traceEvents"]
    ann = {e["args"]["External id"]: e for e in ev if e.get("cat") == "user_annotation"}
    kernels = [e for e in ev if e.get("cat") == "kernel" and not e["name"].startswith("metrics: ")]
    # Only innermost ranges launch work: 12 inner ops plus 3 loader ranges.
    assert len(kernels) == 15
    linked = {ann[k["args"]["External id"]]["name"] for k in kernels}
    assert linked == {"matmul", "add", "softmax", "load0", "load1", "load2"}
    runtime = [e for e in ev if e.get("cat") == "runtime"]
    for r in runtime:  # runtime calls run inside the range they belong to, on its thread
        a = ann[r["args"]["External id"]]
        assert a["tid"] == r["tid"] and a["ts"] <= r["ts"] <= a["ts"] + a["dur"] + 1e-3


def test_ac2g_flows_pair_up(sim_trace):
    _, data = sim_trace
    ev = data["traceEvents"]
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    assert all(e["cat"] == "ac2g" and "bp" not in e for e in starts.values())
    assert all(e["bp"] == "e" for e in ends.values())
    by_corr = {(e["pid"], e["tid"], e["ts"]) for e in ev if e["ph"] == "X"}
    for e in list(starts.values()) + list(ends.values()):
        assert (e["pid"], e["tid"], e["ts"]) in by_corr  # each flow end binds to a slice


def test_per_kernel_metrics_reach_the_summary(sim_trace):
    prof, data = sim_trace
    assert any(e["ph"] == "C" for e in data["traceEvents"])
    rows = [r for r in prof.key_averages() if r.category == "kernel"]
    assert rows and all(set(r.metrics) == {"GpuTime::ns", "XVE_ACTIVE::percent"} for r in rows)
    for r in rows:  # GpuTime is the kernel's own duration (ns; torch's device_time is µs)
        assert r.metrics["GpuTime::ns"][0] == pytest.approx(r.device_time * 1e3)


def test_sim_is_deterministic():
    def kernels():
        with xpuprof.profile(backends=["sim"]) as prof:
            for i in range(10):
                with xpuprof.record_function("op"):
                    pass
        t = slice_table(prof.builder, "kernel")
        return t["name"].tolist(), t["dur"].tolist()

    assert kernels() == kernels()


def test_sim_is_never_selected_unless_named():
    with xpuprof.profile() as prof:
        with xpuprof.record_function("x"):
            pass
    assert "sim" not in prof.builder.metadata["backends"]
    assert len(slice_table(prof.builder, "kernel")["name"]) == 0


def test_sim_respects_selected_activities():
    with xpuprof.profile(activities=["user_annotation", "kernel"], backends=["sim"]) as prof:
        with xpuprof.record_function("op"):
            pass
    cats = set(slice_table(prof.builder)["cat"].tolist())
    assert cats == {"user_annotation", "kernel"}
