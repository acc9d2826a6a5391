"""Intel GPUs through Intel PTI. The vendor pipeline, stage by stage (the same names in every vendor folder):

- ``records``: PTI view buffers -> record columns (walked with PTI's own ``ptiViewGetNextRecord``).
- ``emit``: record columns -> TraceBuilder (Kineto XPU rows, args, flows).
- ``activity_api``: ``XpuptiActivityApi``, the PTI view session; ``scope_api``: ``XpuptiActivityScopeApi``
  (per-kernel metrics, ``metrics_scope``) derived from it in its own file.
- ``backend``: ``XpuBackend`` (probe, supported activities, session choice).

Beside them: ``kernel_columns`` (the kernel name filter and submission intervals in the emit stage),
``stall_sampling`` / ``stall_emit`` / ``stall_session`` (EU stall sampling through PTI's PC sampling) and
``kernel_resources`` (Level Zero kernel properties at kernel creation).

The PTI ABI itself is ``xpuprof.vendors.pti`` / ``pti_metrics`` / ``pti_pc_sampling`` / ``levelzero`` /
``levelzero_tracing``.
"""
