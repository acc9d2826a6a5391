"""Crash-safe host recording: the recorder's logs kept in mapped files of a private directory.

Under ``xpuprof exec`` every Python process records into files rather than anonymous memory: each of a
HostRecorder's growing blocks (ranges, instants, names, args) lives in a ``MAP_SHARED`` mapping of its
own file (``Int64Log.spill_to`` and friends, ``_native/shared/hostmem.c``), so a row is in the file the moment
it is written. A process killed by SIGKILL, SIGSEGV, SIGBUS or SIGABRT, or hung, leaves every range it
closed: nothing is flushed, nothing runs in a signal handler. The ``exec`` parent turns what is left
into the trace (``ondemand/crashsafe.py``). PyTorch's NCCL flight recorder keeps the last collectives
in a ring for the same reason; here the whole recording survives, bounded by the recording cap.

Layout, all created by the processes themselves and read only by the parent that made the root::

    <root>/                           0700, made by ``xpuprof exec`` (XPUPROF_SPILL_DIR)
        <pid>-<random>/               0700, one per process (mkdir: never an existing directory)
            process.json              pid, start time, host, worker name, rank (written once)
            c<N>.json                 one recording cycle: window start, activities
            c<N>.ranges, .instants    SpillHeader (64 B: magic, width, committed rows) + int64 rows
            c<N>.names, .names.ends   name text; its ends (Int64Log(1))
            c<N>.args, .args.ends     args JSON text; its ends
            c<N>.open                 the ranges open now: (t0, tid, id, name, state) rows, state 1 while open
            c<N>.threads              "tid\\tname" lines, appended when a thread first records

Every file is created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (0600) through a descriptor of its directory,
and the root is checked (a directory, owned by this user, no access for others) before anything is
written: nothing is ever written through a name another user could plant. A cycle's files go once its
trace is built (``discard``); the process directory goes at a clean exit.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import time
from typing import Any

SPILL_ENV = "XPUPROF_SPILL_DIR"
SPILL_BASE_ENV = "XPUPROF_SPILL_BASE"  # where ``xpuprof exec`` makes its private root (default: /dev/shm or TMPDIR)
HEADER_BYTES = 64
MAGIC = b"XPUSPL1\0"
BLOCKS = ("ranges", "instants", "names", "names.ends", "args", "args.ends", "open")
_CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SpillError(OSError):
    """The spill directory cannot be used safely; the message says why."""


def open_private_dir(path: str) -> int:
    """A descriptor of ``path``, which must be a directory (not a link) of this user with no access for
    group or others."""
    try:
        fd = os.open(path, _DIR)
    except OSError as exc:
        raise SpillError(exc.errno, f"spill directory {path}: {exc.strerror}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise SpillError(errno.EPERM, f"spill directory {path} is not private to this user (uid {st.st_uid}, mode "
                                      f"{stat.S_IMODE(st.st_mode):04o})")
    return fd


def _create(dfd: int, name: str) -> int:
    return os.open(name, _CREATE, 0o600, dir_fd=dfd)


def _write_json(dfd: int, name: str, data: dict) -> None:
    fd = _create(dfd, name)
    try:
        os.write(fd, json.dumps(data).encode())
    finally:
        os.close(fd)


class ProcessSpill:
    """This process's directory under the exec root; hands a ``CycleSpill`` to each new HostRecorder."""

    def __init__(self, root: str) -> None:
        root_fd = open_private_dir(root)
        try:
            name = f"{os.getpid()}-{secrets.token_hex(4)}"
            os.mkdir(name, 0o700, dir_fd=root_fd)  # fails on anything already there
            self.dfd = os.open(name, _DIR, dir_fd=root_fd)
        finally:
            os.close(root_fd)
        self.path = os.path.join(root, name)
        self.pid = os.getpid()
        self.cycles = 0
        _write_json(self.dfd, "process.json", process_facts())

    def new_cycle(self) -> "CycleSpill | None":
        if os.getpid() != self.pid:  # a forked child: its own profile records in memory
            return None
        self.cycles += 1
        return CycleSpill(self, self.cycles)

    def close(self, remove: bool) -> None:
        """At a clean exit: the directory goes (its cycles were discarded when their traces were built)."""
        if self.dfd < 0 or os.getpid() != self.pid:
            return
        if remove:
            for name in os.listdir(self.dfd):
                try:
                    os.unlink(name, dir_fd=self.dfd)
                except OSError:
                    pass
        os.close(self.dfd)
        self.dfd = -1
        if remove:
            try:
                os.rmdir(self.path)
            except OSError:
                pass


def process_facts() -> dict[str, Any]:
    import socket
    import sys

    from .. import rank as rank_env

    info = rank_env.detect_or_none()
    argv0 = sys.argv[0] if sys.argv else ""
    return {"pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid()), "host": socket.gethostname(),
            "process_name": os.path.basename(argv0) if argv0 not in ("", "-", "-c") else "python",
            "distributedInfo": info.distributed_info() if info is not None else None}


