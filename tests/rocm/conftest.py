"""Builds the rocprofiler-sdk ABI test double (fake_rocprofiler.c) with gcc, once per session."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def fake_rocprofiler_build(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the rocprofiler-sdk test double")
    out = tmp_path_factory.mktemp("fake-rocprofiler") / "librocprofiler-sdk.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out),
                    str(HERE / "fake_rocprofiler.c"), "-lpthread"], check=True, capture_output=True, text=True)
    return out


@pytest.fixture
def fake_rocprofiler(fake_rocprofiler_build, tmp_path, monkeypatch):
    """A fresh copy per test (a new dlopen instance, so fresh library state) + a fresh registration."""
    from xpuprof.backends.rocm import activity_api

    lib = tmp_path / "librocprofiler-sdk.so"
    shutil.copy(fake_rocprofiler_build, lib)
    monkeypatch.setenv("ROCPROFILER_SDK_LIBRARY", str(lib))
    monkeypatch.setattr(activity_api, "_REG", None)
    return lib
