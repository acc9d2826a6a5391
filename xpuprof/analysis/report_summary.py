"""Each rank's report partial kept in its store partition (``rank=<r>/report.json``), so that ``xpuprof report
STORE`` reads a few KB per rank instead of every event (issue 41: >= 10x the report of the same ranks' JSON).

What a rank keeps is ``report.partials`` of its rows - the same function the report of any traces adds up
(``report.stats_of``) - computed from the rank's table as the store reader gives it back (``write_summary``:
the writer's callers, ``profile.export_parquet`` and ``xpuprof convert``; convert hands over the rows it wrote,
kept as they streamed by with the report's push-down applied, ``RankRows``, instead of reading them back), with
what the report reads besides the rows: the rows' categories and count, the units of their metrics, and the header keys
the report's kernel resources, submission intervals and telemetry units come from. So a report from
summaries is the report of the rows, not a second implementation of its rules.

The summaries answer the whole-trace report (any sort, top and --by-rank). A report asking for a category, a
name, a time window or the HTML charts reads the rows; so does one over a store any of whose ranks has no
summary (written by an older xpuprof, or a rank with telemetry series or times no trace can hold, which the
summaries do not carry). A partition is replaced whole, so a summary never outlives its rows.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

FILE = "report.json"
FORMAT = "xpuprof-report-summary"
VERSION = 1
CHECKSUM_KEY = "crc32"  # of the rest (``_crc``); summaries written before it have none and are read as they are
MAX_SUMMARY_BYTES = 64 << 20  # a few KB per rank (one row per kernel name)
HEADER_KEYS = ("collectors", "xpu_kernel_resources", "xpu_submission_intervals")  # what report_of reads of headers


class SummaryRows:
    """What a report reads of its rows when they are not read: their count, categories, units and time."""

    def __init__(self, rows: int, categories: list[str], units: dict[str, str], inclusive_ns: int) -> None:
        self.rows, self._categories, self.units, self.inclusive_ns = rows, categories, units, inclusive_ns
        self.metrics: dict = {}

    def __len__(self) -> int:
        return self.rows

    def categories(self) -> list[str]:
        return list(self._categories)

    @property
    def holds_device_work(self) -> bool:
        from .report_terms import device_work

        work = device_work()
        return any(c in work for c in self._categories)


def summary_of(table) -> dict | None:
    """The summary of a one-trace TraceTable read from a store partition (None: the report must read this
    rank's rows: times no trace holds, or telemetry series)."""
    from .event_table import EventTable
    from .report import partials
    from .telemetry import telemetry_series

    (info,) = table.traces
    if info.bad_base is not None or info.bad_times or info.merged_ranks or telemetry_series(table):
        return None
    rows = EventTable.of_trace(table, 0).with_self_times()
    header = info.header
    part = partials(rows)
    return {"format": FORMAT, "version": VERSION, "rank": info.rank, "origin": info.origin, "named": info.named,
            "rows": len(rows), "categories": rows.categories(), "inclusive_ns": rows.inclusive_ns,
            "units": dict(rows.units), "header": {k: header[k] for k in HEADER_KEYS if k in header},
            "partial": [[rank, name, *vals] for (rank, name), vals in part.items()]}


class RankRows:
    """The rows of a rank as its store writer writes them (``parquet.StoreRows(writer, keep=rows.add)``), kept as
    the report reads them (the slices, args only of the metric slices, and the telemetry counters: what
    ``write_summary`` reads back), so that ``xpuprof convert`` computes the summary from the rows it streams
    instead of reading the partition back from Parquet; ``table(rank, metadata)`` is the rank's table."""

    def __init__(self) -> None:
        self.parts: list = []

    def clear(self) -> None:
        self.parts = []

    def add(self, c, base_time_ns: int) -> None:
        """One column set as written (``ts`` + ``base_time_ns`` - the trace's base time = ns after it, as stored)."""
        from dataclasses import replace

        import numpy as np

        from ..trace.table.columns import RowText
        from .report import REPORT_KINDS, _metric_slice
        from .telemetry import TELEMETRY_CATEGORIES

        if c.KIND not in REPORT_KINDS or not len(c):
            return
        c = replace(c, ts=np.asarray(c.ts, np.int64) - np.int64(base_time_ns))
        if c.KIND == "counters":
            self.parts.append(c.take(np.array([x in TELEMETRY_CATEGORIES for x in c.strings] + [False])[c.cat]))
            return
        metric = np.array([_metric_slice(x) for x in c.strings] + [False], bool)[np.asarray(c.name)]
        if metric.any():  # their args are what the report reads of a slice's args (the metric join)
            self.parts.append(c.take(metric))
        if not metric.all():  # the others' args are dropped as they stream by (memory: a chunk's text at most)
            bare = replace(c, args=RowText.empty(len(c)), ints={}, floats={})
            self.parts.append(bare.take(~metric) if metric.any() else bare)

    def table(self, rank: int, metadata: dict):
        """The kept rows as ``read_store`` gives the rank back (``metadata``: the rank's row as committed)."""
        from dataclasses import replace

        import numpy as np

        from ..trace.read.store_table import rank_info
        from ..trace.table.columns import constant
        from ..trace.table.model import FlatSegment, TraceTable

        info = rank_info(rank, metadata, lambda: json.loads(metadata.get("header_json") or "{}"),
                         lambda: json.loads(metadata.get("metadata_events_json") or "[]"))
        segments = [FlatSegment(replace(c, rank=constant(rank, len(c), np.int32)), rank, 0, info.base_time_ns)
                    for c in self.parts]
        return TraceTable(segments, [info])


def write_summary(partition, rows: RankRows | None = None, metadata: dict | None = None) -> Path | None:
    """Writes the summary of the rank partition just written (``STORE/rank=<r>``) into it (atomically: a private
    file renamed into place): of ``rows``, the rows its writer kept (``RankRows``) with the rank's committed
    ``metadata``, else of the partition read back. The path, or None when this rank keeps none
    (``summary_of``). A summary that cannot be written leaves the store as it was (its report reads the rows)."""
    from ..trace.store_schema import RANK_DIR_PREFIX

    partition = Path(partition)
    rank = int(partition.name[len(RANK_DIR_PREFIX):])
    if rows is not None and metadata is not None:
        table = rows.table(rank, metadata)
    else:
        from ..trace.read.store_table import read_store
        from .report import REPORT_KINDS, _metric_slice
        from .telemetry import TELEMETRY_CATEGORIES

        table = read_store(partition.parent, ranks=[rank], kinds=REPORT_KINDS, slice_args=_metric_slice,
                           counters=TELEMETRY_CATEGORIES.__contains__)
    summary = summary_of(table)
    if summary is None:
        return None
    final = partition / FILE
    summary[CHECKSUM_KEY] = _crc(summary)  # a flipped bit in it is an error, as in the store's data files
    fd, tmp = tempfile.mkstemp(prefix=f".{FILE}.", dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(summary, separators=(",", ":")).encode())
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final


def read_summaries(store) -> list[dict] | None:
    """Every rank's summary, in rank order, or None when a rank has none (or one that does not parse)."""
    from ..trace.read.store import open_store

    from ..inputs import InputError, read_input
    from ..trace.read.store import StoreError

    st = open_store(store, read_meta=False)
    out = []
    for rank in st.ranks:
        file = st.partitions[rank].path / FILE
        try:  # a store file like the others: regular, bounded (a FIFO here hung report, /dev/zero filled memory)
            data = json.loads(read_input(file, "report summary", limit=MAX_SUMMARY_BYTES))
        except InputError as exc:
            raise StoreError(str(exc)) from None
        except (OSError, ValueError):
            return None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == VERSION
                and data.get("rank") == rank and isinstance(data.get("partial"), list)):
            return None
        want = data.pop(CHECKSUM_KEY, None)
        if want is not None and want != _crc(data):
            raise StoreError(f"{file} does not match the checksum written with it: the file was changed or corrupted "
                             "after it was written")
        out.append(data)
    return out


