"""rocprofiler-sdk buffers -> record arrays (the records stage of the ROCm pipeline).

rocprofiler's buffer callback (C, ``xpuprof._native.rocbuf``) groups the records it receives by
(category, kind) into contiguous blobs of one stride; ``rows_of`` turns one blob into a
structured array of the mirrored layout (``vendors.rocprofiler``), the record's own ``size``
picking the SDK generation's mirror. ``RocmRecords`` holds a session's record arrays and the
tables resolving them (API and kernel names, agents), and the HIP event operations the C
callbacks captured from the API arguments (``EVENT_OP_DTYPE``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...vendors import rocprofiler as rocprof

# HIP event operations captured from the HIP API arguments (by the C callback part).
EVENT_OP_DTYPE = np.dtype([("correlation_id", "<u8"), ("op", "u1"), ("event", "<u8"), ("stream", "<u8")])
OP_RECORD, OP_STREAM_WAIT, OP_EVENT_SYNC, OP_LAUNCH = 1, 2, 3, 4  # OP_LAUNCH: only the stream
OP_STREAM_SYNC, OP_DEVICE_SYNC = 5, 6
SYNC_TYPES = {OP_STREAM_WAIT: "Stream Wait Event", OP_EVENT_SYNC: "Event Sync", OP_STREAM_SYNC: "Stream Sync",
              OP_DEVICE_SYNC: "Device Sync"}


@dataclass
class RocmRecords:
    hip_api: np.ndarray | None = None  # rocprof.HIP_API_DTYPE (SDK 0.x) or HIP_API_V1_DTYPE (1.x)
    dispatch: np.ndarray | None = None  # rocprof.DISPATCH_DTYPE
    copies: np.ndarray | None = None  # rocprof.COPY_DTYPE (0.x) or COPY_V1_DTYPE (1.x)
    event_ops: np.ndarray | None = None  # EVENT_OP_DTYPE
    api_names: dict[int, str] = field(default_factory=dict)  # HIP operation -> function name
    kernel_names: dict[int, str] = field(default_factory=dict)  # kernel_id -> symbol
    agent_device: dict[int, int] = field(default_factory=dict)  # agent handle -> device index
    dropped: int = 0


def rows_of(blob: tuple[int, bytes], layout) -> np.ndarray:
    """One (stride, rows) group from ``rocbuf.split`` as a structured array.

    ``layout`` is a ctypes mirror (records without a size field) or a ``rocprof.KNOWN_LAYOUTS``
    kind, whose mirror each record's own leading ``u64 size`` picks (SDK 0.x or 1.x).
    """
    stride, data = blob
    n = len(data) // stride if stride else 0
    if isinstance(layout, str):
        sizes = np.ndarray((n,), dtype="<u8", buffer=data, strides=(stride,)) if n else np.zeros(0, "<u8")
        layout = rocprof.layout_for(layout, sizes)
    dtype = rocprof.numpy_dtype(layout)
    if n and stride < dtype.itemsize:
        raise rocprof.RocprofAbiError(f"{layout.__name__}: {stride}-byte rows, the mirrored layout needs "
                                      f"{dtype.itemsize}")
    return np.ndarray((n,), dtype=dtype, buffer=data, strides=(stride,)).copy() if n else np.zeros(0, dtype)
