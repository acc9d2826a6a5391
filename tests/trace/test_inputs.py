"""One directory rule for every command (``trace.read.inputs``): a directory stands for its ``*.json`` and
``*.json.gz`` files, recursively; hidden entries, stores inside, symbolic links and other files are not read
and said in one line. ``report``, ``convert``, ``merge``, ``diff`` and ``analyze`` read the same files of a
directory."""
from __future__ import annotations

import json
import os

import pytest

from xpuprof.cli import main
from xpuprof.trace.read.inputs import InputsError, expand_inputs

EVENT = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5, "dur": 2, "pid": 1, "tid": 1}


def _trace(path, rank, name="gemm"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": [dict(EVENT, name=name)]}))
    return path


@pytest.fixture
def tree(tmp_path):
    """traces/ holding ranks at two depths, under two naming styles, and things that are not traces."""
    top = tmp_path / "traces"
    a = _trace(top / "a.pt.trace.json", 0)
    b = _trace(top / "quickstart" / "b.json", 1)  # a subdirectory, a plain .json name (HTA's and torch's)
    c = _trace(top / "quickstart" / "deeper" / "c.json", 2)
    (top / "notes.txt").write_text("not a trace")
    (top / ".hidden.json").write_text("{}")
    os.symlink(a, top / "link.json")
    (top / ".rank=0.tmp").mkdir()
    return top, [a, b, c]


def test_a_directory_is_its_json_files_recursively_and_says_what_it_skipped(tree):
    top, files = tree
    got = expand_inputs([top])
    assert got.traces == sorted(files) and got.stores == []
    (note,) = got.notes
    assert note.startswith(f"{top}: skipped 4") and "symbolic link" in note and "hidden" in note
    assert "notes.txt" in note


def test_files_named_are_read_as_given_and_a_missing_path_is_one_error(tmp_path, tree):
    top, files = tree
    odd = tmp_path / "odd.trace"
    odd.write_text("{}")
    assert expand_inputs([odd]).traces == [odd]
    with pytest.raises(InputsError, match="no such trace file or directory"):
        expand_inputs([tmp_path / "missing"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputsError, match="holds no trace files .*\\*.json.gz.*\\*.pftrace"):
        expand_inputs([empty])
    got = expand_inputs([tmp_path / "missing", top], strict=False)
    assert got.traces == sorted(files) and "no such trace file" in got.errors[0]


def test_report_reads_every_rank_of_the_directory(tree, capsys):
    top, _ = tree
    assert main(["report", str(top), "--format", "json", "--by-rank"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["ranks"] == [0, 1, 2] and len(doc["sources"]) == 3
    (line,) = out.err.splitlines()  # one line says what was not read, and why
    assert line.startswith(f"xpuprof report: {top}: skipped 4") and "symbolic link" in line


def test_convert_reads_the_same_files_recursively(tree, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    top, _ = tree
    assert main(["convert", str(top), "-o", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.name.startswith("rank=")) == \
        ["rank=0", "rank=1", "rank=2"]
    assert f"{top}: skipped 4" in err  # the one line on what was not read


def test_merge_reads_the_same_files(tree, tmp_path):
    top, _ = tree
    assert main(["merge", str(top), "-o", str(tmp_path / "m.merged.json")]) == 0
    merged = json.loads((tmp_path / "m.merged.json").read_text())
    assert merged["mergedRanks"]["ranks"] == [0, 1, 2]


def test_a_store_inside_a_directory_is_skipped_and_a_store_given_is_a_store(tree, tmp_path):
    pytest.importorskip("pyarrow")
    top, _ = tree
    store = top / "store"
    assert main(["convert", str(top / "a.pt.trace.json"), "-o", str(store)]) == 0
    got = expand_inputs([top])
    assert all(store not in p.parents for p in got.traces)
    assert "trace store" in got.notes[0]
    assert expand_inputs([store]).stores == [store]


def test_analyze_reads_the_same_files(tree, capsys):
    top, _ = tree
    assert main(["analyze", str(top), "temporal", "--format", "json"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err[0].startswith(f"xpuprof analyze: {top}: skipped 4") and "symbolic link" in err[0]
    assert any("ranks without GPU kernels" in ln and "0, 1, 2" in ln for ln in err), err  # every rank read


def test_each_trace_file_is_opened_once_whatever_its_format(tmp_path, monkeypatch):
    """``read_inputs`` tells a file's format from the first bytes its reader opens it with (1,000 small rank
    files were each opened twice: once to tell the format, once to read); a Perfetto protobuf file still reads."""
    from xpuprof.trace.read import inputs, source
    from xpuprof.trace.write.files import write_trace

    golden = os.path.join(os.path.dirname(__file__), "..", "data", "golden", "host.pt.trace.json")
    j = tmp_path / "w.rank0.pt.trace.json"
    j.write_bytes(open(golden, "rb").read())
    pf = write_trace(inputs.read_inputs([j]), tmp_path / "w.rank1.pftrace")
    opened = []
    real = source.TraceInput.__init__

    def counted(self, path, **kw):
        opened.append(os.path.basename(str(path)))
        real(self, path, **kw)

    monkeypatch.setattr(source.TraceInput, "__init__", counted)
    table = inputs.read_inputs([j, pf])
    assert opened.count(j.name) == 1
    assert [info.rank for info in table.traces] == [0, 1] and len(table.columns("slices")) > 0
    assert len(table.columns("slices", trace=1)) == len(table.columns("slices", trace=0))
