"""The column decode: PTI records straight into one typed column per field, in C (two passes, the
capture window on the way), equal to the whole-record decode and to its numpy fallback."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from xpuprof.backends import record_columns
from xpuprof.backends.xpu import records
from xpuprof.vendors import pti

from .test_decode import api, every_kind, ext, kernel, memcpy, sync

V = pti.ViewKind


@pytest.fixture(params=["C", "numpy"])
def engine(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(record_columns, "_native_module", None)
    return request.param


def _as_column(values: np.ndarray, column: np.ndarray) -> list:
    return values.astype(column.dtype).tolist() if column.dtype.kind in "iu" else values.tolist()


def test_every_emitted_field_equals_the_whole_record_decode(engine):
    whole = records.decode_buffers([every_kind()], records.LayoutWalker())
    cols = records.decode_records([every_kind()], records.LayoutWalker())
    assert cols.unknown == {} and not cols.windowed
    for kind, fields in records.EMITTED_FIELDS.items():
        rec, col = whole.get(kind), cols.get(kind)
        assert len(col) == len(rec), kind
        for name in fields:
            assert _as_column(rec[name], col[name]) == col[name].tolist(), (kind, name)
    k = cols.get(V.DEVICE_GPU_KERNEL)
    assert k["_start_timestamp"].dtype == np.int64 and k["_name"].dtype == np.uint64  # final types, no astype
    assert k["_correlation_id"].dtype == np.int64 and k["_device_uuid"].shape == (2, 16)


def test_the_window_keeps_what_starts_inside_and_counts_the_rest_per_kind(engine):
    buf = b"".join([ext(1, 42), api(6, 1, 100, 200), kernel(1, 1, 300, 400), api(6, 2, 2500, 2600),
                    kernel(2, 2, 2000, 2100), memcpy(3, 5000, 5100), sync(4, 300, 250)])
    # The clock offset moves PTI time onto the window's (lo <= start + offset <= hi).
    got = records.decode_records([buf], records.LayoutWalker(), window=(1_100, 2_999, 1_000))
    assert got.windowed
    assert got.get(V.RUNTIME_API)["_correlation_id"].tolist() == [1]
    assert got.get(V.DEVICE_GPU_KERNEL)["_kernel_id"].tolist() == [1]
    assert got.get(V.EXTERNAL_CORRELATION)["_external_id"].tolist() == [42]  # never windowed: only looked up
    assert len(got.get(V.DEVICE_GPU_MEM_COPY)) == 0 and len(got.get(V.DEVICE_SYNCHRONIZATION)) == 1
    assert got.out_of_window == {int(V.RUNTIME_API): 1, int(V.DEVICE_GPU_KERNEL): 1, int(V.DEVICE_GPU_MEM_COPY): 1}
    assert got.misordered == {int(V.DEVICE_SYNCHRONIZATION): 1}  # over every record, kept or not
    assert got.get(V.DEVICE_GPU_MEM_COPY)["_bytes"].dtype == np.int64  # an empty kind still has typed columns


def test_buffers_fill_one_set_of_columns_in_order_and_are_released():
    bufs = [kernel(1, 1, 10, 20) + api(6, 1, 1, 2), kernel(2, 2, 30, 40), api(6, 2, 3, 4) + kernel(3, 3, 50, 60)]
    got = records.decode_records(bufs, records.LayoutWalker(), release=True)
    assert bufs == [None, None, None] and got.buffers == 3
    assert got.get(V.DEVICE_GPU_KERNEL)["_kernel_id"].tolist() == [1, 2, 3]
    assert got.get(V.RUNTIME_API)["_correlation_id"].tolist() == [1, 2]


def test_c_and_numpy_give_the_same_columns_and_counts(monkeypatch):
    rng = np.random.default_rng(11)
    makers = [lambda i: kernel(i, i, i * 7, i * 7 + 3), lambda i: api(6, i, i * 5, i * 5 + 1), lambda i: ext(i, i * 10),
              lambda i: memcpy(i, i * 3, i * 3 + 2), lambda i: sync(i, i * 4, i * 4 - (i % 3))]
    bufs = [b"".join(makers[int(c)](300 * b + i + 10) for i, c in enumerate(rng.integers(0, len(makers), 300)))
            for b in range(4)]
    window = (2_000, 9_000, 17)
    fast = records.decode_records(list(bufs), records.LayoutWalker(), window=window)
    monkeypatch.setattr(record_columns, "_native_module", None)
    slow = records.decode_records(list(bufs), records.LayoutWalker(), window=window)
    assert (fast.out_of_window, fast.misordered, fast.unknown) == (slow.out_of_window, slow.misordered, slow.unknown)
    assert fast.by_kind.keys() == slow.by_kind.keys()
    for kind, cols in fast.by_kind.items():
        for name in cols.names:
            assert cols[name].dtype == slow.get(kind)[name].dtype
            assert cols[name].tobytes() == slow.get(kind)[name].tobytes(), (kind, name)


def test_a_record_past_the_buffer_end_is_a_decode_error(engine):
    # Located at an offset PTI's own walk could hand out (the walker does not know record sizes).
    buf = api(6, 1, 1, 2) + kernel(1, 1, 50, 60)[:100]

    def walker(_buf):
        return np.array([0, 48], np.uint64)

    with pytest.raises(records.BufferDecodeError, match="a 184-byte record at offset 48 runs past the buffer's end"):
        records.decode_records([buf], walker)


def test_unknown_kinds_are_counted_not_decoded(engine):
    future = struct.pack("<IIQQQ", 13, 0, 1, 2, 3)
    sizes = dict(pti.record_sizes())
    sizes[13] = len(future)
    got = records.decode_records([api(6, 1, 1, 2) + future + future], records.LayoutWalker(sizes))
    assert got.unknown == {13: 2} and len(got.get(V.RUNTIME_API)) == 1


def test_malformed_plans_and_small_columns_are_refused_not_written_past():
    native = record_columns._native()
    if native is None:
        pytest.skip("xpuprof._native.records is not built")
    buf = api(6, 1, 1, 2) + api(6, 2, 3, 4)
    offsets = np.array([0, 48], np.uint64)
    with pytest.raises(ValueError, match="malformed decode plan"):
        native.plan_count(buf, offsets, np.array([1, 6, 48, 8, 16, 1, 44, 8, 0, 8, 0], np.int64), None)  # past 48
    plan = records.column_plan()
    outs = plan.allocate([1] * len(plan.kinds))  # one row per kind: the second runtime record does not fit
    pos = np.zeros(len(plan.kinds), np.int64)
    with pytest.raises(ValueError, match="columns of record kind 6 are full"):
        native.plan_fill(buf, offsets, plan.array, outs, pos, None)
