"""`xpuprof exec -- COMMAND`: the command's exit status, output bytes and signals are its own; every Python
process it starts writes one trace (the whole run by default, a window, or N iterations); the environment's
own sitecustomize still runs; bad options are refused before anything runs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odhelpers import PYTHON, REPO, LineWatch, events, load_trace

XPUPROF = [PYTHON, "-m", "xpuprof"]
pytestmark = pytest.mark.slow  # each case starts Python processes that import xpuprof (and torch)


def base_env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), XPUPROF_DISABLE_BACKENDS="cuda,rocm")
    for key in ("KINETO_USE_DAEMON", "XPUPROF_KINETO_USE_DAEMON", "XPUPROF_EXEC", "XPUPROF_HELPER", "KINETO_CONFIG",
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "PYTHONSTARTUP"):
        env.pop(key, None)
    env.update(extra)
    return env


def traces(out: Path) -> list[dict]:
    return [load_trace(p) for p in sorted(out.glob("*.pt.trace.json"))]


def wrote_lines(out: Path) -> bytes:
    """What exec adds to the command's stderr: one line per trace, saying where it wrote it (issue 39)."""
    return b"".join(f"xpuprof exec: wrote {p}\n".encode() for p in sorted(out.glob("*.pt.trace.json")))


NOISY = textwrap.dedent(r"""
    import os, sys
    sys.stdout.buffer.write(b"out \x00\xff\xfe line\n" * 3)
    sys.stdout.flush()
    sys.stderr.buffer.write(b"err \xc3\x28 bytes\n")
    sys.stderr.flush()
    os.write(1, b"raw fd write\n")
    sys.exit(int(sys.argv[1]))
""")


@pytest.mark.parametrize("status", [0, 7, 255])
def test_exit_status_and_output_bytes_are_the_commands(status, tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    direct = subprocess.run([PYTHON, str(script), str(status)], capture_output=True, env=base_env(), timeout=60)
    under = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", PYTHON, str(script), str(status)],
                           capture_output=True, env=base_env(), timeout=120, cwd=tmp_path)
    assert (under.returncode, under.stdout, under.stderr) == (direct.returncode, direct.stdout,
                                                              direct.stderr + wrote_lines(tmp_path / "t"))
    assert under.returncode == status
    (trace,) = traces(tmp_path / "t")
    assert trace["ondemand"] == {"source": "exec", "mode": "run", "pid": trace["ondemand"]["pid"]}


def test_a_signal_ends_the_command_as_it_would_and_the_trace_is_still_written(tmp_path):
    """SIGTERM from outside (the command runs as the exec's own pid): dies by SIGTERM, as without xpuprof, and
    the whole-run trace is written first, saying it was cut short. A program's own handler is left alone."""
    script = tmp_path / "wait.py"
    script.write_text(textwrap.dedent("""
        import signal, sys, time
        if sys.argv[1] == "own":
            signal.signal(signal.SIGTERM, lambda s, f: (print("handled", flush=True), sys.exit(5)))
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """))
    for mode, expected in (("default", -signal.SIGTERM), ("own", 5)):
        out = tmp_path / mode
        proc = subprocess.Popen([*XPUPROF, "exec", "--out", str(out), "--", PYTHON, str(script), mode],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(), cwd=tmp_path)
        watch = LineWatch(proc.stdout, "program")
        watch.wait("ready")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == expected, proc.stderr.read().decode()[-2000:]
        (trace,) = traces(out)
        if mode == "default":
            assert trace["ondemand"]["stopped_early"].startswith("SIGTERM")
            assert proc.stderr.read() == wrote_lines(out)
        else:
            assert "handled" in watch.text() and "stopped_early" not in trace["ondemand"]
    killed = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "k"), "--", PYTHON, "-c",
                             "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"], env=base_env(), timeout=60)
    assert killed.returncode == -signal.SIGUSR1


