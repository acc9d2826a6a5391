"""Range lifetimes a user's code really has: asyncio tasks and contexts interleaving on one thread,
ranges exited out of order or on another thread, deep nesting, ranges open when recording stops.
Device work must be linked to the range it was launched in (the logical range), and whatever cannot
be told right is said in the trace - never a closed range's id, a phantom kernel or a range that
silently vanishes."""
from __future__ import annotations

import asyncio
import contextvars
import json
import threading

import pytest

import xpuprof
from xpuprof.host import recorder

rf = xpuprof.record_function
current = xpuprof.current_correlation_id


class VendorStacks:
    """A session as vendor libraries keep external ids: one stack per thread, push and pop."""

    wants_correlation = True

    def __init__(self) -> None:
        self.stacks: dict[int, list[int]] = {}

    def push_correlation_id(self, cid: int, user: bool = False) -> None:
        self.stacks.setdefault(threading.get_native_id(), []).append(cid)

    def pop_correlation_id(self, user: bool = False) -> None:
        stack = self.stacks.get(threading.get_native_id())
        if stack:
            stack.pop()

    def launch(self) -> int:
        """The id a kernel launched now on this thread is linked to."""
        stack = self.stacks.get(threading.get_native_id())
        return stack[-1] if stack else 0


@pytest.fixture
def vendor():
    session = VendorStacks()
    rec = recorder.HostRecorder(correlation_sessions=[session])
    recorder.install(rec)
    try:
        yield session, rec
    finally:
        recorder.install(None)


def _sim_trace(tmp_path, body) -> dict:
    with xpuprof.profile(backends=["sim"]) as prof:
        body()
    return json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())


def _ranges(trace: dict) -> dict[str, dict]:
    return {e["name"]: e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}


def _kernel_ids(trace: dict) -> list[int]:
    return sorted(e["args"]["External id"] for e in trace["traceEvents"] if e.get("cat") == "kernel")


# ----------------------------------------------------------------------------- asyncio, contexts
def test_asyncio_tasks_see_their_own_ranges_and_each_leaf_gets_its_kernel(tmp_path):
    seen: list[tuple[int, int]] = []

    async def leaf(i: int) -> None:
        with rf(f"leaf {i}") as r:
            await asyncio.sleep(0)  # every other task enters its range before this one goes on
            seen.append((r.correlation_id, current()))
            await asyncio.sleep(0)

    async def main() -> None:
        with rf("outer"):
            await asyncio.gather(*(leaf(i) for i in range(50)))

    trace = _sim_trace(tmp_path, lambda: asyncio.run(main()))
    assert len(seen) == 50 and all(own == cur for own, cur in seen), [p for p in seen if p[0] != p[1]][:5]
    leaves = sorted(e["args"]["External id"] for name, e in _ranges(trace).items() if name.startswith("leaf "))
    assert len(leaves) == 50 and _kernel_ids(trace) == leaves  # one kernel per leaf, linked to it
    assert trace["range_lifetimes"]["entered_over_another_context"] >= 49  # the vendor caveat is said


def test_contexts_run_through_copy_context_keep_their_own_ranges(vendor):
    ctx1, ctx2 = contextvars.copy_context(), contextvars.copy_context()
    c, d = rf("c"), rf("d")
    ctx1.run(c.__enter__)
    ctx2.run(d.__enter__)  # entered last on this thread, in another context
    assert ctx1.run(current) == c.correlation_id
    assert ctx2.run(current) == d.correlation_id
    ctx1.run(c.__exit__, None, None, None)
    assert ctx2.run(current) == d.correlation_id and ctx1.run(current) == 0
    ctx2.run(d.__exit__, None, None, None)
    assert current() == 0


def test_a_task_sees_the_range_it_was_created_in():
    async def main() -> tuple[int, int]:
        with rf("outer") as outer:
            inner = await asyncio.create_task(_current_later())
        return outer.correlation_id, inner

    async def _current_later() -> int:
        await asyncio.sleep(0)
        return current()

    with xpuprof.profile(backends=["sim"]):
        outer, inner = asyncio.run(main())
    assert inner == outer != 0


# ----------------------------------------------------------------------------- out of order, other threads
def test_ranges_exited_out_of_order_leave_the_open_one_current(vendor):
    session, rec = vendor
    a = rf("a").__enter__()
    b = rf("b").__enter__()
    a.__exit__(None, None, None)  # before b, which it encloses
    assert current() == b.correlation_id
    assert session.launch() == b.correlation_id  # the vendor's stack lost a, not b
    b.__exit__(None, None, None)
    assert current() == 0 and session.launch() == 0
    assert rec.lifetimes()["exited_out_of_order"] == 1


