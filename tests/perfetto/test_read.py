"""Reading ``.pftrace`` back (issue 38 item 5): through the one reader entry a Perfetto trace gives the TraceTable
its JSON gives (every row, the rank table), so ``report``, ``diff``, ``merge`` and ``convert ... -o STORE`` read it
too, and ``report`` of a ``.pftrace`` equals ``report`` of the JSON in every field but ``sources``."""
from __future__ import annotations

import json
import shutil

import pytest

from corpus import CORPUS, GOLDEN, SNAPSHOTS, ids, snapshot

from xpuprof.cli import main
from xpuprof.trace.read.inputs import expand_inputs, read_file, read_inputs
from xpuprof.trace.read.kineto import read_trace
from xpuprof.trace.read.perfetto import read_perfetto
from xpuprof.trace.read.source import TraceLoadError, trace_format
from xpuprof.trace.table.compare import differences
from xpuprof.trace.write.chrome import write_chrome_trace
from xpuprof.trace.write.perfetto import write_perfetto


@pytest.mark.parametrize("path", CORPUS, ids=ids(CORPUS))
def test_a_pftrace_reads_back_as_the_table_of_its_json(path, tmp_path):
    table = read_trace(path)
    back = read_perfetto(write_perfetto(table, tmp_path / "t.pftrace"))
    assert differences(table, back, orders=False) == []


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_a_profiles_pftrace_reads_back_as_its_json_does(name, tmp_path):
    builder = snapshot(name)
    from_json = read_trace(write_chrome_trace(builder, tmp_path / "t.pt.trace.json"))
    from_pftrace = read_perfetto(write_perfetto(builder, tmp_path / "t.pftrace"))
    assert differences(from_json, from_pftrace, orders=False) == []


