"""Large arrays on small pages during stop, process and write (``xpuprof.pages``).

numpy's request for transparent huge pages is off while xpuprof fills its large columns and back on
afterwards, nested and concurrent uses included; a user's own ``NUMPY_MADVISE_HUGEPAGE`` stands."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import xpuprof
from xpuprof import pages
from xpuprof.trace.build.builder import TraceBuilder

SETTER = pages._numpy_setter()
pytestmark = pytest.mark.skipif(SETTER is None, reason="this numpy has no _set_madvise_hugepage switch")


def hugepages_requested() -> bool:
    previous = SETTER(True)
    SETTER(previous)
    return bool(previous)


@pytest.fixture(autouse=True)
def numpy_asks_for_hugepages(monkeypatch):
    monkeypatch.delenv(pages.USER_SETTING_ENV, raising=False)
    before = SETTER(True)
    yield
    SETTER(before)


def test_small_pages_turns_numpy_request_off_and_back_on():
    with pages.small_pages():
        assert not hugepages_requested()
        with pages.small_pages():
            assert not hugepages_requested()
        assert not hugepages_requested()  # the outer use still holds
    assert hugepages_requested()


def test_overlapping_uses_on_two_threads_restore_only_when_the_last_ends():
    entered, release_first = threading.Event(), threading.Event()
    seen = {}

    def first():
        with pages.small_pages():
            entered.set()
            release_first.wait(10)
        seen["after first"] = hugepages_requested()

    t = threading.Thread(target=first)
    t.start()
    assert entered.wait(10)
    with pages.small_pages():
        release_first.set()
        t.join(10)
        assert not hugepages_requested()  # the first thread ended; this use still holds
    assert seen["after first"] is False
    assert hugepages_requested()


def test_a_users_own_numpy_setting_stands(monkeypatch):
    monkeypatch.setenv(pages.USER_SETTING_ENV, "1")
    with pages.small_pages():
        assert hugepages_requested()


def test_profile_stop_and_export_fill_columns_on_small_pages(tmp_path, monkeypatch):
    seen = []
    add_slices = TraceBuilder.add_slices

    def watching(self, *args, **kwargs):
        seen.append(("build", hugepages_requested()))
        return add_slices(self, *args, **kwargs)

    monkeypatch.setattr(TraceBuilder, "add_slices", watching)
    from xpuprof.trace.write import chrome

    open_sink = chrome.ChunkSink

    def sink(*args, **kwargs):
        seen.append(("write", hugepages_requested()))
        return open_sink(*args, **kwargs)

    monkeypatch.setattr(chrome, "ChunkSink", sink)
    with xpuprof.profile(activities=["cpu"]) as prof:
        with xpuprof.record_function("step"):
            pass
    assert hugepages_requested()
    prof.export_chrome_trace(tmp_path / "t.json")
    assert ("build", False) in seen and ("write", False) in seen
    assert not any(requested for _, requested in seen)
    assert hugepages_requested()


class WatchingBuilder(TraceBuilder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def add_slices(self, *args, **kwargs):
        self.seen.append(hugepages_requested())
        return super().add_slices(*args, **kwargs)


def test_cuda_and_rocm_decoders_process_on_small_pages():
    pytest.importorskip("cupti", reason="cupti-python gives the CUPTI record dtypes")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_device_end_to_end as bench

    from xpuprof.backends.base import ProcessWindow
    from xpuprof.backends.cuda.emit import CuptiDecoder
    from xpuprof.backends.rocm.emit import RocprofDecoder

    t0 = 10**15
    for decode in (lambda b: CuptiDecoder(bench._cuda_names).process(b, ProcessWindow(t0, t0 + 10**12),
                                                                     bench._cuda_chunks(40, t0)[0]),
                   lambda b: RocprofDecoder(pid=4321).process(b, ProcessWindow(t0, t0 + 10**12),
                                                              bench._rocm_records(40, t0)[0])):
        builder = WatchingBuilder()
        decode(builder)
        assert builder.seen and not any(builder.seen)
        assert hugepages_requested()


def test_xpu_process_runs_on_small_pages():
    from xpuprof.backends.xpu.activity_api import XpuptiActivityApi

    seen = []

    class Session:  # what process() reads of its session; _process is where the decode happens
        stall = resources = None

        def _process(self, builder, window):
            seen.append(hugepages_requested())

    XpuptiActivityApi.process(Session(), TraceBuilder(), None)
    assert seen == [False]
    assert hugepages_requested()
