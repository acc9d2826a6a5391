"""CudaBackend: NVIDIA GPUs through CUPTI (cupti-python, the optional ``[cuda]`` extra).

cupti-python is under NVIDIA's proprietary EULA, so xpuprof never bundles it: the user
installs it (``pip install 'xpuprof[cuda]'``) and it is imported only here, after the probe.
"""
from __future__ import annotations

import subprocess
import sys

from ...activity import ActivityType
from ..base import Backend, ProbeResult, Session
from .activity_api import SUPPORTED, CuptiActivityApi

# Runs in a child process: a broken driver can crash or hang the probe, never the caller.
_PROBE = r"""
import sys
try:
    from cupti import cupti
except ImportError as exc:
    print("cupti-python is not installed (pip install 'xpuprof[cuda]'):", exc); sys.exit(2)
try:
    cupti.get_timestamp()
except Exception as exc:
    print("CUPTI cannot run here:", type(exc).__name__, exc); sys.exit(3)
try:
    from cuda.bindings import driver
    driver.cuInit(0)
    err, n = driver.cuDeviceGetCount()
    n = n if int(err) == 0 else 0
except Exception as exc:
    print("the CUDA driver does not answer:", exc); sys.exit(4)
if n == 0:
    print("no NVIDIA GPU visible (cuDeviceGetCount returned 0)"); sys.exit(5)
print(f"{n} NVIDIA GPU(s)")
"""


def run_probe(timeout: float = 60.0) -> ProbeResult:
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ProbeResult.unavailable(f"the CUDA probe did not finish within {timeout:.0f} s")
    lines = (done.stdout.strip() or done.stderr.strip() or f"probe exited with {done.returncode}").splitlines()
    line = lines[-1] if lines else f"probe exited with {done.returncode}"
    return ProbeResult.ok(line) if done.returncode == 0 else ProbeResult.unavailable(line)


class CudaBackend(Backend):
    name = "cuda"
    vendor = "cuda"
    description = "NVIDIA GPUs through CUPTI (cupti-python): kernels, copies, syncs, events, PM sampling counters"

    _probe_cache: ProbeResult | None = None

    @classmethod
    def probe(cls) -> ProbeResult:
        if cls._probe_cache is None:
            cls._probe_cache = run_probe()
        return cls._probe_cache

    @classmethod
    def supported_activities(cls) -> frozenset[ActivityType]:
        return SUPPORTED

    def configure(self, activity_types, config) -> Session | None:
        wanted = frozenset(activity_types) & SUPPORTED
        if not wanted:
            return None
        if ActivityType.GPU_PM_COUNTER in wanted and config.experimental.profiler_metrics:
            from .pm_sampling_api import CuptiPmSamplingApi

            return CuptiPmSamplingApi(wanted, config)
        if wanted == {ActivityType.GPU_PM_COUNTER}:
            return None  # counters asked for without metric names: nothing to sample
        return CuptiActivityApi(wanted, config)
