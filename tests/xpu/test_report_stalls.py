"""``xpuprof report --stalls`` (table, csv, json, html), the kernel report's resources table and
``xpuprof diff`` on stall-reason shares, over traces the XPU backend wrote from the PTI double."""
from __future__ import annotations

import csv
import ctypes
import io

import orjson
import pytest

from xpuprof.backends.base import ProcessWindow
from xpuprof.backends.xpu.activity_api import XpuptiActivityApi
from xpuprof.cli import main
from xpuprof.clock import now_ns
from xpuprof.config.options import ExperimentalConfig, ProfilerConfig
from xpuprof.trace.builder.builder import TraceBuilder
from xpuprof.trace.write.chrome import write_chrome_trace

from .conftest import ALL, UUID0

REASONS = ["Active", "ControlStall", "PipeStall", "SendStall", "DistStall", "SbidStall", "SyncStall",
           "InstrFetchStall", "OtherStall"]


@pytest.fixture
def stall_trace(pti_double, tmp_path):
    """A trace with EU stall samples (and a trace of the same run without them)."""
    pti_double.c.xpd_set_version(b"1.2.0")
    pti_double.c.pcs_double_sample.argtypes = [ctypes.c_size_t] * 3
    pti_double.c.pcs_double_sample.restype = ctypes.c_uint64
    api = XpuptiActivityApi(ALL, ProfilerConfig(experimental=ExperimentalConfig(stall_sampling=True)),
                            library=pti_double.lib, device_uuids=[UUID0])
    api.start()
    pti_double.workload_holding_gil(6)
    api.stop()
    b = TraceBuilder()
    api.process(b, ProcessWindow(api.start_ns - 1_000_000, now_ns()))
    return write_chrome_trace(b, tmp_path / "stalls.pt.trace.json")


def cli(capsys, *argv):
    rc = main(list(map(str, argv)))
    out = capsys.readouterr()
    return rc, out.out, out.err


def mix(pti_double, k):
    return [sum(pti_double.c.pcs_double_sample(k, i, r) for i in range(6)) for r in range(9)]


def test_stall_report_json_follows_the_report_schema(pti_double, stall_trace, capsys):
    rc, out, err = cli(capsys, "report", "--stalls", "--format", "json", stall_trace)
    assert rc == 0, err
    doc = orjson.loads(out)
    assert doc["schema"] == "xpuprof.report" and doc["version"] == 1
    assert [r["name"] for r in doc["reasons"]] == REASONS
    tables = doc["tables"]
    for t in tables.values():
        keys = {c["key"] for c in t["columns"]}
        assert all(set(row) <= keys for row in t["rows"]), t["title"]
    kernels = {r["kernel"]: r for r in tables["stall_kernels"]["rows"]}
    gemm = mix(pti_double, 0)
    assert kernels["gemm_kernel<float>"]["samples"] == sum(gemm)
    top = max(range(9), key=lambda r: gemm[r])
    assert kernels["gemm_kernel<float>"]["top_reason"] == REASONS[top]
    shares = {(r["kernel"], r["reason"]): r["share_pct"] for r in tables["stall_reasons"]["rows"]}
    assert shares[("gemm_kernel<float>", "SbidStall")] == pytest.approx(100 * gemm[5] / sum(gemm), abs=1e-3)
    lines = [r for r in tables["stall_lines"]["rows"] if r["kernel"] == "gemm_kernel<float>"]
    # instructions 0 and 1 share gemm.cpp:10, so that line holds both their samples
    first_two = sum(pti_double.c.pcs_double_sample(0, i, r) for i in (0, 1) for r in range(9))
    line10 = next(r for r in lines if r["location"] == "/src/kernels/gemm.cpp:10")
    assert line10["samples"] == first_two and line10["offsets"] == ["0x100", "0x110"]
    assert [r["samples"] for r in lines] == sorted((r["samples"] for r in lines), reverse=True)
    assert any(r["location"].startswith("+0x") and r["file"] is None for r in lines)  # no source: by offset


def test_stall_report_table_csv_and_html(stall_trace, capsys, tmp_path):
    rc, out, _ = cli(capsys, "report", "--stalls", "--lines", "2", stall_trace)
    assert rc == 0 and "EU stall samples" in out and "SbidStall" in out and "/src/kernels/relu.cpp:10" in out
    rc, out, _ = cli(capsys, "report", "--stalls", "--format", "csv", "--name", "relu", stall_trace)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["kernel"] for r in rows} == {"relu_kernel"}
    assert {r["row"] for r in rows} == {"reason", "line"}
    assert sum(float(r["share_pct"]) for r in rows if r["row"] == "reason") == pytest.approx(100.0)
    rc, _, err = cli(capsys, "report", "--stalls", "--format", "html", "-o", tmp_path / "s.html", stall_trace)
    page = (tmp_path / "s.html").read_text()
    assert rc == 0 and page.count('class="chart"') == 2 and "Stalled waiting on a software scoreboard" in page


