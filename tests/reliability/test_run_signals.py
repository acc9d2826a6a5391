"""SIGINT/SIGTERM sent to a real ``xpuprof run`` process at several points.

Each case waits for something observable (a marker file the workload writes after N iterations, or the
trace's temporary file appearing while it is written), polled with a bounded deadline, then signals.
Expected every time: no traceback, a valid trace of what was recorded, ``summary.jsonl`` written and
saying it was interrupted, the files named on stdout, exit status 128 + signum, no ``*.tmp`` left.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0

STEP_MODULE = """
import os
calls = 0
def step(marker, after):
    global calls
    calls += 1
    if calls == after:
        open(marker, "w").close()
"""


def _start(tmp_path, *, iterations: int, marker_after: int) -> tuple[subprocess.Popen, Path, Path]:
    (tmp_path / "sigstep.py").write_text(STEP_MODULE)
    marker = tmp_path / "marker"
    cfg = tmp_path / "sig.yaml"
    cfg.write_text(f"""
name: sig
workload: {{callable: "sigstep:step", kwargs: {{marker: "{marker}", after: {marker_after}}}}}
warmup: 0
iterations: {iterations}
activities: [user_annotation]
""")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "xpuprof", "run", str(cfg), "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, marker, out


def _wait_for(predicate, proc: subprocess.Popen, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"xpuprof run exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.0005)  # polling an observable condition, bounded by the deadline
    proc.kill()
    pytest.fail(f"no {what} within {DEADLINE_S} s")


def _read_stderr_until(proc: subprocess.Popen, text: str) -> str:
    """Read the child's stderr (raw fd, bounded deadline) until ``text`` appears; returns what was read."""
    import select

    fd, got = proc.stderr.fileno(), b""
    deadline = time.monotonic() + DEADLINE_S
    while text.encode() not in got:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            pytest.fail(f"{text!r} not on stderr within {DEADLINE_S} s: {got!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                pytest.fail(f"stderr closed before {text!r}: {got!r}")
            got += chunk
    return got.decode()


def _finish(proc: subprocess.Popen, stderr_before: str = "") -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=DEADLINE_S)
    return proc.returncode, out, stderr_before + err


def _check_common(out_dir: Path, rc: int, stdout: str, stderr: str, signum: int) -> dict:
    name = signal.Signals(signum).name
    assert rc == 128 + signum, (rc, stdout, stderr)
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
    assert not list(out_dir.rglob("*.tmp")), list(out_dir.rglob("*"))
    summary_path = out_dir / "summary.jsonl"
    summary = json.loads(summary_path.read_text())
    assert summary["interrupted"]["signal"] == name
    assert f"summary: {summary_path}" in stdout
    assert f"stopped by {name}" in stdout
    return summary


