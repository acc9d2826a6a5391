"""Can the XPU backend run here? Each failure gives its own specific reason.

Order of checks: in this process, from files alone (``backends.system_facts``, nothing loaded): the
``intel-pti`` wheel, a Level Zero loader the child's dynamic linker could find, and a device node an
Intel GPU driver could open (``/dev/dri/renderD*``; ``/dev/dxg`` under WSL2) unless Level Zero is told to
use its null or an alternate driver. Then in a child process with PTI's LD_LIBRARY_PATH: the loader, one
new enough for PTI (``zesInit``), a driver (``zeInit``; with a loader but no driver PTI *aborts* the
process), a GPU device, and finally PTI's core library itself. The parent never loads PTI for this.
An explicit PTI library or loader path, or ``XPUPROF_FULL_PROBE=1``, always gets the child's checks.
"""
from __future__ import annotations

import os

from .. import system_facts
from ..base import ProbeResult
from ..probe import run_probe
from ...vendors import levelzero, pti

STAGE_OK = "ok"
LOADER_NAMES = ("libze_loader.so.1", "libze_loader.so")
GPU_NODES = ("/dev/dri/renderD*", system_facts.WSL_GPU_NODE)
# Level Zero driver choices that need no GPU device node (the null driver of the test tier, a named driver).
NODELESS_DRIVER_ENV = ("ZE_ENABLE_NULL_DRIVER", "ZE_ENABLE_ALT_DRIVERS")
NULL_DEVICE_NAME = levelzero.NULL_DEVICE_NAME  # what Level Zero's null driver (ZE_ENABLE_NULL_DRIVER=1) reports


def _result(available: bool, stage: str, reason: str, **details) -> dict:
    return {"available": available, "reason": reason, "details": {"stage": stage, **details}}


def check_level_zero() -> dict:
    """Loader, zesInit, driver and GPU checks (safe in-process: no PTI involved)."""
    path = levelzero.find_loader()
    if not path:
        return _result(False, "no_loader", "no Level Zero loader (libze_loader.so.1) found; install the Intel GPU "
                       "runtime (Level Zero loader and intel-level-zero-gpu driver)")
    try:
        lib = levelzero.load_loader(path)
    except levelzero.LevelZeroError as exc:
        return _result(False, "no_loader", str(exc))
    if not hasattr(lib, "zesInit"):
        return _result(False, "old_loader", f"the Level Zero loader {path} does not export zesInit, which PTI needs "
                       "(Debian 12's libze1 1.8 is too old); install a newer Level Zero loader", loader=path)
    try:
        drivers = levelzero.drivers(lib)
    except levelzero.LevelZeroError as exc:
        return _result(False, "no_driver", f"a Level Zero loader ({path}) is present but no driver initialized ({exc}); "
                       "PTI would abort this process. Install the Intel GPU driver (intel-level-zero-gpu / "
                       "compute-runtime)", loader=path)
    if not drivers:
        return _result(False, "no_driver", f"a Level Zero loader ({path}) is present but reports no driver; PTI would "
                       "abort this process. Install the Intel GPU driver (intel-level-zero-gpu / compute-runtime)",
                       loader=path)
    devices = levelzero.gpu_devices(lib)
    if not devices:
        return _result(False, "no_gpu", f"Level Zero has {len(drivers)} driver(s) but no GPU device", loader=path)
    return _result(True, STAGE_OK, "Level Zero GPU found", loader=path,
                   devices=[{"name": d.name, "uuid": d.uuid.hex()} for d in devices])


