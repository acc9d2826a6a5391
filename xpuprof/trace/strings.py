"""Interned, JSON-safe strings: every name, category and string arg is stored once, as an id."""
from __future__ import annotations

import numpy as np

# Longer strings are cut (with a marker) so one runaway kernel name cannot bloat a trace.
MAX_STRING_CHARS = 1 << 16


def json_safe(value) -> str:
    """Any str/bytes/object -> a str that every JSON encoder accepts (valid UTF-8, bounded)."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: not representable in UTF-8 JSON
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > MAX_STRING_CHARS:
        text = f"{text[:MAX_STRING_CHARS]}...[{len(text) - MAX_STRING_CHARS} more chars]"
    return text


class StringTable:
    """str -> dense int32 id. Id 0 is the empty string."""

    __slots__ = ("_ids", "strings")

    def __init__(self) -> None:
        self._ids: dict = {"": 0}
        self.strings: list[str] = [""]

    def __len__(self) -> int:
        return len(self.strings)

    def intern(self, value) -> int:
        ids = self._ids
        got = ids.get(value)
        if got is not None:
            return got
        safe = json_safe(value)
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
