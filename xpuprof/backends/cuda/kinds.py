"""Which CUPTI activity kinds record each activity type: the table the backend's ``supported_activities``
answers from and the activity session enables from. Kept apart from the session (``activity_api``) so that
choosing backends and probing them imports no record decoding or emit code (see ``backend``)."""
from __future__ import annotations

from ...activity import ActivityType
from ...vendors import cupti

# Which CUPTI activity kinds each xpuprof activity type needs.
KINDS_FOR: dict[ActivityType, tuple[int, ...]] = {
    ActivityType.CONCURRENT_KERNEL: (cupti.KIND_CONCURRENT_KERNEL,),
    ActivityType.GPU_MEMCPY: (cupti.KIND_MEMCPY, cupti.KIND_MEMCPY2),  # MEMCPY2: peer-to-peer (Kineto enables it)
    ActivityType.GPU_MEMSET: (cupti.KIND_MEMSET,),
    ActivityType.RUNTIME: (cupti.KIND_RUNTIME,),
    ActivityType.DRIVER: (cupti.KIND_DRIVER,),
    ActivityType.CUDA_SYNC: (cupti.KIND_SYNCHRONIZATION, cupti.KIND_CUDA_EVENT),
    ActivityType.CUDA_EVENT: (cupti.KIND_CUDA_EVENT,),
    ActivityType.EXTERNAL_CORRELATION: (cupti.KIND_EXTERNAL_CORRELATION,),
    ActivityType.OVERHEAD: (cupti.KIND_OVERHEAD,),
}
SUPPORTED = frozenset(KINDS_FOR) | {ActivityType.GPU_PM_COUNTER}
