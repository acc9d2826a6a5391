"""Itanium C++ kernel-name demangling, shared by every vendor backend (CUDA, ROCm, plugins).

Not any one vendor's: kernels from nvcc, hipcc and SYCL compilers all carry Itanium-mangled names.
Kept out of the vendor packages so that sibling backends never import each other.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _cxa_demangle():
    path = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        fn = ctypes.CDLL(path).__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
    return fn


_libc_free = ctypes.CDLL(None).free
_libc_free.argtypes = [ctypes.c_void_p]


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """Itanium C++ demangling through libstdc++ (what Kineto does); the input when it is not mangled."""
    fn = _cxa_demangle()
    if fn is None or not name.startswith("_Z"):
        return name
    status = ctypes.c_int(0)
    out = fn(name.encode(), None, None, ctypes.byref(status))
    if not out or status.value != 0:
        return name
    try:
        return ctypes.string_at(out).decode("utf-8", "replace")
    finally:
        _libc_free(out)
