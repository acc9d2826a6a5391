"""AMD SMI through the ``amdsmi`` package (a ctypes wrapper of ROCm's libamd_smi), imported only
when asked for."""
from __future__ import annotations


def load():
    """The ``amdsmi`` module: ImportError when it is not installed; OSError or KeyError (raised by
    its own import) when the package is there but ROCm's ``libamd_smi.so`` is not."""
    import amdsmi

    return amdsmi
