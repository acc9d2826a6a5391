"""SQL over what Perfetto's own trace processor imports from a trace (v58.2, built in ../shared/perfetto/).

Found through ``XPUPROF_TRACE_PROCESSOR`` (the shell's path) or ``../shared/perfetto/bin`` beside the
checkout (its ``lib/`` on ``LD_LIBRARY_PATH``); tests skip with the precise reason where it is absent.
"""
from __future__ import annotations

import csv
import io
import os
import subprocess
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "perfetto"


def trace_processor() -> tuple[Path, dict]:
    """(the shell, its environment), or a skip saying what is missing."""
    given = os.environ.get("XPUPROF_TRACE_PROCESSOR")
    shell = Path(given) if given else SHARED / "bin" / "trace_processor_shell"
    if not shell.is_file():
        pytest.skip(f"Perfetto's trace processor is not at {shell} (set XPUPROF_TRACE_PROCESSOR, or build "
                    f"../shared/perfetto with its build.sh)")
    env = dict(os.environ)
    lib = shell.parent.parent / "lib"
    if lib.is_dir():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), env.get("LD_LIBRARY_PATH", "")]))
    return shell, env


def query(trace: Path, sql: str, tmp_path: Path) -> list[dict]:
    """The rows ``sql`` gives over ``trace`` as Perfetto imports it (values as the shell prints them)."""
    shell, env = trace_processor()
    script = tmp_path / "query.sql"
    script.write_text(sql)
    done = subprocess.run([str(shell), "-q", str(script), str(trace)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(done.stdout)))