def test_a_range_exited_on_another_thread_stays_on_its_row_and_leaves_its_thread_clean(vendor):
    session, rec = vendor
    a = rf("a").__enter__()
    t = threading.Thread(target=a.__exit__, args=(None, None, None))
    t.start()
    t.join()
    assert current() == 0
    with rf("c") as c:  # this thread's next range: the vendor's stack no longer holds a
        assert session.launch() == c.correlation_id
        assert session.stacks[threading.get_native_id()] == [c.correlation_id]
    rows = recorder.log_array(rec.ranges)
    (a_row,) = [r for r in rows.tolist() if r[3] == a.correlation_id]
    assert a_row[2] == threading.get_native_id()  # the entering thread's row
    assert rec.lifetimes()["exited_on_another_thread"] == 1


def test_a_cross_thread_exit_draws_no_phantom_kernel(tmp_path):
    def body():
        a = rf("a").__enter__()
        t = threading.Thread(target=a.__exit__, args=(None, None, None))
        t.start()
        t.join()
        with rf("b"):
            pass

    trace = _sim_trace(tmp_path, body)
    ranges = _ranges(trace)
    me = threading.get_native_id()
    assert ranges["a"]["tid"] == me == ranges["b"]["tid"]
    assert _kernel_ids(trace) == sorted([ranges["a"]["args"]["External id"], ranges["b"]["args"]["External id"]])
    assert trace["range_lifetimes"]["exited_on_another_thread"] == 1


def test_no_depth_limit_changes_the_current_range(vendor):
    session, _ = vendor
    opened = []
    for i in range(300):  # the C stack kept 256 and answered the 256th for anything deeper
        r = rf(f"depth {i}").__enter__()
        opened.append(r)
        assert current() == r.correlation_id and session.launch() == r.correlation_id
    for r in reversed(opened):
        assert current() == r.correlation_id
        r.__exit__(None, None, None)
    assert current() == 0 and session.launch() == 0


# ----------------------------------------------------------------------------- open at stop
def test_ranges_open_at_stop_are_closed_at_the_window_end_and_marked(tmp_path):
    traces = []
    with xpuprof.profile(backends=["sim"], schedule=xpuprof.schedule(wait=0, warmup=0, active=1, repeat=2),
                         on_trace_ready=lambda p: traces.append(
                             json.loads(p.export_chrome_trace(tmp_path / f"t{len(traces)}.json").read_text()))) as p:
        spanning = rf("spans the step boundary", {"phase": "fwd"}).__enter__()
        p.step()  # the first cycle stops with the range open
        spanning.__exit__(None, None, None)
        p.step()
    first = traces[0]
    r = _ranges(first)["spans the step boundary"]
    assert r["args"]["truncated"] is True and r["args"]["phase"] == "fwd"
    end = next(e for e in first["traceEvents"] if e.get("name") == "Record Window End")["ts"]
    assert abs(r["ts"] + r["dur"] - end) < 1000  # ends with the window (µs)
    assert first["truncated_ranges"]["count"] == 1
    assert r["args"]["External id"] in _kernel_ids(first)  # its device work links to a range in the trace
    (k,) = [e for e in first["traceEvents"] if e.get("cat") == "kernel"
            and e["args"]["External id"] == r["args"]["External id"]]
    assert "spans the step boundary" in k["name"]  # and is named after it, as a closed range's is
    assert "spans the step boundary" not in _ranges(traces[1])  # closed once, never drawn twice


def test_the_pure_python_path_follows_the_same_rules(tmp_path):
    """Without the C extension (host/correlation.py): asyncio tasks, out-of-order exits, the sim's leaves."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    program = textwrap.dedent("""
        import asyncio, json, sys
        sys.modules["xpuprof._native.hostrec"] = None  # as if the C part were not built
        import xpuprof
        from xpuprof.host import recorder
        assert not recorder.FAST_PATH
        rf, current = xpuprof.record_function, xpuprof.current_correlation_id
        seen = []

        async def leaf(i):
            with rf(f"leaf {i}") as r:
                await asyncio.sleep(0)
                seen.append(r.correlation_id == current())

        async def main():
            await asyncio.gather(*(leaf(i) for i in range(20)))

        with xpuprof.profile(backends=["sim"]) as prof:
            asyncio.run(main())
            a = rf("a").__enter__()
            b = rf("b").__enter__()
            a.__exit__(None, None, None)
            seen.append(current() == b.correlation_id)
            b.__exit__(None, None, None)
            seen.append(current() == 0)
        trace = json.loads(prof.export_chrome_trace(sys.argv[1]).read_text())
        kernels = sorted(e["args"]["External id"] for e in trace["traceEvents"] if e.get("cat") == "kernel")
        leaves = sorted(e["args"]["External id"] for e in trace["traceEvents"]
                        if e.get("cat") == "user_annotation" and e["name"] != "a")
        print(json.dumps({"all_own": all(seen), "kernels_are_leaves": kernels == leaves,
                          "lifetimes": trace.get("range_lifetimes", {})}))
    """)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "t.json")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["all_own"] and got["kernels_are_leaves"], got
    assert got["lifetimes"]["exited_out_of_order"] >= 1 and got["lifetimes"]["entered_over_another_context"] >= 19
