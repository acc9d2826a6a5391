"""Run a risky availability check in a child Python process and turn its outcome into a ProbeResult.

Vendor libraries may abort the whole process when a driver is missing (Intel PTI raises SIGABRT
with a Level Zero loader but no driver), so backends probe in a subprocess. The child imports
``module``, calls ``function(*args)`` and prints its result — a ``ProbeResult`` or a dict with
``available``/``reason``/``details`` — as one marked JSON line. Whatever happens in the child
(crash, signal, hang, garbage output), the parent gets a ProbeResult and never aborts.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any, Callable, Mapping, Sequence

import orjson

from .base import ProbeResult

RESULT_MARKER = "@@XPUPROF-PROBE-RESULT@@"
# Set in the environment of xpuprof's own helper processes: they are never profiled themselves (no
# on-demand registration, no `xpuprof exec` capture), whatever the parent's environment asks for.
HELPER_ENV = "XPUPROF_HELPER"

_CHILD = f"""
import sys, orjson, importlib
mod, fn, args = sys.argv[1], sys.argv[2], orjson.loads(sys.argv[3])
res = getattr(importlib.import_module(mod), fn)(*args)
if not isinstance(res, dict):
    res = {{"available": bool(res.available), "reason": res.reason, "details": dict(res.details)}}
sys.stdout.write("\\n{RESULT_MARKER}" + orjson.dumps(res, default=str).decode() + "\\n")
sys.stdout.flush()
"""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def run_probe(module: str, function: str, args: Sequence[Any] = (), *, name: str | None = None,
              env: Mapping[str, str] | None = None, timeout: float = 60.0,
              on_crash: Callable[[int, str], str] | None = None) -> ProbeResult:
    """Run ``module.function(*args)`` in a fresh interpreter; return its ProbeResult.

    ``env`` replaces the child's environment (e.g. with LD_LIBRARY_PATH added, which only takes
    effect at process start). ``on_crash(returncode, stderr_tail)`` may explain a crash in
    backend terms; the default names the signal or exit status. The child's stderr tail is kept
    in ``details["stderr"]`` for unavailable results.
    """
    label = name or f"{module}.{function}"
    cmd = [sys.executable, "-c", _CHILD, module, function, orjson.dumps(list(args)).decode()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**(os.environ if env is None else env), HELPER_ENV: "1"})
    except subprocess.TimeoutExpired:
        return ProbeResult.unavailable(f"{label} probe did not finish within {timeout:g} s (hung in the vendor library)")
    except OSError as exc:
        return ProbeResult.unavailable(f"{label} probe could not start a Python subprocess: {exc}")
    err_tail = (proc.stderr or "").strip()[-2000:]
    for line in reversed((proc.stdout or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                data = orjson.loads(line[len(RESULT_MARKER):])
                details = dict(data.get("details") or {})
                if not data.get("available") and err_tail:
                    details.setdefault("stderr", err_tail)
                return ProbeResult(bool(data.get("available")), str(data.get("reason", "")), details)
            except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
                return ProbeResult.unavailable(f"{label} probe printed an unreadable result: {exc}")
    rc = proc.returncode
    if on_crash is not None:
        reason = on_crash(rc, err_tail)
    elif rc < 0:
        reason = f"{label} probe was killed by {_signal_name(-rc)}"
    else:
        reason = f"{label} probe exited with status {rc} without a result"
    last = err_tail.splitlines()[-1] if err_tail else ""
    if last and last not in reason:
        reason = f"{reason}: {last}"
    return ProbeResult.unavailable(reason, returncode=rc, stderr=err_tail)
