"""The golden corpus: Chrome JSON from every producer, byte for byte as main's writer wrote it.

Each snapshot in ``tests/data/golden`` is what one producer put into a TraceBuilder (``capture.py`` says
how to capture them again); each ``.pt.trace.json`` beside it is what the writer made of it when the
corpus was captured. Here every snapshot is written again - on the writer's threads, on one thread, through
the generic (dict) path, gzip-compressed - and must give those bytes exactly; the merged view of two
ranks is merged again from the rank traces.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import capture  # noqa: E402
import snapshot  # noqa: E402

from xpuprof.clock import BASE_TIME_NS  # noqa: E402
from xpuprof.trace.write.chrome import write_chrome_trace  # noqa: E402

DATA = capture.DATA
NAMES = sorted(p.name[:-len(".snap.npz")] for p in DATA.glob("*.snap.npz"))


def captured_base(name: str) -> int:
    with np.load(DATA / f"{name}.snap.npz") as z:
        return json.loads(z["manifest"].tobytes())["base_time_ns"]


def golden(name: str, file: str | None = None) -> bytes:
    """The golden bytes with the capture's base time replaced by this process's (the only difference a
    later day makes: the relative times in the file stay as captured)."""
    data = (DATA / (file or f"{name}.pt.trace.json")).read_bytes()
    old = b'"baseTimeNanoseconds": %d' % captured_base(name)
    assert data.count(old) == 1
    return data.replace(old, b'"baseTimeNanoseconds": %d' % BASE_TIME_NS)


def load(name: str):
    return snapshot.load(DATA / f"{name}.snap.npz", BASE_TIME_NS)


def test_the_corpus_covers_every_producer():
    assert set(NAMES) == set(capture.PRODUCERS), "capture.py and tests/data/golden disagree: run capture.py"
    assert (DATA / f"{capture.MERGED}.json").is_file()
    total = sum(p.stat().st_size for p in DATA.iterdir())
    assert total < 1 << 20, f"the golden corpus is {total:,} bytes: keep it small"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["threads", "one thread", "generic"])
def test_chrome_json_is_byte_identical_to_main(name, how, tmp_path):
    kw = {"threads": 1} if how == "one thread" else {"columnar": False} if how == "generic" else {}
    path = write_chrome_trace(load(name), tmp_path / "t.pt.trace.json",
                              trace_name=capture.TRACE_NAME.format(name=name), **kw)
    assert path.read_bytes() == golden(name)


def test_gzip_holds_the_same_bytes(tmp_path):
    name = capture.GZIPPED
    path = write_chrome_trace(load(name), tmp_path / "t.pt.trace.json.gz", trace_name=capture.TRACE_NAME.format(name=name))
    assert gzip.decompress(path.read_bytes()) == golden(name)


def test_merge_of_two_ranks_is_mains_merged_view(tmp_path):
    """The merged view, now written by the Chrome writer from the merged TraceTable, is main's document: every
    top-level key and every event, in order, with equal values (the bytes differ only in the writer's spelling:
    times with exactly 3 decimals as in the rank traces, typed args first), and it reads as an equal table."""
    from xpuprof.trace.read.kineto import read_trace
    from xpuprof.trace.table.compare import differences

    src = tmp_path / "src"
    src.mkdir()
    for r in (0, 1):
        (src / f"sim_rank{r}.pt.trace.json").write_bytes(golden(f"sim_rank{r}"))
    got = capture.write_merged(src, into=tmp_path)
    mains = DATA / f"{capture.MERGED}.json"
    assert json.loads(got.read_bytes()) == json.loads(mains.read_bytes())
    assert differences(read_trace(got), read_trace(mains)) == []
    assert b'"dur":5.000,' in got.read_bytes()  # the writer's times, as in the rank traces (main wrote 5.0)


@pytest.mark.parametrize("name", NAMES)
def test_the_writer_reads_a_frozen_table_byte_for_byte(name, tmp_path):
    table = load(name).freeze()  # what the profiler hands the writers at stop
    path = write_chrome_trace(table, tmp_path / "t.pt.trace.json", trace_name=capture.TRACE_NAME.format(name=name))
    assert path.read_bytes() == golden(name)


@pytest.mark.parametrize("name", NAMES)
def test_a_table_read_from_json_is_written_back_as_the_same_trace(name, tmp_path):
    from xpuprof.trace.read.kineto import read_trace
    from xpuprof.trace.table.compare import differences

    table = read_trace(DATA / f"{name}.pt.trace.json")
    path = write_chrome_trace(table, tmp_path / "again.json")
    assert differences(table, read_trace(path)) == []
