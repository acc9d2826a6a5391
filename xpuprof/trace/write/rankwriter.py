"""One rank's partition of a trace store, written whole in a private directory and renamed into place.

Ranks exporting into one store at once never clash: each writes ``STORE/.rank=<r>.<unique>.tmp/``
(created exclusively, unique per writer) and renames it to ``STORE/rank=<r>/`` at the end; a reader
sees a rank completely or not at all. A rank the store already has is refused unless ``replace``;
a replacement swaps the old partition out, the new one in, then deletes the old.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import queue
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..store_checksum import CHECKSUMS_KEY, crc32_file
from ..store_schema import (COLUMNS, FORMAT, MANIFEST, RANK_DIR_PREFIX, SCHEMA_VERSION, TABLES,
                            arrow_schema,
                            rank_dir_name)
from .slice_summary import SliceSummary

ROW_GROUP_ROWS = 1 << 20  # one row group per write call, at most this many rows
# zstd (level 1, its fastest) for stores written offline (convert): about half lz4's size; lz4 where the
# profiled process pays the write (export_parquet): 4x faster to encode here, still ~8x smaller than JSON.
COMPRESSIONS = {"zstd": 1, "lz4": None}
STATISTICS = ["idx", "ts", "dur"]  # min/max per row group: time windows skip row groups


class StoreWriteError(ValueError):
    """A store that cannot be written as asked (a rank it has, a directory that is not a store)."""


def prepare_store(path) -> Path:
    """The store directory, created with its manifest when new. Refuses a path that is not a
    directory, a non-empty directory without a manifest, and a store of another schema version."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StoreWriteError(f"{path} exists and is not a directory; a store is a directory")
    path.mkdir(parents=True, exist_ok=True)
    manifest = path / MANIFEST
    if not manifest.exists():
        if any(e for e in os.scandir(path) if not e.name.startswith(".")):
            raise StoreWriteError(f"{path} is a non-empty directory without {MANIFEST}: not a trace store; "
                                  "name a new or empty directory")
        _create_manifest(path)
    check_manifest(path)
    return path


