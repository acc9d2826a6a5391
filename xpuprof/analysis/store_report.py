"""``xpuprof report STORE``: the kernel report of trace files, from a trace store, any number of ranks.

The same rows as reading the ranks' JSON traces (``analysis.report.build_report``): the same category
choice per rank (device categories, else host annotations; or ``--cat``), ``ProfilerStep#N`` grouped,
the name regex and time window, the per-kernel metrics joined from ``metrics: <kernel>`` slices, the
same sort and percentages, the telemetry tracks. Aggregation runs in DuckDB (the engine's task),
so no Python object is made per event; the JSON reader's float timestamps are reproduced where the
window and the metrics join depend on them.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np
import orjson

from ..trace.read.store import open_store
from ..trace.store_schema import INT_ARGS
from .event_table import (DEVICE_CATEGORIES, DEVICE_WORK, HOST_CATEGORIES, METRICS_PREFIX, NON_METRIC_ARGS,
                          ReportError, _group_name, _wanted_categories)
from .report import NameStat, Report, _metric_stats, _order

# ts as the JSON reader computes it: base + rint(float(ts_us) * 1000), ts_us being the number the
# trace's text parses to (frame.us: whole µs and ns remainder converted apart).
_REPORT_TS = "(m.base_time_ns + round_even((({c} // 1000)::DOUBLE + ({c} % 1000) / 1e3) * 1e3, 0)::BIGINT)"


class StoreTable:
    """What a Report keeps of its rows: the count, their categories, inclusive time, per-instance metric
    values (HTML histograms) and units; the rows themselves stay in the store."""

    def __init__(self, rows: int, inclusive_ns: int, categories: Sequence[str], metrics: dict[str, np.ndarray],
                 units: dict[str, str]) -> None:
        self._rows, self.inclusive_ns, self._categories = rows, inclusive_ns, list(categories)
        self.metrics, self.units = metrics, units

    def __len__(self) -> int:
        return self._rows

    def categories(self) -> list[str]:
        return list(self._categories)

    @property
    def holds_device_work(self) -> bool:
        return any(c in DEVICE_WORK for c in self._categories)


def _rows_sql(params: dict) -> str:
    """The report's rows (rank, raw name, dur ns, pid, tid, report ts, idx) with each rank's categories."""
    if params["categories"] is not None:
        cats = ", ".join("'" + c.replace("'", "''") + "'" for c in params["categories"])
        chosen = f"SELECT rank, cat FROM (SELECT DISTINCT rank, cat FROM slices) WHERE cat IN ({cats})"
    else:
        dev = ", ".join(f"'{c}'" for c in DEVICE_CATEGORIES)
        host = ", ".join(f"'{c}'" for c in HOST_CATEGORIES)
        chosen = f"""
        WITH present AS (SELECT DISTINCT rank, cat FROM slices WHERE NOT starts_with(coalesce(name, ''), '{METRICS_PREFIX}')),
        has_dev AS (SELECT DISTINCT rank FROM present WHERE cat IN ({dev}))
        SELECT rank, cat FROM present WHERE cat IN ({dev})
        UNION ALL SELECT rank, cat FROM present WHERE cat IN ({host}) AND rank NOT IN (SELECT rank FROM has_dev)"""
    return f"""
    SELECT s.rank, CASE WHEN m.rank_source = 'default' THEN -1 ELSE s.rank END AS rk, coalesce(s.name, '') AS name,
           s.cat, coalesce(s.dur, 0) AS dur, s.pid, s.pid_label, s.tid, s.tid_label,
           {_REPORT_TS.format(c='s.ts')} AS ts, s.idx
    FROM slices s JOIN ranks m ON s.rank = m.rank JOIN ({chosen}) c ON s.rank = c.rank AND s.cat = c.cat
    WHERE NOT starts_with(coalesce(s.name, ''), '{METRICS_PREFIX}')"""


def task(con, ranks: Sequence[int], params: dict) -> dict:
    rows = _rows_sql(params)
    # The window counts from each rank's first slice (any category, metric slices too).
    con.execute(f"""CREATE TEMP TABLE starts AS SELECT s.rank, min({_REPORT_TS.format(c='s.ts')}) AS start
                    FROM slices s JOIN ranks m ON s.rank = m.rank GROUP BY s.rank""")
    window = []
    if params["start_ns"] is not None:
        window.append(f"r.ts - st.start >= {int(params['start_ns'])}")
    if params["end_ns"] is not None:
        window.append(f"r.ts - st.start < {int(params['end_ns'])}")
    where = " AND ".join(window) or "TRUE"
    # Self times before the window: a row's own time does not depend on which rows are shown.
    con.execute(f"CREATE TEMP TABLE chosen AS {rows}")
    own = _host_self_times(con)
    con.execute(f"""CREATE TEMP TABLE rep AS SELECT r.*, {'coalesce(o.self_ns, r.dur)' if own else 'r.dur'} AS self_ns
                    FROM chosen r JOIN starts st USING (rank) {'LEFT JOIN own o USING (rank, idx)' if own else ''}
                    WHERE {where}""")
    names = [n for (n,) in con.execute("SELECT DISTINCT name FROM rep").fetchall()]
    grouped = {n: _group_name(n) for n in names}
    if params["name"]:
        rx = re.compile(params["name"])
        grouped = {n: g for n, g in grouped.items() if rx.search(g) is not None}
    import pyarrow as pa

    from ..trace.write.arrowcols import strings

    con.register("gmap", pa.Table.from_arrays([strings(list(grouped)), strings(list(grouped.values()))],
                                              names=["name", "grouped"]))
    rank_key = "rep.rk" if params["by_rank"] else "-1"  # rk: -1 for a rank the trace did not name
    stats = con.execute(f"""SELECT {rank_key} AS rk, g.grouped, count(*), sum(dur), min(dur), max(dur), sum(self_ns)
                            FROM rep JOIN gmap g ON rep.name = g.name GROUP BY ALL""").fetchall()
    cats = [c for (c,) in con.execute("SELECT DISTINCT rep.cat FROM rep JOIN gmap g ON rep.name = g.name").fetchall()]
    metrics = []
    if con.execute(f"SELECT count(*) FROM slices WHERE starts_with(name, '{METRICS_PREFIX}')").fetchone()[0]:
        metrics = _metric_rows(con, rank_key)
    return {"stats": stats, "metrics": metrics, "categories": cats}


def _host_self_times(con) -> bool:
    """Table ``own`` (rank, idx, self_ns) for the chosen host rows, which nest: each one's duration minus
    the rows directly inside it on its thread (``analysis.nesting``, as for trace files). False when the
    chosen rows are device work only (their self time is their duration)."""
    device = ", ".join("'" + c.replace("'", "''") + "'" for c in sorted(DEVICE_WORK))
    got = con.execute(f"""SELECT rank, idx, ts, dur,
                                 dense_rank() OVER (ORDER BY rank, pid, pid_label, tid, tid_label) AS thread
                          FROM chosen WHERE cat NOT IN ({device})""").fetchnumpy()
    if not len(got["idx"]):
        return False
    import pyarrow as pa

    from .nesting import self_times

    own = self_times(np.asarray(got["thread"], np.int64), np.asarray(got["ts"], np.int64),
                     np.asarray(got["dur"], np.int64))
    con.register("own", pa.table({"rank": np.asarray(got["rank"]), "idx": np.asarray(got["idx"]), "self_ns": own}))
    return True


def _metric_rows(con, rank_key: str) -> list[tuple]:
    """Per kernel instance that has a ``metrics: <kernel>`` slice 1 ns before it on its row: (rank key,
    grouped name, rank, idx, the metric slice's args with its typed columns put back)."""
    typed = list(INT_ARGS.items())
    cols = ", ".join(f"m.{c}" for _, c in typed)
    rows = con.execute(f"""
        WITH ms AS (SELECT s.rank, s.pid, s.pid_label, s.tid, s.tid_label, substr(s.name, {len(METRICS_PREFIX) + 1})
                           AS kname, {_REPORT_TS.format(c='s.ts')} + 1 AS at, s.idx AS midx, {', '.join(f's.{c}' for _, c in typed)},
                           s.args FROM slices s JOIN ranks m ON s.rank = m.rank
                    WHERE starts_with(s.name, '{METRICS_PREFIX}')),
        cand AS (SELECT {rank_key} AS rk, g.grouped, rep.rank, rep.idx, m.midx,
                        CASE rep.ts - m.at WHEN 0 THEN 0 WHEN -1 THEN 1 ELSE 2 END AS pref, {cols}, m.args
                 FROM ms m JOIN rep ON rep.rank = m.rank AND rep.name = m.kname
                      AND rep.pid IS NOT DISTINCT FROM m.pid AND rep.pid_label IS NOT DISTINCT FROM m.pid_label
                      AND rep.tid IS NOT DISTINCT FROM m.tid AND rep.tid_label IS NOT DISTINCT FROM m.tid_label
                      AND rep.ts BETWEEN m.at - 1 AND m.at + 1
                 JOIN gmap g ON rep.name = g.name)
        SELECT * EXCLUDE (pref) FROM cand QUALIFY row_number() OVER (PARTITION BY rank, midx ORDER BY pref, idx DESC) = 1
        ORDER BY rank, midx""").fetchall()
    merged: dict[tuple, tuple] = {}
    for r in rows:  # in file order: a later metric slice for the same kernel overrides, as the JSON reader does
        rk, grouped, rank, idx, _, *typed_vals, args = r
        values = {k: v for (k, _), v in zip(typed, typed_vals) if v is not None}
        values.update(orjson.loads(args) if args else {})
        got = merged.setdefault((rank, idx), (rk, grouped, rank, idx, {}))
        got[4].update((k, v) for k, v in values.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in NON_METRIC_ARGS)
    return [merged[k] for k in sorted(merged)]


def build_store_report(store, *, categories: Sequence[str] | None = None, name: str | None = None,
                       start_ms: float | None = None, end_ms: float | None = None, by_rank: bool = False,
                       sort_by: str = "total", top: int | None = None, engine=None,
                       ranks: Sequence[int] | None = None) -> Report:
    """The report of the store's ranks (``ranks``: only these)."""
    from .engines import open_engine

    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ReportError(f"--end ({end_ms} ms) must be after --start ({start_ms} ms)")
    if name:
        try:
            re.compile(name)
        except re.error as exc:
            raise ReportError(f"--name {name!r} is not a valid regular expression: {exc}") from None
    params = {"categories": sorted(_wanted_categories(categories)) if categories else None, "name": name,
              "start_ns": None if start_ms is None else int(start_ms * 1e6),
              "end_ns": None if end_ms is None else int(end_ms * 1e6), "by_rank": by_rank}
    st = engine.store if engine is not None else open_store(store)
    shown = st.ranks if ranks is None else sorted(ranks)
    got = None
    if start_ms is None and end_ms is None:
        # Without a time window the rank summaries hold every number, unless metric slices must be
        # joined or host rows nest (their self times need the events).
        got = _totals_from_summaries(st, shown, params)
    parts: list = []
    if got is None:
        own = engine is None
        engine = open_engine(st) if own else engine
        try:
            parts = engine.run(task, params, ranks=ranks)
        finally:
            if own:
                engine.close()
        totals: dict[tuple, list] = {}
        cats: set[str] = set()
        for part in parts:
            cats.update(part["categories"])
            for rk, grouped, n, total, lo, hi, self_ns in part["stats"]:
                _accumulate(totals, (rk, grouped), n, int(total), lo, hi, int(self_ns))
    else:
        totals, cats = got
    headers = _headers(st, shown)
    telemetry = _telemetry(st, shown, headers)
    keys = sorted(totals, key=lambda k: (k[1], k[0]))
    instances = sum(v[0] for v in totals.values())
    inclusive = sum(v[1] for v in totals.values())
    grand = sum(v[4] for v in totals.values())
    metric_rows = sorted((r for part in parts for r in part["metrics"]), key=lambda r: (r[2], r[3]))
    labels, units, per_metric, per_instance = _metrics(metric_rows, {k: i for i, k in enumerate(keys)})
    rows = []
    for i, key in enumerate(keys):
        rk, grouped = key
        n, total, lo, hi, own_ns = totals[key]
        stat = {m: (float(v[0][i]), float(v[1][i]), float(v[2][i])) for m, v in per_metric.items() if v[3][i]}
        rows.append(NameStat(grouped, n, total, 100.0 * own_ns / (float(grand) or 1.0), total / n, int(lo), int(hi),
                             rk if by_rank and rk >= 0 else None, {m: v[0] for m, v in stat.items()},
                             {m: v[1] for m, v in stat.items()}, {m: v[2] for m, v in stat.items()}, own_ns))
    rows.sort(key=_order(sort_by, labels))
    stats = rows[:top] if top else rows
    named = [r for r in shown if st.meta(r).get("rank_source") != "default"]  # as trace files without one
    filters = {"categories": list(categories) if categories else None, "name": name, "start_ms": start_ms,
               "end_ms": end_ms, "by_rank": by_rank, "sort": sort_by, "top": top}
    from .intervals import METADATA_KEY as INTERVALS_KEY, combine
    from .resources import METADATA_KEY as RESOURCES_KEY, resource_rows

    resources = resource_rows((headers[r].get(RESOURCES_KEY) for r in shown), [s.name for s in stats])
    windowed = start_ms is not None or end_ms is not None  # the interval sums cover whole traces
    intervals = {} if windowed else combine(((r if r in named else None, headers[r].get(INTERVALS_KEY))
                                             for r in shown), by_rank)
    return Report(stats, StoreTable(instances, inclusive, sorted(cats), per_instance, units),
                  [str(Path(st.path) / f"rank={r}") for r in shown], named, grand, telemetry, filters, resources,
                  intervals)


def _headers(st, ranks: Sequence[int]) -> dict[int, dict]:
    """Each rank's trace header (its top-level keys), read by a few threads (pyarrow reads without the GIL)."""
    if len(ranks) <= 4:
        return {r: st.partitions[r].header for r in ranks}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(8, len(ranks))) as pool:
        return dict(zip(ranks, pool.map(lambda r: st.partitions[r].header, ranks)))


