"""Vendor API bindings, one module per vendor API, shared by backends and collectors.

- ``pti``: Intel PTI's view API (record layouts, enums, ``PtiLibrary``, locating ``libpti_view.so``).
- ``pti_metrics``: PTI's metrics and metrics-scope ABI (per-kernel and time-based hardware metrics).
- ``pti_pc_sampling``: PTI's PC sampling ABI (EU stall sampling; layouts known per PTI release).
- ``levelzero``: the Level Zero loader's core API (drivers, devices, properties).
- ``levelzero_tracing``: the loader's tracing layer and the kernel/module structs it lets a tool read.
- ``sysman``: Level Zero Sysman (device telemetry).
- ``cupti``: NVIDIA CUPTI through cupti-python and cuda-bindings (the ``[cuda]`` extra).
- ``rocprofiler``: AMD rocprofiler-sdk (ctypes; no Python binding exists).
- ``nvml``, ``amdsmi``: the NVIDIA and AMD telemetry packages.

A module here knows the vendor's ABI and how to load it; it imports no backend, collector or
profiler code (import contracts in pyproject). Vendor packages are imported inside the function
that needs them, so importing any of these modules loads none.
"""
