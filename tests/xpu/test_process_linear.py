"""The XPU process path interns names, filters the window and finds flows/external ids in
linear time (a hash of the distinct keys, dense correlation tables) instead of sorting whole columns.

The previous (np.unique-based) implementation is kept below verbatim as the reference: on a realistic
buffer from the PTI double (3,000 distinct kernel names, two devices, unseen device UUIDs, both
external-id kinds, P2P copies, comms, a window that drops part of the records) both must write
exactly the same trace.
"""
from __future__ import annotations

import ctypes

import numpy as np
import orjson
import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu import emit
from xpuprof.vendors import pti
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.clock import now_ns
from xpuprof.trace.builder import columns as builder_mod, keyindex
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

from .conftest import ALL


# ----------------------------------------------------------------------------- the previous code, verbatim
class PreviousFlows:
    def __init__(self, runtime_corr, end_corr):
        rt = np.unique(runtime_corr[runtime_corr != 0])
        ends = np.unique(end_corr[end_corr != 0])
        self.ids = np.intersect1d(rt, ends, assume_unique=True)

    def starts(self, corr):
        mask = np.zeros(len(corr), bool)
        if not len(corr) or not len(self.ids):
            return mask
        _, first = np.unique(corr, return_index=True)
        first = first[np.isin(corr[first], self.ids, assume_unique=False)]
        mask[first] = True
        return mask


class PreviousExternalIds:
    def __init__(self, ext):
        kinds = ext["_external_kind"]
        order = np.argsort(kinds != pti.ExternalKind.CUSTOM_0, kind="stable")
        corr = ext["_correlation_id"][order].astype(np.int64)
        ids = ext["_external_id"][order].astype(np.int64)
        uniq, first = np.unique(corr, return_index=True)
        self.corr, self.ids = uniq, ids[first]
        user = kinds == pti.ExternalKind.CUSTOM_1
        self.user_corr = ext["_correlation_id"][user].astype(np.int64)

    def lookup(self, corr):
        out = np.zeros(len(corr), np.int64)
        if not len(self.corr) or not len(corr):
            return out
        c = corr.astype(np.int64)
        pos = np.minimum(np.searchsorted(self.corr, c), len(self.corr) - 1)
        hit = self.corr[pos] == c
        out[hit] = self.ids[pos[hit]]
        return out


class PreviousRecordWriter(emit.XpuEmitter):
    def _in_window(self, rec, start_field, end_field, what):
        start = rec[start_field]
        bad = rec[end_field] < start
        if bad.any():
            self.errors.append(f"{int(bad.sum())} {what} records end before they start")
        if self.window is None:
            return rec
        ts = self._epoch(start)
        keep = self.window.contains(ts)
        lost = int((~keep).sum())
        if lost:
            self.b.count_dropped("xpu: out of window", lost)
        return rec[keep]

    def _device_index(self, uuids):
        if not len(uuids):
            return np.zeros(0, np.int64)
        keys = np.ascontiguousarray(uuids).view("V16").reshape(-1)
        uniq, inverse = np.unique(keys, return_inverse=True)
        known = self.ctx.device_uuids
        table = np.empty(len(uniq), np.int64)
        for i, u in enumerate(uniq.tolist()):
            raw = bytes(u)
            if raw not in known:
                known.append(raw)
            table[i] = known.index(raw)
        return table[inverse.reshape(-1)]

    def _intern_ptrs(self, ptrs):
        uniq, inverse = np.unique(ptrs, return_inverse=True)
        ids = np.fromiter((self.b.strings.intern(self.ctx.strings(p)) for p in uniq.tolist()), np.int32, len(uniq))
        return ids[inverse.reshape(-1)], ptrs != 0

    def _api_name_ids(self, group, api_id):
        key = (group.astype(np.uint64) << np.uint64(32)) | api_id.astype(np.uint64)
        uniq, inverse = np.unique(key, return_inverse=True)
        ids = np.fromiter((self.b.strings.intern(self.ctx.api_names(int(k) >> 32, int(k) & 0xFFFFFFFF))
                           for k in uniq.tolist()), np.int32, len(uniq))
        return ids[inverse.reshape(-1)]

    def _table_names(self, codes, fmt):
        uniq, inverse = np.unique(codes, return_inverse=True)
        ids = np.fromiter((self.b.strings.intern(fmt(int(c))) for c in uniq.tolist()), np.int32, len(uniq))
        return ids[inverse.reshape(-1)]

    def _device_rows(self, pid, queue):
        if not len(pid):
            return
        pairs = np.unique(np.stack([pid, queue], axis=1), axis=0)
        for d, q in pairs.tolist():
            if (d, q) not in self._streams:
                self._streams.add((d, q))
                self.b.set_thread_name(d, q, f"Stream {q}", sort_index=q)
            self._device_pids.add(d)


