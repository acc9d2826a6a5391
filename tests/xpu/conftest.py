"""Fixtures for the XPU backend tests: the PTI-ABI test double, compiled here with the system C compiler."""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xpuprof.activity import ActivityType
from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.clock import now_ns
from xpuprof.config.options import ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.read.load import load
from xpuprof.trace.write.chrome import write_chrome_trace

DOUBLE_DIR = Path(__file__).parent / "double"


def build_double(out_dir: Path) -> Path:
    """Compile every .c file of the double into one shared library (sources hashed into the name)."""
    sources = sorted(DOUBLE_DIR.glob("*.c"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in [*sources, *DOUBLE_DIR.glob("*.h")])).hexdigest()[:12]
    lib = out_dir / f"libpti_double_{digest}.so"
    if not lib.exists():
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        assert cc, "the XPU tests need a C compiler (cc/gcc) to build the PTI test double"
        cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter", "-o", str(lib),
               *map(str, sources), "-lpthread"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"building the PTI double failed:\n{' '.join(cmd)}\n{proc.stderr}"
    return lib


@pytest.fixture(scope="session")
def pti_double_path(tmp_path_factory) -> Path:
    return build_double(tmp_path_factory.mktemp("pti_double"))


class Double:
    """The double's test-only controls next to the PtiLibrary that xpuprof uses."""

    def __init__(self, path: Path) -> None:
        from xpuprof.vendors import pti

        self.path = path
        self.lib = pti.PtiLibrary.load(path)
        self.c = ctypes.CDLL(str(path))  # releases the GIL during calls
        self.py = ctypes.PyDLL(str(path))  # keeps the GIL held during calls, like a torch/SYCL C extension
        for h in (self.c, self.py):
            h.xpd_workload.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
            h.xpd_workload.restype = ctypes.c_int
        self.c.xpd_record_size.argtypes = [ctypes.c_uint32]
        self.c.xpd_record_size.restype = ctypes.c_size_t
        self.c.xpd_field_offset.argtypes = [ctypes.c_char_p]
        self.c.xpd_field_offset.restype = ctypes.c_size_t
        self.c.xpd_clock_shift.restype = ctypes.c_uint64
        self.c.xpd_lost_records.restype = ctypes.c_uint64
        self.c.xpd_kernel_count.restype = ctypes.c_size_t

    FUTURE_RECORD, P2P, COMMS, MANY_NAMES, RUNTIME_TID0 = 1, 2, 4, 8, 16

    def workload_holding_gil(self, iterations: int, flags: int = 0, timeout_ms: int = 5000) -> int:
        return self.py.xpd_workload(iterations, flags, timeout_ms)

    def reset(self) -> None:
        self.c.xpd_wait_idle()
        self.c.xpd_reset()


@pytest.fixture
def pti_double(pti_double_path):
    from xpuprof._native import ptibuf

    d = Double(pti_double_path)
    d.reset()
    ptibuf.reset()
    yield d
    d.reset()
    ptibuf.reset()


# ---------------------------------------------------------------- a whole live session against the double
ALL = frozenset({ActivityType.CONCURRENT_KERNEL, ActivityType.GPU_MEMCPY, ActivityType.GPU_MEMSET,
                 ActivityType.RUNTIME, ActivityType.DRIVER, ActivityType.EXTERNAL_CORRELATION,
                 ActivityType.XPU_SYNC, ActivityType.OVERHEAD, ActivityType.COLLECTIVE_COMM})
UUID0 = bytes(range(0xA0, 0xB0))[:15] + b"\x00"


def _run_session(double, tmp_path, iterations=6, flags=0, types=ALL, capture=None, ext_id=4242, range_threads=None):
    cfg = ProfilerConfig(raw_capture_path=str(capture) if capture else None)
    api = XpuptiActivityApi(types, cfg, library=double.lib, device_uuids=[UUID0])
    api.start()
    t0 = now_ns()
    api.push_correlation_id(ext_id)
    rc = double.workload_holding_gil(iterations, flags)
    api.pop_correlation_id()
    t1 = now_ns()
    api.stop()
    builder = TraceBuilder()
    # the double scripts its records up to (iterations + 1) * 10 us into the past
    api.process(builder, ProcessWindow(api.start_ns - 1_000_000, now_ns(), range_threads))
    path = write_chrome_trace(builder, tmp_path / "trace.json")
    return rc, api, builder, load(path), (t0, t1)


@pytest.fixture
def run_session():
    """``run_session(double, tmp_path, iterations=6, flags=0, types=ALL, capture=None, ext_id=4242,
    range_threads=None)``
    -> (workload rc, session, builder, loaded trace, (t0, t1))."""
    return _run_session
