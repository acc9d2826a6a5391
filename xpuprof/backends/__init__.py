"""Backends: the interface (base), the registry, and the vendor packages (imported lazily)."""
from .base import Backend, BackendError, ProbeResult, ProcessWindow, Session

__all__ = ["Backend", "BackendError", "ProbeResult", "ProcessWindow", "Session"]
