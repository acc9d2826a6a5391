"""The layout pass: every slice on a track it nests on, every id one every viewer keeps (issue 38).

``lay_out(table) -> table``: the contract every writer relies on (JSON, ``.json.gz``, the store, the
Perfetto protobuf), run once on the TraceTable before writing (a laid-out table is returned as it is):

- On every (pid, tid) track, any two complete slices are disjoint or one lies inside the other (closed:
  equal bounds nest). A track whose slices already nest is left as it is; on one that does not, the slices
  that cannot stay go to *lanes*: thread rows of their own under the same process (``lanes``: which ones
  move and where; ``apply``: the rows, names and flows that go with them).
- A moved slice keeps its thread's tid in its args (``"original tid"``); a lane's tid is one no real row of
  the trace uses; a lane is named after its thread and sorted beside it; a flow end bound to a moved slice
  moves with it; nothing else moves (counters, instants, metadata rows keep their rows).
- Every pid and tid is in 0..2**31-1 (``trace.ids``): an id outside it gets a free one.
- The trace says what moved: ``laneLayout`` (per lane: pid, tid, lane_tid, name, what it holds, how many
  slices and flow ends) and ``idMap`` in its metadata, only when something did; ``table.layout`` is the
  ``LayoutSummary``.

``check`` is the strict-nesting checker the tests run over every trace we write.
"""
from __future__ import annotations

import importlib

_MODULE_OF = {"lay_out": ".layout", "LayoutSummary": ".layout", "LANES_KEY": ".layout", "IDS_KEY": ".layout",
              "ORIGINAL_TID": ".apply"}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