# ----------------------------------------------------------------------------- helpers
def _recorded(double, iterations, flags):
    api = XpuptiActivityApi(ALL, None, library=double.lib, device_uuids=[])  # every UUID unseen
    api.start()
    api.push_correlation_id(4242)
    double.lib.push_external_correlation(pti.ExternalKind.CUSTOM_1, 77)  # a user id beside the op id
    assert double.workload_holding_gil(iterations, flags) == 0
    double.lib.pop_external_correlation(pti.ExternalKind.CUSTOM_1)
    api.pop_correlation_id()
    api.stop()
    return api


def _trace(api, records, window, writer_cls, tmp_path, name):
    ctx = api.context()
    ctx.device_uuids = []
    builder = TraceBuilder()
    result = writer_cls(ctx, api.types).write(builder, window, records)
    path = write_chrome_trace(builder, tmp_path / name)
    trace = orjson.loads(path.read_bytes())
    trace["traceName"] = None
    return trace, result, ctx.device_uuids


def _intervals_by_name(trace):
    """xpu_submission_intervals lists kernel names in interning order, which the two paths may differ in:
    compared per name."""
    iv = trace.pop("xpu_submission_intervals", None)
    if iv is None:
        return None
    order = sorted(range(len(iv["names"])), key=iv["names"].__getitem__)
    return {k: ([v[i] for i in order] if k == "names" else
                {f: [c[i] for i in order] for f, c in v.items()} if isinstance(v, dict) else v)
            for k, v in iv.items()}


def _same(a, b):
    assert _intervals_by_name(a[0]) == _intervals_by_name(b[0])
    assert a[0] == b[0]  # every event, in order, and the metadata (dropped counts included)
    ka, kb = a[1].kernels, b[1].kernels
    for f in ("kernel_id", "start_ns", "end_ns", "device", "queue", "name"):
        assert getattr(ka, f).tolist() == getattr(kb, f).tolist()
    assert a[1].counts == b[1].counts and a[1].errors == b[1].errors
    assert a[2] == b[2]  # device indices handed out in the same order


