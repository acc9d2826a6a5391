"""Out-of-tree backends: the registry (``register_backend``, entry points), directory plugins
(Python modules and C shared libraries, see ``xpuprof/include/xpuprof_plugin.h``) and fault
isolation."""
from ..backends import registry as _core
from ..collectors import registry as _collectors
from . import activity_types, entry_points, faults
from . import registry as _plugin_registry
from .faults import PluginFault
from .registry import BackendRegistrationError, register_backend, unregister_backend, validate_backend_class


def _discover(config=None) -> None:
    """Discover backend entry points and load plugin directories (idempotent)."""
    from . import loader

    _plugin_registry.initialize()
    loader.load_plugins(config)


def _discover_collectors(config=None) -> None:
    """Discover collector entry points and load plugin directories (idempotent)."""
    from . import loader

    _collectors.discover_entry_points()
    loader.load_plugins(config)


def _load_failures() -> list[tuple[str, str]]:
    return [(f.origin, f.reason) for f in faults.faults() if f.stage == "load"]


# The plugin layer hands its discovery down to the registries (which import no plugin code).
_core.BACKENDS.install_discovery(_discover, entry_points.load_group)
_core.install_load_failures(_load_failures)
_collectors.install_discovery(_discover_collectors, _plugin_registry.loading_origin, faults.report,
                              entry_points.load_group)

__all__ = ["BackendRegistrationError", "PluginFault", "faults", "register_backend", "unregister_backend",
           "validate_backend_class"]
