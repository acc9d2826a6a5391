"""Live collection end to end against the rocprofiler-sdk ABI test double (fake_rocprofiler.c):
load -> force_configure -> C callbacks (one from a foreign thread) -> drain -> decode -> JSON."""
from __future__ import annotations

import orjson
import pytest

from slice_tables import slice_table
from xpuprof.activity import ActivityType
from xpuprof.backends.base import BackendError, ProcessWindow
from xpuprof.vendors import rocprofiler as rocprof
from xpuprof.backends.rocm.backend import RocmBackend
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import iter_event_chunks

pytestmark = pytest.mark.slow

ALL = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.RUNTIME,
                 ActivityType.EXTERNAL_CORRELATION, ActivityType.CUDA_SYNC})


def _run(config=None, *, external=77):
    session = RocmBackend().configure(ALL, config or ProfilerConfig())
    lib = rocprof.load_library()
    session.start()
    session.push_correlation_id(external)
    lib.fake_run_scenario()
    session.pop_correlation_id()
    session.stop()
    assert lib.fake_delivered_from_other_thread() == 1 and lib.fake_external_depth() == 0
    b = TraceBuilder(pid=session.pid)
    session.process(b, ProcessWindow(0, 2**62))
    events = [e for chunk in iter_event_chunks(b) for e in chunk]
    orjson.dumps(events)  # the whole trace serialises
    return session, b, events


SDK_VERSIONS = [(0, 6, 0), (1, 0, 0)]  # ROCm 6.4 and ROCm 7 record layouts


@pytest.fixture(params=SDK_VERSIONS, ids=lambda v: "sdk-" + ".".join(map(str, v)))
def sdk(request, fake_rocprofiler):
    rocprof.load_library().fake_set_sdk_version(*request.param)
    return request.param


def test_end_to_end_kernels_copies_api_and_dependencies(sdk):
    session, b, evs = _run()
    kern = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["args"]["correlation"])
    assert [k["name"] for k in kern[:2]] == ["vecAdd(float*, float*, int)", "gemm_kernel"]  # code-object callbacks
    assert kern[0]["args"]["hsa_queue"] == "0x0000000000000051"
    api_rows = [e for e in evs if e.get("ph") == "X" and e.get("name", "").startswith("hip")]
    runtime_cat = api_rows[0]["cat"]  # the category name comes from the trace, not from this test
    api = {(e["name"], e["args"]["correlation"]): e for e in api_rows}
    by_name = {n: e for (n, _), e in api.items()}
    # Every launch API puts its kernel on its HIP stream's row: streams A, B, C -> logical 1, 2, 3.
    assert [k["tid"] for k in kern] == [1, 2, 2, 3, 1]  # A, B, B (module), C (ext module), A (graph)
    assert all(api[(n, k["args"]["correlation"])]["args"]["hip_stream"] == k["tid"]
               for k in kern for (n, c) in api if c == k["args"]["correlation"])
    copies = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert [c["name"] for c in copies] == ["Memcpy HtoD (Host -> Device)"]  # op 7 resolved by name
    assert copies[0]["tid"] == kern[1]["tid"] == copies[0]["args"]["stream"]  # hipMemcpyAsync on stream B, as Kineto
    assert all(e["cat"] == runtime_cat for e in api_rows)
    assert "hipGetDevice" not in {n for n, _ in api}  # suppressed like Kineto
    rec = api[("hipEventRecord", 2)]["args"]
    assert (rec["hip_event"], rec["hip_stream"]) == ("0x00000000000000e1", kern[0]["tid"])
    wait = api[("hipStreamWaitEvent", 3)]["args"]
    assert wait["wait_on_hip_event_record_corr_id"] == 2 and wait["wait_on_hip_event_id"] == rec["hip_event"]
    assert wait["wait_on_stream"] == kern[0]["tid"] == rec["hip_stream"]  # the producer's GPU row
    assert wait["sync_type"] == "Stream Wait Event"
    sync = api[("hipEventSynchronize", 6)]["args"]
    assert sync["wait_on_hip_event_record_corr_id"] == 2  # the later re-record (corr 8) is not taken
    # The re-record on the null stream: the default stream is a real stream, named like the record row.
    last = api[("hipStreamWaitEvent", 9)]["args"]
    assert last["wait_on_hip_event_record_corr_id"] == 8
    assert last["wait_on_stream"] == api[("hipEventRecord", 8)]["args"]["hip_stream"] not in (None, -1)
    # Stream / device syncs: sync_type + hip_stream on the call, a cuda_sync row on the GPU.
    assert (by_name["hipStreamSynchronize"]["args"]["sync_type"], by_name["hipStreamSynchronize"]["args"]["hip_stream"]) \
        == ("Stream Sync", 3)
    assert (by_name["hipDeviceSynchronize"]["args"]["sync_type"], by_name["hipDeviceSynchronize"]["args"]["hip_stream"]) \
        == ("Device Sync", -1)
    gpu_syncs = sorted((e["name"], e["tid"]) for e in evs if e.get("cat") == "cuda_sync")
    assert gpu_syncs == [("Device Sync", 1_000_000), ("Stream Sync", 1_000_003)]
    assert sum(e.get("ph") == "s" for e in evs) == sum(e.get("ph") == "f" for e in evs) >= 6  # launches + deps
    # External correlation pushed around the scenario reaches every record.
    assert {k["args"].get("External id") for k in kern} == {77}
    assert b.dropped.get("rocm records dropped by rocprofiler") == 3  # the double reports drop_count 3
    from xpuprof.clock import now_ns

    ts = slice_table(b, "kernel")["ts"]
    assert ((now_ns() - ts) < 60 * 10**9).all() and (ts <= now_ns()).all()  # monotonic stamps aligned to epoch
    assert session.reg.version == sdk and session.reg.layout == sdk[0]


