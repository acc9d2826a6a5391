"""Out-of-tree backends: the registry (``register_backend``, entry points), directory plugins
(Python modules and C shared libraries, see ``xpuprof/include/xpuprof_plugin.h``) and fault
isolation."""
from . import activity_types, faults
from .faults import PluginFault
from .registry import BackendRegistrationError, register_backend, unregister_backend, validate_backend_class

__all__ = ["BackendRegistrationError", "PluginFault", "faults", "register_backend", "unregister_backend",
           "validate_backend_class"]