def _report(capsys, *args) -> dict:
    assert main(["report", *map(str, args), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc.pop("sources")
    return doc


REPORTED = [GOLDEN / "sim_xpu_metrics.pt.trace.json", GOLDEN / "telemetry.pt.trace.json", GOLDEN / "host.pt.trace.json",
            GOLDEN / "rocm_decoder.pt.trace.json", *[p for p in CORPUS if "amd_trace" in str(p)]]


@pytest.mark.parametrize("path", REPORTED, ids=ids(REPORTED))
@pytest.mark.parametrize("by_rank", [False, True])
def test_report_of_a_pftrace_equals_report_of_its_json(path, by_rank, tmp_path, capsys):
    out = tmp_path / "t.pftrace"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    extra = ["--by-rank"] if by_rank else []
    assert _report(capsys, out, *extra) == _report(capsys, path, *extra)


def test_the_directory_rule_reads_pftrace_files_and_the_format_is_told_by_content(tmp_path):
    top = tmp_path / "traces"
    (top / "sub").mkdir(parents=True)
    a = write_perfetto(read_trace(GOLDEN / "sim_rank0.pt.trace.json"), top / "r0.pftrace")
    b = write_perfetto(read_trace(GOLDEN / "sim_rank1.pt.trace.json"), top / "sub" / "r1.perfetto-trace")
    shutil.copy(GOLDEN / "host.pt.trace.json", top / "h.json")
    (top / "notes.txt").write_text("x")
    got = expand_inputs([top])
    assert got.traces == sorted([a, b, top / "h.json"])
    assert "not *.json, *.json.gz, *.pftrace or *.perfetto-trace" in got.notes[0]
    # a file is read as what its bytes are, whatever its name
    odd = tmp_path / "trace.bin"
    shutil.copy(a, odd)
    assert trace_format(odd) == "perfetto" and trace_format(top / "h.json") == "json"
    assert differences(read_file(odd), read_file(a)) == []
    table = read_inputs([top])
    assert sorted(info.rank for info in table.traces) == [0, 0, 1]


def test_json_with_a_leading_newline_is_json_not_protobuf(tmp_path):
    """A Perfetto trace opens with 0x0a, the newline a JSON document may start with (HTA's simple_add does)."""
    path = tmp_path / "t.json"
    path.write_bytes(b"\n" + (GOLDEN / "host.pt.trace.json").read_bytes())
    assert trace_format(path) == "json"
    assert len(read_file(path).slices) == len(read_trace(GOLDEN / "host.pt.trace.json").slices)


def test_a_broken_pftrace_is_one_error_naming_the_file_and_byte(tmp_path):
    good = write_perfetto(read_trace(GOLDEN / "sim_xpu_metrics.pt.trace.json"), tmp_path / "t.pftrace").read_bytes()
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(TraceLoadError, match=r"cut\.pftrace: not a Perfetto protobuf trace: .*at byte \d+"):
        read_perfetto(cut)
    junk = tmp_path / "junk.pftrace"
    junk.write_bytes(b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    with pytest.raises(TraceLoadError, match=r"junk\.pftrace: not a Perfetto protobuf trace"):
        read_perfetto(junk)
    assert main(["report", str(cut)]) == 2


def test_convert_reads_pftrace_into_a_store_equal_to_the_jsons(tmp_path, capsys):
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'xpuprof[scale]')")
    from xpuprof.trace.read.store_table import read_store

    src = GOLDEN / "sim_rank1.pt.trace.json"
    pf = tmp_path / "r1.pftrace"
    assert main(["convert", str(src), "-o", str(pf)]) == 0
    assert main(["convert", str(pf), "-o", str(tmp_path / "a.store")]) == 0
    assert main(["convert", str(src), "-o", str(tmp_path / "b.store")]) == 0
    capsys.readouterr()
    a, b = read_store(tmp_path / "a.store"), read_store(tmp_path / "b.store")
    assert differences(a, b, orders=False, compare_ranks=False) == []
    assert a.traces[0].rank == b.traces[0].rank == 1


def test_merge_and_diff_read_pftrace(tmp_path, capsys):
    paths = []
    for r in (0, 1):
        out = tmp_path / f"rank{r}.pftrace"
        assert main(["convert", str(GOLDEN / f"sim_rank{r}.pt.trace.json"), "-o", str(out)]) == 0
        paths.append(out)
    assert main(["merge", *map(str, paths), "-o", str(tmp_path / "pf.merged.json")]) == 0
    assert main(["merge", str(GOLDEN / "sim_rank0.pt.trace.json"), str(GOLDEN / "sim_rank1.pt.trace.json"),
                 "-o", str(tmp_path / "json.merged.json")]) == 0
    pf, js = read_file(tmp_path / "pf.merged.json"), read_file(tmp_path / "json.merged.json")
    assert differences(pf, js, orders=False, ignore_header=("traceName", "mergedRanks")) == []
    pf_ranks, js_ranks = pf.traces[0].header["mergedRanks"], js.traces[0].header["mergedRanks"]
    assert pf_ranks.pop("sources") == [str(p) for p in paths]  # the inputs differ, and only they
    js_ranks.pop("sources")
    assert pf_ranks == js_ranks
    capsys.readouterr()
    assert main(["diff", str(paths[0]), str(GOLDEN / "sim_rank0.pt.trace.json"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["regressions"] == 0 and len(doc["kernels"]) == 5
    assert all(k["status"] == "same" and k["a_ns"] == k["b_ns"] for k in doc["kernels"])


def test_convert_to_pftrace_takes_one_input(tmp_path, capsys):
    out = tmp_path / "x.pftrace"
    assert main(["convert", str(GOLDEN / "sim_rank0.pt.trace.json"), str(GOLDEN / "sim_rank1.pt.trace.json"),
                 "-o", str(out)]) == 2
    assert "holds one trace; 2 inputs given" in capsys.readouterr().err
    assert not out.exists()


def test_a_trace_without_the_writers_map_is_read_through_its_descriptors(tmp_path):
    """Another tool's Perfetto trace: threads by their pid and tid, other tracks by name."""
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                             reason="the perfetto wheel (Perfetto's Python protos) is not installed")
    trace = pb.Trace()

    def packet(**kw):
        p = trace.packet.add()
        p.trusted_packet_sequence_id = 7
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    p = packet()
    p.track_descriptor.uuid = 1
    p.track_descriptor.process.pid = 42
    p.track_descriptor.process.process_name = "app"
    p = packet()
    p.track_descriptor.uuid = 2
    p.track_descriptor.parent_uuid = 1
    p.track_descriptor.thread.pid = 42
    p.track_descriptor.thread.tid = 43
    p.track_descriptor.thread.thread_name = "worker"
    for ts, typ, name in ((1000, 1, "outer"), (1200, 1, "inner"), (1500, 2, None), (2000, 2, None)):
        p = packet(timestamp=ts)
        p.track_event.type = typ
        p.track_event.track_uuid = 2
        if name:
            p.track_event.name = name
            a = p.track_event.debug_annotations.add()
            a.name = "k"
            a.int_value = 5
    path = tmp_path / "other.pftrace"
    path.write_bytes(trace.SerializeToString())
    table = read_perfetto(path)
    s = table.slices
    rows = sorted(zip(s.where("pid"), s.where("tid"), s.ts.tolist(), s.dur.tolist(), s.text("name")))
    assert rows == [(42, 43, 1000, 1000, "outer"), (42, 43, 1200, 300, "inner")]
    assert {e["name"]: e["args"]["name"] for e in table.traces[0].metadata_events} == \
        {"process_name": "app", "thread_name": "worker"}
    assert [json.loads(s.args[i]) for i in range(2)] == [{"k": 5}, {"k": 5}]
