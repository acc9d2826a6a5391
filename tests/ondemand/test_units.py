"""The parts, each against the facts of Kineto's and dynolog's code: datagram layout, ancestor pids, job id,
request semantics (Kineto's file names, start iterations), confined trace files, the main-thread runner,
and iterations counted as torch's KinetoStepTracker counts them."""
from __future__ import annotations

import json
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import threading

import pytest

from xpuprof.ondemand import fabric, mainthread, tracefile, trigger
from xpuprof.ondemand.capture import start_iteration_for
from xpuprof.ondemand.request import CaptureRequest, RequestError, from_kineto_text, log_file_for_pid
from xpuprof.config.options import ProfilerConfig


# ----------------------------------------------------------------------------- fabric
def test_request_datagram_layout_is_dynologs():
    raw = fabric.encode_request(fabric.CONFIG_ACTIVITIES, [100, 50, 7], 1234)
    size, kind = struct.unpack_from("@N32s", raw)
    assert len(raw) == 40 + 16 + 12 and size == 28 and kind.rstrip(b"\0") == b"req"
    assert struct.unpack_from("@iiq3i", raw, 40) == (2, 3, 1234, 100, 50, 7)
    assert fabric.decode(raw) == ("req", raw[40:])
    assert fabric.decode_request(raw[40:]) == (2, [100, 50, 7], 1234)
    with pytest.raises(ValueError, match="says 3 pids"):
        fabric.decode_request(raw[40:-4])
    with pytest.raises(ValueError, match="header says"):
        fabric.decode(raw[:-1])


def test_addresses_as_dynolog_builds_them(tmp_path):
    assert fabric.address("dynolog") == "\0dynolog\0"  # the trailing NUL is part of the abstract name
    assert fabric.address("dynolog", "/d") == "/d/dynolog"
    assert fabric.name_of("\0dynoconfigclientX\0") == "dynoconfigclientX"
    assert fabric.name_of("/d/dynolog", "/d") == "dynolog" and fabric.name_of("/e/dynolog", "/d") == ""
    with pytest.raises(fabric.FabricError, match="too long"):
        fabric.address("dynoconfigclient" + "x" * 36, "/" + "d" * 80)


