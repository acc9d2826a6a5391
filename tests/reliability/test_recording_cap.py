"""The recording cap (issue 40 item 8): past it, host recording stops with a note in the trace and the
program goes on - never a MemoryError raised into the user's loop, never a lost trace."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import xpuprof
from xpuprof import diagnostics
from xpuprof.host import budget, recorder

REPO = Path(__file__).resolve().parents[2]
N = 60_000


def _user_annotations(path: Path) -> list[dict]:
    trace = json.loads(path.read_text())
    return trace, [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]


@pytest.mark.parametrize("rf", [xpuprof.record_function, recorder.PurePythonRecordFunction],
                         ids=["c", "pure-python"])
def test_past_the_cap_recording_stops_the_loop_goes_on_and_the_trace_says_so(rf, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(budget.ENV_MAX_RECORD, "256K")
    diagnostics.forget("recording-stopped")
    done = 0
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(N):
            with rf("step", {"i": i} if i % 5 == 0 else None):
                done += 1
        xpuprof.instant("after the loop")
    assert done == N
    trace, ranges = _user_annotations(prof.export_chrome_trace(tmp_path / "t.json"))
    note = trace["recording_stopped"]
    assert note["reason"] == "the recording cap was reached" and note["cap_bytes"] == 256 << 10
    assert note["setting"] == "XPUPROF_MAX_RECORD_BYTES" and 0 < note["bytes_recorded"] <= 256 << 10
    assert 0 < len(ranges) < N and len(ranges) + note["ranges_not_recorded"] == N
    assert note["instants_not_recorded"] == 1
    # what was recorded is the beginning, in order, up to the note's time
    ts = sorted(e["ts"] for e in ranges)
    assert ts[-1] <= note["ts"]
    assert sorted(e["args"]["i"] for e in ranges if "i" in e.get("args", {}))[:3] == [0, 5, 10]
    assert "recording stopped" in caplog.text and "XPUPROF_MAX_RECORD_BYTES" in caplog.text


def test_no_note_below_the_cap_and_zero_means_no_cap(tmp_path, monkeypatch):
    monkeypatch.setenv(budget.ENV_MAX_RECORD, "0")
    with xpuprof.profile(activities=["cpu"]) as prof:
        for _ in range(N):
            with xpuprof.record_function("step"):
                pass
    trace, ranges = _user_annotations(prof.export_chrome_trace(tmp_path / "t.json"))
    assert len(ranges) == N and "recording_stopped" not in trace


def test_the_next_profile_records_again(tmp_path, monkeypatch):
    monkeypatch.setenv(budget.ENV_MAX_RECORD, "128K")
    for cycle in range(2):
        with xpuprof.profile(activities=["cpu"]) as prof:
            for _ in range(N):
                with xpuprof.record_function("step"):
                    pass
        trace, ranges = _user_annotations(prof.export_chrome_trace(tmp_path / f"{cycle}.json"))
        assert trace["recording_stopped"]["ranges_not_recorded"] == N - len(ranges) > 0, cycle


def test_a_bad_setting_is_said_once_and_the_default_used(monkeypatch, caplog):
    monkeypatch.setenv(budget.ENV_MAX_RECORD, "lots")
    assert budget.max_record_bytes() == budget.default_max_bytes()
    assert "XPUPROF_MAX_RECORD_BYTES='lots' is not a size" in caplog.text
    for raw, value in (("64K", 64 << 10), ("3m", 3 << 20), ("1G", 1 << 30), ("0", 0), ("123", 123)):
        assert budget.parse_size(raw) == value
    for raw in ("-1", "1.5G", "", "G", "1e9"):
        assert budget.parse_size(raw) is None


def test_the_default_cap_is_a_quarter_of_what_an_address_space_limit_leaves():
    code = textwrap.dedent("""
        import resource
        from xpuprof.host import budget
        size = budget._proc_status()["VmSize"]
        resource.setrlimit(resource.RLIMIT_AS, (size + (400 << 20), resource.RLIM_INFINITY))
        print(budget.default_max_bytes())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert (400 << 20) // 4 - (16 << 20) <= int(out.stdout) <= (400 << 20) // 4


MEMORY_LIMITED = textwrap.dedent("""
    import resource, sys
    import numpy, orjson  # the program's own imports, before the limit
    import xpuprof

    def vm_size():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))

    limit = vm_size() + (256 << 20)  # 256 MiB more than the process maps now
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    n = int(sys.argv[2])
    done = 0
    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(n):
            with xpuprof.record_function("step"):
                done += 1
    print("loop done", done, flush=True)
    prof.export_chrome_trace(sys.argv[1])
    print("written", flush=True)
""")


@pytest.mark.slow
def test_a_memory_limited_program_finishes_its_work_and_writes_its_trace(tmp_path):
    """RLIMIT_AS 256 MiB above what the program maps: 4 M ranges would need ~200 MB of records and as much
    again to build the trace (before the cap: a MemoryError at stop, the trace lost). With the default cap
    (a quarter of what the limit leaves) recording stops, the loop ends, the trace is written."""
    script = tmp_path / "limited.py"
    script.write_text(MEMORY_LIMITED)
    n = 4_000_000
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "t.json"), str(n)], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"loop done {n}" in out.stdout and "written" in out.stdout
    trace, ranges = _user_annotations(tmp_path / "t.json")
    note = trace["recording_stopped"]
    assert note["reason"] == "the recording cap was reached"
    assert len(ranges) > 500_000 and len(ranges) + note["ranges_not_recorded"] == n


def test_the_cap_holds_without_the_c_extension():
    """The pure-Python fallback (no C extension built) counts its own storage against the same cap."""
    code = textwrap.dedent("""
        import sys, types, warnings, json
        sys.modules["xpuprof._native.hostrec"] = types.ModuleType("xpuprof._native.hostrec")  # not built
        warnings.simplefilter("ignore")
        import xpuprof
        from xpuprof.host import recorder
        assert not recorder.FAST_PATH
        with xpuprof.profile(activities=["cpu"]) as prof:
            for i in range(20000):
                with xpuprof.record_function("step"):
                    pass
        note = prof.builder.metadata["recording_stopped"]
        print(json.dumps(note))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO), XPUPROF_MAX_RECORD_BYTES="64K"))
    assert out.returncode == 0, out.stderr[-2000:]
    note = json.loads(out.stdout.strip().splitlines()[-1])
    assert note["reason"] == "the recording cap was reached" and 0 < note["ranges_not_recorded"] < 20000
