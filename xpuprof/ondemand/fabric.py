"""dynolog's IPC fabric, both ends: datagram layout, endpoint names, who sent a datagram.

Facts from dynolog ``src/ipcfabric/{Endpoint,FabricManager,Utils}.h`` and Kineto
``IpcFabricConfigClient.cpp`` / ``ThreadUtil.cpp`` (the code the real daemon and torch's client run):

* ``AF_UNIX`` + ``SOCK_DGRAM``. A name ``N`` is the abstract address ``"\\0N\\0"`` (the trailing NUL
  is part of it), or the file ``$KINETO_IPC_SOCKET_DIR/N`` when that variable is set (both ends must
  use the same value: the daemon aborts on a datagram from a path outside its directory).
* The daemon is ``dynolog``; a client binds ``dynoconfigclient<uuid4>``; the daemon answers the name
  a datagram came from.
* Datagram = ``Metadata{size_t size; char type[32]}`` (40 bytes, native) + ``size`` payload bytes.
* ``"req"``: ``LibkinetoRequest{int32 type; int32 n; int64 jobid; int32 pids[n]}``; the answer is a
  ``"req"`` datagram whose payload is the config text (empty: nothing pending).
* ``pids``: the process itself, then its ancestors, at most 11 in all, stopping before pid 1 (pid 1
  is kept only as the process itself, in a container); computed once, as Kineto does.
* ``jobid``: ``SLURM_JOB_ID`` read as ``strtoll`` reads it, else 0.

Security (ours; Kineto does not check): every datagram is received with ``SO_PASSCRED``, so the
kernel says which pid and uid sent it, and the receiver's trust rule (``trusted_sender``: root or this
process's own uid) is applied to those credentials before a byte of the datagram is decoded or logged
(``Untrusted``). Filesystem sockets live only in a directory no other user can turn against this process
(``sockdir``); the socket file's mode is set, and the file removed, through a descriptor of that directory
and of the file itself, never through a name resolved again.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import struct
import uuid
from dataclasses import dataclass
from typing import Callable

from . import sockdir

DAEMON_NAME = "dynolog"
CLIENT_PREFIX = "dynoconfigclient"
SOCKET_DIR_ENV = "KINETO_IPC_SOCKET_DIR"

TYPE_SIZE = 32
_METADATA = struct.Struct("@N32s")  # size_t size; char type[32]
_REQUEST_HEAD = struct.Struct("@iiq")  # int type; int n; int64_t jobid
_CONTEXT = struct.Struct("@iiq")  # int32 gpu; pid_t pid; int64_t jobid
_UCRED = struct.Struct("@iII")  # struct ucred {pid_t pid; uid_t uid; gid_t gid}
METADATA_SIZE = _METADATA.size

MSG_REQUEST = "req"
MSG_CONTEXT = "ctxt"
# LibkinetoConfigType bits
CONFIG_EVENTS = 0x1
CONFIG_ACTIVITIES = 0x2

MAX_ANCESTORS = 10  # kMaxParentPids: the process plus up to 10 ancestors
MAX_NAME = 108 - 2  # sockaddr_un.sun_path minus the two NULs of an abstract name
MAX_CONFIG_BYTES = 64 << 10  # a config text is a few hundred bytes; the documented bound on one (issue 40)
MAX_DATAGRAM = METADATA_SIZE + MAX_CONFIG_BYTES  # anything larger is truncated, said, and dropped


class FabricError(OSError):
    """The endpoint cannot be set up (name too long, directory missing or unsafe, name taken)."""


class Untrusted(Exception):
    """A datagram whose sender the receiver does not trust; nothing of it was decoded."""

    def __init__(self, credentials: "Credentials | None") -> None:
        super().__init__(credentials)
        self.credentials = credentials


class Malformed(ValueError):
    """A datagram from a trusted sender that is not one (its header does not describe it, or truncated)."""

    def __init__(self, message: str, credentials: "Credentials | None") -> None:
        super().__init__(message)
        self.credentials = credentials


@dataclass(frozen=True)
class Credentials:
    pid: int
    uid: int
    gid: int


@dataclass(frozen=True)
class Datagram:
    type: str
    payload: bytes
    sender: str  # the sender's endpoint name (without the socket directory or NULs)
    credentials: Credentials | None


# ----------------------------------------------------------------------------- names and addresses
def socket_dir() -> str | None:
    """``KINETO_IPC_SOCKET_DIR`` when set and non-empty (filesystem sockets), else None (abstract)."""
    value = os.environ.get(SOCKET_DIR_ENV)
    return value or None


def address(name: str, directory: str | None = None) -> str:
    """The ``sockaddr_un`` path of endpoint ``name``, as dynolog's ``setAddress_`` builds it."""
    if len(name.encode()) > MAX_NAME:
        raise FabricError(errno.ENAMETOOLONG, f"endpoint name {name!r} is longer than {MAX_NAME} bytes")
    if directory:
        path = f"{directory}/{name}"
        if len(path.encode()) > 107:
            raise FabricError(errno.ENAMETOOLONG,
                              f"{SOCKET_DIR_ENV}={directory!r} is too long for a socket path ({path!r} is "
                              f"{len(path.encode())} bytes; at most 107): use a shorter directory")
        return path
    return f"\0{name}\0"


