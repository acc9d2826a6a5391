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


def _number(text: str, kind, least, *, strict: bool, what: str):
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or value != value or value == float("inf") or value < least or (strict and value == least):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _number(text, int, 0, strict=True, what="a positive integer")


def non_negative_int(text: str) -> int:
    return _number(text, int, 0, strict=False, what="an integer >= 0")


def positive_seconds(text: str) -> float:
    return _number(text, float, 0.0, strict=True, what="a positive number of seconds")


def non_negative_seconds(text: str) -> float:
    return _number(text, float, 0.0, strict=False, what="a number of seconds >= 0")


def tcp_port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port (1-65535), got {text!r}")
    return value
