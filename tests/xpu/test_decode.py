"""The vectorized decoder on buffers built byte by byte to PTI's layouts."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from xpuprof.backends.xpu import records as decode
from xpuprof.vendors import pti

UUID = bytes(range(16))


def kernel(corr, kid, start, end, queue=7):
    head = struct.pack("<I4xQQQQQQII16s16s", 1, 0x1000, 0xC0, 0xAA, 0, 0, kid, corr, 99, b"0000:3a:00.0", UUID)
    times = struct.pack("<QQQQQQQQ", start - 3, start, end, start - 2, start - 9, start - 8, 5, queue)
    tail = struct.pack("<I4xQII", 3, 0xD0, 1, 2)
    rec = head + times + tail
    assert len(rec) == 184
    return rec


def api(kind, corr, start, end, group=3, api_id=1):
    rec = struct.pack("<I4xQQIIIIII", kind, start, end, group, api_id, 1234, 5678, corr, 0)
    assert len(rec) == 48
    return rec


def ext(corr, ext_id, kind=2):
    rec = struct.pack("<IIQI4x", 7, corr, ext_id, kind)
    assert len(rec) == 24
    return rec


def memcpy(corr, start, end, nbytes=4096):
    rec = (struct.pack("<IIIIQQQ16s16sQII", 8, 6, 1, 2, 0x1000, 0xC0, 0xBB, b"", UUID, 11, corr, 5678)
           + struct.pack("<QQQQQQQII", start - 2, start, end, start - 1, nbytes, 7, 0xD0, 0, 0))
    assert len(rec) == 152
    return rec


def fill(corr, start, end):
    rec = (struct.pack("<IIQQQ16s16sQII", 9, 2, 0x1000, 0xC0, 0xBB, b"", UUID, 12, corr, 5678)
           + struct.pack("<QQQQQQQQII", 0, start, end, 0, 64, 0, 7, 0xD0, 0, 0))
    assert len(rec) == 152
    return rec


def p2p(corr, start, end):
    rec = (struct.pack("<IIIIQQQ16s16s16s16sQII", 10, 10, 2, 2, 0x1000, 0xC0, 0xBB, b"", b"", UUID, UUID, 13, corr, 1)
           + struct.pack("<QQQQQQQQII", 0, start, end, 0, 8, 7, 0xD0, 0xD1, 0, 0))
    assert len(rec) == 192
    return rec


def sync(corr, start, end):
    rec = struct.pack("<IIQQQQQIIIIII", 11, 6, 0xC0, 0x1000, 0xE0, start, end, 5678, corr, 1, 0, 4, 1)
    assert len(rec) == 72
    return rec


def overhead(start, end):
    rec = struct.pack("<I4xQQIIQQI4x", 5, start, end, 5678, 0, 3, 250, 3)
    assert len(rec) == 56
    return rec


def comms(start, end):
    rec = struct.pack("<I4xQQIIQQQQ", 12, start, end, 1234, 5678, 64, 32, 77, 0xCC)
    assert len(rec) == 64
    return rec


def every_kind() -> bytes:
    return b"".join([ext(1, 42), api(6, 1, 100, 200), api(3, 1, 120, 180, group=1), kernel(1, 1, 300, 400),
                     memcpy(2, 500, 600), fill(3, 700, 800), p2p(4, 900, 1000), sync(5, 1100, 1200),
                     overhead(50, 1300), comms(1400, 1500), kernel(6, 2, 1600, 1700)])


@pytest.fixture(params=["native", "numpy"])
def native_mode(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(decode, "_native_module", None)
    return request.param


def test_every_kind_decodes_with_its_fields(native_mode):
    d = decode.decode_buffers([every_kind()], decode.LayoutWalker())
    assert d.record_count == 11 and d.unknown == {}
    k = d.get(pti.ViewKind.DEVICE_GPU_KERNEL)
    assert k["_kernel_id"].tolist() == [1, 2] and k["_start_timestamp"].tolist() == [300, 1600]
    assert k["_sycl_queue_id"].tolist() == [7, 7] and bytes(k["_device_uuid"][0]) == UUID
    assert k["_pci_address"][0] == b"0000:3a:00.0" and k["_device_handle"][0] == 0xD0 and k["_engine_index"][0] == 2
    assert k["_append_timestamp"][0] == 297 and k["_sycl_invocation_id"][0] == 3
    assert d.get(pti.ViewKind.RUNTIME_API)["_api_group"].tolist() == [3]
    assert d.get(pti.ViewKind.DRIVER_API)["_start_timestamp"].tolist() == [120]
    assert d.get(pti.ViewKind.EXTERNAL_CORRELATION)["_external_id"].tolist() == [42]
    m = d.get(pti.ViewKind.DEVICE_GPU_MEM_COPY)
    assert m["_memcpy_type"].tolist() == [6] and m["_bytes"].tolist() == [4096] and m["_sycl_queue_id"][0] == 7
    assert d.get(pti.ViewKind.DEVICE_GPU_MEM_FILL)["_bytes"].tolist() == [64]
    assert d.get(pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P)["_dst_device_handle"].tolist() == [0xD1]
    s = d.get(pti.ViewKind.DEVICE_SYNCHRONIZATION)
    assert s["_event_handle"].tolist() == [0xE0] and s["_api_group"].tolist() == [1]
    assert d.get(pti.ViewKind.COLLECTION_OVERHEAD)["_overhead_duration_ns"].tolist() == [250]
    assert d.get(pti.ViewKind.COMMUNICATION)["_communicator_id"].tolist() == [77]


def test_records_split_across_buffers_keep_buffer_order(native_mode):
    bufs = [kernel(1, 1, 10, 20) + api(6, 1, 1, 2), kernel(2, 2, 30, 40), api(6, 2, 3, 4) + kernel(3, 3, 50, 60)]
    d = decode.decode_buffers(bufs, decode.LayoutWalker())
    assert d.buffers == 3
    assert d.get(1)["_kernel_id"].tolist() == [1, 2, 3]
    assert d.get(6)["_correlation_id"].tolist() == [1, 2]


def test_unknown_kinds_are_skipped_with_a_count(native_mode):
    future = struct.pack("<IIQQQ", 13, 0, 1, 2, 3)
    sizes = dict(pti.record_sizes())
    sizes[13] = len(future)
    d = decode.decode_buffers([api(6, 1, 1, 2) + future + future + kernel(1, 1, 50, 60)], decode.LayoutWalker(sizes))
    assert d.unknown == {13: 2}
    assert len(d.get(6)) == 1 and len(d.get(1)) == 1


def test_unknown_kind_without_a_size_cannot_be_walked(native_mode):
    with pytest.raises(decode.BufferDecodeError, match="unknown kind 13 at offset 48"):
        decode.decode_buffers([api(6, 1, 1, 2) + struct.pack("<IIQQQ", 13, 0, 1, 2, 3)], decode.LayoutWalker())


def test_truncated_buffers_are_rejected(native_mode):
    buf = api(6, 1, 1, 2) + kernel(1, 1, 50, 60)
    with pytest.raises(decode.BufferDecodeError, match=r"truncated PTI buffer: the record at offset 48 \(kind 1\) "
                                                       r"needs 184 bytes but only 100"):
        decode.decode_buffers([buf[:148]], decode.LayoutWalker())
    with pytest.raises(decode.BufferDecodeError, match="no complete kind field"):
        decode.decode_buffers([buf[:50]], decode.LayoutWalker())


def test_pti_walker_uses_the_library_walk_and_reports_its_errors(pti_double):
    walker = decode.PtiWalker(pti_double.lib.next_record_address())
    future = struct.pack("<IIQQQ", 13, 0, 1, 2, 3)  # the double knows kind 13's size, as PTI knows its own
    d = decode.decode_buffers([every_kind() + future], walker)
    assert d.record_count == 12 and d.unknown == {13: 1}
    with pytest.raises(decode.BufferDecodeError, match="ptiViewGetNextRecord stopped with result 3 after 1 records"):
        decode.decode_buffers([api(6, 1, 1, 2) + kernel(1, 1, 50, 60)[:100]], walker)


def test_empty_input_gives_empty_typed_arrays():
    d = decode.decode_buffers([], decode.LayoutWalker())
    assert d.record_count == 0
    assert d.get(pti.ViewKind.DEVICE_GPU_KERNEL).dtype == pti.record_dtype(pti.ViewKind.DEVICE_GPU_KERNEL)


def test_random_interleavings_decode_identically_with_and_without_c(monkeypatch):
    rng = np.random.default_rng(7)
    makers = [lambda i: kernel(i, i, i, i + 1), lambda i: api(6, i, i, i + 1), lambda i: ext(i, i * 10),
              lambda i: memcpy(i, i, i + 2), lambda i: sync(i, i, i + 3)]
    buf = b"".join(makers[int(c)](i + 10) for i, c in enumerate(rng.integers(0, len(makers), 500)))
    fast = decode.decode_buffers([buf], decode.LayoutWalker())
    monkeypatch.setattr(decode, "_native_module", None)
    slow = decode.decode_buffers([buf], decode.LayoutWalker())
    assert fast.by_kind.keys() == slow.by_kind.keys()
    for k in fast.by_kind:
        assert fast.by_kind[k].tobytes() == slow.by_kind[k].tobytes()