def name_of(addr, directory: str | None = None) -> str:
    """The endpoint name a received address stands for ('' when it is outside the fabric)."""
    if isinstance(addr, bytes):
        addr = addr.decode("utf-8", "replace")
    if not addr:
        return ""
    if addr.startswith("\0"):
        return addr[1:].split("\0", 1)[0]
    if directory and addr.startswith(directory + "/"):
        return addr[len(directory) + 1:]
    return ""


def new_client_name() -> str:
    return f"{CLIENT_PREFIX}{uuid.uuid4()}"


# ----------------------------------------------------------------------------- the process
def ancestor_pids(pid: int | None = None, proc: str = "/proc") -> list[int]:
    """This process and its ancestors, as Kineto's ``pidCommandPairsOfAncestors``."""
    current = os.getpid() if pid is None else pid
    out: list[int] = []
    for i in range(MAX_ANCESTORS + 1):
        if i and current <= 1:
            break
        out.append(current)
        current = _parent_pid(current, proc)
    return out


def _parent_pid(pid: int, proc: str) -> int:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
    tail = stat[stat.rfind(b")") + 1:].split()
    try:
        return int(tail[1])
    except (IndexError, ValueError):
        return 0


_STRTOLL = re.compile(r"\s*([+-]?\d+)")


def job_id(environ=None) -> int:
    """``SLURM_JOB_ID`` as ``strtoll(id, nullptr, 10)`` reads it (leading digits; 0 when none)."""
    env = os.environ if environ is None else environ
    value = env.get("SLURM_JOB_ID")
    if value is None:
        return 0
    m = _STRTOLL.match(value)
    if not m:
        return 0
    return max(min(int(m.group(1)), (1 << 63) - 1), -(1 << 63))


# ----------------------------------------------------------------------------- payloads
def encode(msg_type: str, payload: bytes) -> bytes:
    raw = msg_type.encode()
    if len(raw) >= TYPE_SIZE:
        raise ValueError(f"message type {msg_type!r} does not fit {TYPE_SIZE} bytes")
    return _METADATA.pack(len(payload), raw) + payload


def encode_request(config_type: int, pids: list[int], jobid: int) -> bytes:
    body = _REQUEST_HEAD.pack(config_type, len(pids), jobid) + struct.pack(f"@{len(pids)}i", *pids)
    return encode(MSG_REQUEST, body)


def decode_request(payload: bytes) -> tuple[int, list[int], int]:
    """(config type, pids, job id) of a ``"req"`` payload; ValueError when malformed."""
    if len(payload) < _REQUEST_HEAD.size:
        raise ValueError(f"request payload of {len(payload)} bytes is shorter than its {_REQUEST_HEAD.size}-byte head")
    config_type, n, jobid = _REQUEST_HEAD.unpack_from(payload)
    if n < 0 or len(payload) != _REQUEST_HEAD.size + 4 * n:
        raise ValueError(f"request says {n} pids but carries {len(payload) - _REQUEST_HEAD.size} bytes of them")
    return config_type, list(struct.unpack_from(f"@{n}i", payload, _REQUEST_HEAD.size)), jobid


def decode_context(payload: bytes) -> tuple[int, int, int]:
    if len(payload) != _CONTEXT.size:
        raise ValueError(f"context payload of {len(payload)} bytes (expected {_CONTEXT.size})")
    return _CONTEXT.unpack(payload)


def decode(raw: bytes) -> tuple[str, bytes]:
    """(type, payload) of one datagram; ValueError when its header does not describe it."""
    if len(raw) < METADATA_SIZE:
        raise ValueError(f"datagram of {len(raw)} bytes is shorter than the {METADATA_SIZE}-byte header")
    size, raw_type = _METADATA.unpack_from(raw)
    if size != len(raw) - METADATA_SIZE:
        raise ValueError(f"datagram header says {size} payload bytes, {len(raw) - METADATA_SIZE} arrived")
    return raw_type.split(b"\0", 1)[0].decode("ascii", "replace"), raw[METADATA_SIZE:]


def trusted_sender(cred: Credentials | None, own_uid: int | None = None) -> bool:
    """Root or this process's own user (the kernel-reported sender of the datagram)."""
    if cred is None:
        return False
    uid = os.getuid() if own_uid is None else own_uid
    return cred.uid in (0, uid)


