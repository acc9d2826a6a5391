"""Opening a trace file for reading: the one place where an input is checked before and while it is read.

Every reader of Kineto JSON (``kineto_stream``, ``load``) opens its file here, so the rules are written once:

* what may be read: regular files only (``xpuprof.inputs.open_regular``); a path that does not exist, a
  directory, a FIFO, a device or one that cannot be opened is one ``TraceLoadError`` naming it;
* the input limit (``xpuprof.inputs``, ``XPUPROF_MAX_INPUT_BYTES``): a file over it is refused before it is
  read, and every byte read counts against it - for gzip, what it decompresses to - so a gzip bomb stops at
  the limit (and, being zeros or garbage, at its first inflated bytes);
* the first bytes: a document must open with ``{`` or ``[`` (after a BOM and whitespace), so a stream of
  zeros or a binary file is refused at its first bytes, not after gigabytes; a reader that also takes
  Perfetto protobuf (``accept``) takes a document whose first byte opens a ``Trace.packet`` (0x0a) too, and
  ``TraceInput.format`` says which it is.
"""
from __future__ import annotations

import zlib
from pathlib import Path

from ...inputs import InputError, check_json_start, max_input_bytes, open_regular, too_large

WHAT = "trace file"
FIRST_BYTES = 1 << 16  # read before anything else: enough to see what the file is
FILE_KINDS = ("regular file",)  # what is read as a trace (xpuprof.inputs.open_regular)
FORMATS = ("json", "perfetto")  # Kineto JSON; Perfetto protobuf (a Trace message: packets, field 1)
PERFETTO_FIRST_BYTE = b"\x0a"  # Trace.packet (field 1, length-delimited): how every Perfetto trace opens


class TraceLoadError(ValueError):
    """A trace file that is missing, unreadable, over the input limit or not a Chrome trace; the message
    names the file and what is wrong."""


