"""Argument types shared by the subcommands."""
from __future__ import annotations

import argparse


def top_count(text: str) -> int | None:
    """``--top N``: a positive row count, or ``all`` (None). Negatives and 0 are refused: a slice such as
    ``rows[:-1]`` would silently drop rows."""
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}")
    return n
