"""``xpuprof exec``'s parent: runs the command, and turns what a crashed or hung process recorded into its trace.

Every Python process under ``exec`` records into mapped files of a private directory (``host/spill.py``),
so a range is on file the moment it closes. This parent makes that directory (0700, under
``XPUPROF_SPILL_BASE``, else ``/dev/shm`` when it has 1 GiB free, else the temp directory), starts the
command with the environment ``launcher.child_environment`` gives it, and waits:

* Signals sent to ``exec`` (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1/2, SIGWINCH, SIGALRM) are passed to
  the command - except those the terminal sent to the whole foreground group, which the command got
  already (told apart by ``si_code``). Its exit status is ``exec``'s; a command killed by a signal ends
  ``exec`` by the same signal (without a core dump of its own).
* When the command has ended, every process whose recording is still on file - it was killed
  (SIGKILL, SIGSEGV, SIGBUS, SIGABRT), or exited without writing (``os._exit``) - gets its trace from
  the file, in ``--out`` under the usual name, marked ``"truncated": "<why>"`` at the top level; one line
  on stderr says where. A process that is still running (a daemon it left) keeps its files.
* Watchdog (``XPUPROF_EXEC_WATCHDOG_S``, seconds; off by default): a process whose recording has not
  grown for that long while it runs is taken as hung; what it recorded is written as a trace marked
  ``"truncated": "hang: ..."`` (the process is left running). If it later writes its own trace, that
  snapshot is removed; if it dies, the snapshot is replaced by the trace of everything it recorded.

Kept: host ranges (``record_function``, torch.profiler-compatible step ranges), instants, thread names,
everything up to the last range closed. Not kept: what lives in other libraries' memory until stop -
torch's operator events, device activity in the vendor's buffers, telemetry counters, the args of
instants and non-dict args - the trace's ``crash_recovery.not_kept`` says so.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..host import spill

log = logging.getLogger("xpuprof")

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH, signal.SIGALRM)
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT, signal.SIGWINCH)  # the tty sends these to the whole group
SI_KERNEL = 0x80
WATCHDOG_ENV = "XPUPROF_EXEC_WATCHDOG_S"
SHM_MIN_FREE = 1 << 30  # /dev/shm is used when it has this much free
NOT_KEPT = ("torch operator events (held by torch's profiler until stop)",
            "device activity (held in the vendor library's buffers until stop)", "telemetry counters",
            "args of instants and non-dict args of ranges (held in memory)")


def spill_base() -> str:
    import tempfile

    base = os.environ.get(spill.SPILL_BASE_ENV, "")
    if base:
        return base
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):  # memory: no disk writeback
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= SHM_MIN_FREE:  # not a container's 64 MiB default
            return "/dev/shm"
    return tempfile.gettempdir()


def make_root() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="xpuprof-exec-", dir=spill_base())  # 0700, made exclusively


def run_supervised(program: str, command: list[str], env: dict[str, str], out_dir: str) -> int:
    """Run ``command`` under this parent; returns its exit status (or ends this process by its signal)."""
    import shutil

    try:
        root = make_root()
    except OSError as exc:
        print(f"xpuprof exec: note: no crash-safe copy of the recordings ({exc.strerror or exc}); a process that "
              "crashes loses its trace", file=sys.stderr)
        root = ""
    if root:
        env = dict(env, **{spill.SPILL_ENV: root})
    watchdog = _watchdog_seconds()
    wanted = set(FORWARDED) | {signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        # as the command would start without xpuprof: the caller's signal mask; SIGPIPE and SIGXFSZ, which
        # Python ignores for itself, back to their defaults (subprocess's restore_signals)
        pid = os.posix_spawn(program, command, env, setsigmask=old_mask, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if root:
            shutil.rmtree(root, ignore_errors=True)
        raise
    watch = Watchdog(root, out_dir, watchdog) if root and watchdog else None
    status = None
    while status is None:
        info = signal.sigtimedwait(wanted, 1.0 if watch is not None else 3600.0)
        if info is None or info.si_signo == signal.SIGCHLD:
            got, raw = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                status, reaped_ns = raw, time.time_ns()
            elif watch is not None:
                watch.tick()
            continue
        if info.si_code == SI_KERNEL and info.si_signo in FROM_TERMINAL:
            continue  # the terminal sent it to the command too
        try:
            os.kill(pid, info.si_signo)
        except ProcessLookupError:
            pass
    if root:
        recover(root, out_dir, pid, status, watch.snapshots if watch is not None else {}, reaped_ns)
        if watch is not None:
            watch.forget_finished()
        if not os.listdir(root):
            os.rmdir(root)
        else:
            print(f"xpuprof exec: note: processes still running keep their recordings in {root}", file=sys.stderr)
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    if os.WIFSIGNALED(status):
        _end_by_signal(os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


def _end_by_signal(signo: int) -> None:
    """End this process as the command ended: by its signal (no core file of this process)."""
    import resource

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    if signo not in (signal.SIGKILL, signal.SIGSTOP):  # these two have no handler to reset
        signal.signal(signo, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signo})
    os.kill(os.getpid(), signo)
    os._exit(128 + signo)  # a signal this process cannot die by (e.g. one that is ignored by default)


def _watchdog_seconds() -> float:
    raw = os.environ.get(WATCHDOG_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        print(f"xpuprof exec: note: {WATCHDOG_ENV}={raw!r} is not a positive number of seconds; no watchdog",
              file=sys.stderr)
        return 0.0
    return value


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"the process was killed by {name}"
    return f"the process exited with status {os.waitstatus_to_exitcode(status)} without writing its trace"


# ----------------------------------------------------------------------------- recovery
def process_dirs(root: str) -> list[tuple[str, dict]]:
    """(directory name, process.json) of every process that recorded under ``root``."""
    out = []
    root_fd = spill.open_private_dir(root)
    try:
        for name in sorted(os.listdir(root_fd)):
            try:
                dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
            except OSError:
                continue
            try:
                facts = json.loads(_read_small(dfd, "process.json") or b"{}")
            except ValueError:
                facts = {}
            finally:
                os.close(dfd)
            if isinstance(facts, dict) and isinstance(facts.get("pid"), int):
                out.append((name, facts))
    finally:
        os.close(root_fd)
    return out


def _read_small(dfd: int, name: str, limit: int = 1 << 20) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def is_running(facts: dict) -> bool:
    pid = facts["pid"]
    ticks = spill.process_start_ticks(pid)
    return ticks is not None and ticks == facts.get("start_ticks") and _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
        return text[text.rindex(")") + 2:].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def cycles_of(dfd: int) -> list[str]:
    return sorted({n.split(".")[0] for n in os.listdir(dfd) if n.startswith("c") and n.endswith(".json")},
                  key=lambda c: int(c[1:]) if c[1:].isdigit() else 0)


def recover(root: str, out_dir: str, child_pid: int, status: int, snapshots: dict | None = None,
            reaped_ns: int | None = None) -> list[Path]:
    """Write the trace of every recording left in ``root`` by a process that is gone (``reaped_ns``: when
    ``child_pid`` was seen gone, epoch ns); returns the paths."""
    snapshots = snapshots if snapshots is not None else {}
    written = []
    root_fd = spill.open_private_dir(root)
    try:
        for name, facts in process_dirs(root):
            if facts["pid"] != child_pid and is_running(facts):
                continue
            ended_ns = reaped_ns if facts["pid"] == child_pid else None
            why = describe_status(status) if facts["pid"] == child_pid else \
                "the process ended without writing its trace (killed, crashed or os._exit; not xpuprof exec's own " \
                "child, so how it ended is not known)"
            dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
            try:
                for cycle in cycles_of(dfd):
                    path = write_recovered(dfd, cycle, facts, out_dir, why, ended_ns=ended_ns)
                    old = snapshots.pop((name, cycle), None)
                    if old is not None and old != path:
                        _unlink_quietly(old)
                    if path is not None:
                        written.append(path)
                        print(f"xpuprof exec: process {facts['pid']}: {why}; the trace of what it recorded until "
                              f"then: {path}", file=sys.stderr)
                for leftover in os.listdir(dfd):
                    os.unlink(leftover, dir_fd=dfd)
            finally:
                os.close(dfd)
            os.rmdir(name, dir_fd=root_fd)
    finally:
        os.close(root_fd)
    return written


def _unlink_quietly(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_recovered(dfd: int, cycle: str, facts: dict, out_dir: str, why: str, *, name: str | None = None,
                    ended_ns: int | None = None) -> Path | None:
    """The trace of one cycle's crash-safe copy, marked truncated. ``ended_ns`` (epoch): when the process was
    seen gone (xpuprof exec's own child), else the last time it recorded; ranges still open then end there."""
    from ..backends.base import ProcessWindow
    from ..clock import MONOTONIC_TO_EPOCH_NS, now_ns
    from ..config.options import ProfilerConfig
    from ..profiler.api import trace_file_name
    from ..profiler.assemble import build_trace
    from ..profiler.cycle import RecordingCycle
    from ..profiler.stages import load_trace_stages
    from .tracefile import write_in_dir

    load_trace_stages()
    try:
        meta = json.loads(_read_small(dfd, f"{cycle}.json") or b"{}")
    except ValueError:
        meta = {}
    rec = spill.SpilledRecorder(dfd, cycle)
    start = int(meta.get("window_start_ns") or 0)
    last = rec.last_ns()
    end = max(start, last + MONOTONIC_TO_EPOCH_NS if last else start, ended_ns or 0)
    if not start:
        start = end or now_ns()
    rec.close_open_at(end - MONOTONIC_TO_EPOCH_NS)
    cyc = RecordingCycle(ProfilerConfig(), {})
    cyc.recorder = rec  # type: ignore[assignment]  # read back: what assemble reads of a HostRecorder
    cyc.lifetimes = {}
    note: dict[str, Any] = {
        "reason": why, "not_kept": list(NOT_KEPT),
        "kept": "host ranges and instants up to the last one recorded, the ranges still open then (ending at the "
                "process's end, \"truncated\": true), thread names"}
    if rec.args_lost:
        note["args_not_kept"] = rec.args_lost
    if rec.detached:
        note["copy_ended_early"] = {block: os.strerror(err) for block, err in rec.detached.items()}
    metadata = {"truncated": why, "crash_recovery": note,
                "ondemand": {"source": "exec", "mode": "run", "pid": facts["pid"], "stopped_early": why}}
    if isinstance(facts.get("distributedInfo"), dict):
        metadata["distributedInfo"] = facts["distributedInfo"]
    quiet = logging.getLogger("xpuprof")  # the trace says what the child's log would have; exec says one line
    level, quiet.level = quiet.level, logging.ERROR
    try:
        builder = build_trace(cyc, ProcessWindow(start, end), {}, iteration=0, block_error=None, no_device_reasons={},
                              metadata=metadata, pid=facts["pid"],
                              process_name=str(facts.get("process_name") or "python"))
    finally:
        quiet.level = level
    shim = _Written(builder)
    name = name or trace_file_name(host=str(facts.get("host") or "host"), pid=facts["pid"])
    return write_in_dir(shim, out_dir, name)


class _Written:
    """What ``tracefile.write_in_dir`` reads of a profile: its last trace and the category setting."""

    class config:  # noqa: N801 - the attribute path a profile has
        generic_categories = False

    def __init__(self, builder) -> None:
        self.builder = builder


# ----------------------------------------------------------------------------- the watchdog
class Watchdog:
    """Writes a snapshot of a process whose recording stopped growing for ``seconds`` while it runs."""

    def __init__(self, root: str, out_dir: str, seconds: float) -> None:
        self.root, self.out_dir, self.seconds = root, out_dir, seconds
        self.seen: dict[tuple[str, str], tuple[int, float]] = {}  # (dir, cycle) -> (size, since)
        self.snapshots: dict[tuple[str, str], Path] = {}

    def tick(self) -> None:
        now = time.monotonic()
        try:
            dirs = process_dirs(self.root)
        except OSError:
            return
        root_fd = spill.open_private_dir(self.root)
        try:
            for name, facts in dirs:
                if not is_running(facts):
                    continue
                try:
                    dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
                except OSError:
                    continue
                try:
                    for cycle in cycles_of(dfd):
                        key = (name, cycle)
                        size = _committed(dfd, cycle)
                        old = self.seen.get(key)
                        if old is None or old[0] != size:
                            self.seen[key] = (size, now)
                            continue
                        if now - old[1] >= self.seconds and key not in self.snapshots:
                            why = (f"hang: nothing recorded for {self.seconds:g} s while the process runs "
                                   "(xpuprof exec's watchdog; the process was left running)")
                            path = write_recovered(dfd, cycle, facts, self.out_dir, why)
                            if path is not None:
                                self.snapshots[key] = path
                                print(f"xpuprof exec: process {facts['pid']}: {why}; what it recorded so far: {path}",
                                      file=sys.stderr)
                finally:
                    os.close(dfd)
        finally:
            os.close(root_fd)
        self.forget_finished()

    def forget_finished(self) -> None:
        """A snapshot whose recording is no longer on file - the process went on and built its own trace -
        goes: the process's own trace holds everything."""
        for key in list(self.snapshots):
            name, cycle = key
            try:
                root_fd = spill.open_private_dir(self.root)
            except OSError:
                return
            try:
                present = os.path.exists(f"/proc/self/fd/{root_fd}/{name}/{cycle}.json")
            finally:
                os.close(root_fd)
            if not present:
                _unlink_quietly(self.snapshots.pop(key))


def _committed(dfd: int, cycle: str) -> int:
    """The rows and bytes a cycle has committed (its files' headers): grows while the process records."""
    total = 0
    for block in ("ranges", "instants"):
        head = _read_small(dfd, f"{cycle}.{block}", spill.HEADER_BYTES) or b""
        if len(head) == spill.HEADER_BYTES:
            total += int.from_bytes(head[16:24], "little", signed=True)
    return total
