"""AMD GPUs through rocprofiler-sdk. The vendor pipeline, stage by stage:

- ``records``: rocprofiler buffers -> record arrays (grouped by the C callbacks of ``_native``).
- ``emit``: record arrays -> TraceBuilder (Kineto ROCm rows, args, flows, HIP event dependencies).
- ``activity_api``: ``RocprofActivityApi``; ``counter_api``: ``RocprofCounterApi`` derived from it.
- ``backend``: ``RocmBackend``.

The rocprofiler-sdk ABI itself is ``xpuprof.vendors.rocprofiler``.
"""