def _create_manifest(path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}.", suffix=".tmp", dir=path)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"format": FORMAT, "schema_version": SCHEMA_VERSION}, f)
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path / MANIFEST)  # never replaces: a writer that got there first wins
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def check_manifest(path: Path) -> dict:
    manifest = Path(path) / MANIFEST
    try:
        data = json.loads(manifest.read_bytes())
    except FileNotFoundError:
        raise StoreWriteError(f"{path} is not a trace store (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise StoreWriteError(f"{manifest} is unreadable ({exc}); not a trace store") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreWriteError(f"{manifest} does not describe an {FORMAT}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise StoreWriteError(f"{path} has store schema version {data.get('schema_version')!r}; this xpuprof "
                              f"reads and writes version {SCHEMA_VERSION}")
    return data


def writer_version() -> str:
    """xpuprof's version, for the rank metadata (without importing the package root from trace/)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xpuprof")
    except PackageNotFoundError:
        return "unknown"


def rank_exists(store: Path, rank: int) -> bool:
    return os.path.lexists(Path(store) / rank_dir_name(rank))


class RankWriter:
    """Writes one rank's tables; ``commit`` moves them into the store, ``abort`` (or an exception in
    a ``with`` block) removes them."""

    def __init__(self, store, rank: int | None = None, *, replace: bool = False, compression: str = "zstd") -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise StoreWriteError("a trace store needs the pyarrow package: pip install 'xpuprof[scale]'") from None

        self._pq = pq
        if compression not in COMPRESSIONS:
            raise ValueError(f"store compression {compression!r}; valid: {', '.join(COMPRESSIONS)}")
        self.compression = compression
        self.store = prepare_store(store)
        self.replace = replace
        if rank is not None:
            self.check_rank(rank)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{RANK_DIR_PREFIX}", suffix=".tmp", dir=self.store))
        self.rows = dict.fromkeys(TABLES, 0)
        self._writers: dict[str, Any] = {}
        self._encoder = _Encoder()
        self.summary = SliceSummary()  # the writer of slices adds to it
        self._done = False

    def check_rank(self, rank: int) -> None:
        if not self.replace and rank_exists(self.store, rank):
            raise StoreWriteError(f"{self.store} already holds rank {rank}; pass --replace (replace=True) to "
                                  "replace it")

    def write(self, table: str, columns: Mapping[str, Any]) -> None:
        """Appends rows: ``columns`` maps every column of ``table`` to an Arrow array (or None: all null)."""
        import pyarrow as pa

        schema = arrow_schema(table)
        n = max((len(v) for v in columns.values() if v is not None), default=0)
        if n == 0:
            return
        arrays = []
        for field in schema:
            v = columns.get(field.name)
            arrays.append(pa.nulls(n, field.type) if v is None else v)
        batch = pa.Table.from_arrays(arrays, schema=schema)
        self._encoder.put((self._writer(table, schema), batch))
        self.rows[table] += n

    def _writer(self, table: str, schema):
        w = self._writers.get(table)
        if w is None:
            w = self._writers[table] = self._pq.ParquetWriter(
                self.tmp / f"{table}.parquet", schema, compression=self.compression,
                compression_level=COMPRESSIONS[self.compression],
                use_dictionary=[name for name, kind in COLUMNS[table] if kind == "dict"],
                # integers delta-packed: half lz4's time on plain pages here, a quarter of the size
                column_encoding={name: "DELTA_BINARY_PACKED" for name, kind in COLUMNS[table] if kind in ("i64", "i32")},
                write_statistics=[c for c in STATISTICS if c in schema.names],
                write_page_checksum=True)  # page CRCs: pyarrow and parquet-java verify them
        return w

    def commit(self, rank: int, meta: Mapping[str, Any]) -> Path:
        """Closes the tables, writes the rank's metadata row and renames the partition into the store."""
        import pyarrow as pa

        self._encoder.close()
        for table in TABLES:  # every table exists in every partition, empty or not
            self._writer(table, arrow_schema(table)).close()
        row = {name: meta.get(name) for name, _ in COLUMNS["rank"]}
        row.update(rank=int(rank), schema_version=SCHEMA_VERSION, **{t: self.rows[t] for t in TABLES},
                   **self.summary.lists())
        schema = arrow_schema("rank")
        table = pa.Table.from_arrays([_one(row[f.name], kind) for f, (_, kind) in zip(schema, COLUMNS["rank"])],
                                     schema=schema)
        sums = {}  # every byte of each data file, checked by every reader (store_checksum)
        for name in TABLES:
            size, crc = crc32_file(self.tmp / f"{name}.parquet")
            sums[f"{name}.parquet"] = {"bytes": size, "crc32": crc}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               CHECKSUMS_KEY: json.dumps(sums, sort_keys=True).encode()})
        self._pq.write_table(table, self.tmp / "rank.parquet", compression=self.compression,
                             write_page_checksum=True)
        os.chmod(self.tmp, 0o755)
        final = self.store / rank_dir_name(rank)
        self._move_into_place(final, rank)
        self._done = True
        return final

    def _move_into_place(self, final: Path, rank: int) -> None:
        old = None
        if self.replace and os.path.lexists(final):
            old = self.store / f".{final.name}.{os.getpid()}.{id(self):x}.old"
            os.rename(final, old)
        try:
            os.rename(self.tmp, final)  # fails on an existing non-empty directory: never merges two writes
        except OSError as exc:
            if old is not None:
                with contextlib.suppress(OSError):
                    os.rename(old, final)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise StoreWriteError(f"{self.store} already holds rank {rank} (written by another writer "
                                      "meanwhile); pass --replace (replace=True) to replace it") from None
            raise
        if old is not None:
            _remove(old)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._encoder.close()
        for w in self._writers.values():
            with contextlib.suppress(Exception):
                w.close()
        self._writers.clear()
        if not self._done:
            _remove(self.tmp)
        self._done = True

    def __enter__(self) -> "RankWriter":
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is not None or not self._done:
            self.abort()


class _Encoder:
    """Encodes and compresses row groups on a second thread (pyarrow releases the GIL there) while the
    next chunk's columns are built; at most ``depth`` chunks wait, which bounds memory."""

    def __init__(self, depth: int = 2) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def put(self, item) -> None:
        if self._error is not None:
            raise self._error
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="xpuprof-parquet-writer", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    writer, table = item
                    writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
                except BaseException as exc:  # re-raised on the writing thread
                    self._error = exc

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error


def _one(value, kind: str):
    """A one-row column of the metadata table."""
    from .arrowcols import float_column, int32_column, ints, string_lists, strings

    if kind == "strlist":
        return string_lists([list(value or [])])
    if kind == "i64list":
        import pyarrow as pa

        values = list(value or [])
        return pa.ListArray.from_arrays(int32_column(np.array([0, len(values)])), ints(values))
    if kind == "str":
        return strings([value])
    if kind == "i32":
        return int32_column(np.array([value or 0]), np.array([value is not None]))
    if kind == "f64":
        return float_column(np.array([value or 0.0]), np.array([value is not None]))
    return ints([value])


def _remove(path: Path) -> None:
    """Removes a partition directory (never following a link planted in its place)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
