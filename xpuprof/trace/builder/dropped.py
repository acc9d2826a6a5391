"""The trace's account of records lost or discarded: label -> count, each label with its reason.

Producers count through ``TraceBuilder.drop(source, reason, count, kind=...)``; the label the
trace shows (``dropped_records``) is "<source>: <reason>", or "<source> <kind> <reason>" with a
kind. ``OUT_OF_WINDOW`` losses are expected (a schedule's warmup, records between cycles): counted,
never warned about; every other reason is (``unexpected``).
"""
from __future__ import annotations

OUT_OF_WINDOW = "out of window"


def drop_label(source: str, reason: str, kind: str = "") -> str:
    return f"{source} {kind} {reason}" if kind else f"{source}: {reason}"


class DroppedRecords(dict):
    """label -> records (a dict, as the writer and readers take it), plus each label's reason."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: dict[str, str] = {}

    def add(self, label: str, reason: str, count: int) -> None:
        if count:
            self[label] = self.get(label, 0) + int(count)
            self.reasons.setdefault(label, reason)

    def unexpected(self) -> dict[str, int]:
        """The losses whose reason is not ``OUT_OF_WINDOW``."""
        return {k: v for k, v in self.items() if self.reasons.get(k) != OUT_OF_WINDOW}
