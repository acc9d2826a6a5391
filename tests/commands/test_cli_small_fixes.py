"""Smaller CLI items: rich markup must not eat [brackets] in messages, `--top` refuses
negatives (`--top -1` must not drop the last row), a bad `--set` key is blamed on the --set (not on a
YAML line), and `report --by-rank` splits a merged trace by rank."""
from __future__ import annotations

import importlib.util

import pytest

from xpuprof.cli import main


def _failure_lines(text: str) -> str:
    """The 'point ... failed:' message printed before the summary table (the table escapes its cells)."""
    return text.split("┏", 1)[0]


def _cfg(tmp_path, text: str, name: str = "bench.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_point_failure_message_keeps_brackets(tmp_path, capsys):
    (tmp_path / "failstep.py").write_text(
        "def step():\n    raise RuntimeError(\"install it with pip install 'xpuprof[dpnp-cpu]' [see_docs]\")\n")
    cfg = _cfg(tmp_path, 'workload: {callable: "failstep:step"}\nwarmup: 0\niterations: 1\n'
                         "activities: [user_annotation]\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    printed = _failure_lines(capsys.readouterr().out)
    assert "failed:" in printed and "'xpuprof[dpnp-cpu]'" in printed and "[see_docs]" in printed, printed


@pytest.mark.skipif(importlib.util.find_spec("dpnp") is not None, reason="dpnp is installed: no install hint to print")
def test_dpnp_install_hint_is_printed_whole(tmp_path, capsys):
    cfg = _cfg(tmp_path, "workload: {builtin: gemm, library: dpnp, kwargs: {n: 8}}\nwarmup: 0\niterations: 1\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    printed = _failure_lines(capsys.readouterr().out)
    assert "failed:" in printed and "pip install 'xpuprof[dpnp-cpu]'" in printed, printed


@pytest.mark.parametrize("command", ["report", "run"])
@pytest.mark.parametrize("bad", ["-1", "0", "x"])
def test_top_refuses_non_positive_values(tmp_path, capsys, command, bad):
    target = str(tmp_path / "whatever.yaml")
    with pytest.raises(SystemExit) as exc:
        main([command, target, "--top", bad])
    assert exc.value.code == 2
    assert f"argument --top: expected a positive integer or 'all', got '{bad}'" in capsys.readouterr().err


def test_report_top_all_and_n(rank_traces, capsys):
    assert main(["report", str(rank_traces[0]), "--top", "all", "--format", "csv"]) == 0
    all_rows = capsys.readouterr().out.strip().splitlines()
    assert main(["report", str(rank_traces[0]), "--top", "2", "--format", "csv"]) == 0
    two = capsys.readouterr().out.strip().splitlines()
    assert len(all_rows) == 4 and two == all_rows[:3]  # header + 3 kernels; header + top 2


def test_run_top_all_shows_every_row(tmp_path, capsys):
    cfg = _cfg(tmp_path, "workload: {builtin: gemm, kwargs: {n: 8}}\nwarmup: 0\niterations: 2\n"
                         "schedule: {wait: 0, warmup: 0, active: 2, repeat: 1}\nactivities: [user_annotation]\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress", "--top", "all"]) == 0
    out = capsys.readouterr().out
    assert "top 2 of 2 host ranges" in out and "ProfilerStep#*" in out and "gemm[numpy]" in out


@pytest.mark.parametrize("override, blamed", [
    ("workload.kwarg.n=3", "--set workload.kwarg.n=3: workload.kwarg: unknown key"),
    ("nosuch.key=1", "--set nosuch.key=1: nosuch: unknown key"),
    ("output.dirr=x", "--set output.dirr=x: output.dirr: unknown key"),
])
def test_bad_set_key_is_blamed_on_the_set_argument(tmp_path, capsys, override, blamed):
    cfg = _cfg(tmp_path, "name: b\nworkload:\n  builtin: gemm\n  kwargs: {n: 8}\noutput:\n  dir: out\n")
    assert main(["run", str(cfg), "--set", override, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert blamed in err and "bench.yaml:" not in err, err


def test_report_by_rank_splits_a_merged_trace(rank_traces, tmp_path, capsys):
    merged = tmp_path / "job.merged.json"
    assert main(["merge", *map(str, rank_traces), "-o", str(merged)]) == 0
    capsys.readouterr()
    assert main(["report", str(merged), "--by-rank", "--format", "json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == [0, 1]
    by = {(k["rank"], k["name"]): k["calls"] for k in data["tables"]["by_name"]["rows"]}
    assert by[(0, "gemm_kernel")] == 6 and by[(1, "gemm_kernel")] == 6 and len(by) == 6
    # The same numbers as reporting the two rank files themselves.
    assert main(["report", *map(str, rank_traces), "--by-rank", "--format", "json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert {(k["rank"], k["name"]): k["calls"] for k in direct["tables"]["by_name"]["rows"]} == by


def test_report_output_is_atomic_and_refuses_a_directory(rank_traces, tmp_path, capsys):
    """Every output atomic; `report -o DIR` is one line, not an IsADirectoryError traceback."""
    target = tmp_path / "a_dir"
    target.mkdir()
    assert main(["report", str(rank_traces[0]), "-o", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("xpuprof report: cannot write") and "a directory" in err and "Traceback" not in err
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert main(["report", str(rank_traces[0]), "--format", "csv", "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_text().startswith("kernel,calls,") and not list(tmp_path.glob("*.tmp"))


def _subparsers():
    import argparse

    from xpuprof.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return parser, sub.choices


def test_help_texts_are_plain_text(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    parser, commands = _subparsers()
    assert len(commands) >= 7
    for name, p in [("xpuprof", parser), *commands.items()]:
        text = p.format_help()
        assert "``" not in text, (name, text)
        assert not any(line.rstrip().endswith("-") and not line.rstrip().endswith(" -") for line in text.splitlines()
                       if not line.lstrip().startswith("-")), (name, text)  # no word cut at a hyphen


@pytest.mark.slow  # a fresh interpreter per command
@pytest.mark.parametrize("argv", [["devices", "--json"], ["devices"], ["metrics"], ["metrics", "--format", "json"],
                                  ["--help"], ["report", "--help"]])
def test_a_closed_stdout_ends_quietly(argv):
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: every write is EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "xpuprof", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.stderr == "", proc.stderr
    # as if killed by SIGPIPE, like any Unix tool in a closed pipe; argparse's help drops what it cannot write
    assert proc.returncode == (0 if "--help" in argv else 141)