def _accumulate(totals: dict, key: tuple, n: int, total: int, lo, hi, self_ns: int) -> None:
    got = totals.get(key)
    if got is None:
        totals[key] = [n, total, lo, hi, self_ns]
    else:
        got[0] += n
        got[1] += total
        got[2], got[3] = min(got[2], lo), max(got[3], hi)
        got[4] += self_ns


def _totals_from_summaries(st, ranks: Sequence[int], params: dict) -> tuple[dict, set] | None:
    """The report's per (rank key, grouped name) totals and the categories shown, from the ranks' slice
    summaries (no event read); None when a rank has per-kernel metric slices or the rows chosen could
    nest (host ranges and ops: their self times need the events)."""
    rows = {}
    for r in ranks:
        m = st.meta(r)
        got = [{"name": n, "cat": c, "count": k, "total_ns": s, "min_ns": lo, "max_ns": hi} for n, c, k, s, lo, hi in
               zip(m["summary_name"], m["summary_cat"], m["summary_count"], m["summary_total_ns"],
                   m["summary_min_ns"], m["summary_max_ns"])]
        if any((g["name"] or "").startswith(METRICS_PREFIX) for g in got):
            return None
        rows[r] = got
    wanted = set(params["categories"]) if params["categories"] is not None else None
    rx = re.compile(params["name"]) if params["name"] else None
    grouped: dict[str, str | None] = {}
    totals: dict[tuple, list] = {}
    shown: set[str] = set()
    for r, got in rows.items():
        cats = wanted
        if cats is None:  # as the trace reader: device categories, else host ones
            present = {g["cat"] for g in got}
            cats = (present & set(DEVICE_CATEGORIES)) or (present & set(HOST_CATEGORIES))
        if any(g["cat"] in cats and g["cat"] not in DEVICE_WORK for g in got):
            return None
        rk = -1 if not params["by_rank"] or st.meta(r).get("rank_source") == "default" else r
        for g in got:
            if g["cat"] is None or g["cat"] not in cats:
                continue
            name = g["name"] or ""
            if name not in grouped:
                key = _group_name(name)
                grouped[name] = key if rx is None or rx.search(key) is not None else None
            key = grouped[name]
            if key is not None:
                _accumulate(totals, (rk, key), g["count"], g["total_ns"], g["min_ns"], g["max_ns"], g["total_ns"])
                shown.add(g["cat"])
    return totals, shown


