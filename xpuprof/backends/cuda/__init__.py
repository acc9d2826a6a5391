"""NVIDIA GPUs through CUPTI (cupti-python). The vendor pipeline, stage by stage:

- ``records``: CUPTI activity buffers -> record arrays (copied out of CUPTI's completion callback).
- ``emit``: record arrays -> TraceBuilder (Kineto CUDA rows, args, flows, event dependencies).
- ``activity_api``: ``CuptiActivityApi``; ``pm_sampling_api``: ``CuptiPmSamplingApi`` derived from it.
- ``backend``: ``CudaBackend``.

The CUPTI binding itself is ``xpuprof.vendors.cupti``.
"""
