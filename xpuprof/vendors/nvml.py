"""NVIDIA's NVML through nvidia-ml-py (``pynvml``), imported only when asked for."""
from __future__ import annotations


def load():
    """The ``pynvml`` module (ImportError when nvidia-ml-py is not installed)."""
    import pynvml

    return pynvml
