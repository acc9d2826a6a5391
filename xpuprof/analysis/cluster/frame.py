"""The events HTA 0.5 analyses see, as DuckDB views over a store (per task: a group of ranks).

HTA (``hta.common.trace`` / ``trace_parser``) reads each rank's trace into a DataFrame and, before
any analysis:
- keeps the events with a ``dur`` and a ``cat``, except category ``Trace``;
- in a trace whose ``ts`` are floats, rounds each event to whole µs inwards: ``ts = ceil(ts)``,
  ``end = floor(ts + dur)``, ``dur = end - ts`` (an event under 1 µs can get ``dur = -1``);
- reads ``stream`` (-1 when absent) and ``correlation`` (-1 when absent) from args;
- links each GPU kernel and its CPU launch by correlation (``index_correlation``: the other side's
  event index, the last one when several match);
- when the traces hold two or more distinct ``ProfilerStep`` names (all ranks together), keeps per
  rank only the CPU events that start before the last ``ProfilerStep`` starts, and the GPU events
  whose correlation one of those carries (a join: a correlation several kept CPU events carry
  repeats the GPU event; here each GPU event repeats once per carrier, counted, which joins a
  smaller table). GPU events here: ``stream >= 0 and correlation >= 0``, or the names
  ``Event Sync`` and ``Context Sync``.

Views (µs as DOUBLE, whole µs where HTA rounds): ``hta_base`` (per-rank events before the step
filter), ``hta_frame`` (after it; ``part`` 0 for GPU rows and 1 for CPU rows in the filtered case,
so ``(part, idx)`` is HTA's row order), ``ktypes`` (kernel type of every name).
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ...trace.read.arrow import to_numpy

# Communication kernels: NCCL's and RCCL's (HTA's rule, ``^nccl.*Kernel``) and oneCCL's SYCL kernels
# (``oneccl_reduce_base<...>`` ...), which HTA does not know.
COMMUNICATION_KERNEL = re.compile(r"(^nccl.*Kernel)|(^oneccl_)")
MEMORY_KERNEL = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(^oneccl_)|(.*(Memcpy)|(Memset))|(.*Sync)")
COMMUNICATION, MEMORY, COMPUTATION, OTHER = "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"
GPU_SYNC_NAMES = ("Event Sync", "Context Sync")
STEP_MARK = "ProfilerStep"


def kernel_type(name: str) -> str:
    """HTA's ``get_kernel_type``, oneCCL's kernels counted as communication too."""
    if COMMUNICATION_KERNEL.match(name):
        return COMMUNICATION
    if MEMORY_KERNEL.match(name):
        return MEMORY
    if not NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def memory_kernel_type(name: str) -> str:
    """HTA's ``get_memory_kernel_type``: "Memcpy DtoH" and the like, "Memset", "Memcpy Unknown"."""
    if name[:6] == "Memset":
        return "Memset"
    if name[:6] != "Memcpy":
        return "Memcpy Unknown"
    return name[:11]


def us(col: str) -> str:
    """SQL: an int64 ns column as the double µs the trace's JSON number parses to. ns reach 1e18,
    beyond a double's exact integers: whole µs and the ns remainder are converted apart, which rounds
    once, as parsing the decimal text does."""
    return f"(({col} // 1000)::DOUBLE + ({col} % 1000) / 1e3)"


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


BASE_SQL = """
SELECT s.rank, s.idx, s.name, s.cat, s.pid, s.tid,
       CASE WHEN m.int_ts THEN {ts} ELSE ceil({ts}) END AS ts,
       CASE WHEN m.int_ts THEN {dur} ELSE floor({ts} + {dur}) - ceil({ts}) END AS dur,
       coalesce(s.stream, -1) AS stream, coalesce(s.correlation, -1) AS correlation,
       coalesce(s.memory_bw_gbps, 0.0) AS memory_bw_gbps, coalesce(s.bytes, -1) AS bytes,
       ((coalesce(s.stream, -1) >= 0 AND coalesce(s.correlation, -1) >= 0) OR s.name IN ({sync})) AS is_gpu
FROM slices s JOIN hta_ranks m ON s.rank = m.rank
WHERE s.dur IS NOT NULL AND s.cat IS NOT NULL AND s.cat <> 'Trace'
"""


_KEPT = "dur IS NOT NULL AND cat IS NOT NULL AND cat <> 'Trace'"  # hta_base's rows