def test_ancestor_pids_as_kineto_collects_them():
    pids = fabric.ancestor_pids()
    assert pids[0] == os.getpid() and pids[1] == os.getppid()
    assert 1 not in pids and len(pids) <= 11
    # a comm with spaces and parentheses does not break the parse (Kineto's fscanf would)
    code = "import os, sys; sys.path.insert(0, sys.argv[1]); from xpuprof.ondemand import fabric; " \
           "print(fabric.ancestor_pids()[:2] == [os.getpid(), os.getppid()])"
    renamed = os.path.join(os.path.dirname(sys.executable), "python")
    proc = subprocess.run(["bash", "-c", 'exec -a "odd (name) x" "$0" "$@"', renamed, "-c", code,
                           os.path.dirname(os.path.dirname(fabric.__file__)) + "/.."], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == "True", proc.stderr


@pytest.mark.parametrize("value,expected", [(None, 0), ("4242", 4242), ("  77abc", 77), ("abc", 0), ("-3", -3),
                                            ("99999999999999999999", (1 << 63) - 1)])
def test_job_id_reads_slurm_job_id_as_strtoll(value, expected):
    env = {} if value is None else {"SLURM_JOB_ID": value}
    assert fabric.job_id(env) == expected


def test_sender_trust_is_root_or_own_user():
    own = os.getuid()
    assert fabric.trusted_sender(fabric.Credentials(1, 0, 0), own)
    assert fabric.trusted_sender(fabric.Credentials(1, own, own), own)
    assert not fabric.trusted_sender(fabric.Credentials(1, own + 1, 0), own)
    assert not fabric.trusted_sender(None, own)


# ----------------------------------------------------------------------------- requests
@pytest.mark.parametrize("given,written", [("/tmp/t.json", "/tmp/t_42.json"),
                                           ("/tmp/t.pt.trace.json", "/tmp/t_42.pt.trace.json"),
                                           ("/tmp/t.json.gz", "/tmp/t_42.json.gz"),
                                           ("/tmp/a.json.d/t.json", "/tmp/a_42.json.d/t.json"),
                                           ("/tmp/trace", "/tmp/trace_42.json")])
def test_log_file_names_follow_kineto(given, written):
    assert log_file_for_pid(given, 42) == written


def test_a_dyno_gputrace_request(monkeypatch):
    monkeypatch.setenv("KINETO_ONDEMAND_TRACE_DIR", "/tmp")
    text = ("ACTIVITIES_LOG_FILE=/tmp/x.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=750\n"
            "PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_WITH_STACK=true\nPROFILE_WITH_FLOPS=false\n"
            "PROFILE_WITH_MODULES=false\n    REQUEST_TRACE_ID=123\n")
    req = from_kineto_text(text, pid=9)
    assert (req.by_iterations, req.duration_ms, req.start_time_ms, req.trace_id) == (False, 750, None, "123")
    assert req.log_file == "/tmp/x_9.json" and req.notes == {}
    assert req.config.record_shapes and req.config.with_stack and req.config.trace_id == "123"
    it = from_kineto_text("PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=100\nACTIVITIES_ITERATIONS=5",
                          pid=9)
    assert (it.by_iterations, it.iterations, it.roundup) == (True, 5, 100)
    # no ACTIVITIES_LOG_FILE: the project's one naming rule, <host>_<pid>.<ts>.pt.trace.json (issue 39)
    assert re.fullmatch(rf"/tmp/{re.escape(socket.gethostname())}_9\.\d+\.pt\.trace\.json", it.log_file)
    sent = trigger.gputrace_config(log_file="/tmp/m.json", profile_memory=True)  # xpuprof trigger --profile-memory
    assert from_kineto_text(sent, pid=9).config.profile_memory
    assert not from_kineto_text(trigger.gputrace_config(log_file="/tmp/m.json"), pid=9).config.profile_memory


def test_what_cannot_be_honoured_is_noted_and_what_cannot_run_is_refused(monkeypatch):
    monkeypatch.setenv("KINETO_ONDEMAND_TRACE_DIR", "/tmp")
    req = from_kineto_text("ACTIVITIES_LOG_FILE=/home/u/t.json\nPROFILE_PROFILE_MEMORY=true\nSOME_NEW_KEY=1\n"
                           "ACTIVITIES_ITERATIONS=4", pid=5)
    assert re.fullmatch(r"/tmp/.*_5\.\d+\.pt\.trace\.json", req.log_file)
    assert "/home/u/t.json" in req.notes["ACTIVITIES_LOG_FILE"] and req.log_file in req.notes["ACTIVITIES_LOG_FILE"]
    assert "SOME_NEW_KEY" in req.notes["unknown keys"]
    assert req.config.profile_memory and "PROFILE_PROFILE_MEMORY" not in req.notes  # torch's [memory] events
    assert not req.by_iterations and "duration-based" in req.notes["ACTIVITIES_ITERATIONS"]
    for text, fact in (("ACTIVITIES_DURATION_MSECS=x", "ACTIVITIES_DURATION_MSECS"),
                       ("PROFILE_MEMORY=true", "memory snapshot"), ("ACTIVITIES_ENABLED=false", "no activity"),
                       ("ACTIVITIES_DURATION_MSECS=0", "at least 1 ms"), ("PROFILE_START_TIME=1000", "10 s"),
                       ("A=B=C", "exactly one '='")):
        with pytest.raises(RequestError, match=fact):
            from_kineto_text(text)


@pytest.mark.parametrize("start,roundup,warmup,current,expected", [
    (0, 1, 0, 9, 10),      # dyno's default: the next iteration
    (0, 100, 0, 9, 100),   # rounded up to the next multiple
    (0, 100, 0, 99, 100),  # exactly on a multiple
    (0, 100, 5, 9, 100),   # warm-up iterations before it
    (500, -1, 0, 9, 500),  # a start still ahead is kept
    (5, -1, 0, 9, 10),     # a start already past: from now
    (0, -1, 3, 9, 13),     # ... plus the warm-up iterations
])
def test_start_iteration_as_kineto_decides_it(start, roundup, warmup, current, expected):
    req = CaptureRequest(config=ProfilerConfig(), source="daemon", by_iterations=True, start_iteration=start,
                         roundup=roundup, warmup_iterations=warmup, iterations=3)
    assert start_iteration_for(req, current) == expected


# ----------------------------------------------------------------------------- trace files
class _FakeProfile:
    """What tracefile reads from a finished profile: its trace and its category choice."""

    def __init__(self):
        from xpuprof.trace.builder.builder import TraceBuilder

        self.builder = TraceBuilder()
        self.builder.set_window(1_000_000_000, 2_000_000_000)
        self.builder.flush()
        self.config = ProfilerConfig()


def test_confined_trace_files(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    prof = _FakeProfile()
    out = tracefile.write_confined(prof, f"{allowed}/sub/dir/t_1.json", str(allowed))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and stat.S_IMODE(out.parent.stat().st_mode) == 0o700
    assert json.loads(out.read_text())["traceName"] == str(out)
    tracefile.write_confined(prof, str(out), str(allowed))  # our own earlier trace is replaced
    assert sorted(p.name for p in out.parent.iterdir()) == ["t_1.json"]  # no staging left behind
    (allowed / "link").symlink_to(tmp_path)
    with pytest.raises(tracefile.TraceFileError, match="symbolic link"):
        tracefile.write_confined(prof, f"{allowed}/link/t_1.json", str(allowed))
    (allowed / "victim").write_text("keep")
    (allowed / "t_2.json").symlink_to(allowed / "victim")
    with pytest.raises(tracefile.TraceFileError, match="symbolic link"):
        tracefile.write_confined(prof, f"{allowed}/t_2.json", str(allowed))
    assert (allowed / "victim").read_text() == "keep"
    (allowed / "t_3.json").mkdir()
    with pytest.raises(tracefile.TraceFileError, match="not a regular file"):
        tracefile.write_confined(prof, f"{allowed}/t_3.json", str(allowed))
    for bad in (f"{tmp_path}/elsewhere.json", f"{allowed}/../x.json"):
        with pytest.raises(tracefile.TraceFileError, match="must lie under"):
            tracefile.write_confined(prof, bad, str(allowed))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_of_another_user_on_the_path_is_refused(tmp_path):
    allowed = tmp_path / "allowed"
    (allowed / "theirs").mkdir(parents=True)
    os.chown(allowed / "theirs", 54321, 54321)
    with pytest.raises(tracefile.TraceFileError, match="belongs to uid 54321"):
        tracefile.write_confined(_FakeProfile(), f"{allowed}/theirs/t.json", str(allowed))
    (allowed / "t.json").write_text("theirs")
    os.chown(allowed / "t.json", 54321, 54321)
    with pytest.raises(tracefile.TraceFileError, match="belongs to uid 54321"):
        tracefile.write_confined(_FakeProfile(), f"{allowed}/t.json", str(allowed))
    assert (allowed / "t.json").read_text() == "theirs"


# ----------------------------------------------------------------------------- main-thread runner
def test_main_thread_runner_runs_on_the_main_thread_and_cancels_when_it_cannot():
    result = {}
    first_done, go = threading.Event(), threading.Event()

    def worker():
        result["ran_on"] = mainthread.run(lambda: threading.current_thread().name, 10.0)
        first_done.set()
        go.wait(10)
        try:
            mainthread.run(lambda: result.setdefault("late", True), 0.2)
        except mainthread.MainThreadTimeout as exc:
            result["timeout"] = str(exc)

    t = threading.Thread(target=worker)
    t.start()
    assert mainthread.wait_serving(first_done, 10.0)  # the main thread runs the first call while it waits
    go.set()
    t.join(10)  # blocked in C, not running bytecode: the second call cannot run, and is cancelled
    assert result["ran_on"] == "MainThread" and "within 0.2 s" in result["timeout"]
    mainthread.wait_serving(threading.Event(), 0.01)  # the queue drained: a cancelled call never runs
    assert "late" not in result


# ----------------------------------------------------------------------------- iterations
STEPS = textwrap.dedent("""
    import json, os
    os.environ["KINETO_USE_DAEMON"] = "1"
    os.environ["KINETO_IPC_SOCKET_DIR"] = os.environ["TEST_SOCKDIR"]
    import xpuprof, torch
    from xpuprof.ondemand import steps
    tracker = torch.autograd.profiler.KinetoStepTracker
    model = torch.nn.Linear(4, 4)
    a = torch.optim.SGD(model.parameters(), lr=0.1)
    b = torch.optim.Adam(model.parameters(), lr=0.1)
    seen = []
    for i in range(4):
        model(torch.ones(1, 4)).sum().backward()
        a.step()
        if i % 2:
            b.step()
        xpuprof.step()
        # Kineto counts one iteration per _kineto_step call, from -1: torch's step minus one
        seen.append((steps.current(), tracker.current_step() - 1))
    print(json.dumps(seen))
""")


@pytest.mark.slow
def test_iterations_count_as_torchs_kineto_step_tracker_counts(tmp_path):
    """One count per increase of the maximum over KinetoStepTracker's requesters (optimizer steps through
    torch.profiler's own hook, xpuprof.step() as one more requester); none counted twice."""
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(fabric.__file__))),
               TEST_SOCKDIR=str(tmp_path), XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    proc = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(ours == kineto for ours, kineto in seen), seen
    assert [ours for ours, _ in seen] == sorted({ours for ours, _ in seen})  # increasing every iteration


