"""Opening a trace store: its manifest, its rank partitions and their metadata, checked.

A bad store gets one clear line (``StoreError``): not a store (or a trace file given instead),
another schema version, a partition whose files are missing or truncated (Parquet files end with
the ``PAR1`` magic: a cut file does not), or mixed ranks (a partition whose metadata names another
rank than its directory).

The store's files are inputs like any other (``xpuprof.inputs``): only regular files are read - a manifest
or a Parquet file that is a FIFO, a device or a link to one is refused before it is opened (a FIFO would
hang the read, ``/dev/zero`` never ends) - and the manifest is read with a bound (``MAX_MANIFEST_BYTES``).
A data file is checked against the CRC-32 its writer recorded (``store_checksum``; ``verify_checksums``)
before it is read: a flipped bit is one error, never other numbers. Stores written before checksums were
recorded have none to check (their Parquet pages are still read with pyarrow's page-CRC check where present).
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ...inputs import InputError, KIND_NAMES, open_regular, read_input
from ..store_checksum import CHECKSUMS_KEY, crc32_fd
from ..store_schema import FORMAT, MANIFEST, RANK_DIR_PREFIX, RANKS_TABLE, SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLES

_RANK_DIR = re.compile(re.escape(RANK_DIR_PREFIX) + r"(-?\d+)$")
PARQUET_MAGIC = b"PAR1"
HEAVY_META = ("header_json", "metadata_events_json")  # read when asked (RankPartition.header ...)
MAX_MANIFEST_BYTES = 1 << 20  # the manifest is a few keys (the writers' is under 100 bytes)


class StoreError(ValueError):
    """A store that cannot be read; the message names the path and what is wrong."""


@dataclass
class RankPartition:
    rank: int
    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    checksums: dict[str, dict] | None = None  # file name -> {"bytes", "crc32"}; None: written without them

    def file(self, table: str) -> Path:
        return self.path / f"{table}.parquet"

    @property
    def header(self) -> dict:
        """The trace's top-level keys (read from the metadata file when asked: they can be large)."""
        return json.loads(self._heavy("header_json") or "{}")

    @property
    def metadata_events(self) -> list:
        return json.loads(self._heavy("metadata_events_json") or "[]")

    def _heavy(self, column: str):
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.file(RANKS_TABLE), page_checksum_verification=True).read(
            columns=[column]).column(0)[0].as_py()


@dataclass
class Store:
    path: Path
    partitions: dict[int, RankPartition]

    @property
    def ranks(self) -> list[int]:
        return sorted(self.partitions)

    def files(self, table: str, ranks: Iterable[int] | None = None) -> list[str]:
        ranks = self.ranks if ranks is None else ranks
        return [str(self.partitions[r].file(table)) for r in ranks]

    def meta(self, rank: int) -> dict[str, Any]:
        return self.partitions[rank].meta


def is_store(path) -> bool:
    """Whether ``path`` is a directory holding a store manifest (cheap: for choosing a reader). A manifest
    that is no regular file (a FIFO, a link to ``/dev/zero``) still makes a store - one ``open_store``
    refuses with one line - rather than a directory of traces."""
    manifest = Path(path) / MANIFEST
    return os.path.lexists(manifest) and not manifest.is_dir()