def process_start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it
    names one process even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


class CycleSpill:
    """The files of one recording cycle (one HostRecorder)."""

    def __init__(self, owner: ProcessSpill, number: int) -> None:
        self.owner = owner
        self.prefix = f"c{number}"
        self.threads_fd = -1
        self.names: list[str] = []

    def attach(self, rec) -> None:
        """Move ``rec``'s empty logs into this cycle's files (before it records)."""
        from ..clock import now_ns

        dfd = self.owner.dfd
        fds = {}
        try:
            for block in BLOCKS:
                name = f"{self.prefix}.{block}"
                fds[block] = _create(dfd, name)
                self.names.append(name)
            rec.ranges.spill_to(fds["ranges"])
            rec.instants.spill_to(fds["instants"])
            rec.names.spill_to(fds["names"], fds["names.ends"])
            rec.args_area.spill_to(fds["args"], fds["args.ends"])
            rec.open_slots.spill_to(fds["open"])
            self.threads_fd = _create(dfd, f"{self.prefix}.threads")
            self.names.append(f"{self.prefix}.threads")
            _write_json(dfd, f"{self.prefix}.json", {"window_start_ns": now_ns(), "written_ns": time.time_ns()})
            self.names.append(f"{self.prefix}.json")
        finally:
            for fd in fds.values():
                os.close(fd)  # the logs hold their own descriptors

    def note_thread(self, tid: int, name: str) -> None:
        if self.threads_fd >= 0:
            try:
                os.write(self.threads_fd, f"{tid}\t{name}\n".replace("\r", " ").encode("utf-8", "replace"))
            except OSError:
                pass

    def discard(self) -> None:
        """The cycle's trace is built: its files go."""
        if self.threads_fd >= 0:
            os.close(self.threads_fd)
            self.threads_fd = -1
        if os.getpid() != self.owner.pid or self.owner.dfd < 0:
            return
        for name in self.names:
            try:
                os.unlink(name, dir_fd=self.owner.dfd)
            except OSError:
                pass
        self.names = []


# ----------------------------------------------------------------------------- this process's spill
_home: ProcessSpill | None = None


def start_from_environment() -> ProcessSpill | None:
    """Under ``xpuprof exec`` (``XPUPROF_SPILL_DIR`` set): this process's spill directory, made once. A
    root that is not private is refused with one warning (recording goes on in memory)."""
    global _home
    root = os.environ.get(SPILL_ENV, "")
    if _home is not None or not root:
        return _home
    try:
        _home = ProcessSpill(root)
    except OSError as exc:
        import logging

        logging.getLogger("xpuprof").warning("xpuprof: no crash-safe copy of this process's recording: %s", exc)
        return None
    import atexit

    atexit.register(_at_exit)
    return _home


def home() -> ProcessSpill | None:
    return _home if _home is not None and _home.pid == os.getpid() else None


def _at_exit() -> None:
    if _home is not None:
        _home.close(remove=not any(n.startswith("c") for n in _listdir(_home.dfd)))


def _listdir(dfd: int) -> list[str]:
    try:
        return os.listdir(dfd)
    except OSError:
        return []