def test_unknown_sdk_generation_is_refused_before_registering(fake_rocprofiler):
    lib = rocprof.load_library()
    lib.fake_set_sdk_version(2, 0, 0)
    with pytest.raises(BackendError, match="rocprofiler-sdk 2.0.0 is a generation xpuprof does not know"):
        RocmBackend().configure(ALL, ProfilerConfig())


@pytest.mark.parametrize("size", [72, 48])
def test_hip_records_of_unknown_size_are_an_error_not_garbage(sdk, size):
    rocprof.load_library().fake_set_hip_record_size(size)
    with pytest.raises(rocprof.RocprofAbiError, match=f"HIP API records of {size} bytes"):
        _run()


def test_second_session_reuses_the_registration(fake_rocprofiler):
    _run()
    session, b, evs = _run()
    assert len([e for e in evs if e.get("cat") == "kernel"]) == 5
    # this session's losses only (the double reports 3 dropped per flush), not the process's total
    assert b.dropped.get("rocm records dropped by rocprofiler") == 3


def test_per_kernel_counters(sdk):
    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["SQ_WAVES", "GRBM_GUI_ACTIVE"]))
    session, b, evs = _run(cfg)
    metric_slices = sorted((e for e in evs if e.get("name", "").startswith("metrics: ")), key=lambda e: e["ts"])
    assert [e["name"] for e in metric_slices][:2] == ["metrics: vecAdd(float*, float*, int)", "metrics: gemm_kernel"]
    assert len(metric_slices) == 5  # every dispatch of the scenario
    # two instances summed: kernel*100 + i*10 + {0, 1}
    assert metric_slices[0]["args"]["SQ_WAVES"] == 201 and metric_slices[0]["args"]["GRBM_GUI_ACTIVE"] == 221
    assert metric_slices[1]["args"]["SQ_WAVES"] == 401
    counters = [e for e in evs if e.get("ph") == "C"]
    assert len(counters) == 10 and {c["name"] for c in counters} == {"rocm"}
    # each dispatch's metrics sit on its kernel's row (the HIP stream's), not on a row of the HSA queue
    kernels = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    assert [(m["pid"], m["tid"]) for m in metric_slices] == [(k["pid"], k["tid"]) for k in kernels]
    assert {(c["pid"], c["tid"]) for c in counters} == {(k["pid"], k["tid"]) for k in kernels}