def step_symbols(con, ranks: Sequence[int], params: dict) -> list[str]:
    """Task: the distinct names and categories holding "ProfilerStep" (HTA's symbol table test)."""
    rows = con.execute(f"""SELECT DISTINCT name FROM slices WHERE {_KEPT} AND name LIKE '%{STEP_MARK}%'
                           UNION SELECT DISTINCT cat FROM slices WHERE {_KEPT} AND cat LIKE '%{STEP_MARK}%'""").fetchall()
    return sorted(r[0] for r in rows)


def _summary_symbols(store) -> tuple[set[str], set[str]] | None:
    """From the ranks' slice summaries: (the step symbols the events surely hold, those they may hold).
    Sure: a (name, category) with a timed slice and a category neither absent nor "Trace"; may: any
    (a summary's string lists hold an absent category as "", which an empty one also is). None when a
    rank has no summary."""
    sure: set[str] = set()
    maybe: set[str] = set()
    for rank in store.ranks:
        meta = store.meta(rank)
        names, cats, timed = meta.get("summary_name"), meta.get("summary_cat"), meta.get("summary_timed")
        if names is None or cats is None:
            return None
        for i, (name, cat) in enumerate(zip(names, cats)):
            if cat == "Trace":
                continue
            found = {s for s in (name, cat) if s and STEP_MARK in s}
            if not found:
                continue
            maybe |= found
            if cat and timed is not None and timed[i]:
                sure |= found
    return sure, maybe


def steps_params(engine, *, include_last_step: bool = False) -> dict:
    """What every HTA-shaped task needs to know about all ranks: whether the step filter applies (two
    or more step symbols). The ranks' slice summaries answer without reading events unless they leave
    it open (see ``_summary_symbols``); then the events are asked."""
    known = _summary_symbols(engine.store)
    if known is not None and (len(known[0]) >= 2 or len(known[1]) < 2):
        symbols = known[0] if len(known[0]) >= 2 else known[1]
    else:
        symbols = set()
        for part in engine.run(step_symbols):
            symbols.update(part)
    return {"steps_filter": len(symbols) >= 2, "include_last_step": bool(include_last_step)}


def create_base(con) -> None:
    """``hta_ranks`` (each rank's clock kind, read once) and the view ``hta_base``."""
    con.execute("CREATE TEMP TABLE IF NOT EXISTS hta_ranks AS SELECT rank, ts_kind = 'int' AS int_ts FROM ranks")
    con.execute("CREATE OR REPLACE TEMP VIEW hta_base AS "
                + BASE_SQL.format(sync=", ".join(_q(n) for n in GPU_SYNC_NAMES), ts=us("s.ts"), dur=us("s.dur")))


def create_frame(con, params: dict, *, kernel_types: bool = True) -> None:
    """``hta_base``, ``hta_frame`` and (``kernel_types``) ``ktypes`` on ``con``."""
    create_base(con)
    if params.get("steps_filter"):
        bound = "b.ts <= l.last_end" if params.get("include_last_step") else "b.ts < l.last_start"
        con.execute(f"""
        CREATE OR REPLACE TEMP VIEW hta_frame AS
        WITH last AS (
            SELECT rank, max(ts) AS last_start, max(ts + dur) AS last_end FROM hta_base
            WHERE NOT is_gpu AND name LIKE '%{STEP_MARK}%' GROUP BY rank),
        cpu AS (SELECT b.* FROM hta_base b JOIN last l ON b.rank = l.rank WHERE NOT b.is_gpu AND {bound}),
        carried AS (SELECT rank, correlation, count(*) AS n FROM cpu GROUP BY rank, correlation),
        gpu AS (SELECT g.* FROM hta_base g JOIN carried c ON g.rank = c.rank AND g.correlation = c.correlation,
                range(c.n) WHERE g.is_gpu)
        SELECT *, ts + dur AS end_ts, 0 AS part FROM gpu
        UNION ALL SELECT *, ts + dur AS end_ts, 1 AS part FROM cpu""")
    else:
        con.execute("CREATE OR REPLACE TEMP VIEW hta_frame AS SELECT *, ts + dur AS end_ts, 0 AS part FROM hta_base")
    if kernel_types:
        register_kernel_types(con)


def register_kernel_types(con, names: Sequence[str] | None = None) -> None:
    """``ktypes``: the kernel type of ``names`` (any superset of the kernels' names: the ranks' slice
    summaries), else of the names of the events with a stream."""
    import pyarrow as pa

    from ...trace.write.arrowcols import strings

    if names is None:
        missing, = con.execute("SELECT count(*) FILTER (WHERE summary_name IS NULL) FROM ranks").fetchone()
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT name FROM slices WHERE stream IS NOT NULL AND name IS NOT NULL" if missing else
            "SELECT DISTINCT n FROM (SELECT unnest(summary_name) AS n FROM ranks) WHERE n IS NOT NULL").fetchall()]
    table = pa.Table.from_arrays([strings(names), strings([kernel_type(n) for n in names]),
                                  strings([memory_kernel_type(n) for n in names])],
                                 names=["name", "kernel_type", "memory_type"])
    con.register("ktypes_arrow", table)
    con.execute("CREATE OR REPLACE TEMP TABLE ktypes AS SELECT * FROM ktypes_arrow")
    con.unregister("ktypes_arrow")


