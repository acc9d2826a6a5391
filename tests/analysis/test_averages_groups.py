"""key_averages' grouping (``analysis.averages._group_codes``): one code per distinct tuple of key codes,
whether the columns pack into one int64 or not (then the row-wise unique decides)."""
from __future__ import annotations

import numpy as np
import pytest

from xpuprof.analysis.averages import _group_codes


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Two labelings split the rows alike (labels may differ)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize("high", [3, 2**40])  # packs into one int64; does not (three columns of 2**40)
def test_group_codes_give_the_row_wise_unique_partition(high):
    rng = np.random.default_rng(7)
    distinct = rng.integers(0, high, (5, 3))
    parts = [distinct[rng.integers(0, 5, 1000), j].astype(np.int64) for j in range(3)]
    group, k = _group_codes(parts)
    _, expected = np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)
    assert k == len(np.unique(np.stack(parts, axis=1), axis=0))
    assert group.shape == (1000,) and group.min() == 0 and group.max() == k - 1
    assert _same_partition(group, expected.reshape(-1))


def test_group_codes_of_no_rows():
    group, k = _group_codes([np.zeros(0, np.int64), np.zeros(0, np.int64)])
    assert k == 0 and len(group) == 0