def test_xpuprof_step_without_an_agent_costs_nothing():
    proc = subprocess.run([sys.executable, "-c", "import sys, xpuprof; xpuprof.step(); xpuprof.step(); "
                           "print(sorted(m for m in sys.modules if 'ondemand' in m))"],
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if "KINETO" not in k})
    assert proc.stdout.strip() == "[]", proc.stderr


# ----------------------------------------------------------------------------- answers to the trigger
def test_answers_reach_the_trigger_with_the_senders_pid_and_exits_are_seen(monkeypatch):
    """A process answers from an unbound socket; the trigger's box reads who sent it from the kernel, and a
    process that exited - even before it was watched - is seen as exited (a kill while the embedded daemon
    still served once went unnoticed until the trigger's timeout)."""
    from xpuprof.ondemand import answers

    monkeypatch.delenv("KINETO_IPC_SOCKET_DIR", raising=False)
    box = answers.AnswerBox(directory="")
    try:
        answers.send(box.name, answers.ACCEPTED, path="/tmp/x.pt.trace.json")
        answers.send("not-a-trigger", answers.WRITTEN, path="/etc/passwd")  # a name of another shape: never sent
        child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                               text=True, check=True)
        gone = int(child.stdout)
        box.watch(gone)
        box.wait(lambda b: bool(b.by_pid), deadline=__import__("time").monotonic() + 10)
        mine = box.of(os.getpid())
        assert mine is not None and mine.kernel_pid == os.getpid() and mine.last["path"] == "/tmp/x.pt.trace.json"
        assert box.has_exited(gone) and not box.has_exited(os.getpid())
        assert answers.answer_name(f"X=1\n{answers.ANSWER_KEY}=../../etc\n") is None
        assert answers.answer_name(f"{box.config_line()}\n") == box.name
    finally:
        box.close()
