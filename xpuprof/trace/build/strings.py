"""Interned, JSON-safe strings: every name, category and string arg is stored once, as an id."""
from __future__ import annotations

import re

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


class StringTable:
    """str -> dense int32 id. Id 0 is the empty string."""

    __slots__ = ("_ids", "strings", "invalid_utf8")

    def __init__(self) -> None:
        self._ids: dict = {"": 0}
        self.strings: list[str] = [""]
        self.invalid_utf8 = 0  # distinct names whose invalid UTF-8 was replaced (written as invalid_utf8_names)

    def __len__(self) -> int:
        return len(self.strings)

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
            got = len(self.strings)
            self.strings.append(safe)
            ids[safe] = got
        try:
            ids[value] = got  # remember the raw spelling too (bytes, surrogates) for the next lookup
        except TypeError:  # unhashable: only its str form is remembered
            pass
        return got

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

    def lookup(self, sid: int) -> str:
        return self.strings[sid]
