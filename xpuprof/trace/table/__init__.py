"""The trace table: the one in-memory model of a trace, at the centre (docs/architecture.md).

Producers fill a ``TraceBuilder`` that freezes into a ``TraceTable`` (``model``); the readers of Kineto
JSON and of the trace store make one; the writers and the analyses read one. Its rows are numpy columns
with dictionary-encoded strings (``columns``), its args typed columns plus JSON text (``args``), convertible
to Arrow without copying the numeric columns (``arrow``); ``compare`` says whether two tables hold the
same trace."""
from __future__ import annotations

import importlib

_MODULE_OF = {"TraceTable": ".model", "RankInfo": ".model", "FlatSegment": ".model", "BatchSegment": ".model",
              "SliceColumns": ".columns", "CounterColumns": ".columns", "FlowColumns": ".columns",
              "InstantColumns": ".columns", "RowText": ".columns", "differences": ".compare",
              "assert_equal": ".compare"}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