def _metrics(metric_rows: list, key_index: dict[tuple, int]):
    """Metric labels, units, per-key (mean, min, max, present) and the per-instance values, in the JSON
    reader's order of metrics."""
    order: dict[str, str] = {}
    for *_, values in metric_rows:
        for arg in values:
            metric, _, unit = arg.partition("::")
            order.setdefault(metric, unit)
    labels = {m: f"{m}::{u}" if u else m for m, u in order.items()}
    per_instance = {m: np.full(len(metric_rows), np.nan) for m in order}
    codes = np.fromiter((key_index[(r[0], r[1])] for r in metric_rows), np.int64, len(metric_rows))
    for i, (*_, values) in enumerate(metric_rows):
        for arg, v in values.items():
            per_instance[arg.partition("::")[0]][i] = float(v)
    per_metric = {m: _metric_stats(codes, col, len(key_index)) for m, col in per_instance.items()}
    return labels, dict(order), per_metric, per_instance


def _telemetry(st, ranks: Sequence[int], headers: dict[int, dict]) -> list:
    """The ranks' telemetry tracks (counters of the telemetry categories), as trace files give them."""
    import pyarrow.parquet as pq

    from ..trace.read.arrow import to_numpy
    from ..trace.write.arrowcols import int_column
    from .telemetry import TELEMETRY_CATEGORIES, collector_units, telemetry_series_of

    parts, with_telemetry = [], []
    for r in ranks:
        pf = pq.ParquetFile(st.partitions[r].file("counters"))
        if not pf.metadata.num_rows:
            continue
        table = pf.read(columns=["idx", "ts", "name", "cat", "pid", "pid_label", "metric", "value"])
        cat = table.column("cat").combine_chunks()
        keep_code = [i for i, c in enumerate(cat.dictionary.to_pylist()) if c in TELEMETRY_CATEGORIES]
        if not keep_code:
            continue
        codes = to_numpy(cat.indices)
        rows = table.take(int_column(np.flatnonzero(np.isin(codes, keep_code)))).to_pylist()
        events: dict[int, dict] = {}
        for row in rows:
            e = events.get(row["idx"])
            if e is None:
                pid = row["pid"] if row["pid"] is not None else row["pid_label"]
                e = events[row["idx"]] = {"ph": "C", "cat": row["cat"], "name": row["name"], "pid": pid,
                                          "ts": _us(row["ts"]), "args": {}}
            e["args"][row["metric"]] = row["value"]
        first = st.meta(r).get("first_ts_ns")
        parts.append((list(events.values()), _us(first) if first is not None else 0.0))
        with_telemetry.append(r)
    if not parts:
        return []
    series = telemetry_series_of(parts)
    # units from the collectors' metadata of the ranks that have telemetry
    units = collector_units(headers[r] for r in with_telemetry)
    for t in series:
        t.unit = units.get((t.track, t.metric), "")
    return series


def _us(ns: int) -> float:
    return float(ns // 1000) + (ns % 1000) / 1e3
