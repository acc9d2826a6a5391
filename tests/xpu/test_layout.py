"""Every mirrored PTI record: size and field offsets against the documented PTI 1.x x86-64 layouts
(pti-and-level-zero.md §7.2), and against the same structs compiled by the system C compiler."""
from __future__ import annotations

import ctypes

import pytest

from xpuprof.vendors import pti

DOCUMENTED = {
    pti.RecordKernel: (184, {
        "_view_kind": 0, "_queue_handle": 8, "_context_handle": 16, "_name": 24, "_source_file_name": 32,
        "_source_line_number": 40, "_kernel_id": 48, "_correlation_id": 56, "_thread_id": 60, "_pci_address": 64,
        "_device_uuid": 80, "_append_timestamp": 96, "_start_timestamp": 104, "_end_timestamp": 112,
        "_submit_timestamp": 120, "_sycl_task_begin_timestamp": 128, "_sycl_enqk_begin_timestamp": 136,
        "_sycl_node_id": 144, "_sycl_queue_id": 152, "_sycl_invocation_id": 160, "_device_handle": 168,
        "_engine_ordinal": 176, "_engine_index": 180}),
    pti.RecordMemoryCopy: (152, {
        "_view_kind": 0, "_memcpy_type": 4, "_mem_src": 8, "_mem_dst": 12, "_queue_handle": 16,
        "_context_handle": 24, "_name": 32, "_pci_address": 40, "_device_uuid": 56, "_mem_op_id": 72,
        "_correlation_id": 80, "_thread_id": 84, "_append_timestamp": 88, "_start_timestamp": 96,
        "_end_timestamp": 104, "_submit_timestamp": 112, "_bytes": 120, "_sycl_queue_id": 128,
        "_device_handle": 136, "_engine_ordinal": 144, "_engine_index": 148}),
    pti.RecordMemoryCopyP2P: (192, {
        "_view_kind": 0, "_memcpy_type": 4, "_mem_src": 8, "_mem_dst": 12, "_queue_handle": 16,
        "_context_handle": 24, "_name": 32, "_src_pci_address": 40, "_dst_pci_address": 56, "_src_uuid": 72,
        "_dst_uuid": 88, "_mem_op_id": 104, "_correlation_id": 112, "_thread_id": 116, "_append_timestamp": 120,
        "_start_timestamp": 128, "_end_timestamp": 136, "_submit_timestamp": 144, "_bytes": 152,
        "_sycl_queue_id": 160, "_src_device_handle": 168, "_dst_device_handle": 176, "_engine_ordinal": 184,
        "_engine_index": 188}),
    pti.RecordMemoryFill: (152, {
        "_view_kind": 0, "_mem_type": 4, "_queue_handle": 8, "_context_handle": 16, "_name": 24,
        "_pci_address": 32, "_device_uuid": 48, "_mem_op_id": 64, "_correlation_id": 72, "_thread_id": 76,
        "_append_timestamp": 80, "_start_timestamp": 88, "_end_timestamp": 96, "_submit_timestamp": 104,
        "_bytes": 112, "_value_for_set": 120, "_sycl_queue_id": 128, "_device_handle": 136,
        "_engine_ordinal": 144, "_engine_index": 148}),
    pti.RecordApi: (48, {
        "_view_kind": 0, "_start_timestamp": 8, "_end_timestamp": 16, "_api_group": 24, "_api_id": 28,
        "_process_id": 32, "_thread_id": 36, "_correlation_id": 40, "_return_code": 44}),
    pti.RecordExternalCorrelation: (24, {"_view_kind": 0, "_correlation_id": 4, "_external_id": 8,
                                         "_external_kind": 16}),
    pti.RecordSynchronization: (72, {
        "_view_kind": 0, "_synch_type": 4, "_context_handle": 8, "_queue_handle": 16, "_event_handle": 24,
        "_start_timestamp": 32, "_end_timestamp": 40, "_thread_id": 48, "_correlation_id": 52,
        "_number_wait_events": 56, "_return_code": 60, "_api_id": 64, "_api_group": 68}),
    pti.RecordOverhead: (56, {
        "_view_kind": 0, "_overhead_start_timestamp_ns": 8, "_overhead_end_timestamp_ns": 16,
        "_overhead_thread_id": 24, "_api_id": 28, "_overhead_count": 32, "_overhead_duration_ns": 40,
        "_overhead_kind": 48}),
    pti.RecordComms: (64, {
        "_view_kind": 0, "_start_timestamp": 8, "_end_timestamp": 16, "_process_id": 24, "_thread_id": 28,
        "_send_size": 32, "_recv_size": 40, "_communicator_id": 48, "_name": 56}),
}

C_NAMES = {pti.RecordKernel: "rec_kernel", pti.RecordMemoryCopy: "rec_memcpy", pti.RecordMemoryCopyP2P: "rec_p2p",
           pti.RecordMemoryFill: "rec_fill", pti.RecordApi: "rec_api", pti.RecordExternalCorrelation: "rec_ext",
           pti.RecordSynchronization: "rec_sync", pti.RecordOverhead: "rec_overhead", pti.RecordComms: "rec_comms"}


@pytest.mark.parametrize("struct", list(DOCUMENTED), ids=lambda s: s.__name__)
def test_ctypes_and_numpy_layouts_match_the_documented_offsets(struct):
    size, offsets = DOCUMENTED[struct]
    assert ctypes.sizeof(struct) == size
    assert {name: getattr(struct, name).offset for name, _ in struct._fields_} == offsets
    kinds = [k for k, s in pti.RECORD_STRUCTS.items() if s is struct]
    for kind in kinds:
        dt = pti.record_dtype(kind)
        assert dt.itemsize == size
        assert {name: dt.fields[name][1] for name in dt.names} == offsets


@pytest.mark.parametrize("struct", list(DOCUMENTED), ids=lambda s: s.__name__)
def test_layouts_match_the_c_compiler(pti_double, struct):
    size, offsets = DOCUMENTED[struct]
    kind = next(k for k, s in pti.RECORD_STRUCTS.items() if s is struct)
    assert pti_double.c.xpd_record_size(kind) == size
    checked = 0
    for name, off in offsets.items():
        got = pti_double.c.xpd_field_offset(f"{C_NAMES[struct]}.{name}".encode())
        if got != ctypes.c_size_t(-1).value:
            assert got == off, name
            checked += 1
    assert checked >= 3


def test_record_sizes_are_the_v2_strides():
    sizes = pti.record_sizes()
    assert sizes[pti.ViewKind.DEVICE_GPU_KERNEL] == 184 and sizes[pti.ViewKind.DEVICE_GPU_MEM_COPY] == 152
    assert sizes[pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P] == 192 and sizes[pti.ViewKind.DEVICE_GPU_MEM_FILL] == 152
    assert all(v % 8 == 0 for v in sizes.values())


def test_enum_values_follow_pti_view_h():
    assert pti.ViewKind.DEVICE_SYNCHRONIZATION == 11 and pti.ViewKind.COMMUNICATION == 12
    assert pti.ExternalKind.CUSTOM_0 == 2 and pti.ExternalKind.CUSTOM_1 == 3
    assert pti.MEMCPY_TYPES[6] == "H2D" and pti.MEMCPY_TYPES[15] == "S2S" and len(pti.MEMCPY_TYPES) == 16
    assert pti.SYNC_TYPES[6] == "HOST_COMMAND_QUEUE" and pti.ApiGroup.ALL == 0x7FFFFFFF