# ----------------------------------------------------------------------------- reading (the exec parent)
def read_block(dfd: int, name: str, width: int) -> tuple[Any, int]:
    """A block's committed content: (int64 rows (n, width) or uint8 bytes, errno that detached it or 0).
    Missing or damaged files read as empty."""
    import numpy as np

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return (np.zeros((0, width), np.int64) if width else np.zeros(0, np.uint8)), 0
    try:
        st = os.fstat(fd)
        head = os.pread(fd, HEADER_BYTES, 0) if stat.S_ISREG(st.st_mode) else b""
        if len(head) < HEADER_BYTES or head[:8] != MAGIC:
            return (np.zeros((0, width), np.int64) if width else np.zeros(0, np.uint8)), 0
        header = np.frombuffer(head, np.int64)
        used, detached = int(header[2]), int(header[3])
        item = 8 * width if width else 1
        used = max(0, min(used, (st.st_size - HEADER_BYTES) // item))
        data = os.pread(fd, used * item, HEADER_BYTES) if used else b""
        used = len(data) // item
        if width:
            return np.frombuffer(data[:used * item], np.int64).reshape(used, width).copy(), detached
        return np.frombuffer(data, np.uint8).copy(), detached
    finally:
        os.close(fd)


class _Rows:
    """A block read back: the shape ``recorder.log_array`` and ``area_arrays`` read (buffer, width, rows)."""

    def __init__(self, array, width: int) -> None:
        self.array, self.width = array, width

    def __len__(self) -> int:
        return len(self.array)


OPEN_WIDTH = 5  # t0, tid, correlation id, name, state (hostrec.c's open_log)


class SpilledRecorder:
    """One cycle's records read back from its files: what ``profiler.assemble`` reads of a HostRecorder."""

    def __init__(self, dfd: int, prefix: str) -> None:
        import numpy as np

        from .record_layout import INSTANT_FIELDS, NO_ARGS, RANGE_FIELDS

        self.detached: dict[str, int] = {}  # block -> errno that ended its crash-safe copy early
        blocks = {}
        for block, width in (("ranges", len(RANGE_FIELDS)), ("instants", len(INSTANT_FIELDS)),
                             ("names", 0), ("names.ends", 1), ("args", 0), ("args.ends", 1)):
            blocks[block], err = read_block(dfd, f"{prefix}.{block}", width)
            if err:
                self.detached[block] = err
        name_ends = blocks["names.ends"][:, 0]
        if not len(name_ends) or name_ends[0] != 0:
            name_ends = np.zeros(1, np.int64)
        name_ends = name_ends[name_ends <= len(blocks["names"])]
        self.name_blob, self.name_ends = blocks["names"], name_ends  # n + 1 ends, row 0 is 0
        n_names = len(name_ends) - 1
        arg_ends = blocks["args.ends"][:, 0]
        arg_ends = arg_ends[arg_ends <= len(blocks["args"])]
        ranges = blocks["ranges"]
        ranges = ranges[(ranges[:, 4] >= 0) & (ranges[:, 4] < n_names)]  # rows past a detached name table go
        bad_args = (ranges[:, 5] >= len(arg_ends)) | (ranges[:, 5] < NO_ARGS)  # past the area, or objects (kept in memory)
        self.args_lost = int(bad_args.sum())
        ranges[bad_args, 5] = NO_ARGS
        instants = blocks["instants"]
        instants = instants[(instants[:, 2] >= 0) & (instants[:, 2] < n_names)]
        self.args_lost += int((instants[:, 3] != NO_ARGS).sum())  # instants' args live in memory only
        instants[:, 3] = NO_ARGS
        self.ranges = _Rows(ranges, len(RANGE_FIELDS))
        self.instants = _Rows(instants, len(INSTANT_FIELDS))
        opened, err = read_block(dfd, f"{prefix}.open", OPEN_WIDTH)
        if err:
            self.detached["open"] = err
        opened = opened[(opened[:, 4] == 1) & (opened[:, 3] >= 0) & (opened[:, 3] < n_names)]
        # ranges open at the end: (t0, t1 set by close_open_at, tid, id, name, no args), as close_open_ranges
        self.truncated = _Rows(np.column_stack([opened[:, 0], opened[:, 0], opened[:, 1], opened[:, 2], opened[:, 3],
                                                np.full(len(opened), NO_ARGS, np.int64)]).astype(np.int64),
                               len(RANGE_FIELDS))
        self.args_area = _Area(blocks["args"], _Rows(arg_ends.reshape(-1, 1), 1))
        self.args: list = []
        self.thread_names = read_threads(dfd, f"{prefix}.threads")
        self.sessions = ()
        self.track_correlation = False

    def range_count(self) -> int:
        return len(self.ranges)

    def close_open_at(self, end_ns: int) -> int:
        """The ranges open when the process ended, closed at ``end_ns`` (monotonic); their count."""
        import numpy as np

        rows = self.truncated.array
        rows[:, 1] = np.maximum(rows[:, 0], end_ns)
        return len(rows)

    def last_ns(self) -> int:
        """The latest monotonic time among the records (0 when none)."""
        ends = [int(self.ranges.array[:, 1].max()) if len(self.ranges) else 0,
                int(self.instants.array[:, 0].max()) if len(self.instants) else 0,
                int(self.truncated.array[:, 0].max()) if len(self.truncated) else 0]
        return max(ends)

    def name_ids_in(self, strings):
        import numpy as np

        first = strings.add_segment(self.name_blob, self.name_ends, invalid_utf8=0)
        return np.arange(first, first + len(self.name_ends) - 1, dtype=np.int32)

    def name_texts(self, ids) -> list[str]:
        ends = self.name_ends
        return [bytes(self.name_blob[int(ends[i]):int(ends[i + 1])]).decode("utf-8", "replace") for i in ids]

    def lifetimes(self) -> dict[str, int]:
        return {}


class _Area(_Rows):
    def __init__(self, data, ends: _Rows) -> None:
        super().__init__(data, 0)
        self.ends = ends


def read_threads(dfd: int, name: str) -> dict[int, str]:
    out: dict[int, str] = {}
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return out
    try:
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    for line in data.decode("utf-8", "replace").splitlines():
        tid, _, thread = line.partition("\t")
        if tid.isdigit():
            out[int(tid)] = thread
    return out
