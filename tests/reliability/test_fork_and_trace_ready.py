"""A forked child (DataLoader workers, fork pools) starts with a clean profiler state and can profile
itself; a trace the on_trace_ready handler cannot write (a full disk) is logged and recorded in the
next trace, never raised into the training loop - an explicit export_chrome_trace still raises."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import xpuprof

REPO = Path(__file__).resolve().parents[2]
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")


@needs_fork
def test_a_forked_child_profiles_itself_and_leaves_the_parents_profile_alone(tmp_path):
    program = textwrap.dedent(f"""
        import json, os, sys
        import xpuprof
        out = {str(tmp_path)!r}
        with xpuprof.profile(activities=["cpu"]) as parent:
            with xpuprof.record_function("parent before fork"):
                pass
            pid = os.fork()
            if pid == 0:  # the child: record_function here belongs to no trace until it starts its own
                try:
                    with xpuprof.record_function("child, before its own profile"):
                        pass
                    parent.step()  # the inherited profile does nothing in the child
                    with xpuprof.profile(activities=["cpu"]) as mine:
                        with xpuprof.record_function("child's own range"):
                            pass
                    mine.export_chrome_trace(os.path.join(out, "child.json"))
                    parent.stop()  # nothing to stop or write here
                    os._exit(0)
                except BaseException as exc:
                    print(f"child failed: {{type(exc).__name__}}: {{exc}}", file=sys.stderr)
                    os._exit(3)
            _, status = os.waitpid(pid, 0)
            with xpuprof.record_function("parent after fork"):
                pass
        parent.export_chrome_trace(os.path.join(out, "parent.json"))
        print(os.waitstatus_to_exitcode(status))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr[-3000:]

    def names(f: str) -> set[str]:
        trace = json.loads((tmp_path / f).read_text())
        return {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}

    assert names("child.json") == {"child's own range"}
    assert names("parent.json") == {"parent before fork", "parent after fork"}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_a_trace_the_handler_cannot_write_is_logged_and_recorded_in_the_next_one(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="xpuprof")
    written = []

    def handler(prof):
        if not written:
            written.append(None)
            return prof.export_chrome_trace("/dev/full")  # the first trace: a full disk
        written.append(prof.export_chrome_trace(tmp_path / f"t{len(written)}.json"))

    with xpuprof.profile(activities=["cpu"], schedule=xpuprof.schedule(wait=0, warmup=0, active=1, repeat=2),
                         on_trace_ready=handler) as prof:
        for step in range(3):  # the training loop: never stopped by the profiler's own write
            with xpuprof.record_function(f"step work {step}"):
                pass
            prof.step()
    assert len(written) == 2 and written[1] is not None
    (failure,) = prof.trace_ready_errors
    assert "trace not written" in failure and "No space left on device" in failure and "/dev/full" in failure
    second = json.loads(Path(written[1]).read_text())
    assert second["previous_trace_write_errors"] == [failure]
    assert any("trace not written" in r.getMessage() for r in caplog.records)
    with pytest.raises(OSError, match="No space left"):  # asked for explicitly: the caller hears it
        prof.export_chrome_trace("/dev/full")
