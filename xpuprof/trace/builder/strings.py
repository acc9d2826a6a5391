"""Interned, JSON-safe strings: every name, category and string arg is stored once, as an id."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

# Longer strings are cut (with a marker) so one runaway kernel name cannot bloat a trace.
MAX_STRING_CHARS = 1 << 16
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _replace_invalid(value) -> str | None:
    """``value`` with invalid UTF-8 bytes / lone surrogates replaced by U+FFFD, or None when it had none."""
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
            return None
        except UnicodeDecodeError:
            return value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return None
        except UnicodeEncodeError:  # lone surrogates (what undecodable bytes become in Python)
            return _SURROGATE.sub(REPLACEMENT, value)
    return None


def json_safe(value) -> str:
    """Any str/bytes/object -> a str that every JSON encoder accepts (valid UTF-8, bounded); invalid
    bytes and lone surrogates become U+FFFD, as a C plugin's names do."""
    fixed = _replace_invalid(value)
    if fixed is not None:
        text = fixed
    elif isinstance(value, bytes):
        text = value.decode("utf-8")
    elif isinstance(value, str):
        text = value
    else:
        text = str(value)
        fixed = _replace_invalid(text)
        text = text if fixed is None else fixed
    if len(text) > MAX_STRING_CHARS:
        text = f"{text[:MAX_STRING_CHARS]}...[{len(text) - MAX_STRING_CHARS} more chars]"
    return text


def has_invalid_utf8(value) -> bool:
    """Whether ``value`` (bytes, or a str with lone surrogates) holds text that is not valid UTF-8."""
    return isinstance(value, (str, bytes)) and _replace_invalid(value) is not None


class _Segment(NamedTuple):
    """Strings handed over in bulk: ids ``first .. first + count - 1`` are ``blob[ends[i]:ends[i + 1]]``
    (valid UTF-8, within the string bound), not deduplicated against the interned ones."""

    first: int
    count: int
    blob: np.ndarray  # uint8
    ends: np.ndarray  # int64, count + 1


