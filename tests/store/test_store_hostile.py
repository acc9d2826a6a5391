"""A store's files are untrusted inputs too (issue 40 item 7): its paths are literal (never globbed, never
parsed for ``key=value`` partitions above the store), only regular files are read (a manifest or Parquet file
that is a FIFO or ``/dev/zero`` is one line, not a hang or a MemoryError), and a flipped bit is one error."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.cli import main
from xpuprof.trace.write.parquet import write_store

from storehelp import synthetic_rank

REPO = Path(__file__).resolve().parents[2]


def _store(path: Path, ranks=(0, 1), **kw) -> Path:
    for r in ranks:
        write_store(synthetic_rank(r, **kw), path)
    return path


def _analyze_json(capsys, store: Path, analysis: str) -> dict:
    assert main(["analyze", str(store), analysis, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _report_json(capsys, store: Path, *extra) -> dict:
    assert main(["report", str(store), "--format", "json", *extra]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def one_line(capsys, argv) -> str:
    rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1, err
    return err[0]


# ----------------------------------------------------------------------------- literal paths
@pytest.mark.parametrize("name", ["run[1].store", "run?.store", "run*.store"])
def test_a_store_path_is_literal_never_a_glob(name, tmp_path, capsys):
    """``run[1].store`` beside ``run1.store`` is read as itself: before, DuckDB globbed the path and
    ``analyze``/``report --start`` answered with ``run1.store``'s data."""
    decoy = _store(tmp_path / "run1.store", ranks=(0, 1), steps=5)
    mine = _store(tmp_path / name, ranks=(0,), steps=2)
    want = _analyze_json(capsys, shutil.copytree(mine, tmp_path / "plain" / "mine.store"), "temporal")
    got = _analyze_json(capsys, mine, "temporal")
    assert got == want and got != _analyze_json(capsys, decoy, "temporal")
    assert {row["rank"] for row in got} == {0}
    start = _report_json(capsys, mine, "--start", "0")
    plain = _report_json(capsys, tmp_path / "plain" / "mine.store", "--start", "0")
    assert start["ranks"] == [0] and (start["totals"], start["tables"]) == (plain["totals"], plain["tables"])


@pytest.mark.parametrize("parent", ["rank=7", "name=x"])
def test_key_value_directories_above_a_store_are_not_columns(parent, tmp_path, capsys):
    """DuckDB's hive partitioning took every ``key=value`` directory of the path as a column: a store under
    ``rank=7/`` was rank 7 throughout, one under ``name=x/`` named every kernel ``x``."""
    plain = _store(tmp_path / "plain.store", ranks=(0, 1), steps=2)
    nested = tmp_path / parent / "s.store"
    shutil.copytree(plain, nested)
    for analysis in ("kernels", "temporal"):
        assert _analyze_json(capsys, nested, analysis) == _analyze_json(capsys, plain, analysis)