def _ranges(trace: Path) -> tuple[dict, list[dict]]:
    raw = trace.read_bytes()
    data = json.loads(raw)
    assert orjson.loads(raw) == data
    return data, [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "user_annotation"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_the_workload_writes_the_recording_marked_interrupted(tmp_path, signum):
    proc, marker, out = _start(tmp_path, iterations=10_000_000, marker_after=2_000)
    _wait_for(marker.exists, proc, "the workload's 2000th iteration")
    proc.send_signal(signum)
    rc, stdout, stderr = _finish(proc)
    summary = _check_common(out, rc, stdout, stderr, signum)
    assert summary["interrupted"]["during"] == "recording"
    (trace,) = out.glob("*.pt.trace.json")
    assert f"trace: {trace}" in stdout
    data, ranges = _ranges(trace)
    assert data["interrupted"] == signal.Signals(signum).name
    assert len(ranges) >= 2_000  # everything recorded before the signal is in the trace
    assert sorted(r["args"]["iteration"] for r in ranges) == list(range(len(ranges)))
    (point,) = summary["points"]
    assert point["traces"] == [str(trace)] and point["interrupted"] == signal.Signals(signum).name
    assert point["iteration_time"]["count"] in (len(ranges), len(ranges) - 1)  # the cut one is not timed


def test_sigterm_during_the_trace_write_finishes_the_write(tmp_path):
    n = 60_000
    proc, _marker, out = _start(tmp_path, iterations=n, marker_after=0)
    _wait_for(lambda: list(out.glob("*.pt.trace.json.*.tmp")), proc, "the trace's temporary file")
    proc.send_signal(signal.SIGTERM)
    rc, stdout, stderr = _finish(proc)
    summary = _check_common(out, rc, stdout, stderr, signal.SIGTERM)
    assert summary["interrupted"]["during"] == "writing a trace"
    (trace,) = out.glob("*.pt.trace.json")
    data, ranges = _ranges(trace)
    assert len(ranges) == n  # the cycle had ended: its whole trace is written, not marked interrupted
    assert "interrupted" not in data


def test_second_signal_during_the_write_abandons_it_and_leaves_no_temp_file(tmp_path):
    proc, _marker, out = _start(tmp_path, iterations=60_000, marker_after=0)
    _wait_for(lambda: list(out.glob("*.pt.trace.json.*.tmp")), proc, "the trace's temporary file")
    proc.send_signal(signal.SIGINT)
    # Signals of one kind coalesce until handled: send the second after the first was seen.
    seen = _read_stderr_until(proc, "SIGINT received")
    proc.send_signal(signal.SIGINT)
    rc, stdout, stderr = _finish(proc, seen)
    summary = _check_common(out, rc, stdout, stderr, signal.SIGINT)
    (point,) = summary["points"]
    assert "abandoned on a second SIGINT" in point["error"]
    assert "abandoning" in stderr
    assert all(t in stdout for t in point["traces"])
    for trace in point["traces"]:  # the write may have finished between the two signals: then it is whole
        _ranges(Path(trace))


def test_signal_while_building_the_workload_stops_before_any_trace(tmp_path):
    (tmp_path / "slowbuild.py").write_text(
        "import os, sys, time\nopen(os.environ['XPUPROF_TEST_MARKER'], 'w').close()\n"
        "import threading\nthreading.Event().wait(120)\ndef step():\n    pass\n")
    marker = tmp_path / "importing"
    cfg = tmp_path / "build.yaml"
    cfg.write_text('name: b\nworkload: {callable: "slowbuild:step"}\niterations: 3\nactivities: [user_annotation]\n')
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XPUPROF_TEST_MARKER=str(marker))
    proc = subprocess.Popen([sys.executable, "-m", "xpuprof", "run", str(cfg), "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for(marker.exists, proc, "the workload module's import")
    proc.send_signal(signal.SIGTERM)
    rc, stdout, stderr = _finish(proc)
    summary = _check_common(out, rc, stdout, stderr, signal.SIGTERM)
    assert summary["interrupted"]["during"] == "building the workload"
    assert not list(out.glob("*.pt.trace.json*"))


def test_run_called_from_a_thread_leaves_signal_handlers_alone(tmp_path):
    """Only the main thread may install handlers: main(["run", ...]) from a thread must still run."""
    import threading

    from xpuprof.cli import main

    cfg = tmp_path / "t.yaml"
    cfg.write_text("workload: {builtin: gemm, kwargs: {n: 8}}\nwarmup: 0\niterations: 2\nactivities: [user_annotation]\n")
    before = signal.getsignal(signal.SIGTERM)
    got = []
    t = threading.Thread(target=lambda: got.append(main(["run", str(cfg), "--out", str(tmp_path / "o"),
                                                         "--no-progress"])))
    t.start()
    t.join()
    assert got == [0] and signal.getsignal(signal.SIGTERM) is before
    assert json.loads((tmp_path / "o" / "summary.jsonl").read_text())["interrupted"] is None


def test_signal_during_the_last_trace_write_starts_no_further_repeat(tmp_path):
    (tmp_path / "sigstep.py").write_text(STEP_MODULE)
    cfg = tmp_path / "rep.yaml"
    cfg.write_text(f'name: sig\nworkload: {{callable: "sigstep:step", kwargs: {{marker: "{tmp_path / "m"}", after: 0}}}}\n'
                   "warmup: 0\niterations: 60000\nrepeats: 3\nactivities: [user_annotation]\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "xpuprof", "run", str(cfg), "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _wait_for(lambda: list(out.glob("*.pt.trace.json.*.tmp")), proc, "repeat 1's temporary trace file")
    proc.send_signal(signal.SIGTERM)
    rc, stdout, stderr = _finish(proc)
    summary = _check_common(out, rc, stdout, stderr, signal.SIGTERM)
    (point,) = summary["points"]
    (trace,) = out.glob("*.pt.trace.json")  # repeat 1 only, whole; repeat 2 never started
    assert point["traces"] == [str(trace)] and point["iteration_time"]["count"] == 60_000
    _data, ranges = _ranges(trace)
    assert len(ranges) == 60_000


def test_signal_while_building_the_trace_marks_the_trace_and_the_point(tmp_path, capsys):
    """A signal that lands after the last iteration, while the trace is built (nothing to cut there),
    was only in the run summary: the trace and the point said "interrupted": None. Delivered for real
    (os.kill of this process) from a backend's process(), which runs while the trace is built."""
    from xpuprof.activity import ActivityType
    from xpuprof.backends import registry
    from xpuprof.backends.base import Backend, ProbeResult, Session
    from xpuprof.cli import main

    class _SignalsWhileProcessing(Session):
        def start(self):
            pass

        def stop(self):
            pass

        def process(self, builder, window):
            os.kill(os.getpid(), signal.SIGTERM)  # handled by xpuprof run's guard in this (main) thread

    class _Backend(Backend):
        name = "sigbuild"

        @classmethod
        def probe(cls):
            return ProbeResult.ok()

        @classmethod
        def supported_activities(cls):
            return frozenset({ActivityType.CONCURRENT_KERNEL})

        def configure(self, types, config):
            return _SignalsWhileProcessing()

    (tmp_path / "sigstep.py").write_text(STEP_MODULE)
    cfg = tmp_path / "b.yaml"
    cfg.write_text(f'name: sig\nworkload: {{callable: "sigstep:step", kwargs: {{marker: "{tmp_path / "m"}", '
                   'after: 0}}\nwarmup: 0\niterations: 5\nrepeats: 2\nactivities: [user_annotation, kernel]\n'
                   "backends: [sigbuild]\n")
    out = tmp_path / "out"
    registry.register(_Backend, replace=True)
    try:
        sys.path.insert(0, str(tmp_path))
        rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
    finally:
        sys.path.remove(str(tmp_path))
        registry.unregister("sigbuild")
    captured = capsys.readouterr()
    assert rc == 128 + signal.SIGTERM, captured.err
    summary = json.loads((out / "summary.jsonl").read_text())
    assert summary["interrupted"] == {"signal": "SIGTERM", "during": "building a trace"}
    (point,) = summary["points"]
    assert point["interrupted"] == "SIGTERM"
    (trace,) = point["traces"]  # repeat 1 only: no further repeat starts
    data, ranges = _ranges(Path(trace))
    assert data["interrupted"] == "SIGTERM" and len(ranges) == 5
