"""Arrow arrays as numpy, without pyarrow's to_numpy (which imports pandas: 1.4 s here)."""
from __future__ import annotations

import numpy as np


_NUMPY = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32, "double": np.float64}


def to_numpy(arr) -> np.ndarray:
    """An Arrow array as numpy without pyarrow's to_numpy (which imports pandas: 1.4 s here): numbers from
    their buffer (nulls as NaN), anything else as Python objects."""
    dtype = _NUMPY.get(str(arr.type))
    if dtype is None:
        return np.array(arr.to_pylist(), dtype=object)
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype)[arr.offset:arr.offset + len(arr)]
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[arr.offset:arr.offset + len(arr)]
        values = np.where(bits.astype(bool), values.astype(np.float64), np.nan)
    return values