# ----------------------------------------------------------------------------- regular files only
def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _child(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xpuprof", *map(str, argv)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_limits)


SPECIAL = {
    "manifest -> /dev/zero": ("xpuprof-store.json", "zero", "store manifest is a character device"),
    "manifest FIFO": ("xpuprof-store.json", "fifo", "store manifest is a FIFO"),
    "slices.parquet FIFO": ("rank=0/slices.parquet", "fifo", "store file is a FIFO"),
    "rank.parquet -> /dev/zero": ("rank=1/rank.parquet", "zero", "store file is a character device"),
    "manifest of 10^6 '['": ("xpuprof-store.json", "brackets", "is not a store manifest"),
    "manifest of 4 GiB": ("xpuprof-store.json", "sparse", "larger than the 1 MiB input limit"),
}


@pytest.mark.parametrize("command", ["analyze", pytest.param("report", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_a_store_file_that_is_no_regular_file_is_one_line(case, command, tmp_path):
    """Before: a manifest that is /dev/zero was a MemoryError traceback (without a limit, the machine's OOM
    killer); a FIFO manifest or slices.parquet hung report and analyze."""
    store = _store(tmp_path / "s.store")
    rel, kind, said = SPECIAL[case]
    target = store / rel
    target.unlink()
    if kind == "zero":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "brackets":
        target.write_bytes(b"[" * 10**6)
    else:
        with open(target, "wb") as f:
            f.truncate(4 << 30)
    argv = ["analyze", store, "temporal"] if command == "analyze" else ["report", store]
    done = _child(*argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"xpuprof {command}: ") and said in lines[0] and str(target) in lines[0], lines


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_store_path_that_is_a_special_file_is_one_line(kind, tmp_path, capsys):
    path = tmp_path / "s.store"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    line = one_line(capsys, ["analyze", str(path), "temporal"])
    # analyze reads trace files as well as stores: the one input rule's line (regular files only)
    assert str(path) in line and ("FIFO" if kind == "fifo" else "character device") in line
    assert "not a regular file" in line


# ----------------------------------------------------------------------------- checksums
def _flip_a_bit_in_dur(store: Path, rank: int = 0) -> Path:
    """One bit flipped in a compressed page of ``slices.dur``: the first one, from the column chunk's start,
    that both pyarrow (not verifying page checksums) and DuckDB read without a word, as other numbers."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = store / f"rank={rank}" / "slices.parquet"
    md = pq.ParquetFile(f).metadata
    col = md.row_group(0).column(md.schema.to_arrow_schema().get_field_index("dur"))
    raw = f.read_bytes()
    want = pq.read_table(f).column("dur").to_pylist()
    sql = f"SELECT list(dur) FROM read_parquet('{f}')"
    for at in range(col.data_page_offset, col.data_page_offset + col.total_compressed_size):
        flipped = bytearray(raw)
        flipped[at] ^= 0x10
        f.write_bytes(bytes(flipped))
        try:
            if pq.read_table(f).column("dur").to_pylist() != want and \
                    sorted(duckdb.connect().execute(sql).fetchone()[0]) != sorted(want):
                return f
        except (pa.ArrowException, OSError, duckdb.Error):  # refused: not the silent kind
            pass
    raise AssertionError("no silent flip found")


@pytest.mark.parametrize("argv", [["report", "{s}"], ["report", "{s}", "--start", "0"], ["analyze", "{s}", "kernels"],
                                  ["analyze", "{s}", "temporal"]], ids=" ".join)
def test_a_flipped_bit_in_a_store_is_one_error(argv, tmp_path, capsys):
    """Before: ``report`` exited 0 with other totals (pyarrow and DuckDB decode a flipped page without a word)."""
    store = _store(tmp_path / "s.store", ranks=(0, 1), steps=3)
    argv = [a.format(s=store) for a in argv]
    assert main(argv) == 0
    capsys.readouterr()
    bad = _flip_a_bit_in_dur(store)
    line = one_line(capsys, argv)
    assert str(bad) in line and "checksum" in line, line


def test_page_checksums_are_written_for_other_parquet_readers(tmp_path):
    """Parquet's own page CRCs are written too (they cover page bodies, not page headers): of the flips in
    ``dur``'s column chunk that a reader checking nothing decodes into other numbers, pyarrow's verifying
    read refuses those in page bodies with a CRC error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = _store(tmp_path / "s.store", ranks=(0,), steps=3)
    f = store / "rank=0" / "slices.parquet"
    md = pq.ParquetFile(f).metadata
    col = md.row_group(0).column(md.schema.to_arrow_schema().get_field_index("dur"))
    raw = f.read_bytes()
    want = pq.ParquetFile(f).read(columns=["dur"]).column(0).to_pylist()
    caught = 0
    for at in range(col.data_page_offset, col.data_page_offset + col.total_compressed_size):
        flipped = bytearray(raw)
        flipped[at] ^= 0x10
        f.write_bytes(bytes(flipped))
        try:
            pq.ParquetFile(f, page_checksum_verification=True).read(columns=["dur"])
        except (pa.ArrowException, OSError) as exc:
            caught += "CRC" in str(exc)
    assert caught > 0


def test_a_store_written_before_checksums_still_reads(capsys):
    """tests/data/store_v1 was written before checksums were recorded: it reads as before."""
    old = REPO / "tests" / "data" / "store_v1" / "convert"
    assert main(["report", str(old), "--format", "json"]) == 0, capsys.readouterr().err


# ----------------------------------------------------------------------------- report summaries
@pytest.fixture
def summarized(tmp_path):
    """A store converted by `xpuprof convert`, which keeps each rank's report summary (report.json)."""
    from xpuprof.trace.write.chrome import write_chrome_trace

    traces = tmp_path / "traces"
    traces.mkdir()
    for r in (0, 1):
        b = synthetic_rank(r, steps=3)
        b.set_distributed_info({"rank": r, "world_size": 2})
        write_chrome_trace(b, traces / f"w.rank{r}.pt.trace.json")
    store = tmp_path / "s.store"
    assert main(["convert", str(traces), "-o", str(store)]) == 0
    assert (store / "rank=0" / "report.json").is_file()
    return store


def test_a_changed_report_summary_is_one_error(summarized, capsys):
    """``report STORE`` reads each rank's summary instead of its rows: a value changed in it was other totals."""
    assert main(["report", str(summarized)]) == 0
    f = summarized / "rank=1" / "report.json"
    text = f.read_text()
    data = json.loads(text)
    row = data["partial"][0]
    i = next(i for i, v in enumerate(row) if isinstance(v, int) and not isinstance(v, bool) and v > 1000)
    row[i] += 1 << 10  # one bit
    f.write_text(json.dumps(data, separators=(",", ":")))
    line = one_line(capsys, ["report", str(summarized)])
    assert str(f) in line and "checksum" in line


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_report_summary_that_is_no_regular_file_is_one_line(kind, summarized):
    """Before: a FIFO report.json hung ``report STORE``; one linked to /dev/zero filled memory."""
    f = summarized / "rank=0" / "report.json"
    f.unlink()
    os.mkfifo(f) if kind == "fifo" else f.symlink_to("/dev/zero")
    done = _child("report", summarized)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and str(f) in lines[0], done.stderr[-2000:]
    assert ("is a FIFO" if kind == "fifo" else "is a character device") in lines[0]
