""""Did you mean": the closest valid word for a mistyped one, for every one-line error that lists what
is valid (backend, category, sort key, format). difflib is imported only when a word is wrong."""
from __future__ import annotations

from typing import Iterable


def closest(word: str, valid: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The valid word most like ``word`` (case-insensitively), or None when none is close."""
    import difflib

    choices = [str(v) for v in valid]
    by_lower = {c.lower(): c for c in choices}
    got = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[got[0]] if got else None


def did_you_mean(word: str, valid: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the closest valid word, else ``""``."""
    got = closest(word, valid, cutoff)
    return f"; did you mean {got!r}?" if got else ""
