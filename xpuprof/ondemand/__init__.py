"""Trace a running process without touching its code: dynolog's on-demand protocol, ``xpuprof exec``,
``xpuprof trigger``.

Layout (one job each):
  fabric     dynolog's IPC fabric: datagram layout, endpoint names, ancestor pids, job id, sender credentials
  sockdir    socket directories no other user can turn against the process; socket files set and removed safely
  refusals   refused datagrams said once per sender, rate-limited
  answers    what became of a request, told to the ``xpuprof trigger`` that sent it
  client     the poll loop (process side of the protocol)
  request    Kineto on-demand config text -> a capture request
  capture    one request, run off the training thread through ``xpuprof.profile``
  agent      one capture at a time; busy notes; exit, SIGTERM and fork
  control    ``xpuprof trigger --pause/--resume/--cancel``: the config line that carries them, their outcome
  steps      iterations as Kineto counts them (``xpuprof.step()``); torchlink hooks torch's count
  torchlink  torch's own Kineto client kept from starting; KinetoStepTracker hooked
  mainthread torch's per-thread op recorder started/stopped on the main thread
  tracefile  confined, exclusive, symlink-safe trace files
  launcher   what ``xpuprof exec`` puts in its command's environment; boot runs in each child
  trigger    the dyno CLI's request to dynolog, and an embedded daemon for local processes

``import xpuprof`` imports this package only when ``KINETO_USE_DAEMON`` is set: Kineto's opt-in. The variable
stays in the environment as the user set it (children inherit it); that this process runs xpuprof's client is
recorded here (``_activated``), not in the environment.
"""
from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("xpuprof.ondemand")

USE_DAEMON_ENV = "KINETO_USE_DAEMON"
HELPER_ENV = "XPUPROF_HELPER"  # xpuprof's own probe subprocesses (backends.probe.HELPER_ENV): never registered

_activated = False


def _is_xpuprof_cli() -> bool:
    """The xpuprof command itself (``xpuprof exec`` sets up its command's environment and execs it): not a
    process to register."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] in ("xpuprof", "xpuprof.cli"):
        return True
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "xpuprof"


def activate(*, force: bool = False) -> bool:
    """Start the daemon client in this process (``KINETO_USE_DAEMON`` set, or ``force``: ``xpuprof exec
    --on-demand``). Returns whether a client runs. Says once why not when torch's Kineto owns the link."""
    global _activated
    if _activated:
        from . import client

        return client.current() is not None
    if not force and not requested():
        return False
    if _is_xpuprof_cli() or os.environ.get(HELPER_ENV) == "1":
        return False
    _activated = True
    from . import agent, client, launcher, torchlink

    if torchlink.torch_client_running():
        log.warning("xpuprof: torch was imported before xpuprof with KINETO_USE_DAEMON set, so torch's own Kineto "
                    "polls the on-demand daemon in this process; xpuprof does not register beside it (one process, "
                    "one trace). For xpuprof's trace, import xpuprof before torch or run under `xpuprof exec`")
        return False
    torchlink.install()  # torch's own client kept off here too (a launcher imports torch), the variable kept for children
    if launcher.is_launcher():  # torchrun starts the ranks; they register, it does not
        return False
    return client.start(agent.get_agent()) is not None


def requested() -> bool:
    """Kineto's opt-in for this process: ``KINETO_USE_DAEMON``."""
    return USE_DAEMON_ENV in os.environ
