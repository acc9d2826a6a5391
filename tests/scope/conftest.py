import ctypes
import subprocess
from pathlib import Path

import pytest

DOUBLE_SRC = Path(__file__).resolve().parents[1] / "xpu" / "pti_scope_double.c"


@pytest.fixture(scope="session")
def scope_double_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("scope_double") / "libpti_scope_double.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out), str(DOUBLE_SRC)], check=True)
    return out


@pytest.fixture()
def scope_double(scope_double_path):
    lib = ctypes.CDLL(str(scope_double_path))
    lib.scope_double_script.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_double)]
    lib.scope_double_buffer_size.restype = ctypes.c_size_t
    return lib
