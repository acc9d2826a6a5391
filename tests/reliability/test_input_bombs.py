"""Issue 40's bound on hostile inputs, command by command: ``report``, ``diff``, ``merge``, ``convert`` and
``analyze`` handed a 4 MB gzip that inflates to 4 GiB of NULs, ``/dev/zero``, 10^6 ``[``, a FIFO, or a valid
trace whose one string is 1 GiB answer with one line and exit status 2 - each in a child process held to
1 GiB of address space (``RLIMIT_AS``) and 5 s of CPU time (``RLIMIT_CPU``: a machine shared by several jobs
stretches the wall clock, not the CPU a read takes; the wall clock gets a generous timeout that only a hang
reaches). The inputs are made cheaply: the bomb and the gzip'd 1 GiB string are gzip members of 1 MiB
repeated (a few MB written); the plain 1 GiB string, streamed to disk, is in the slow tier.

One pair per input runs in the fast tier (each command at least once); the whole matrix is ``slow``."""
from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

REPO = Path(__file__).resolve().parents[2]
MEMORY = 1 << 30
CPU_S = 5
GOOD = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5, "dur": 2, "pid": 1, "tid": 1}]}


def _members(f, piece: bytes, total: int) -> None:
    """``total`` bytes of ``piece`` repeated, as gzip members of 1 MiB each (compressed once)."""
    member = gzip.compress(piece * ((1 << 20) // len(piece)), 9)
    for _ in range(total >> 20):
        f.write(member)


def _bomb(d: Path) -> Path:
    path = d / "bomb.pt.trace.json.gz"
    with open(path, "wb") as f:
        _members(f, b"\0", 4 << 30)
    assert path.stat().st_size < 5 << 20
    return path


HEAD = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "'
TAIL = b'"}]}'


def _long_string_gz(d: Path) -> Path:
    path = d / "long.pt.trace.json.gz"
    with open(path, "wb") as f:
        f.write(gzip.compress(HEAD))
        _members(f, b"a", 1 << 30)
        f.write(gzip.compress(TAIL))
    return path


def _long_string(d: Path) -> Path:
    path = d / "long.pt.trace.json"
    block = b"a" * (16 << 20)
    with open(path, "wb") as f:  # streamed: 16 MiB held at a time
        f.write(HEAD)
        for _ in range((1 << 30) // len(block)):
            f.write(block)
        f.write(TAIL)
    return path


def _brackets(d: Path) -> Path:
    path = d / "brackets.json"
    path.write_bytes(b"[" * 10**6)
    return path


def _fifo(d: Path) -> Path:
    path = d / "fifo.pt.trace.json"
    os.mkfifo(path)
    return path


INPUTS = {  # name: (maker, what the one line says)
    "gzip bomb": (_bomb, "not a JSON trace file (it starts with byte 0x00"),
    "/dev/zero": (lambda d: Path("/dev/zero"), "is a character device, not a"),
    "10^6 [": (_brackets, "is not an event object"),
    "FIFO": (_fifo, "is a FIFO, not a"),
    "1 GiB string (gzip)": (_long_string_gz, "the most one event may take"),
    "1 GiB string": (_long_string, "the most one event may take"),
}
# analyze takes a store: a file is refused as one before anything is read
COMMANDS = ("report", "diff", "merge", "convert", "analyze")
FAST = {("gzip bomb", "report"), ("gzip bomb", "diff"), ("/dev/zero", "convert"), ("10^6 [", "merge"),
        ("FIFO", "analyze"), ("FIFO", "report"), ("1 GiB string (gzip)", "convert")}


def _argv(command: str, bad: Path, good: Path, out: Path) -> list[str]:
    return {"report": ["report", bad], "diff": ["diff", good, bad], "merge": ["merge", good, bad, "-o", out / "m.json"],
            "convert": ["convert", bad, "-o", out / "s.store"], "analyze": ["analyze", bad, "kernels"]}[command]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = INPUTS[name][0](d)
        return cache[name]

    return get


CASES = [pytest.param(name, command, id=f"{command}-{name}", marks=() if (name, command) in FAST else pytest.mark.slow)
         for name in INPUTS for command in COMMANDS]


@pytest.mark.parametrize("name, command", CASES)
def test_a_hostile_input_is_one_line_and_status_2_within_bounds(name, command, made, tmp_path):
    bad = made(name)
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps(GOOD))
    argv = [str(a) for a in _argv(command, bad, good, tmp_path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "xpuprof", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_limits, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])  # -24: SIGXCPU, over 5 s of CPU
    said = INPUTS[name][1]  # analyze reads trace files by the same reader (a file is no longer refused as a store)
    assert len(lines) == 1 and lines[0].startswith(f"xpuprof {command}: ") and said in lines[0], lines
    assert str(bad) in lines[0], lines
    assert cpu <= CPU_S, cpu
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "s.store").exists()
