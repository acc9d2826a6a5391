"""Every request either starts a capture or is listed in a trace's requests_ignored (issue 40: 10 of 70
requests that arrived while a capture stopped, built or wrote its trace were dropped though the log said they
were listed). In-process agent; the write is held at a gate so that a request arrives exactly then."""
from __future__ import annotations

import json
import threading

import pytest

from xpuprof.ondemand import agent as agent_mod
from xpuprof.ondemand import tracefile
from xpuprof.ondemand.request import from_kineto_text


@pytest.fixture
def trace_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KINETO_ONDEMAND_TRACE_DIR", str(tmp_path))
    return tmp_path


def request(directory, name: str, ms: int = 30):
    return from_kineto_text(f"ACTIVITIES_LOG_FILE={directory}/{name}.json\nACTIVITIES_DURATION_MSECS={ms}\n"
                            f"ACTIVITY_TYPES=cpu_op\nREQUEST_TRACE_ID={name}")


def test_a_request_during_the_write_starts_a_new_capture(trace_dir, monkeypatch):
    writing, release = threading.Event(), threading.Event()
    real_write = tracefile.write_confined

    def held_write(prof, final, allowed):
        if final.endswith(f"first_{_pid()}.json"):
            writing.set()
            assert release.wait(30)
        return real_write(prof, final, allowed)

    monkeypatch.setattr(tracefile, "write_confined", held_write)
    ag = agent_mod.Agent()
    assert ag.submit(request(trace_dir, "first", 100)) == agent_mod.STARTED
    first = ag.active()
    assert ag.submit(request(trace_dir, "during")) == agent_mod.BUSY  # while it records: listed in its trace
    assert writing.wait(30)
    assert ag.submit(request(trace_dir, "late")) == agent_mod.STARTED  # its metadata is sealed: a new capture
    late = ag.active()
    assert late is not first
    release.set()
    assert first.done.wait(30) and late.done.wait(30)
    assert first.error is None and late.error is None
    listed = json.loads(first.path.read_text())["ondemand"]["requests_ignored"]
    assert [e["trace_id"] for e in listed] == ["during"]
    assert json.loads(late.path.read_text())["ondemand"]["trace_id"] == "late"


def test_requests_listed_by_a_cancelled_capture_go_into_the_next_trace(trace_dir):
    ag = agent_mod.Agent()
    pending = from_kineto_text(f"PROFILE_START_TIME={_ms_from_now(600)}\nACTIVITIES_DURATION_MSECS=30\n"
                               "ACTIVITY_TYPES=cpu_op\nREQUEST_TRACE_ID=pending")
    assert ag.submit(pending) == agent_mod.STARTED
    capture = ag.active()
    assert ag.submit(request(trace_dir, "while-pending")) == agent_mod.BUSY
    from xpuprof.ondemand import control

    assert control.apply(ag, "cancel") == control.CANCELLED
    assert capture.done.wait(30) and capture.path is None
    assert ag.submit(request(trace_dir, "next")) == agent_mod.STARTED
    nxt = ag.active()
    assert nxt.done.wait(30) and nxt.error is None
    listed = json.loads(nxt.path.read_text())["ondemand"]["requests_ignored"]
    assert [e["trace_id"] for e in listed] == ["while-pending"]


def _pid() -> int:
    import os

    return os.getpid()


def _ms_from_now(seconds: float) -> int:
    import time

    return int((time.time() + seconds) * 1000)
