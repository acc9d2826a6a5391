"""A Perfetto protobuf trace wherever a trace path is accepted (issue 38 item 3): ``prof.export_perfetto``, a
``.pftrace`` path to ``export_chrome_trace``, ``trace_handler(format="perfetto")``, YAML ``output.format:
perfetto``, on-demand requests whose ``ACTIVITIES_LOG_FILE`` ends in ``.pftrace`` (``xpuprof exec --format
perfetto``: tests/perfetto/test_exec_format.py); each the same events as the JSON the same profile gives."""
from __future__ import annotations

import sys

import pytest

from xpuprof import profile, record_function
from xpuprof.cli import main
from xpuprof.profiler import trace_file_name, trace_handler
from xpuprof.trace.read.inputs import read_file
from xpuprof.trace.read.source import trace_format
from xpuprof.trace.table.compare import differences


def _profile(**kw):
    with profile(backends=["sim"], activities=["cpu", "xpu"], **kw) as prof:
        for i in range(3):
            with record_function(f"step{i}", {"i": i}):
                pass
    return prof


def test_export_perfetto_and_a_pftrace_path_write_the_jsons_events(tmp_path):
    prof = _profile()
    a = prof.export_perfetto(tmp_path / "a.trace")  # whatever the name: protobuf
    b = prof.export_chrome_trace(tmp_path / "b.pftrace")  # a .pftrace path: protobuf
    c = prof.export_chrome_trace(tmp_path / "c.perfetto-trace")
    j = prof.export_chrome_trace(tmp_path / "j.json")
    assert [trace_format(p) for p in (a, b, c, j)] == ["perfetto", "perfetto", "perfetto", "json"]
    assert prof.last_trace_path == j
    want = read_file(j)
    assert len(want.slices) > 10 and len(want.flows) > 0
    for p in (a, b, c):
        assert differences(read_file(p), want, orders=False, ignore_header=("traceName",)) == []


def test_trace_handler_writes_pftrace_named_by_the_one_rule(tmp_path):
    prof = _profile(on_trace_ready=trace_handler(tmp_path, worker_name="w", format="perfetto"))
    (path,) = tmp_path.glob("*")
    assert path.name.startswith("w.") and path.name.endswith(".pftrace") and path == prof.last_trace_path
    assert trace_format(path) == "perfetto"
    assert trace_file_name("w", ts_ns=5, format="perfetto") == "w.5.pftrace"
    assert trace_file_name("w", ts_ns=5, use_gzip=True) == "w.5.pt.trace.json.gz"
    with pytest.raises(ValueError, match="not gzip-compressed"):
        trace_handler(tmp_path, use_gzip=True, format="perfetto")
    with pytest.raises(ValueError, match="unknown trace format 'pb'; valid: json, perfetto"):
        trace_handler(tmp_path, format="pb")


def test_yaml_output_format_perfetto(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workload: {builtin: gemm, library: numpy, kwargs: {n: 8}}\niterations: 2\nbackends: [sim]\n"
                   "activities: [user_annotation, kernel]\noutput: {format: perfetto}\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    (trace,) = (tmp_path / "o").glob("*.pftrace")
    assert trace_format(trace) == "perfetto"
    assert len(read_file(trace).slices) > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: {builtin: gemm}\noutput: {format: perfetto, compression: gzip}\n")
    capsys.readouterr()
    assert main(["run", str(bad), "--out", str(tmp_path / "o2"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "output.compression" in err and "perfetto" in err


def test_an_on_demand_request_naming_a_pftrace_gets_one(tmp_path, monkeypatch):
    from xpuprof.ondemand import agent as agent_mod
    from xpuprof.ondemand.request import from_kineto_text, log_file_for_pid

    assert log_file_for_pid("/d/job.pftrace", 7) == "/d/job_7.pftrace"
    assert log_file_for_pid("/d/job.perfetto-trace", 7) == "/d/job_7.perfetto-trace"
    monkeypatch.setenv("KINETO_ONDEMAND_TRACE_DIR", str(tmp_path))
    request = from_kineto_text(f"ACTIVITIES_LOG_FILE={tmp_path}/job.pftrace\nACTIVITIES_DURATION_MSECS=30\n"
                               "ACTIVITY_TYPES=cpu_op\nREQUEST_TRACE_ID=pf")
    ag = agent_mod.Agent()
    assert ag.submit(request) == agent_mod.STARTED
    capture = ag.active()
    assert capture.done.wait(60) and capture.error is None
    assert capture.path.name.endswith(".pftrace") and trace_format(capture.path) == "perfetto"
    assert read_file(capture.path).traces[0].header["ondemand"]["trace_id"] == "pf"


def test_without_its_c_part_the_writer_says_so(tmp_path, monkeypatch):
    prof = _profile()
    monkeypatch.setitem(sys.modules, "xpuprof._native.pfenc", None)
    with pytest.raises(RuntimeError, match=r"xpuprof\._native\.pfenc .*needed for writing a Perfetto protobuf trace"):
        prof.export_perfetto(tmp_path / "x.pftrace")
    assert not (tmp_path / "x.pftrace").exists()


def test_without_its_c_part_the_reader_says_so(tmp_path, monkeypatch):
    from xpuprof.trace.read.source import TraceLoadError

    path = _profile().export_perfetto(tmp_path / "x.pftrace")
    monkeypatch.setitem(sys.modules, "xpuprof._native.pfdec", None)
    with pytest.raises(TraceLoadError, match=r"xpuprof\._native\.pfdec .*needed for reading a Perfetto protobuf trace"):
        read_file(path)