def check_pti_core(pti_path: str) -> dict:
    """Load PTI and enable one view with the C callbacks: NOT_IMPLEMENTED means its core did not load."""
    lib = pti.PtiLibrary.load(pti_path)
    version = lib.version()
    from ... import _native

    try:
        ptibuf = _native.load("ptibuf", "PTI's buffer callbacks (C: Python callbacks deadlock inside SYCL)")
    except _native.NativeUnavailable as exc:
        return _result(False, "no_native", str(exc), pti_version=version)
    lib.ptiViewSetCallbacks(*ptibuf.callback_addresses())
    code = lib.ptiViewEnable(int(pti.ViewKind.DEVICE_GPU_KERNEL))
    if code != pti.Result.SUCCESS:
        missing = pti.library_path_missing(lib.path)
        hint = (f"; LD_LIBRARY_PATH must include {missing} at process start" if missing is not None
                else "; set PTILOG_LEVEL=info for PTI's own reason")
        return _result(False, "pti_core", f"PTI {version} loaded but its core library did not initialize "
                       f"(ptiViewEnable returned {lib.result_name(code)}){hint}", pti_version=version)
    lib.ptiViewDisable(int(pti.ViewKind.DEVICE_GPU_KERNEL))
    return _result(True, STAGE_OK, f"Intel PTI {version}", pti_version=version)


def probe_child(pti_path: str) -> dict:
    """Runs in the probe subprocess."""
    if not os.environ.get(pti.PTI_LIBRARY_ENV):
        l0 = check_level_zero()
        if not l0["available"]:
            return l0
    else:
        l0 = _result(True, STAGE_OK, "Level Zero checks skipped: an explicit PTI library was given")
    core = check_pti_core(pti_path)
    core["details"].update({k: v for k, v in l0["details"].items() if k in ("devices", "loader")})
    return core


def _explain_crash(returncode: int, stderr: str) -> str:
    if returncode == -6 or returncode == 134:
        return ("PTI aborted the probe process (SIGABRT) while initializing; this happens with a Level Zero loader "
                "but no working GPU driver")
    return f"the XPU probe process died (status {returncode})"


def ruled_out(env: dict) -> ProbeResult | None:
    """The XPU probe's answer when files alone show it cannot succeed (None: the child must check)."""
    if system_facts.full_probe_forced(env) or env.get(pti.PTI_LIBRARY_ENV) or env.get(levelzero.LOADER_ENV):
        return None
    if system_facts.find_library(LOADER_NAMES, env) is None:
        return ProbeResult.unavailable(
            "no Level Zero loader (libze_loader.so.1) found; install the Intel GPU runtime (Level Zero loader and "
            f"intel-level-zero-gpu driver). {system_facts.WHERE_LIBRARIES_ARE_LOOKED_FOR}",
            stage="no_loader", decided="in-process", searched=system_facts.library_search_dirs(env))
    if not any(env.get(k) for k in NODELESS_DRIVER_ENV) and not system_facts.device_nodes(GPU_NODES):
        return ProbeResult.unavailable(
            "no Intel GPU device node (/dev/dri/renderD*, or /dev/dxg under WSL2) on this machine, so no Level "
            "Zero GPU driver can open a device (inside a container, pass the GPU in with --device /dev/dri)",
            stage="no_device_node", decided="in-process")
    return None


def probe(timeout: float = 60.0) -> ProbeResult:
    try:
        path = pti.find_pti_library()
    except pti.PtiNotFound as exc:
        return ProbeResult.unavailable(str(exc), stage="no_pti")
    env = pti.environment_with_library_path(path)
    early = ruled_out(env)
    if early is not None:
        early.details.setdefault("pti_library", str(path))
        return early
    res = run_probe(__name__, "probe_child", [str(path)], name="XPU (Intel PTI)", env=env, timeout=timeout,
                    on_crash=_explain_crash)
    details = dict(res.details)
    details.setdefault("pti_library", str(path))
    reason = res.reason
    devices = details.get("devices") or []
    if res.available and devices and all(d.get("name") == NULL_DEVICE_NAME for d in devices):
        # Usable for host-side tracing (the real-PTI test tier relies on it), but say what it is.
        details["null_device"] = True
        reason = (f"{reason} on the Level Zero null driver's {NULL_DEVICE_NAME!r} (a test device, not a GPU: "
                  "runtime and driver calls only; kernels or copies on it abort PTI)")
    return ProbeResult(res.available, reason, details)


