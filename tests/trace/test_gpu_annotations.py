"""gpu_user_annotation slices: one per (device, stream, annotation), enclosing its device ops."""
import numpy as np

from slice_tables import slice_table
import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.trace import TraceBuilder
from xpuprof.trace.builder.gpu_annotations import add_gpu_user_annotations


def _ann_slices(builder):
    t = slice_table(builder, ActivityType.GPU_USER_ANNOTATION)
    return sorted(zip(t["name"].tolist(), t["ts"].tolist(), t["dur"].tolist(), t["pid"].tolist(), t["tid"].tolist()))


def test_groups_by_device_stream_and_annotation():
    b = TraceBuilder()
    b.add_slices(names=["fwd", "bwd"], ts=[1000, 5000], dur=[3000, 3000], pid=1, tid=1,
                 cat=ActivityType.USER_ANNOTATION, external_id=[11, 12])
    # fwd's ops on two streams of device 0; bwd's on stream 7; one op with no link; one linked to
    # an id that is no annotation (a runtime correlation) -> ignored.
    b.add_slices(names=["k1", "k2", "k3", "k4", "k5", "k6"], ts=[1100, 1500, 1200, 5100, 5200, 6000],
                 dur=[100, 100, 50, 10, 10, 10], pid=0, tid=[3, 3, 4, 7, 7, 7], cat=ActivityType.CONCURRENT_KERNEL,
                 external_id=[11, 11, 11, 12, 0, 99])
    b.add_slices(names=["Memcpy HtoD"], ts=[5050], dur=[20], pid=0, tid=7, cat=ActivityType.GPU_MEMCPY,
                 external_id=[12])
    assert add_gpu_user_annotations(b) == 3
    assert _ann_slices(b) == [
        ("bwd", 5049, 5110 - 5050 + 2, 0, 7),
        ("fwd", 1099, 1600 - 1100 + 2, 0, 3),
        ("fwd", 1199, 50 + 2, 0, 4),
    ]


def test_nothing_linked_adds_nothing():
    b = TraceBuilder()
    b.add_slices(names=["k"], ts=[0], dur=[1], pid=0, tid=1, cat=ActivityType.CONCURRENT_KERNEL, external_id=[5])
    assert add_gpu_user_annotations(b) == 0
    assert len(_ann_slices(b)) == 0


def test_profile_with_sim_draws_annotations_on_device_rows():
    with xpuprof.profile(backends=["sim"]) as prof:
        with xpuprof.record_function("outer_step"):
            np.ones(64).sum()
    t = slice_table(prof.builder, ActivityType.GPU_USER_ANNOTATION)
    kernels = slice_table(prof.builder, ActivityType.CONCURRENT_KERNEL)
    assert len(kernels["name"]) and "outer_step" in set(t["name"].tolist())
    # each annotation slice encloses the kernels on its row
    for name, ts, dur, pid, tid in zip(t["name"], t["ts"], t["dur"], t["pid"], t["tid"]):
        on_row = (kernels["pid"] == pid) & (kernels["tid"] == tid)
        assert (kernels["ts"][on_row] >= ts).all()


def test_not_selected_means_not_drawn():
    with xpuprof.profile(backends=["sim"], activities=["kernel", "user_annotation", "runtime"]) as prof:
        with xpuprof.record_function("outer_step"):
            pass
    assert len(slice_table(prof.builder, ActivityType.GPU_USER_ANNOTATION)["name"]) == 0