def test_stall_report_without_samples_is_one_error_saying_how_to_record(tmp_path, capsys):
    b = TraceBuilder()
    b.set_metadata("xpu_stall_sampling_error", "EU stall samples not collected: stopping the collection failed")
    path = write_chrome_trace(b, tmp_path / "plain.pt.trace.json")
    rc, out, err = cli(capsys, "report", "--stalls", path)
    assert rc == 2 and out == ""
    assert "no EU stall samples" in err and "stall_sampling=True" in err and "stopping the collection failed" in err
    rc, _, err = cli(capsys, "report", "--stalls", "--start", "1", path)
    assert rc == 2 and "--start" in err and "no timestamps" in err


def test_diff_flags_a_stall_reason_whose_share_grew_past_the_threshold(stall_trace, tmp_path, capsys):
    data = orjson.loads(stall_trace.read_bytes())
    entry = next(k for k in data["xpu_stall_sampling"]["kernels"] if k["name"] == "relu_kernel")
    total = entry["samples"]
    before = entry["by_reason"]["SbidStall"] / total
    entry["by_reason"]["SbidStall"] += total  # SbidStall's share roughly doubles (+ about 43 points)
    entry["samples"] += total
    after = entry["by_reason"]["SbidStall"] / entry["samples"]
    b_path = tmp_path / "b.pt.trace.json"
    b_path.write_bytes(orjson.dumps(data))
    rc, out, _ = cli(capsys, "diff", "--format", "json", "--threshold", "10", stall_trace, b_path)
    assert rc == 1
    doc = orjson.loads(out)
    grew = [r for r in doc["stalls"]["rows"] if r["status"] == "grew"]
    assert [(r["kernel"], r["reason"]) for r in grew] == [("relu_kernel", "SbidStall")]
    assert grew[0]["delta_points"] == pytest.approx(100 * (after - before), abs=1e-2)
    assert doc["regressions"] == 0  # kernel times did not change: the stall share alone fails the diff
    rc, out, _ = cli(capsys, "diff", "--threshold", "50", stall_trace, b_path)
    assert rc == 0 and "0 grew" in out
    # the same comparison from `report --stalls --format json` documents
    docs = []
    for i, p in enumerate((stall_trace, b_path)):
        rc, out, _ = cli(capsys, "report", "--stalls", "--format", "json", p)
        (tmp_path / f"r{i}.json").write_text(out)
        docs.append(tmp_path / f"r{i}.json")
    rc, out, _ = cli(capsys, "diff", "--format", "json", "--threshold", "10", *docs)
    assert rc == 1 and orjson.loads(out)["stalls"]["grew"] == 1


def test_kernel_report_has_a_resources_table_for_xpu_traces(tmp_path, capsys):
    import numpy as np

    from xpuprof.activity import ActivityType

    b = TraceBuilder()
    b.add_slices(names=["gemm", "gemm", "axpy"], ts=np.array([1, 100, 200]) * 1000 + 10**15,
                 dur=np.array([50, 50, 20]) * 1000, pid=0, tid=7, cat=ActivityType.CONCURRENT_KERNEL)
    b.set_metadata("xpu_kernel_resources", {"kernels": [
        {"name": "gemm", "compiled": "AOT", "simd_width": 16, "slm_bytes": 65536, "private_bytes": 0,
         "spill_bytes": 256, "register_file_size": 256},
        {"name": "axpy", "compiled": "JIT", "simd_width": None, "slm_bytes": None}]})
    path = write_chrome_trace(b, tmp_path / "r.pt.trace.json")
    rc, out, _ = cli(capsys, "report", path)
    assert rc == 0 and "Kernel resources" in out and "AOT" in out and "65536" in out
    rc, out, _ = cli(capsys, "report", "--format", "json", path)
    table = orjson.loads(out)["tables"]["kernel_resources"]
    rows = {r["kernel"]: r for r in table["rows"]}
    assert rows["gemm"]["spill_bytes"] == 256 and rows["gemm"]["compiled"] == "AOT"
    assert "simd_width" not in rows["axpy"] and rows["axpy"]["compiled"] == "JIT"  # not reported: no value
    assert [c["key"] for c in table["columns"]][:2] == ["kernel", "simd_width"]
    rc, _, _ = cli(capsys, "report", "--format", "html", "-o", tmp_path / "k.html", path)
    assert 'id="kernel-resources"' in (tmp_path / "k.html").read_text()
