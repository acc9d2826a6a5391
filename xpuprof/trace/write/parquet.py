"""The trace store writer: a TraceTable into one rank of a Parquet store (docs/store.md).

One row producer for every source (``StoreRows``): a table's segments - a frozen TraceBuilder's batches
(``profile.export_parquet``), or the rows the Kineto JSON reader gives (``xpuprof convert``) - become their
flat columns (``trace.table``), the flat columns Arrow arrays (``trace.table.arrow``: numeric columns not
copied, strings dictionary-encoded), and those one row group of the rank's tables each. No JSON document
on the way: a builder's args are rendered once, as the Chrome writer renders them, into the store's
``args`` text; the typed args go straight into their columns.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..builder.columns import encode_json
from ..store_schema import RANK_SOURCES
from ..table.arrow import int_column, to_arrow_columns
from ..table.columns import Columns, SliceColumns
from ..layout.layout import lay_out
from ..table.model import RankInfo, TraceTable
from .rankwriter import RankWriter, writer_version

log = logging.getLogger("xpuprof")

CHUNK_ROWS = 1 << 17  # rows flattened and written at a time: bounds the Arrow copies held at once


class StoreRows:
    """Writes flat column sets into a rank's tables (``add``) and keeps the rank's slice summary."""

    def __init__(self, writer: RankWriter, keep=None) -> None:
        self.w = writer
        self.keep = keep  # called with each column set written and its base_time_ns (``convert``'s report summary)

    def add(self, c: Columns, base_time_ns: int) -> None:
        """One column set; ``base_time_ns``: what its ``ts`` holds beyond the file's own ns (the store keeps
        ns after the trace's base time)."""
        if not len(c):
            return
        cols = to_arrow_columns(c)
        cols["ts"] = int_column(np.asarray(c.ts, np.int64) - np.int64(base_time_ns))
        if isinstance(c, SliceColumns):
            dur = np.asarray(c.dur, np.int64)
            timed = None if c.dur_present is None else np.asarray(c.dur_present, bool)
            self.w.summary.add(c.strings, c.name, c.strings, c.cat, dur if timed is None else np.where(timed, dur, 0),
                               timed=timed)
        self.w.write(c.KIND, cols)
        if self.keep is not None:
            self.keep(c, base_time_ns)

    def add_table(self, table: TraceTable, trace: int = 0) -> None:
        """Every segment of one trace of a table, a chunk at a time."""
        base = table.traces[trace].base_time_ns
        for seg in table.segments:
            if seg.trace == trace:
                for cols in seg.flat_chunks(CHUNK_ROWS):
                    self.add(cols, base)


def rank_metadata(info: RankInfo, *, writer: str, trace_name: str | None = None, rank_source: str | None = None,
                  sources=None) -> dict[str, Any]:
    """The rank's metadata row (``rank.parquet``) of a trace of the table."""
    header = info.header
    if trace_name is not None:
        header["traceName"] = trace_name
    first = info.first_ts_ns
    return {"rank_source": rank_source or info.source, "writer": f"xpuprof {writer_version()} {writer}",
            "sources": list(info.sources if sources is None else sources), "base_time_ns": info.base_time_ns,
            "ts_kind": info.ts_kind, "first_ts_ns": None if first is None else first - info.base_time_ns,
            "not_stored_json": orjson.dumps(info.not_stored).decode(), "header_json": _json_object(header),
            "metadata_events_json": encode_json(info.metadata_events).decode(), "warnings": list(info.warnings)}


def write_store(source, path, *, rank: int | None = None, rank_source: str = "given", replace: bool = False,
                vendor_categories: bool = True, trace_name: str | None = None) -> Path:
    """Writes a TraceBuilder (frozen here) or a one-trace TraceTable as rank ``rank`` of the store at ``path``
    (created when new); returns the rank's partition directory. ``rank`` None: the trace's own rank
    (a builder's ``distributedInfo`` rank, else 0 with ``rank_source`` "default", said in the rank's
    metadata)."""
    return store_trace(source, path, rank=rank, rank_source=rank_source, replace=replace,
                       vendor_categories=vendor_categories, trace_name=trace_name).partition


@dataclass
class Stored:
    """A rank partition just written: its directory and its metadata row as committed (``rank_metadata``)."""

    partition: Path
    metadata: dict


def store_trace(source, path, *, rank: int | None = None, rank_source: str = "given", replace: bool = False,
                vendor_categories: bool = True, trace_name: str | None = None, keep=None) -> Stored:
    """``write_store``, saying also the metadata committed; ``keep``: called with each column set as it is
    written and its base time (``StoreRows``; ``profile.export_parquet`` keeps the rows its report summary
    is computed from, as ``convert`` does, instead of reading the partition back)."""
    table = source if isinstance(source, TraceTable) else source.freeze(vendor_categories=vendor_categories)
    if len(table.traces) != 1:
        raise ValueError(f"a store partition holds one trace; the table holds {len(table.traces)}")
    table = lay_out(table)  # the rows a viewer of the trace draws (trace.layout)
    info = table.traces[0]
    if rank is None:
        rank, rank_source = info.rank, info.source
    if rank_source not in RANK_SOURCES:
        raise ValueError(f"rank_source {rank_source!r}: valid values are {', '.join(RANK_SOURCES)}")
    with RankWriter(path, int(rank), replace=replace, compression="lz4") as writer:
        StoreRows(writer, keep).add_table(table)
        name = trace_name if trace_name is not None else str(Path(path))
        meta = rank_metadata(info, writer="export_parquet", trace_name=name, rank_source=rank_source, sources=[])
        return Stored(writer.commit(int(rank), meta), meta)


def _json_object(header: dict) -> str:
    """The header as JSON; a value JSON cannot hold becomes a note (never a lost store)."""
    parts = []
    for k, v in header.items():
        try:
            text = encode_json(v)
        except Exception as exc:  # noqa: BLE001 - one bad metadata value must not lose the trace
            log.warning("xpuprof: metadata %r could not be written as JSON (%s); the store holds a note instead",
                        str(k)[:80], type(exc).__name__)
            text = encode_json({"xpuprof_invalid_metadata": f"a {type(v).__name__} could not be written"})
        parts.append(encode_json(str(k)) + b":" + text)
    return (b"{" + b",".join(parts) + b"}").decode()