@pytest.mark.parametrize("dense", [True, False], ids=["dense-tables", "wide-ids-fallback"])
def test_linear_process_writes_exactly_what_the_previous_code_wrote(pti_double, tmp_path, monkeypatch, dense):
    iterations = 600
    api = _recorded(pti_double, iterations, pti_double.MANY_NAMES | pti_double.P2P | pti_double.COMMS)
    records = api.decode()
    kernel_names = {ctypes.string_at(int(p)) for p in records.get(pti.ViewKind.DEVICE_GPU_KERNEL)["_name"]}
    assert len(kernel_names) > 200  # realistic: many distinct names to resolve
    # The window starts at the middle kernel: the records of the first half of the workload, of
    # every kind, are dropped (taken from the records, so no timing of this machine matters).
    kernel_starts = np.sort(records.get(pti.ViewKind.DEVICE_GPU_KERNEL)["_start_timestamp"].astype(np.int64))
    middle = int(kernel_starts[len(kernel_starts) // 2]) + int(api.clock_offset_ns)
    window = ProcessWindow(middle, now_ns() + 10**12)
    if not dense:  # correlation ids spread over a huge range take the sorting path
        monkeypatch.setattr(emit.CorrelationSpace, "over", classmethod(lambda cls, *cols: None))
    new = _trace(api, records, window, emit.XpuEmitter, tmp_path, "new.json")
    monkeypatch.setattr(emit, "_Flows", PreviousFlows)
    monkeypatch.setattr(emit, "_ExternalIds", PreviousExternalIds)
    old = _trace(api, records, window, PreviousRecordWriter, tmp_path, "old.json")
    assert new[0]["dropped_records"]["xpu: out of window"] > 0
    assert sum(e.get("ph") == "f" for e in new[0]["traceEvents"]) > 100
    assert any(e.get("args", {}).get("External id") == 4242 for e in new[0]["traceEvents"])
    _same(new, old)


def test_external_ids_prefer_profiler_ops_and_first_record_per_correlation():
    dt = pti.record_dtype(pti.ViewKind.EXTERNAL_CORRELATION)
    ext = np.zeros(6, dt)
    ext["_correlation_id"] = [5, 5, 6, 7, 7, 9]
    ext["_external_id"] = [50, 51, 60, 70, 71, 90]
    ext["_external_kind"] = [pti.ExternalKind.CUSTOM_1, pti.ExternalKind.CUSTOM_0, pti.ExternalKind.CUSTOM_1,
                             pti.ExternalKind.CUSTOM_0, pti.ExternalKind.CUSTOM_0, pti.ExternalKind.CUSTOM_3]
    query = np.array([5, 6, 7, 8, 9, 0, 1 << 31], np.uint32)
    want = PreviousExternalIds(ext).lookup(query).tolist()
    assert want == [51, 60, 70, 0, 90, 0, 0]
    assert emit._ExternalIds(ext).lookup(query).tolist() == want


# ----------------------------------------------------------------------------- keyindex
def _check_factorized(keys):
    k = np.asarray(keys)
    f = keyindex.factorize(k)
    assert f.uniq[f.codes].tolist() == k.astype(np.uint64).tolist()
    assert k.astype(np.uint64)[f.first].tolist() == f.uniq.tolist()
    assert len(set(f.uniq.tolist())) == len(f.uniq)
    _, first = np.unique(k, return_index=True)
    assert sorted(f.first.tolist()) == sorted(first.tolist())
    assert f.first_mask(len(k)).sum() == len(f.uniq)


@pytest.mark.parametrize("native", [True, False], ids=["c-hash", "numpy-fallback"])
def test_factorize_matches_unique_on_varied_keys(monkeypatch, native):
    if native and keyindex._native() is None:
        pytest.skip("xpuprof._native.keyindex is not built (python setup.py build_ext --inplace)")
    if not native:
        monkeypatch.setattr(keyindex, "_native_module", None)
    rng = np.random.default_rng(15)
    ptrs = (rng.integers(0, 3000, 20_000) * 96 + 0x7F00_0000_1000).astype(np.uint64)
    cases = [
        np.zeros(0, np.uint64), np.array([7], np.uint32), ptrs,  # pointers: a wide range, few distinct
        np.repeat(ptrs[:50], 40),  # long runs of one key
        rng.permutation(50_000).astype(np.uint32) + 3,  # counters: dense
        rng.integers(0, 1 << 63, 5_000, dtype=np.uint64),  # all distinct, wide (the table grows)
        np.array([0, (1 << 64) - 1, 0, 5, (1 << 64) - 1], np.uint64),  # extremes
        rng.integers(-5, 5, 1000).astype(np.int64),  # negative: dense over a small range
    ]
    for keys in cases:
        _check_factorized(keys)


def test_factorize_refuses_non_integer_keys():
    with pytest.raises(TypeError, match="integer keys"):
        keyindex.factorize(np.array([1.5, 2.5]))


def test_pack_pairs_only_when_both_fit():
    assert keyindex.pack_pairs(np.array([0, -1]), np.array([7, 1 << 31])) is not None
    assert keyindex.pack_pairs(np.array([0]), np.array([1 << 40])) is None


def test_columns_of_one_value_are_stored_once_and_write_the_same_trace(pti_double, tmp_path, monkeypatch):
    api = _recorded(pti_double, 300, pti_double.MANY_NAMES | pti_double.P2P | pti_double.COMMS)
    records = api.decode()
    ctx = api.context()
    ctx.device_uuids = []
    builder = TraceBuilder()
    emit.XpuEmitter(ctx, api.types).write(builder, None, records)
    stored_once = [k for b in builder.slices for k, c in b.args.items() if c.values.ndim == 1
                   and c.values.strides[0] == 0 and len(c.values) > 1]
    assert {"context", "bytes", "Return_code"} <= set(stored_once)  # one value in every row of its kind
    once = _trace(api, records, None, emit.XpuEmitter, tmp_path, "once.json")
    monkeypatch.setattr(builder_mod, "stored_once", lambda values: values)
    every_row = _trace(api, records, None, emit.XpuEmitter, tmp_path, "every.json")
    _same(once, every_row)


def test_stored_once_keeps_columns_that_differ():
    col = np.array([0.0, -0.0, 0.0])  # equal, but written differently
    assert builder_mod.stored_once(col) is col
    nan = np.array([np.nan, np.nan])
    assert builder_mod.stored_once(nan) is nan
    same = builder_mod.stored_once(np.array([7, 7, 7], np.int64))
    assert same.strides[0] == 0 and same.tolist() == [7, 7, 7]
    rows = builder_mod.stored_once(np.array([[256, 1, 1]] * 4, np.int64))  # a grid: one list for every row
    assert rows.strides[0] == 0 and rows.tolist() == [[256, 1, 1]] * 4
    differ = np.array([[256, 1, 1], [256, 2, 1]], np.int64)
    assert builder_mod.stored_once(differ) is differ


def test_distinct_rows_equal_the_set_of_row_tuples():
    rng = np.random.default_rng(12)
    a = rng.integers(-3, 3, 5000)
    b = rng.integers(0, 1 << 40, 5000) % 7 + (1 << 40)
    c = rng.integers(0, 4, 5000).astype(np.uint8)
    assert keyindex.distinct_rows(a, b, c) == sorted(set(zip(a.tolist(), b.tolist(), c.tolist())))
    one = np.broadcast_to(np.int64(5), (5000,))  # a column stored once
    assert keyindex.distinct_rows(one, c) == sorted(set(zip([5] * 5000, c.tolist())))
    assert keyindex.distinct_rows(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []
