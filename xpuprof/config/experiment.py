"""What a benchmark point measures, as a short stable hash: the run history's series key
(``xpuprof run --history``, ``xpuprof gate``). Two runs of one config with the same ``--set`` values
and matrix point hash alike wherever the config file lives and whatever ``--out`` says."""
from __future__ import annotations

import hashlib

import orjson

from .yamlconfig import BenchmarkConfig, RunPoint, _deep_copy

# Keys that do not change what a point measures: where outputs go, the words around it, and the sim's
# noise model (it simulates the machine and the change under test, so noisy and slowed-down runs belong
# to the series they are gated against).
NOT_HASHED = (("output",), ("description",), ("name",), ("history",), ("matrix",), ("custom", "sim_noise"))


def point_hash(cfg: BenchmarkConfig, point: RunPoint) -> str:
    """16 hex digits of the config after overrides, without ``NOT_HASHED``, with the point's matrix values."""
    data = _deep_copy(cfg.data)
    for path in NOT_HASHED:
        node = data
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    doc = {"config": data, "point": {k: point.params[k] for k in sorted(point.params)}}
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:16]
