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
    """Forward early registrations, discover entry points and load plugin directories (idempotent)."""
    from . import loader

    _plugin_registry.initialize()
    loader.load_plugins(config)


def _load_failures() -> list[tuple[str, str]]:
    return [(f.origin, f.reason) for f in faults.faults() if f.stage == "load"]


# The plugin layer registers its discovery into the core registry (which imports no plugin code).
_core.install_discovery(_discover, _plugin_registry.plugin_backends, _load_failures)


def _load_plugin_dirs(config=None) -> None:
    from . import loader

    loader.load_plugins(config)


# ... and into the collector registry (collectors, too, import no plugin code).
_collectors.install_discovery(_load_plugin_dirs, _plugin_registry.loading_origin, faults.report,
                              faults.describe_exception, entry_points.load_group)

__all__ = ["BackendRegistrationError", "PluginFault", "faults", "register_backend", "unregister_backend",
           "validate_backend_class"]
