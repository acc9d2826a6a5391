"""Fixtures: the metrics-scope double, alone and linked with the XPU view double into one library
(intel-pti ships the view and metrics-scope functions in one libpti_view.so; the test library mirrors that)."""
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

XPU_TESTS = Path(__file__).resolve().parents[1] / "xpu"
SCOPE_SRC = XPU_TESTS / "pti_scope_double.c"
VIEW_DOUBLE_DIR = XPU_TESTS / "double"


# The double's internal symbols (xpd_*) are renamed in this build: PTI is loaded RTLD_GLOBAL, so
# with the tests/xpu double in the same process identical exported names would interpose each
# other's internal calls (one library's workload writing into the other's buffers).
INTERNAL_PREFIX, RENAMED_PREFIX = "xpd_", "xpds_"


def _renames(sources: list[Path]) -> list[str]:
    names = set()
    for p in sources:
        names |= set(re.findall(rf"\b{INTERNAL_PREFIX}[A-Za-z0-9_]+", p.read_text()))
    return [f"-D{n}={RENAMED_PREFIX}{n[len(INTERNAL_PREFIX):]}" for n in sorted(names)]


def _compile(out_dir: Path, stem: str, sources: list[Path]) -> Path:
    headers = sorted(VIEW_DOUBLE_DIR.glob("*.h"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in [*sources, *headers])).hexdigest()[:12]
    lib = out_dir / f"{stem}_{digest}.so"
    if not lib.exists():
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        assert cc, "the scope tests need a C compiler (cc/gcc) to build the PTI test double"
        cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter", *_renames(sources),
               "-o", str(lib), *map(str, sources), "-lpthread"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"building {stem} failed:\n{' '.join(cmd)}\n{proc.stderr}"
    return lib


def _controls(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.scope_double_script.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_double)]
    lib.scope_double_buffer_size.restype = ctypes.c_size_t
    lib.scope_double_add_orphan.argtypes = [ctypes.c_uint64]
    return lib


@pytest.fixture(scope="session")
def scope_double_path(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("scope_double"), "libpti_scope_double", [SCOPE_SRC])


@pytest.fixture()
def scope_double(scope_double_path):
    lib = _controls(ctypes.CDLL(str(scope_double_path)))
    lib.scope_double_reset()
    return lib


@pytest.fixture(scope="session")
def pti_view_path(tmp_path_factory):
    """libpti_view.so stand-in: the view double and the metrics-scope double in one library."""
    sources = [*sorted(VIEW_DOUBLE_DIR.glob("*.c")), SCOPE_SRC]
    return _compile(tmp_path_factory.mktemp("pti_view_double"), "libpti_view", sources)


class FullDouble:
    """The combined library as xpuprof loads it (PtiLibrary) plus the doubles' test controls."""

    def __init__(self, path: Path) -> None:
        from xpuprof.vendors import pti

        self.path = path
        self.lib = pti.PtiLibrary.load(path)
        self.c = _controls(ctypes.CDLL(str(path)))
        self.py = ctypes.PyDLL(str(path))  # holds the GIL during the workload, like a SYCL extension
        self.py.xpds_workload.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
        self.py.xpds_workload.restype = ctypes.c_int

    def workload(self, iterations: int, flags: int = 0, timeout_ms: int = 5000) -> int:
        return self.py.xpds_workload(iterations, flags, timeout_ms)

    def reset(self) -> None:
        self.c.xpds_wait_idle()
        self.c.xpds_reset()
        self.c.scope_double_reset()


@pytest.fixture
def full_double(pti_view_path, monkeypatch):
    from xpuprof._native import ptibuf

    monkeypatch.setenv("ZET_ENABLE_METRICS", "1")
    d = FullDouble(pti_view_path)
    d.reset()
    ptibuf.reset()
    yield d
    d.reset()
    ptibuf.reset()