def open_store(path, *, read_meta: bool = True, ranks: Iterable[int] | None = None) -> Store:
    """The store at ``path``, its partitions checked; ``read_meta`` also reads each rank's metadata.
    ``ranks``: only these ranks' partitions, each found by its name (one rank of a store of 1,000 is one
    partition's work: convert reads back each rank it writes, and opened the whole store for it, which
    made a convert of N ranks read N * N / 2 partitions' metadata). When one is missing, every partition
    is opened, so that its absence is said beside the ranks the store holds."""
    import orjson

    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise StoreError(f"{path}: no such store") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        raise StoreError(f"{path} is a file, not a trace store (a store is a directory; convert a trace with "
                         f"`xpuprof convert {path} -o STORE`)")
    if not stat.S_ISDIR(mode):
        raise StoreError(f"{path} is a {KIND_NAMES.get(stat.S_IFMT(mode), 'special file')}, not a trace store "
                         "(a store is a directory)")
    manifest = path / MANIFEST
    try:
        data = orjson.loads(read_input(manifest, "store manifest", limit=MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        raise StoreError(f"{path} is not a trace store (no {MANIFEST}; `xpuprof convert` writes one)") from None
    except IsADirectoryError:
        raise StoreError(f"{manifest} is a directory, not a store manifest") from None
    except InputError as exc:  # a FIFO, a device, over the bound
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(f"{manifest} is unreadable: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"{manifest} is not a store manifest (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreError(f"{manifest} does not describe an {FORMAT}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"{path} has store schema version {data.get('schema_version')!r}; this xpuprof reads "
                         f"version {SCHEMA_VERSION}")
    partitions: dict[int, RankPartition] = {}
    wanted = None if ranks is None else sorted({int(r) for r in ranks})
    if wanted and all((path / f"{RANK_DIR_PREFIX}{r}").is_dir() for r in wanted):
        for r in wanted:
            part = RankPartition(r, path / f"{RANK_DIR_PREFIX}{r}")
            for table in (*TABLES, RANKS_TABLE):
                _check_parquet(part.file(table))
            partitions[r] = part
    # else every partition (a rank asked for and not there is then said with the ranks the store holds)
    entries = [] if partitions else sorted(os.scandir(path), key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith(".") or entry.name == MANIFEST:
            continue  # writers' private partitions in progress, and the manifest
        m = _RANK_DIR.match(entry.name)
        if not m or not entry.is_dir():
            raise StoreError(f"{path} holds {entry.name!r}, which is no rank partition ({RANK_DIR_PREFIX}<rank>/); "
                             "a store holds only its manifest and rank partitions")
        part = RankPartition(int(m.group(1)), Path(entry.path))
        for table in (*TABLES, RANKS_TABLE):
            _check_parquet(part.file(table))
        partitions[part.rank] = part
    if not partitions:
        raise StoreError(f"{path} holds no ranks yet")
    if read_meta:
        _read_meta(path, partitions)
    return Store(path, partitions)


def _check_parquet(file: Path) -> None:
    try:
        fd, st = open_regular(file, "store file")  # a FIFO here would hang DuckDB's read, /dev/zero never end
        size = st.st_size
        with open(fd, "rb") as f:
            head = f.read(4)
            f.seek(max(size - 4, 0))
            tail = f.read(4)
    except FileNotFoundError:
        raise StoreError(f"{file.parent} is missing {file.name}: an incomplete rank partition") from None
    except IsADirectoryError:
        raise StoreError(f"{file} is a directory, not a Parquet file") from None
    except InputError as exc:
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(f"{file} is unreadable: {exc.strerror or exc}") from None
    if size < 12 or head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        raise StoreError(f"{file} is not a complete Parquet file ({size} bytes; truncated or corrupt)")


def _read_meta(path: Path, partitions: dict[int, RankPartition]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise StoreError("reading a trace store needs the pyarrow package: pip install 'xpuprof[scale]'") from None

    def read(part: RankPartition):
        file = part.file(RANKS_TABLE)
        try:
            pf = pq.ParquetFile(file, page_checksum_verification=True)
            version = (pf.schema_arrow.metadata or {}).get(SCHEMA_VERSION_KEY)
            sums = (pf.schema_arrow.metadata or {}).get(CHECKSUMS_KEY)
            rows = pf.read(columns=[c for c in pf.schema_arrow.names if c not in HEAVY_META]).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            return StoreError(f"{file} is not a readable Parquet file (truncated or corrupt): "
                              f"{str(exc).splitlines()[0]}")
        try:
            part.checksums = None if sums is None else _checksums(sums)
        except ValueError:
            return StoreError(f"{file} holds unreadable file checksums ({CHECKSUMS_KEY.decode()}): corrupt")
        return version, rows

    parts = list(partitions.values())
    if len(parts) > 4:  # pyarrow reads without the GIL: a few threads overlap the small reads
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(8, len(parts))) as pool:
            results = list(pool.map(read, parts))
    else:
        results = [read(part) for part in parts]
    for part, got in zip(parts, results):  # checked in rank order: the first bad partition is named
        file = part.file(RANKS_TABLE)
        if isinstance(got, StoreError):
            raise got
        version, rows = got
        if version is not None and version != str(SCHEMA_VERSION).encode():
            raise StoreError(f"{file} has store schema version {version.decode()}; this xpuprof reads version "
                             f"{SCHEMA_VERSION}")
        if len(rows) != 1:
            raise StoreError(f"{file} holds {len(rows)} rows; a rank's metadata is one row")
        meta = rows[0]
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise StoreError(f"{file} has store schema version {meta.get('schema_version')!r}; this xpuprof reads "
                             f"version {SCHEMA_VERSION}")
        if meta.get("rank") != part.rank:
            raise StoreError(f"{part.path} holds rank {meta.get('rank')}'s data (its {file.name} says so): mixed "
                             f"ranks; a partition {RANK_DIR_PREFIX}<r> holds rank r only")
        part.meta = meta


def _checksums(raw: bytes) -> dict[str, dict]:
    sums = json.loads(raw)
    if not isinstance(sums, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("crc32"), int)
            for v in sums.values()):
        raise ValueError("not a checksum table")
    return sums


_VERIFIED: set[tuple] = set()  # (device, inode, size, mtime_ns, crc) of files checked in this process


def verify_checksums(store: Store, ranks: Iterable[int] | None = None, tables: Iterable[str] = TABLES) -> None:
    """Each named data file's bytes against the CRC-32 its writer recorded; ``StoreError`` naming the first
    file that differs (in size or CRC). A file is read once per process while it stays as it was checked
    (its inode, size and mtime); a partition written without checksums is not checked."""
    for r in store.ranks if ranks is None else ranks:
        part = store.partitions[r]
        if part.checksums is None:
            continue
        for table in tables:
            file = part.file(table)
            want = part.checksums.get(file.name)
            if want is None:
                raise StoreError(f"{file} has no checksum in {part.file(RANKS_TABLE).name} (which records one for "
                                 "every data file): the partition was changed after it was written")
            try:
                fd, st = open_regular(file, "store file")
            except InputError as exc:
                raise StoreError(str(exc)) from None
            except OSError as exc:
                raise StoreError(f"{file} is unreadable: {exc.strerror or exc}") from None
            try:
                key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, want["crc32"])
                if key in _VERIFIED:
                    continue
                size, crc = crc32_fd(fd)
            except OSError as exc:
                raise StoreError(f"{file} is unreadable: {exc.strerror or exc}") from None
            finally:
                os.close(fd)
            if (size, crc) != (want["bytes"], want["crc32"]):
                raise StoreError(f"{file} does not match the checksum written with it ({size:,} bytes, CRC-32 "
                                 f"{crc:08x}; written: {want['bytes']:,} bytes, {want['crc32']:08x}): the file was "
                                 "changed or corrupted after it was written")
            _VERIFIED.add(key)


def check_data_files(store: Store, ranks: Iterable[int] | None = None) -> None:
    """Reads every data file's footer (schema version, readable): for a check before a long query."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for r in store.ranks if ranks is None else ranks:
        for table in TABLES:
            file = store.partitions[r].file(table)
            try:
                md = pq.read_schema(file).metadata or {}
            except (pa.ArrowException, OSError) as exc:
                raise StoreError(f"{file} is not a readable Parquet file (truncated or corrupt): "
                                 f"{str(exc).splitlines()[0]}") from None
            version = md.get(SCHEMA_VERSION_KEY)
            if version is not None and version != str(SCHEMA_VERSION).encode():
                raise StoreError(f"{file} has store schema version {version.decode()}; this xpuprof reads version "
                                 f"{SCHEMA_VERSION}")
