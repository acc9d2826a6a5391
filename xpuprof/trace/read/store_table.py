"""A trace store (docs/store.md) read as a TraceTable: one trace per rank partition, one segment per row
group of each of its tables, the rank's metadata row as the rank table's row.

Columns come from Parquet as Arrow and become numpy without a copy where their buffers allow; a
dictionary column becomes int32 ids into its dictionary (name, category and metric dictionaries merged
into the segment's one ``strings``, the row-label dictionaries into its ``labels``). Only the columns a
caller names are read (``columns``: push-down), and only the ranks it names (``ranks``). Stores of schema
version 1 - whatever wrote them, before or after the trace table - read the same way.
"""
from __future__ import annotations

import json
from typing import Iterable, Sequence

import numpy as np

from ..store_schema import COLUMNS, FLOAT_ARGS, INT_ARGS, TABLES
from ..table.arrow import dict_ids, row_text, to_numpy, valid
from ..table.columns import COLUMN_SETS, RowText, constant
from ..table.model import FlatSegment, RankInfo, TraceTable
from .store import Store, StoreError, open_store, verify_checksums

_ALWAYS = ("idx", "ts", "name", "cat")  # what and when a row is; where (pid, tid) when asked for


def read_store(store, *, ranks: Iterable[int] | None = None, kinds: Sequence[str] = TABLES,
               columns: dict[str, Sequence[str]] | None = None, slice_args=True, counters=True) -> TraceTable:
    """The store's ranks (``ranks``: only these) as one TraceTable. Push-down: ``kinds``: the tables to read
    (the others stay empty); ``columns``: per table, the store columns to read beyond what and when a row
    is (default: all of them; rows whose pid and tid are not read have none); ``slice_args``: the args of every slice (True), of none (False), or of the
    slices whose name satisfies a function (their row groups' args columns are read only then);
    ``counters``: every counter (True) or those whose category satisfies a function."""
    st = store if isinstance(store, Store) else open_store(store, ranks=ranks)
    wanted = st.ranks if ranks is None else sorted(ranks)
    missing = [r for r in wanted if r not in st.partitions]
    if missing:
        raise StoreError(f"{st.path} holds no rank {missing[0]} (it holds ranks {st.ranks})")
    verify_checksums(st, wanted, kinds)
    segments, traces = [], []
    for i, r in enumerate(wanted):
        part = st.partitions[r]
        traces.append(_rank_info(part))
        for kind in kinds:
            names = None if columns is None or kind not in columns else list(dict.fromkeys([*_ALWAYS, *columns[kind]]))
            segments += _segments(part, kind, names, r, i, traces[-1].base_time_ns, slice_args, counters)
    return TraceTable(segments, traces)


def _rank_info(part) -> RankInfo:
    return rank_info(part.rank, part.meta, lambda: part.header, lambda: part.metadata_events)


def rank_info(rank: int, m: dict, header, metadata_events) -> RankInfo:
    """A rank's row of the rank table from its metadata row (``parquet.rank_metadata``): what the store keeps of
    it; ``header``/``metadata_events``: its top-level keys and "M" rows (or functions giving them when asked)."""
    try:
        not_stored = json.loads(m.get("not_stored_json") or "{}")
    except ValueError:
        not_stored = {}
    base = int(m.get("base_time_ns") or 0)
    first = m.get("first_ts_ns")
    info = RankInfo(rank, m.get("rank_source") or "default", header=header,
                    metadata_events=metadata_events, base_time_ns=base,
                    first_ts_ns=None if first is None else base + int(first), sources=m.get("sources") or [],
                    warnings=m.get("warnings") or [], not_stored=not_stored, ts_kind=m.get("ts_kind") or "int",
                    writer=m.get("writer") or "")
    info.events = sum(int(m.get(t) or 0) for t in TABLES)
    return info


_SLICE_ARGS = (*INT_ARGS.values(), *FLOAT_ARGS.values(), "args")