def test_unknown_counter_names_the_close_match(fake_rocprofiler, monkeypatch):
    from xpuprof.backends.rocm import counter_api

    monkeypatch.setattr(counter_api, "validate_offline", lambda names: None)  # reach the device check
    cfg = ProfilerConfig(experimental=ExperimentalConfig(profiler_metrics=["SQ_WAVE"]))
    with pytest.raises(BackendError, match="does not offer counter.*SQ_WAVE.*did you mean SQ_WAVES"):
        RocmBackend().configure(ALL, cfg)


def test_configuration_locked_is_explained(fake_rocprofiler):
    _run()
    from xpuprof.backends.rocm import activity_api

    activity_api._REG = None  # a second tool registration in the same process
    with pytest.raises(BackendError, match="CONFIGURATION_LOCKED.*before HIP initialises"):
        RocmBackend().configure(ALL, ProfilerConfig())


def test_missing_library_is_a_clear_probe_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCPROFILER_SDK_LIBRARY", str(tmp_path / "nope.so"))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.setattr(rocprof.ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(rocprof, "LIBRARY", "librocprofiler-sdk-absent.so")
    probe = RocmBackend.probe()
    assert not probe and "rocprofiler-sdk not found" in probe.reason
    with pytest.raises(BackendError, match="rocprofiler-sdk not found"):
        RocmBackend().configure(ALL, ProfilerConfig())


@pytest.mark.parametrize("v2", ["0", "1"])
def test_client_name_lands_in_either_client_id_layout(fake_rocprofiler, v2):
    # registration.h: older SDKs pass {const char* name; u32 handle}, newer ones
    # {size_t size; const char* name; u32 handle}: the name must never overwrite `size`.
    import ctypes

    lib = rocprof.load_library()
    lib.fake_use_client_v2(int(v2))
    _run()
    lib.fake_client_name.restype = ctypes.c_char_p
    lib.fake_client_v2_size.restype = ctypes.c_size_t
    assert lib.fake_client_v2_size() == 24  # `size` left intact
    name = lib.fake_client_name()
    assert name == b"xpuprof"


def test_every_launch_api_puts_its_kernel_on_its_hip_stream(sdk):
    # Each call places the stream at the offset the *real* api_args.h gives (not xpuprof's table),
    # and each dispatch comes from a different HSA queue: only the captured stream can put them all
    # on one row.
    import json
    from pathlib import Path


    real = json.loads((Path(__file__).parent / "data" / "rocprofiler_sdk_layouts.json").read_text())
    offsets = real["versions"]["1.0.0" if sdk[0] else "0.6.0"]["hip_args"]
    names = [n for n in ("hipLaunchKernel_spt", "hipLaunchCooperativeKernel", "hipLaunchCooperativeKernel_spt",
                         "hipExtLaunchKernel", "hipModuleLaunchCooperativeKernel", "hipGraphLaunch_spt",
                         "hipMemcpyAsync_spt", "hipMemcpyWithStream", "hipMemsetAsync", "hipMemsetAsync_spt",
                         "hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipMemcpyDtoDAsync", "hipMemcpy2DAsync")]
    session = RocmBackend().configure(ALL, ProfilerConfig())
    lib = rocprof.load_library()
    lib.fake_launch_by_name.argtypes = [rocprof.ctypes.c_char_p, rocprof.ctypes.c_int, rocprof.ctypes.c_uint64,
                                        rocprof.ctypes.c_uint64]
    session.start()
    for i, name in enumerate(names):
        assert lib.fake_launch_by_name(name.encode(), offsets[name]["stream"], 0x5EA0, 0x900 + i) == 1
    session.stop()
    b = TraceBuilder(pid=session.pid)
    session.process(b, ProcessWindow(0, 2**62))
    evs = [e for chunk in iter_event_chunks(b) for e in chunk]
    kern = [e for e in evs if e.get("cat") == "kernel"]
    assert len(kern) == len(names) and len({k["tid"] for k in kern}) == 1  # one HIP stream, one row
    api = {e["name"]: e["args"] for e in evs if e.get("ph") == "X" and e.get("name", "") in names}
    assert set(api) == set(names) and {a["hip_stream"] for a in api.values()} == {kern[0]["tid"]}
