"""The trace store's format: a directory of Parquet files, one partition per rank (docs/store.md).

    STORE/
      xpuprof-store.json          {"format": "xpuprof-store", "schema_version": 1}
      rank=<r>/                   one rank, written whole then renamed into place (atomic)
        rank.parquet              one row: the rank's metadata (the "ranks" table)
        slices.parquet            complete events: ops, host ranges, runtime/driver calls, kernels, copies, syncs
        counters.parquet          counter samples, one row per (event, metric)
        flows.parquet             flow ends ("s", "f", "t")
        instants.parquet          instant events
        summary.parquet           per (name, category) of the slices: count, total/min/max duration (the
                                  kernel report's numbers, so it need not read the events)

Times are int64 ns on the rank's own clock: ``ts`` counts from the rank's ``base_time_ns`` (the trace's
``baseTimeNanoseconds``), so ``base_time_ns + ts`` is the epoch time. Strings that repeat (names,
categories, metric names) are dictionary-encoded. This module holds names and Arrow types only;
pyarrow is imported by the functions that build schemas.
"""
from __future__ import annotations

FORMAT = "xpuprof-store"
SCHEMA_VERSION = 1
MANIFEST = "xpuprof-store.json"
RANK_DIR_PREFIX = "rank="
TABLES = ("slices", "counters", "flows", "instants")
RANKS_TABLE = "rank"  # rank=<r>/rank.parquet; all of them together are the "ranks" table
SUMMARY_COLUMNS = ("summary_name", "summary_cat", "summary_count", "summary_total_ns", "summary_min_ns",
                   "summary_max_ns", "summary_timed")
SCHEMA_VERSION_KEY = b"xpuprof.schema_version"

# Args Kineto traces carry that the analyses read, as typed columns (JSON key -> column).
INT_ARGS = {"External id": "external_id", "correlation": "correlation", "stream": "stream", "device": "device",
            "bytes": "bytes", "wait_on_stream": "wait_on_stream",
            "wait_on_cuda_event_record_corr_id": "wait_on_cuda_event_record_corr_id"}
FLOAT_ARGS = {"memory bandwidth (GB/s)": "memory_bw_gbps"}

# Column -> Arrow type name: "i32", "i64", "f64", "dict" (dictionary<int32, string>), "str", "strlist",
# "i64list".
_ROW = [("idx", "i64"), ("ts", "i64")]  # the rank is the partition's (rank=<r>/)
_WHERE = [("pid", "i64"), ("pid_label", "dict"), ("tid", "i64"), ("tid_label", "dict")]
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "slices": _ROW + [("dur", "i64"), ("name", "dict"), ("cat", "dict")] + _WHERE
    + [(c, "i64") for c in INT_ARGS.values()] + [(c, "f64") for c in FLOAT_ARGS.values()] + [("args", "str")],
    "counters": _ROW + [("name", "dict"), ("cat", "dict")] + _WHERE + [("metric", "dict"), ("value", "f64")],
    "flows": _ROW + [("id", "i64"), ("id_label", "dict"), ("name", "dict"), ("cat", "dict")] + _WHERE
    + [("phase", "dict"), ("bp", "dict")],
    "instants": _ROW + [("name", "dict"), ("cat", "dict")] + _WHERE + [("scope", "dict"), ("args", "str")],
    "rank": [("rank", "i32"), ("schema_version", "i32"), ("rank_source", "str"), ("writer", "str"),
             ("sources", "strlist"), ("base_time_ns", "i64"), ("ts_kind", "str"), ("first_ts_ns", "i64"),
             ("slices", "i64"), ("counters", "i64"), ("flows", "i64"), ("instants", "i64"),
             ("not_stored_json", "str"), ("header_json", "str"), ("metadata_events_json", "str"),
             ("warnings", "strlist"), ("summary_name", "strlist"), ("summary_cat", "strlist"),
             ("summary_count", "i64list"), ("summary_total_ns", "i64list"), ("summary_min_ns", "i64list"),
             ("summary_max_ns", "i64list"), ("summary_timed", "i64list")],
}
# rank_source values: where a rank number came from.
RANK_SOURCES = ("distributedInfo", "file name", "position", "given", "environment", "default")


def arrow_type(kind: str):
    import pyarrow as pa

    return {"i32": pa.int32(), "i64": pa.int64(), "f64": pa.float64(), "dict": pa.dictionary(pa.int32(), pa.string()),
            "str": pa.string(), "strlist": pa.list_(pa.string()), "i64list": pa.list_(pa.int64())}[kind]


def arrow_schema(table: str):
    """The Arrow schema of a table, carrying the schema version in its metadata."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in COLUMNS[table]],
                     metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()})


def rank_dir_name(rank: int) -> str:
    return f"{RANK_DIR_PREFIX}{int(rank)}"