# ----------------------------------------------------------------------------- the endpoint
class Endpoint:
    """One bound fabric endpoint (client or daemon side). Not thread-safe: one owner thread."""

    def __init__(self, name: str, directory: str | None = None, *, replace_stale: bool = True,
                 mode: int = 0o600) -> None:
        """``mode``: of the socket file (filesystem sockets). Clients keep 0600; a daemon-side endpoint
        that other users' processes must reach takes 0666, as dynolog's, and checks who sends instead.
        ``FabricError`` when the directory is unsafe (``sockdir``), the name taken or too long."""
        self.name = name
        self._mode = mode
        self.directory = directory
        self.address = address(name, directory)
        self._dir_fd: int | None = None
        self._bound_name: str | None = None
        if directory:
            try:
                self._dir_fd = sockdir.open_checked(directory)
            except sockdir.SocketDirError as exc:
                raise FabricError(exc.errno, exc.strerror) from None
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            if directory:
                self._bind_file(replace_stale)
            else:
                self._sock.bind(self.address)
        except OSError as exc:
            self._sock.close()
            self._close_dir()
            if isinstance(exc, FabricError):
                raise
            if isinstance(exc, sockdir.SocketDirError):
                raise FabricError(exc.errno, exc.strerror) from None
            where = self.address if directory else f"abstract socket @{name}"
            raise FabricError(exc.errno, f"cannot bind {where}: {exc.strerror or exc}") from None

    def _bind_file(self, replace_stale: bool) -> None:
        # Linux creates the socket file with the socket's own mode less the umask: set before bind, the file is
        # never, even for an instant, more open than asked (the umask may still take bits away: see below).
        os.fchmod(self._sock.fileno(), self._mode)
        try:
            self._sock.bind(self.address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or not replace_stale or self._in_use(self.address):
                raise
            # a stale socket no process listens on (dynolog unlinks before binding too): only our own is removed
            if not sockdir.unlink_own_socket(self._dir_fd, self.name):
                raise FabricError(errno.EADDRINUSE, f"{self.address} exists and is not a stale socket of this user; "
                                  "it is left alone") from None
            self._sock.bind(self.address)
        self._bound_name = self.name
        # Senders are checked by uid anyway (SO_PASSCRED). The exact mode (0666 for a daemon endpoint, which the
        # umask narrowed) is set through an O_PATH descriptor of the file just bound, never by its name (which a
        # swapped symlink could redirect); the umask is process-wide, so it is not changed.
        sockdir.set_socket_mode(self._dir_fd, self.name, self._mode)

    @staticmethod
    def _in_use(path: str) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            probe.connect(path)
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, dest_name: str, datagram: bytes) -> None:
        """One non-blocking send; OSError (ECONNREFUSED/ENOENT: nobody at ``dest_name``) is the caller's."""
        self._sock.sendto(datagram, socket.MSG_DONTWAIT, address(dest_name, self.directory))

    def receive(self, timeout: float | None,
                trust: Callable[["Credentials | None"], bool] | None = None) -> Datagram | None:
        """The next datagram, or None after ``timeout`` seconds (0: only what is queued now).

        ``trust(credentials)`` is asked first (default: ``trusted_sender``); a sender it refuses raises
        ``Untrusted`` before anything of the datagram is decoded. A trusted sender's malformed datagram raises
        ``Malformed``. The datagram is consumed either way."""
        self._sock.settimeout(timeout)
        try:
            raw, ancdata, flags, addr = self._sock.recvmsg(MAX_DATAGRAM, socket.CMSG_SPACE(_UCRED.size))
        except (socket.timeout, BlockingIOError):
            return None
        cred = None
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _UCRED.size:
                cred = Credentials(*_UCRED.unpack_from(data))
        if not (trust or trusted_sender)(cred):
            raise Untrusted(cred)
        if flags & socket.MSG_TRUNC:
            raise Malformed(f"datagram larger than {MAX_DATAGRAM} bytes (truncated)", cred)
        try:
            msg_type, payload = decode(raw)
        except ValueError as exc:
            raise Malformed(str(exc), cred) from None
        return Datagram(msg_type, payload, name_of(addr, self.directory), cred)

    def _close_dir(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def close(self) -> None:
        self._sock.close()
        if self._bound_name and self._dir_fd is not None:
            sockdir.unlink_own_socket(self._dir_fd, self._bound_name)  # through the directory's descriptor
        self._bound_name = None
        self._close_dir()

    def detach(self) -> None:
        """After fork, in the child: close our copy without removing the parent's socket file."""
        self._bound_name = None
        self._sock.close()
        self._close_dir()


def send_once(dest_name: str, datagram: bytes, directory: str | None = None) -> None:
    """One datagram from an unbound socket (the receiver still gets the kernel's credentials); for answers
    sent from any thread. OSError is the caller's."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.sendto(datagram, socket.MSG_DONTWAIT, address(dest_name, directory))