def _segments(part, kind: str, names, rank: int, trace: int, base: int, slice_args=True,
              counters=True) -> list[FlatSegment]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    file = part.file(kind)
    try:
        pf = pq.ParquetFile(file, page_checksum_verification=True)
        have = pf.schema_arrow.names
        wanted = [c for c in (names or have) if c in have]
        args_cols = [c for c in wanted if c in _SLICE_ARGS] if kind == "slices" and slice_args is not True else []
        base_cols = [c for c in wanted if c not in args_cols]
        out = []
        for g in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(g, columns=base_cols)
            if not t.num_rows:
                continue
            if args_cols and slice_args is not False:  # the args of the slices asked for, when a row group has any
                ids, texts = dict_ids(t.column("name")) if "name" in t.column_names else (None, [])
                want = np.array([bool(slice_args(x)) for x in texts] + [False], bool)[ids] if ids is not None else None
                if want is not None and want.any():
                    extra = pf.read_row_group(g, columns=args_cols)
                    keep = pa.array(want)
                    for name in args_cols:
                        col = extra.column(name)
                        t = t.append_column(name, pc.if_else(keep, col, pa.nulls(len(col), col.type)))
            if kind == "counters" and counters is not True and "cat" in t.column_names:
                ids, texts = dict_ids(t.column("cat"))
                keep = np.array([bool(counters(x)) for x in texts] + [False], bool)[ids]
                if not keep.all():
                    t = t.filter(pa.array(keep))
                if not t.num_rows:
                    continue
            out.append(FlatSegment(_columns(kind, t, rank), rank, trace, base))
        return out
    except (pa.ArrowException, OSError) as exc:
        raise StoreError(f"{file} is not a readable Parquet file (truncated or corrupt): "
                         f"{str(exc).splitlines()[0]}") from None


def _get(t, name: str):
    return t.column(name) if name in t.column_names else None


def _int(t, name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    col = _get(t, name)
    if col is None:
        return np.zeros(n, np.int64), np.zeros(n, bool)
    return to_numpy(col, fill=0).astype(np.int64, copy=False), valid(col)


class _Dicts:
    """Dictionary columns of one segment merged into one list (ids offset)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ids(self, col, n: int) -> np.ndarray:
        if col is None:
            return constant(-1, n, np.int32)
        ids, texts = dict_ids(col)
        base = len(self.texts)
        self.texts += texts
        return np.where(ids >= 0, ids + base, -1).astype(np.int32) if base else ids


def _columns(kind: str, t, rank: int):
    n = t.num_rows
    strings, labels = _Dicts(), _Dicts()
    cols = {"rank": constant(rank, n, np.int32)}
    cols["order"] = _int(t, "idx", n)[0]
    cols["ts"] = _int(t, "ts", n)[0]
    for key in ("pid", "tid"):
        values, is_int = _int(t, key, n)
        label = labels.ids(_get(t, f"{key}_label"), n)
        cols[key] = values
        cols[f"{key}_label"] = np.where(is_int, -1, np.where(np.asarray(label) >= 0, label, -2)).astype(np.int32)
    cols["name"] = strings.ids(_get(t, "name"), n)
    cols["cat"] = strings.ids(_get(t, "cat"), n)
    if kind == "slices":
        dur, timed = _int(t, "dur", n)
        cols.update(dur=dur, dur_present=None if timed.all() else timed)
        ints, floats = {}, {}
        for col in INT_ARGS.values():
            got = _get(t, col)
            if got is not None and got.null_count < n:
                ints[col] = (to_numpy(got, fill=0).astype(np.int64, copy=False), valid(got))
        for col in FLOAT_ARGS.values():
            got = _get(t, col)
            if got is not None and got.null_count < n:
                floats[col] = (to_numpy(got, fill=0.0).astype(np.float64, copy=False), valid(got))
        cols.update(ints=ints, floats=floats, args=_text(t, "args", n))
    elif kind == "counters":
        cols["metric"] = strings.ids(_get(t, "metric"), n)
        value = _get(t, "value")
        cols["value"] = np.zeros(n) if value is None else to_numpy(value, fill=np.nan).astype(np.float64, copy=False)
    elif kind == "flows":
        values, is_int = _int(t, "id", n)
        label = labels.ids(_get(t, "id_label"), n)
        cols.update(flow_id=values, id_label=np.where(is_int, -1, np.where(np.asarray(label) >= 0, label, -2))
                    .astype(np.int32), phase=_letters(_get(t, "phase"), n), bp=_letters(_get(t, "bp"), n))
    elif kind == "instants":
        cols.update(scope=_letters(_get(t, "scope"), n), args=_text(t, "args", n))
    return COLUMN_SETS[kind](strings=strings.texts, labels=labels.texts, **cols)


def _text(t, name: str, n: int) -> RowText:
    col = _get(t, name)
    return RowText.empty(n) if col is None else row_text(col)


def _letters(col, n: int) -> np.ndarray:
    """A one-letter dictionary column as byte codes (0: none)."""
    if col is None:
        return np.zeros(n, np.uint8)
    ids, texts = dict_ids(col)
    codes = np.array([ord(x[0]) if len(x) == 1 else 0 for x in texts] + [0], np.uint8)
    return codes[np.where(ids >= 0, ids, len(texts))]


assert set(COLUMNS) >= set(TABLES)
