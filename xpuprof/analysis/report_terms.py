"""The report's words that need no rows: which categories are device work and which host, the metric slices'
prefix, the step group, the time limit, and ``ReportError``. Kept apart from ``event_table`` (numpy) so that a
report added up from a store's summaries (``report_summary``) imports no numpy."""
from __future__ import annotations

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("user_annotation", "cpu_op", "gpu_user_annotation")
METRICS_PREFIX = "metrics: "
NON_METRIC_ARGS = frozenset({"kernel_id", "External id"})  # ids Kineto puts on "metrics: <kernel>" slices
TIME_LIMIT_NS = 2**62  # times (ns, base included) the int64 columns hold with room for sums and differences
STEP_GROUP = "ProfilerStep#*"  # step annotations are summarized as one row


class ReportError(ValueError):
    """Bad report input (no traces found, a bad regex, an empty window); the message says which."""


def device_work() -> frozenset[str]:
    """Every spelling of the device categories: rows that never nest."""
    from ..activity import category_spellings

    return frozenset(c for name in DEVICE_CATEGORIES for c in category_spellings(name))
