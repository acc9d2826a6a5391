"""The distinct values of an integer column, without numpy's first-call cost.

numpy 2's ``np.unique(a)`` (no index, inverse or counts asked) checks ``np.ma.is_masked(a)`` first, and
the first such call in a process imports ``numpy.ma``: 40-120 ms of CPU (more under load) spent inside the
first recording cycle's stop, which torch.profiler does not pay. Asking for the counts takes numpy's sort
path, which never touches ``numpy.ma`` and costs about the same for the thread and name columns of a trace.
"""
from __future__ import annotations

import numpy as np


def distinct(values) -> np.ndarray:
    """The sorted distinct values of ``values`` (as ``np.unique``)."""
    return np.unique(np.asarray(values), return_counts=True)[0]
