"""Which PTI views record each activity type: the table the backend's ``supported_activities`` answers from
and the view session enables from. Kept apart from the session (``activity_api``) so that choosing
backends and probing them imports no record decoding or emit code (see ``backend``)."""
from __future__ import annotations

from ...activity import ActivityType
from ...vendors import pti

# Activity type -> the PTI views that produce it (Kineto's XpuptiActivityApi table).
VIEWS_BY_TYPE: dict[ActivityType, tuple[pti.ViewKind, ...]] = {
    ActivityType.GPU_MEMCPY: (pti.ViewKind.DEVICE_GPU_MEM_COPY, pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P),
    ActivityType.GPU_MEMSET: (pti.ViewKind.DEVICE_GPU_MEM_FILL,),
    ActivityType.CONCURRENT_KERNEL: (pti.ViewKind.DEVICE_GPU_KERNEL,),
    ActivityType.EXTERNAL_CORRELATION: (pti.ViewKind.EXTERNAL_CORRELATION,),
    ActivityType.RUNTIME: (pti.ViewKind.RUNTIME_API,),
    ActivityType.DRIVER: (pti.ViewKind.DRIVER_API,),
    ActivityType.OVERHEAD: (pti.ViewKind.COLLECTION_OVERHEAD,),
    ActivityType.XPU_SYNC: (pti.ViewKind.DEVICE_SYNCHRONIZATION,),
    ActivityType.CUDA_SYNC: (pti.ViewKind.DEVICE_SYNCHRONIZATION,),  # the generic "sync" selection
    ActivityType.COLLECTIVE_COMM: (pti.ViewKind.COMMUNICATION,),
}
SUPPORTED_TYPES = frozenset(VIEWS_BY_TYPE) | {ActivityType.XPU_SCOPE_PROFILER}