class StringTable:
    """str -> dense int32 id. Id 0 is the empty string.

    Strings come one at a time (``intern``: deduplicated, each a Python str) or as a segment of many
    (``add_segment``: UTF-8 text in one buffer, no Python object per string - the host recorder's
    names). ``strings`` reads any id as a str; ``json_tokens`` encodes many ids at once."""

    __slots__ = ("_ids", "_list", "_segments", "_size", "invalid_utf8")

    def __init__(self) -> None:
        self._ids: dict = {"": 0}
        self._list: list[str] = [""]  # the interned strings, in id order (segment ids skipped)
        self._segments: list[_Segment] = []
        self._size = 1
        self.invalid_utf8 = 0  # distinct names whose invalid UTF-8 was replaced (written as invalid_utf8_names)

    def __len__(self) -> int:
        return self._size

    @property
    def strings(self) -> "Sequence[str]":
        """Every string by id: the list itself while there is no segment, else a read-only view that
        decodes segment strings as they are read (``StringView``)."""
        return StringView(self) if self._segments else self._list

    def intern(self, value) -> int:
        ids = self._ids
        got = ids.get(value)
        if got is not None:
            return got
        safe = json_safe(value)
        if safe is not value and isinstance(value, (str, bytes)) and _replace_invalid(value) is not None:
            self.invalid_utf8 += 1
        got = ids.get(safe)
        if got is None:
            got = self._size
            self._size += 1
            self._list.append(safe)
            ids[safe] = got
        try:
            ids[value] = got  # remember the raw spelling too (bytes, surrogates) for the next lookup
        except TypeError:  # unhashable: only its str form is remembered
            pass
        return got

    def add_segment(self, blob: np.ndarray, ends: np.ndarray, *, invalid_utf8: int = 0) -> int:
        """Append ``len(ends) - 1`` strings given as UTF-8 text (``blob[ends[i]:ends[i + 1]]``, each valid
        and within the string bound - the host recorder's NameTable guarantees both); returns the first
        id (the others follow it). The arrays are kept as given (views, no copy)."""
        count = len(ends) - 1
        first = self._size
        if count > 0:
            self._segments.append(_Segment(first, count, blob, ends))
            self._size += count
        self.invalid_utf8 += invalid_utf8
        return first

    def _locate(self, sid: int) -> tuple[_Segment | None, int]:
        """(segment, index in it) or (None, index in ``_list``) for an id."""
        before = 0
        for seg in self._segments:
            if sid < seg.first:
                break
            if sid < seg.first + seg.count:
                return seg, sid - seg.first
            before += seg.count
        return None, sid - before

    def lookup(self, sid: int) -> str:
        if not self._segments:
            return self._list[sid]
        sid = int(sid)
        if not 0 <= sid < self._size:
            raise IndexError(f"string id {sid} out of range")
        seg, i = self._locate(sid)
        if seg is None:
            return self._list[i]
        return seg.blob[int(seg.ends[i]):int(seg.ends[i + 1])].tobytes().decode("utf-8")

    def intern_many(self, values) -> np.ndarray:
        """Intern a sequence (or numpy array) of strings; returns int32 ids."""
        if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
            raise TypeError("intern_many takes strings, not ids")
        intern = self.intern
        if isinstance(values, np.ndarray):
            # Intern each distinct value once; map back through np.unique's inverse.
            uniq, inverse = np.unique(values.astype(object), return_inverse=True)
            table = np.fromiter((intern(u) for u in uniq), dtype=np.int32, count=len(uniq))
            return table[inverse.reshape(-1)]
        return np.fromiter((intern(v) for v in values), dtype=np.int32, count=len(values))

    def json_tokens(self, ids: np.ndarray, encode_one) -> tuple[bytes, np.ndarray]:
        """The JSON encoding of each id in ``ids`` (distinct, ascending) as one blob and ``len(ids) + 1``
        int64 offsets. ``encode_one(sid)`` encodes an interned string (the writer caches those); segment
        strings are escaped in bulk (C, ``xpuprof._native.rowfmt``; per string without it)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not self._segments:
            return _joined([encode_one(i) for i in ids.tolist()])
        pieces: list[tuple[bytes, np.ndarray]] = []
        lo = 0
        for seg in self._segments:  # the interned ids before each segment, then the segment's own
            hi = int(np.searchsorted(ids, seg.first))
            if hi > lo:
                pieces.append(_joined([encode_one(i) for i in ids[lo:hi].tolist()]))
            end = int(np.searchsorted(ids, seg.first + seg.count))
            if end > hi:
                pieces.append(_escape_segment(seg, ids[hi:end] - seg.first))
            lo = end
        if lo < len(ids):
            pieces.append(_joined([encode_one(i) for i in ids[lo:].tolist()]))
        if len(pieces) == 1:
            return pieces[0]
        offsets = np.zeros(len(ids) + 1, np.int64)
        at, base = 1, 0
        for blob, offs in pieces:
            offsets[at:at + len(offs) - 1] = offs[1:] + base
            at += len(offs) - 1
            base += len(blob)
        return b"".join(blob for blob, _ in pieces), offsets


class StringView(Sequence):
    """``StringTable.strings``: any id as a str, ``len``, iteration (read-only)."""

    __slots__ = ("_table",)

    def __init__(self, table: StringTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return self._table._size

    def __getitem__(self, sid):
        if isinstance(sid, slice):
            return [self._table.lookup(i) for i in range(*sid.indices(len(self)))]
        if not self._table._segments:
            return self._table._list[sid]
        sid = int(sid)
        return self._table.lookup(sid + len(self) if sid < 0 else sid)

    def __iter__(self):
        t = self._table
        if not t._segments:
            return iter(t._list)
        return (t.lookup(i) for i in range(t._size))


def _joined(tokens: list[bytes]) -> tuple[bytes, np.ndarray]:
    offsets = np.zeros(len(tokens) + 1, np.int64)
    if tokens:
        np.cumsum(np.fromiter(map(len, tokens), np.int64, len(tokens)), out=offsets[1:])
    return b"".join(tokens), offsets


def native_escaper():
    """``xpuprof._native.rowfmt`` when it is built with ``json_tokens`` (the bulk escaper), else None."""
    from ... import _native

    rowfmt = _native.optional("rowfmt")
    return rowfmt if hasattr(rowfmt, "json_tokens") else None


def _escape_segment(seg: _Segment, local: np.ndarray) -> tuple[bytes, np.ndarray]:
    """JSON string tokens (orjson's escaping) of a segment's strings ``local`` (ascending)."""
    rowfmt = native_escaper()
    if rowfmt is not None:
        blob, offsets = rowfmt.json_tokens(seg.blob, np.ascontiguousarray(seg.ends, np.int64),
                                           np.ascontiguousarray(local, np.int64))
        return blob, np.frombuffer(offsets, np.int64)
    import orjson

    ends = seg.ends
    return _joined([bytes(memoryview(orjson.dumps(seg.blob[int(ends[i]):int(ends[i + 1])].tobytes().decode())))
                    for i in local.tolist()])