class TraceInput:
    """A trace file opened for reading: ``read(n)`` gives the document's next bytes (gzip undone), checked
    and counted as the module docstring says. Use as a context manager, or ``close()``."""

    def __init__(self, path, *, limit: int | None = None, accept: tuple[str, ...] = ("json",)) -> None:
        self.path = Path(path)
        self.limit = max_input_bytes() if limit is None else limit
        self.accept = accept
        self.format = "json"
        self.total = 0  # document bytes read so far (decompressed)
        self.gzip = False
        self._raw = self._open()
        self._f = self._raw
        self._pending = b""
        try:
            self._pending = self._first_bytes()
        except BaseException:
            self.close()
            raise

    def _fail(self, what: str) -> TraceLoadError:
        return TraceLoadError(f"{self.path}: {what}")

    def _open(self):
        p = self.path
        try:
            fd, st = open_regular(p, WHAT)
        except FileNotFoundError:
            raise TraceLoadError(f"{p}: no such trace file") from None
        except IsADirectoryError:
            raise self._fail("is a directory, not a trace file") from None
        except InputError as exc:  # a FIFO, a device, a socket
            raise TraceLoadError(str(exc)) from None
        except OSError as exc:
            raise TraceLoadError(f"cannot read trace file {p}: {exc.strerror or exc}") from None
        f = open(fd, "rb", buffering=0)
        if st.st_size > self.limit:
            f.close()
            raise TraceLoadError(str(too_large(p, WHAT, self.limit, f" ({st.st_size:,} bytes)")))
        return f

    def _first_bytes(self) -> bytes:
        head = self._raw_read(FIRST_BYTES)
        self._check(head)
        if head[:2] != b"\x1f\x8b":
            return head
        import io

        self.gzip = True
        self._f = _Gunzip(head, self._raw)
        self.total = 0
        first = self.read(FIRST_BYTES)
        self._check(first)
        return first

    def _check(self, first: bytes) -> None:
        # JSON first: its leading whitespace may be a newline, the byte that opens a Perfetto Trace
        body = first[3:] if first.startswith(b"\xef\xbb\xbf") else first
        json_start = body.lstrip(b" \t\r\n")[:1] in (b"{", b"[")
        if "perfetto" in self.accept and not json_start and first[:1] == PERFETTO_FIRST_BYTE:
            self.format = "perfetto"
            return
        if "json" not in self.accept:
            if first[:2] == b"\x1f\x8b":
                return  # gzip: checked again once decompressed
            got = f"byte 0x{first[0]:02x}" if first else "nothing (it is empty)"
            raise TraceLoadError(f"{self.path}: not a Perfetto protobuf trace (it starts with {got}, not a "
                                 "TracePacket's 0x0a)")
        try:
            check_json_start(self.path, WHAT)(first)
        except InputError as exc:
            if "perfetto" in self.accept:
                raise TraceLoadError(f"{exc} nor a Perfetto protobuf trace's 0x0a") from None
            raise TraceLoadError(str(exc)) from None

    def _raw_read(self, n: int) -> bytes:
        try:
            data = self._raw.read(n)
        except OSError as exc:
            raise TraceLoadError(f"cannot read trace file {self.path}: {exc.strerror or exc}") from None
        self.total += len(data)
        if self.total > self.limit:
            raise TraceLoadError(str(too_large(self.path, WHAT, self.limit)))
        return data

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of the document (``-1``: the rest); b"" at its end."""
        if self._pending:
            data, self._pending = self._pending, b""
            if n < 0:
                return data + self.read(-1)
            return data
        if self._f is self._raw:
            if n < 0:
                parts = []
                while True:
                    got = self._raw_read(1 << 20)
                    if not got:
                        return b"".join(parts)
                    parts.append(got)
            return self._raw_read(n)
        try:
            data = self._f.read(self.limit + 1 - self.total if n < 0 else n)
        except (EOFError, OSError, ValueError) as exc:  # truncated or corrupt gzip
            raise TraceLoadError(f"{self.path}: is not a readable gzip file (truncated or corrupt?): "
                                 f"{type(exc).__name__}: {exc}") \
                from None
        except Exception as exc:  # zlib/isal errors of a corrupt stream
            raise TraceLoadError(f"{self.path}: is not a readable gzip file (truncated or corrupt?): "
                                 f"{type(exc).__name__}: {exc}") \
                from None
        self.total += len(data)
        if self.total > self.limit:
            raise TraceLoadError(str(too_large(self.path, f"{WHAT} (decompressed)", self.limit)))
        return data

    def close(self) -> None:
        for f in (self._f, self._raw):
            try:
                f.close()
            except Exception:  # noqa: BLE001 - closing a broken gzip stream may raise again
                pass

    def __enter__(self) -> "TraceInput":
        return self

    def __exit__(self, *_) -> None:
        self.close()


class _Gunzip:
    """The gzip stream of a raw file (its first bytes already read: ``head``), decompressed piece by piece:
    several members one after the other, and trailing bytes that start no member ignored, as gzip does.
    A truncated or corrupt stream raises (``EOFError``, ``zlib.error``)."""

    READ = 1 << 20

    def __init__(self, head: bytes, raw) -> None:
        try:
            from isal import isal_zlib as z  # python-isal: several times faster than zlib
        except ImportError:
            z = zlib
        self._z, self._raw = z, raw
        self._pending = head
        self._d = z.decompressobj(31)
        self._out = b""
        self._eof = False

    def _more_input(self) -> bytes:
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        return self._raw.read(self.READ)

    def read(self, n: int) -> bytes:
        while len(self._out) < n and not self._eof:
            data = self._d.unconsumed_tail or self._more_input()
            if not data:
                if not self._d.eof:
                    raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                self._eof = True
                break
            self._out += self._d.decompress(data, max(n - len(self._out), 1 << 16))
            if self._d.eof:
                rest = self._d.unused_data + (b"" if self._d.unconsumed_tail else b"")
                rest = rest or self._more_input()
                if rest[:2] == b"\x1f\x8b":  # another member
                    self._d = self._z.decompressobj(31)
                    self._pending = rest
                else:  # trailing garbage (or nothing): the stream ends
                    self._eof = True
        out, self._out = self._out[:n], self._out[n:]
        return out

    def close(self) -> None:
        pass


def read_document(path) -> bytes:
    """The whole document (gzip undone), checked and bounded as the module says."""
    with TraceInput(path) as src:
        return src.read(-1)


def trace_format(path) -> str:
    """Which format a trace file is in, from its first bytes: "json" (Kineto) or "perfetto" (protobuf); an
    error naming the file when it is neither, missing or unreadable."""
    with TraceInput(path, accept=FORMATS) as src:
        return src.format
