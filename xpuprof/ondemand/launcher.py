"""What ``xpuprof exec`` gives the command it runs, and how a process under it knows its part.

The command inherits an environment that puts xpuprof in every Python process it starts, its
children included (they inherit it too):

* ``PYTHONPATH`` starts with ``bootstrap/``, whose ``sitecustomize`` imports xpuprof at interpreter
  start (before the program, so before any SYCL work) and hands over to the ``sitecustomize`` it
  shadows, if any;
* ``LD_PRELOAD`` carries Intel PTI's view library when it is installed (and the XPU backend is not
  disabled), so SYCL programs, Python or not, start with PTI's hooks in place; ``LD_LIBRARY_PATH``
  gets the directory PTI's core needs at process start;
* ``XPUPROF_EXEC`` carries the capture policy (JSON).

Launchers (torchrun, ``python -m torch.distributed.run``) get the environment but record nothing and
never register with a daemon: their ranks do (a request to the job reaches ranks, not the launcher).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

EXEC_ENV = "XPUPROF_EXEC"
BOOTSTRAP_DIR = Path(__file__).resolve().with_name("bootstrap")
MODES = ("run", "window", "iterations", "on-demand")
LAUNCHER_SCRIPTS = ("torchrun",)
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


@dataclass
class ExecPolicy:
    mode: str = "run"  # whole run | window (delay + duration) | iterations | on-demand
    out_dir: str = "xpuprof-traces"
    out_given: bool = False  # --out was given: daemon requests (--on-demand) are written there too
    trace_format: str = "json"  # --format: the traces written in out_dir (json, perfetto)
    config_text: str = ""  # Kineto config lines (--config FILE, --set KEY=VALUE)
    delay_s: float = 0.0
    duration_s: float = 0.0
    iterations: int = 0
    start_iteration: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"capture mode {self.mode!r} is not one of {', '.join(MODES)}")

    def to_env(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_env(cls, text: str) -> "ExecPolicy":
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{EXEC_ENV} is not a JSON object")
        return cls(**data)

    def request(self):
        """The capture request this policy means (the ``window``/``iterations``/``run`` modes)."""
        import time

        from ..config.options import ProfilerConfig
        from .request import CaptureRequest

        config = ProfilerConfig.from_kineto(self.config_text) if self.config_text.strip() else ProfilerConfig()
        req = CaptureRequest(config=config, source="exec")
        if self.mode == "window":
            req.start_time_ms = int((time.time() + self.delay_s) * 1000) if self.delay_s else None
            req.duration_ms = max(1, int(self.duration_s * 1000))
        elif self.mode == "iterations":
            req.by_iterations = True
            req.start_iteration = self.start_iteration
            req.iterations = self.iterations
        return req


def child_environment(policy: ExecPolicy, environ=None) -> dict[str, str]:
    """The environment ``xpuprof exec`` runs its command in."""
    env = dict(os.environ if environ is None else environ)
    env[EXEC_ENV] = policy.to_env()
    env["PYTHONPATH"] = _prepend(str(BOOTSTRAP_DIR), env.get("PYTHONPATH", ""), os.pathsep)
    view = pti_view_library(env)
    if view is not None:
        from ..vendors import pti

        env = pti.environment_with_library_path(view, env)
        if str(view) not in env.get("LD_PRELOAD", "").replace(" ", ":").split(":"):
            env["LD_PRELOAD"] = _prepend(str(view), env.get("LD_PRELOAD", ""), ":")
    return env


def pti_view_library(env) -> Path | None:
    """PTI's view library, when installed and the XPU backend is not switched off."""
    names = {n.strip().lower() for n in env.get("XPUPROF_DISABLE_BACKENDS", "").split(",")}
    if "xpu" in names or env.get("XPUPROF_EARLY_PTI", "").strip().lower() in {"0", "false", "no", "off"}:
        return None
    from ..vendors import pti

    try:
        return pti.find_pti_library()
    except pti.PtiNotFound:
        return None


def _prepend(item: str, existing: str, sep: str) -> str:
    rest = [p for p in existing.split(sep) if p and p != item]
    return sep.join([item, *rest])


def is_launcher(argv=None, orig_argv=None) -> bool:
    """torchrun and its module forms: they start the ranks and train nothing themselves."""
    argv = sys.argv if argv is None else argv
    orig = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    if argv and os.path.basename(argv[0]) in LAUNCHER_SCRIPTS:
        return True
    for i, arg in enumerate(orig[:-1]):
        if arg == "-m":
            return orig[i + 1] in LAUNCHER_MODULES
    return False
