"""Every engine option is checked before anything is read (issue 40 item 7): one line naming the option and
what is valid, exit status 2 - never a DuckDB traceback with exit status 1, never a hang."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.analysis.engines import EngineError, check_engine_options, open_engine
from xpuprof.cli import main
from xpuprof.trace.write.parquet import write_store

from storehelp import synthetic_rank

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("opts") / "s.store"
    write_store(synthetic_rank(0, steps=2), path)
    return path


BAD = {  # argv tail: what the one line says
    ("--memory-limit", "garbage"): "--memory-limit 'garbage' is not a memory size",
    ("--memory-limit", "1XB"): "--memory-limit '1XB' is not a memory size",
    ("--memory-limit", "0"): "--memory-limit '0' is not a memory size",
    ("--memory-limit", "1e400GB"): "--memory-limit '1e400GB' is not a memory size",
    ("--memory-limit", "1KB"): "--memory-limit '1KB' is less than DuckDB can work in",
    ("--memory-limit", "9000000TB"): "--memory-limit '9000000TB' is more than DuckDB can work in",
    ("--threads", "-1"): "--threads must be a whole number from 1 to 1024, not -1",
    ("--threads", "0"): "--threads must be a whole number from 1 to 1024, not 0",
    ("--group-events", "0"): "--group-events must be a whole number from 1",
    ("--ray-address", "127.0.0.1:1"): "--ray-address is an option of the ray engine, not of duckdb",
}


def _one_line(capsys, argv) -> str:
    rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1, (rc, err)
    return err[0]


@pytest.mark.parametrize("flag, value", sorted(BAD), ids=[" ".join(k) for k in sorted(BAD)])
def test_a_bad_engine_option_is_one_line_and_status_2(flag, value, store, capsys):
    """Before: --memory-limit garbage / 1XB / 0 / 1e400GB and --threads -1 were DuckDB tracebacks (exit 1);
    --memory-limit 1KB failed the first query with DuckDB's out-of-memory error; --threads 0 and
    --ray-address with the duckdb engine were ignored."""
    line = _one_line(capsys, ["analyze", str(store), "temporal", f"{flag}={value}"])
    assert line.startswith("xpuprof analyze: ") and BAD[(flag, value)] in line, line


def test_a_huge_thread_count_is_refused_not_started(store):
    """Before: --threads 99999999 hung - DuckDB starts its threads when it connects."""
    done = subprocess.run([sys.executable, "-m", "xpuprof", "analyze", str(store), "temporal", "--threads", "99999999"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "--threads must be a whole number from 1 to 1024" in done.stderr, done.stderr


@pytest.mark.parametrize("var, value, said", [("XPUPROF_DUCKDB_MEMORY", "lots", "XPUPROF_DUCKDB_MEMORY 'lots' is not a memory size"),
                                              ("XPUPROF_GROUP_EVENTS", "-5", "XPUPROF_GROUP_EVENTS must be a whole number")])
def test_a_bad_engine_setting_in_the_environment_is_one_line(var, value, said, store, capsys, monkeypatch):
    monkeypatch.setenv(var, value)
    assert said in _one_line(capsys, ["analyze", str(store), "temporal"])


def test_good_options_are_taken_in_duckdbs_units(store, capsys):
    assert main(["analyze", str(store), "temporal", "--memory-limit", "1.5 GiB", "--threads", "2"]) == 0
    assert check_engine_options("duckdb", {"memory_limit": "512MB", "threads": 3}) == {"memory_limit": "512MB",
                                                                                        "threads": 3}


def test_the_api_checks_the_same_options(store):
    with pytest.raises(EngineError, match="memory_limit 'lots' is not a memory size"):
        open_engine(store, memory_limit="lots")
    with pytest.raises(EngineError, match="threads must be a whole number from 1 to 1024, not True"):
        open_engine(store, threads=True)
    with pytest.raises(EngineError, match="group_events is an option of the duckdb engine, not of ray"):
        check_engine_options("ray", {"group_events": 5})
