"""`import xpuprof` stays cheap: without Kineto's opt-in nothing of xpuprof.ondemand is imported or
started; with it, one daemon thread polls. xpuprof's own helper processes, the xpuprof command itself,
launchers and forked children never register."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from odhelpers import PYTHON, REPO, client_env

PROBE = textwrap.dedent("""
    import json, os, sys, threading
    import xpuprof
    d = sys.argv[1]
    out = {
        "modules": sorted(m for m in sys.modules if m.startswith("xpuprof.ondemand")),
        "threads": sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()),
        "sockets": sorted(n for n in os.listdir(d) if n.startswith("dynoconfigclient")),
        "modes": sorted(oct(os.stat(os.path.join(d, n)).st_mode & 0o777) for n in os.listdir(d)
                        if n.startswith("dynoconfigclient")),
        "env": os.environ.get("KINETO_USE_DAEMON"),
    }
    if len(sys.argv) > 2 and sys.argv[2] == "fork":
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
            os.write(w, json.dumps(names).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        out["child_threads"] = json.loads(os.read(r, 65536))
    print(json.dumps(out))
""")


def probe(env, sockdir, *args, argv0=None):
    cmd = [PYTHON, "-c", PROBE, str(sockdir), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_without_the_opt_in_nothing_is_imported_or_started(sockdir):
    env = client_env(sockdir)
    env.pop("KINETO_USE_DAEMON")
    out, err = probe(env, sockdir)
    assert out["modules"] == [] and out["threads"] == [] and out["sockets"] == []
    assert err == ""


def test_with_the_opt_in_one_daemon_thread_polls(sockdir):
    out, err = probe(client_env(sockdir), sockdir, "fork")
    assert out["threads"] == ["xpuprof-ondemand-poll"]
    assert len(out["sockets"]) == 1 and out["modes"] == ["0o600"]
    assert out["env"] == "1"  # left as the user set it: children inherit it (issue 40)
    assert out["child_threads"] == []  # a forked child (a DataLoader worker) does not poll
    assert not [n for n in os.listdir(sockdir) if n.startswith("dynoconfigclient")]  # removed at exit
    assert "Traceback" not in err


def test_helpers_and_the_xpuprof_command_never_register(sockdir):
    out, _ = probe(client_env(sockdir, XPUPROF_HELPER="1"), sockdir)
    assert out["threads"] == [] and out["sockets"] == []
    proc = subprocess.run([PYTHON, "-m", "xpuprof", "--version"], capture_output=True, text=True,
                          env=client_env(sockdir), timeout=60)
    assert proc.returncode == 0 and not [n for n in os.listdir(sockdir) if n.startswith("dynoconfig")]


def test_a_socket_dir_too_long_for_a_socket_path_is_said_once(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    out, err = probe(client_env(deep), deep)
    assert out["threads"] == [] and out["sockets"] == []
    assert err.count("on-demand tracing is off in this process") == 1 and "KINETO_IPC_SOCKET_DIR" in err