def test_every_python_process_gets_its_own_trace(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys
        import xpuprof  # the program may import xpuprof itself: still one trace per process
        with xpuprof.record_function("parent-work"):
            subprocess.run([sys.executable, "-c", "import time; sum(range(10000))"], check=True)
    """))
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", PYTHON, str(script)],
                          capture_output=True, text=True, env=base_env(), timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = traces(tmp_path / "t")
    assert len(found) == 2 and len({t["ondemand"]["pid"] for t in found}) == 2
    (parent,) = [t for t in found if any(e["name"] == "parent-work" for e in events(t))]
    assert parent["traceName"].endswith(".pt.trace.json")


def test_window_and_iteration_policies(tmp_path):
    loop = tmp_path / "loop.py"
    loop.write_text(textwrap.dedent("""
        import time, torch
        model = torch.nn.Linear(8, 8); opt = torch.optim.SGD(model.parameters(), lr=0.1); x = torch.randn(2, 8)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            model(x).sum().backward(); opt.step(); opt.zero_grad(); time.sleep(0.005)
    """))
    window = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "w"), "--delay", "0.2", "--duration", "0.3",
                             "--", PYTHON, str(loop)], capture_output=True, text=True, env=base_env(), timeout=120)
    assert window.returncode == 0, window.stderr
    (w,) = traces(tmp_path / "w")
    assert w["ondemand"]["source"] == "exec" and 290 <= w["ondemand"]["stopped_ms"] - w["ondemand"]["started_ms"] < 2000
    iters = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "i"), "--iterations", "3", "--start-iteration",
                            "10", "--", PYTHON, str(loop)], capture_output=True, text=True, env=base_env(), timeout=120)
    assert iters.returncode == 0, iters.stderr
    (i,) = traces(tmp_path / "i")
    first, last = i["ondemand"]["first_iteration"], i["ondemand"]["last_iteration"]
    assert last - first == 2 and first >= 10
    if first != 10:  # started after iteration 10 had begun (a loaded machine): moved, and said so
        assert "iteration 10 had begun" in i["ondemand"]["notes"]["start"]
    assert sorted(e["name"] for e in events(i) if e["name"].startswith("ProfilerStep#")) == \
        [f"ProfilerStep#{k}" for k in range(first, last + 1)]


def test_the_environments_own_sitecustomize_still_runs(tmp_path):
    theirs = tmp_path / "site"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS'] = 'ran'\n")
    env = base_env(PYTHONPATH=f"{theirs}{os.pathsep}{REPO}")
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", PYTHON, "-c",
                           "import os, sys; print(os.environ.get('THEIRS'), 'xpuprof.ondemand.boot' in sys.modules)"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split() == ["ran", "True"], proc.stderr


def test_a_command_that_does_not_exist_and_bad_options(tmp_path):
    missing = subprocess.run([*XPUPROF, "exec", "--", "no-such-command-xyz"], capture_output=True, text=True,
                             env=base_env(), timeout=60)
    assert missing.returncode == 127 and "no-such-command-xyz: command not found" in missing.stderr
    for args, fact in ((["--duration", "1", "--iterations", "3"], "give one"),
                       (["--delay", "1"], "--delay needs --duration"),
                       (["--iterations", "0"], "positive integer"),
                       (["--set", "ACTIVITIES_DURATION_MSECS=soon"], "ACTIVITIES_DURATION_MSECS"),
                       (["--config", str(tmp_path / "missing.conf")], "missing.conf"),
                       ([], "no command")):
        proc = subprocess.run([*XPUPROF, "exec", *args, "--", *(["true"] if args else [])], capture_output=True,
                              text=True, env=base_env(), timeout=60)
        assert proc.returncode == 2 and fact in proc.stderr.strip().splitlines()[-1], (args, proc.stderr)


@pytest.mark.parametrize("policy", [[], ["--duration", "0.2"]])
def test_recording_torch_ops_adds_nothing_to_the_programs_output(policy, tmp_path):
    """torch 2.13's Kineto prints `USDT: profiler_start/stop` at each start and stop of torch's profiler;
    xpuprof records torch's ops through that profiler and keeps those lines out of the program's stderr."""
    script = tmp_path / "torchy.py"
    # Under a duration policy the program runs until its trace is written (a loaded machine starts the capture
    # late: a fixed 0.6 s program ended it early, which exec rightly says); alone, it runs 0.6 s.
    script.write_text(textwrap.dedent("""
        import os, sys, time, torch
        wait_in = os.environ.get("WAIT_FOR_TRACE_IN")
        x = torch.ones(4)
        t0 = time.monotonic()

        def done():
            if wait_in:
                return os.path.isdir(wait_in) and any(n.endswith(".json") for n in os.listdir(wait_in))
            return time.monotonic() - t0 >= 0.6

        while not done() and time.monotonic() - t0 < 120:
            x = x * 1.0001
        print("result", float(x.sum()) > 0)
        print("to stderr", file=sys.stderr)
    """))
    direct = subprocess.run([PYTHON, str(script)], capture_output=True, env=base_env(), timeout=120)
    wait = {"WAIT_FOR_TRACE_IN": str(tmp_path / "t")} if policy else {}
    under = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), *policy, "--", PYTHON, str(script)],
                           capture_output=True, env=base_env(**wait), timeout=180)
    assert (under.returncode, under.stdout) == (direct.returncode, direct.stdout)
    # the program's own lines in their order, and exec's "wrote" line - which a capture that ends while the
    # program runs prints when it writes the trace, between the program's lines
    ours = [ln for ln in under.stderr.splitlines(True) if ln.startswith(b"xpuprof exec: wrote ")]
    assert [ln for ln in under.stderr.splitlines(True) if ln not in ours] == direct.stderr.splitlines(True)
    assert b"".join(ours) == wrote_lines(tmp_path / "t"), under.stderr
    (trace,) = traces(tmp_path / "t")
    assert trace["torch_ops"]["ops"] > 0


def test_a_program_that_runs_torch_profiler_itself_is_not_broken(tmp_path):
    """Under exec the whole run records torch's ops through torch's profiler; the program's own
    torch.profiler takes over (the exec trace ends there and says so), instead of being refused."""
    script = tmp_path / "own.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        x = torch.ones(8)
        for _ in range(50):
            x = torch.tanh(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                x = torch.sigmoid(x)
        prof.export_chrome_trace(sys.argv[1])
        print("done")
    """))
    proc = subprocess.run([*XPUPROF, "exec", "--out", str(tmp_path / "t"), "--", PYTHON, str(script),
                           str(tmp_path / "theirs.json")], capture_output=True, text=True, env=base_env(), timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]
    theirs = load_trace(tmp_path / "theirs.json")
    assert any(e.get("name") == "aten::sigmoid" for e in events(theirs))
    (ours,) = traces(tmp_path / "t")
    assert "torch.profiler" in ours["ondemand"]["notes"]["preempted"]
    assert any(e.get("name") == "aten::tanh" for e in events(ours))
