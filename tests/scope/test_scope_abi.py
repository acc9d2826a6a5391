"""The metrics-scope ctypes mirrors against intel/pti-gpu ``pti_metrics.h`` / ``pti_metrics_scope.h`` (x86-64):
struct sizes and offsets, and the argument types of every bound function."""
from __future__ import annotations

import ctypes

import pytest

from xpuprof.vendors import pti_metrics as ms

LAYOUTS = {
    ms.PtiDeviceProperties: (40, {"_handle": 0, "_domain": 8, "_bus": 9, "_device": 10, "_function": 11,
                                  "_model_name": 16, "_uuid": 24}),
    ms.ScopeRecordMetadata: (40, {"_struct_size": 0, "_metrics_count": 8, "_value_types": 16, "_metric_names": 24,
                                  "_metric_units": 32}),
    ms.ScopeCollectionBufferProperties: (56, {"_struct_size": 0, "_device_handle": 8, "_num_scopes": 16,
                                              "_buffer_size": 24, "_host_time_first_scope_append": 32,
                                              "_host_time_last_scope_append": 40, "_metric_group_name": 48}),
    ms.ScopeRecord: (32, {"_kernel_id": 0, "_queue": 8, "_kernel_name": 16, "_metrics_values": 24}),
    ms.MetricsGroupProperties: (48, {"_handle": 0, "_type": 8, "_domain": 12, "_metric_count": 16,
                                     "_metric_properties": 24, "_name": 32, "_description": 40}),
    ms.MetricProperties: (40, {"_handle": 0, "_name": 8, "_description": 16, "_metric_type": 24, "_value_type": 28,
                               "_units": 32}),
}


@pytest.mark.parametrize("struct", list(LAYOUTS), ids=lambda s: s.__name__)
def test_struct_layout_matches_the_header(struct):
    size, offsets = LAYOUTS[struct]
    assert ctypes.sizeof(struct) == size
    assert {name: getattr(struct, name).offset for name in offsets} == offsets


def test_scope_record_dtype_matches_the_ctypes_record():
    assert ms.SCOPE_RECORD_DTYPE.itemsize == ctypes.sizeof(ms.ScopeRecord)


P = ctypes.POINTER
H, SZ, U32, VP = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p

# The C prototypes, argument by argument (enums are 32-bit; handles are pointers).
HEADER_ARGTYPES = {
    "ptiMetricsGetDevices": [P(ms.PtiDeviceProperties), P(U32)],
    "ptiMetricsGetMetricGroups": [VP, P(ms.MetricsGroupProperties), P(U32)],
    "ptiMetricsGetMetricsProperties": [VP, P(ms.MetricProperties)],
    "ptiMetricsScopeEnable": [P(H)],
    # (handle, pti_metrics_scope_mode_t, pti_device_handle_t* devices, uint32_t device_count, const char**, size_t)
    "ptiMetricsScopeConfigure": [H, U32, P(VP), U32, P(ctypes.c_char_p), SZ],
    "ptiMetricsScopeQueryCollectionBufferSize": [H, SZ, P(SZ)],
    "ptiMetricsScopeSetCollectionBufferSize": [H, SZ],
    "ptiMetricsScopeStartCollection": [H],
    "ptiMetricsScopeStopCollection": [H],
    "ptiMetricsScopeGetCollectionBuffersCount": [H, P(SZ)],
    "ptiMetricsScopeGetCollectionBuffer": [H, SZ, P(VP), P(SZ)],
    "ptiMetricsScopeGetCollectionBufferProperties": [H, VP, P(ms.ScopeCollectionBufferProperties)],
    "ptiMetricsScopeQueryMetricsBufferSize": [H, VP, P(SZ), P(SZ)],
    "ptiMetricsScopeCalculateMetrics": [H, VP, VP, SZ, P(SZ)],
    "ptiMetricsScopeGetMetricsMetadata": [H, P(ms.ScopeRecordMetadata)],
    "ptiMetricsScopeDisable": [H],
}


@pytest.mark.parametrize("name", sorted(HEADER_ARGTYPES))
def test_bound_argtypes_match_the_header(name):
    got = ms.SCOPE_SIGNATURES[name]
    want = HEADER_ARGTYPES[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert ctypes.sizeof(g) == ctypes.sizeof(w) and g._type_ == w._type_, (name, i, g, w)