def _crc(summary: dict) -> int:
    """CRC-32 of the summary's canonical JSON (sorted keys; floats as Python writes them, which read back equal)."""
    import zlib

    return zlib.crc32(json.dumps({k: v for k, v in summary.items() if k != CHECKSUM_KEY}, sort_keys=True,
                                 separators=(",", ":")).encode())


def build_report(inputs, *, categories=None, name=None, start_ms=None, end_ms=None, by_rank: bool = False,
                 sort_by: str = "total", top: int | None = None, say=None):
    """``report.build_report``, added up from the stores' summaries when every input is a store whose ranks all
    keep one and the report covers whole traces (no category, name or window asked for)."""
    from . import report

    if not hasattr(inputs, "traces") and (categories, name, start_ms, end_ms) == (None,) * 4:
        paths = list(inputs)
        from ..trace.read.store import StoreError, is_store

        if paths and all(is_store(p) for p in paths):
            try:
                got = report_from_summaries(paths, by_rank=by_rank, sort_by=sort_by, top=top)
            except StoreError as exc:
                raise report.ReportError(str(exc)) from None
            if got is not None:
                return got
        inputs = paths
    return report.build_report(inputs, categories=categories, name=name, start_ms=start_ms, end_ms=end_ms,
                               by_rank=by_rank, sort_by=sort_by, top=top, say=say)


def report_from_summaries(stores: Sequence, *, by_rank: bool = False, sort_by: str = "total",
                          top: int | None = None):
    """The whole-trace report of the stores' ranks from their summaries (``report.report_of`` of the rows,
    added up the same way), or None when a rank keeps none."""
    from .intervals import METADATA_KEY as INTERVALS_KEY, combine
    from .report import Report, stats_of
    from .resources import METADATA_KEY as RESOURCES_KEY, resource_rows

    summaries = []
    for store in stores:
        got = read_summaries(store)
        if got is None:
            return None
        summaries += got
    parts = [{(int(rank), str(name)): [calls, total, own, lo, hi, metrics]
              for rank, name, calls, total, own, lo, hi, metrics in s["partial"]} for s in summaries]
    units: dict[str, str] = {}
    for s in summaries:
        units.update(s["units"])
    stats = stats_of(parts, units, by_rank=by_rank, sort_by=sort_by, top=top)
    rows = SummaryRows(sum(s["rows"] for s in summaries),
                       list(dict.fromkeys(c for s in summaries for c in s["categories"])), units,
                       sum(s["inclusive_ns"] for s in summaries))
    headers = [s["header"] for s in summaries]
    filters = {"categories": None, "name": None, "start_ms": None, "end_ms": None, "by_rank": by_rank,
               "sort": sort_by, "top": top}
    resources = resource_rows((h.get(RESOURCES_KEY) for h in headers), [s.name for s in stats])
    intervals = combine(((s["rank"] if s["named"] else None, h.get(INTERVALS_KEY)) for s, h in zip(summaries, headers)),
                        by_rank)
    ranks = sorted({s["rank"] for s in summaries if s["named"]})
    own = sum(vals[2] for part in parts for vals in part.values())
    return Report(stats, rows, [s["origin"] for s in summaries], ranks, int(own), [], filters, resources, intervals)
