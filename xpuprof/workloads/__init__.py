"""Workloads a benchmark config can name: built-ins (GEMM, elementwise via numpy, torch or dpnp),
a Python callable (``module:function``) or a script with argv.

The library behind a built-in is imported only when the workload is built, so configs validate
(and ``import xpuprof`` works) without torch or dpnp installed. A missing library is a
``WorkloadError`` that says which package to install.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Workload, WorkloadError


@dataclass(frozen=True)
class BuiltinInfo:
    description: str
    params: dict[str, Any]  # parameter -> default


BUILTINS: dict[str, BuiltinInfo] = {
    "gemm": BuiltinInfo("C = A @ B with square n x n matrices", {"n": 512, "dtype": "float32", "seed": 0}),
    "elementwise": BuiltinInfo("out = sin(x) * alpha + y over a 1-D array",
                               {"size": 1 << 20, "dtype": "float32", "alpha": 2.0, "seed": 0}),
}

# library -> (module with gemm()/elementwise(), pip hint for when it is missing)
LIBRARIES: dict[str, tuple[str, str]] = {
    "numpy": ("xpuprof.workloads.numpy_ops", "pip install numpy"),
    "torch": ("xpuprof.workloads.torch_ops", "pip install torch (or the XPU/CUDA build for your device)"),
    "dpnp": ("xpuprof.workloads.dpnp_ops", "pip install 'xpuprof[dpnp-cpu]' (dpnp + dpctl pinned for the OpenCL CPU device)"),
}

DTYPES = ("float16", "bfloat16", "float32", "float64")


def builtin_params(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``kwargs``; unknown names raise one error listing the valid ones."""
    if name not in BUILTINS:
        raise WorkloadError(f"unknown built-in workload {name!r}; valid: {', '.join(BUILTINS)}")
    params = dict(BUILTINS[name].params)
    bad = sorted(set(kwargs) - set(params))
    if bad:
        raise WorkloadError(f"built-in workload {name!r} has no parameter(s) {', '.join(map(repr, bad))}; "
                            f"valid: {', '.join(params)}")
    params.update(kwargs)
    if params["dtype"] not in DTYPES:
        raise WorkloadError(f"dtype {params['dtype']!r} is not supported; valid: {', '.join(DTYPES)}")
    return params


def make_builtin(name: str, library: str, device: str, kwargs: dict[str, Any]) -> Workload:
    import importlib

    if library not in LIBRARIES:
        raise WorkloadError(f"unknown workload library {library!r}; valid: {', '.join(LIBRARIES)}")
    params = builtin_params(name, kwargs)
    module_name, hint = LIBRARIES[library]
    module = importlib.import_module(module_name)
    try:
        lib = module.import_library()
    except ImportError as exc:
        raise WorkloadError(f"built-in workload {name!r} with library {library!r} needs the {library!r} package, "
                            f"which cannot be imported here ({exc}); install it: {hint}") from None
    return getattr(module, name)(lib, device, **params)


from .user import make_callable, make_script  # noqa: E402  (needs Workload/WorkloadError above)

__all__ = ["BUILTINS", "DTYPES", "LIBRARIES", "Workload", "WorkloadError", "builtin_params", "make_builtin",
           "make_callable", "make_script"]


def run_names():
    """The names a YAML run config is checked against (``config.yamlconfig.RunNames``): built-in
    workloads, libraries, their kwargs, and the backends known here (plugins included)."""
    from ..backends import registry
    from ..config.yamlconfig import RunNames

    def check_kwarg(builtin: str, kwargs: dict) -> None:
        try:
            builtin_params(builtin, kwargs)
        except WorkloadError as exc:
            raise ValueError(str(exc)) from None

    return RunNames(builtins=tuple(BUILTINS), libraries=tuple(LIBRARIES), backends=tuple(registry.backend_names()),
                    check_builtin_kwarg=check_kwarg)


def build_workload(spec, device: str):
    """The runnable ``Workload`` for a config's ``WorkloadSpec`` (imports the library / module now)."""
    from pathlib import Path

    if spec.kind == "builtin":
        return make_builtin(spec.target, spec.library, device, spec.kwargs)
    if spec.kind == "callable":
        return make_callable(spec.target, spec.kwargs, factory=spec.factory, device=device, base_dir=spec.base_dir)
    return make_script(Path(spec.target), spec.argv, device=device)
