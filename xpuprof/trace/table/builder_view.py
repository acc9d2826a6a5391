"""A TraceBuilder seen as a TraceTable (``TraceBuilder.freeze()``): its batches become segments as they
are, in the order the Chrome writer writes them, and its metadata becomes the rank table's row.

The trace's top-level keys are made here once (``header_bytes``): the Chrome writer writes these bytes,
and the table's ``header`` is what a reader parses from them.
"""
from __future__ import annotations

import json
import logging
from typing import Mapping

import numpy as np
import orjson

from ...clock import BASE_TIME_NS
from ..builder.columns import encode_json
from .columns import COLUMN_SETS
from .flatten import Flattener, clamp_ts, meta_events
from .model import BatchSegment, FlatSegment, RankInfo, TraceTable

log = logging.getLogger("xpuprof")
_KINDS = (("slices", "slices"), ("instants", "instants"), ("counters", "counters"), ("flows", "flows"))


def metadata_json(key, value) -> bytes:
    """One metadata value as JSON; a value JSON cannot hold (an int >= 2**64, a cycle, a failing
    __str__) becomes a note saying why, so the trace is still written (never lost at export)."""
    try:
        return encode_json(value)
    except Exception as exc:  # noqa: BLE001 - any failure here would lose the whole trace
        try:
            why = f"{type(exc).__name__}: {exc}"[:200]
        except Exception:  # an exception whose message itself fails
            why = type(exc).__name__
        log.warning("xpuprof: metadata %r could not be written as JSON (%s); the trace holds a note instead",
                    str(key)[:80], why)
        return encode_json({"xpuprof_invalid_metadata": f"a {type(value).__name__} could not be written ({why})"})


def header_metadata(builder) -> dict:
    """The builder's metadata as the trace's top-level keys hold it (with the names kept with U+FFFD and
    the dropped records)."""
    meta = dict(builder.metadata)
    if builder.strings.invalid_utf8:  # names kept with U+FFFD for their invalid bytes (never dropped)
        meta.setdefault("invalid_utf8_names", builder.strings.invalid_utf8)
    if builder.dropped:
        meta["dropped_records"] = dict(builder.dropped)
    return meta


def header_bytes(builder) -> bytes:
    """The trace's opening: ``{"schemaVersion": 1, ..., "traceEvents": [\\n`` (Kineto's key order)."""
    parts = [b'{"schemaVersion": 1, "deviceProperties": ', encode_json(builder.device_properties)]
    meta = header_metadata(builder)
    for k, v in meta.items():
        if k == "distributedInfo":
            continue
        parts += [b", ", encode_json(k), b": ", metadata_json(k, v)]
    dist = builder.distributed_info if builder.distributed_info is not None else meta.get("distributedInfo")
    if dist is not None:
        dist = json.loads(metadata_json("distributedInfo", dist))
        # json.dumps's default separators give `"rank": 0`: HTA's rank regex needs the space.
        parts += [b', "distributedInfo": ', json.dumps(dist, ensure_ascii=False).encode()]
    parts.append(f', "displayTimeUnit": "ms", "baseTimeNanoseconds": {BASE_TIME_NS}, "traceEvents": [\n'.encode())
    return b"".join(parts)


def builder_rank(builder) -> tuple[int, str]:
    """The builder's ``distributedInfo`` rank (source "distributedInfo"), else 0 (source "default")."""
    info = builder.distributed_info if builder.distributed_info is not None else builder.metadata.get(
        "distributedInfo")
    got = info.get("rank") if isinstance(info, Mapping) else None
    if isinstance(got, int) and not isinstance(got, bool):
        return int(got), "distributedInfo"
    return 0, "default"


def builder_table(builder, *, vendor_categories: bool = True, rank: int | None = None,
                  rank_source: str | None = None) -> TraceTable:
    """The builder's batches as a TraceTable's segments (no column copied); the rank: ``rank``, else the
    builder's ``distributedInfo`` rank, else 0 (source "default")."""
    vendor = vendor_categories
    builder.flush()
    if rank is None:
        rank, source = builder_rank(builder)
    else:
        source = rank_source or "given"
    flattener = Flattener(builder, rank, vendor)
    meta = meta_events(builder)
    order = len(meta)
    segments = []
    for attr, kind in _KINDS:  # the writer's order: slices, instants, counters, flows
        for b in list(getattr(builder, attr)):
            segments.append(BatchSegment(kind, b, flattener, order, rank))
            order += len(b)
    spans, instants, span_meta = flattener.spans_and_end(order)
    if len(spans):
        segments.append(FlatSegment(spans, rank))
    segments.append(FlatSegment(instants, rank))

    def header() -> dict:
        got = orjson.loads(header_bytes(builder) + b"]}")
        del got["traceEvents"]
        return got

    def first_ts() -> int | None:
        firsts = [int(clamp_ts(np.array([builder.window_start_ns]))[0])] if meta else []
        for seg in segments:
            ts = seg.batch.ts if isinstance(seg, BatchSegment) else seg.columns.ts
            if len(ts):
                firsts.append(int(clamp_ts(np.asarray(ts)).min()))
        return min(firsts) if firsts else None

    info = RankInfo(rank, source, header=header, metadata_events=lambda: meta + span_meta, base_time_ns=BASE_TIME_NS,
                    first_ts_ns=first_ts, warnings=list(builder.warnings), ts_kind="float")
    info.metadata_order = [*range(len(meta)), *(order + 3 * k + 1 for k in range(len(builder.spans)))]
    return TraceTable(segments, [info], builder=builder, vendor_categories=vendor)


assert set(COLUMN_SETS) == {k for _, k in _KINDS}