def index_correlation_sql() -> str:
    """Per frame row: HTA's index_correlation (computed on each rank's events before the step filter)."""
    return """
    WITH c AS (SELECT rank, idx, correlation, is_gpu FROM hta_base WHERE correlation <> -1),
    pairs AS (SELECT x.rank, x.idx AS idx, max(y.idx) AS other FROM c x JOIN c y
              ON x.rank = y.rank AND x.correlation = y.correlation AND x.is_gpu <> y.is_gpu
              GROUP BY x.rank, x.idx)
    SELECT b.rank, b.idx, coalesce(p.other, least(b.correlation, 0)) AS index_correlation
    FROM hta_base b LEFT JOIN pairs p ON b.rank = p.rank AND b.idx = p.idx"""


def union_sql(source: str, keys: Sequence[str] = ()) -> str:
    """HTA's ``merge_kernel_intervals`` per (rank, keys): rows (rank, keys, grp, s, e) of the merged
    [ts, end_ts) intervals of ``source``; groups numbered from 0 in time order."""
    k = "".join(f", {c}" for c in keys)
    return f"""
    WITH w AS (SELECT rank{k}, ts, end_ts, part, idx, max(end_ts) OVER (PARTITION BY rank{k} ORDER BY ts, part, idx
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM {source}),
    g AS (SELECT *, sum(CASE WHEN prev IS NOT NULL AND ts > prev THEN 1 ELSE 0 END)
                    OVER (PARTITION BY rank{k} ORDER BY ts, part, idx ROWS UNBOUNDED PRECEDING) AS grp FROM w)
    SELECT rank{k}, grp, min(ts) AS s, max(end_ts) AS e FROM g GROUP BY rank{k}, grp"""


def state_time_sql(types: Sequence[str]) -> str:
    """HTA's overlap sweep (``_get_gpu_kernel_type_time``): per rank and per combination of kernel
    types running at once (a bit mask, bit i for ``types[i]``), the time spent in it. Ties at one
    instant only make zero-length states, which are left out."""
    bits = " ".join(f"WHEN {_q(t)} THEN {1 << i}" for i, t in enumerate(types))
    merged = union_sql(f"""(SELECT f.*, k.kernel_type FROM hta_frame f JOIN ktypes k ON f.name = k.name
                            WHERE f.stream <> -1 AND k.kernel_type IN ({', '.join(_q(t) for t in types)}))""",
                       ["kernel_type"])
    return f"""
    WITH m AS ({merged}),
    ev AS (SELECT rank, s AS t, CASE kernel_type {bits} END AS d FROM m
           UNION ALL SELECT rank, e AS t, -(CASE kernel_type {bits} END) AS d FROM m),
    run AS (SELECT rank, t, sum(d) OVER (PARTITION BY rank ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS state,
                   lead(t) OVER (PARTITION BY rank ORDER BY t, d) AS next_t FROM ev)
    SELECT rank, state, sum(next_t - t) AS time FROM run WHERE state > 0 AND next_t > t GROUP BY rank, state"""


def state_name(state: int, types: Sequence[str]) -> str:
    return " overlapping ".join(t for i, t in enumerate(types) if state & (1 << i))


def rank_batches(con, sql: str):
    """(rank, {column: numpy array}) per rank of a query ordered by rank first, streamed in batches.
    (``con.sql``: a reader from ``con.execute`` loses the ORDER BY when insertion order is not kept.)"""
    reader = con.sql(sql).to_arrow_reader(1 << 16)
    pending: dict[str, list] = {}
    current = None
    for batch in reader:
        cols = {name: to_numpy(batch.column(i)) for i, name in enumerate(batch.schema.names)}
        ranks = cols["rank"]
        cuts = np.flatnonzero(np.diff(ranks)) + 1
        for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(ranks)]])):
            r = int(ranks[lo])
            if current is not None and r != current:
                yield current, {k: np.concatenate(v) for k, v in pending.items()}
                pending = {}
            current = r
            for k, v in cols.items():
                pending.setdefault(k, []).append(v[lo:hi])
    if current is not None:
        yield current, {k: np.concatenate(v) for k, v in pending.items()}

