"""What the command line imports before it does anything (issue 41): ``xpuprof --help`` and ``xpuprof COMMAND
--help`` import no numpy and no analysis module (analyze's help lists the analyses from their light registry),
and no command module but the one asked for; ``xpuprof report STORE`` imports no JSON reader. Read from
``sys.modules`` of fresh processes; the timing against ``import xpuprof`` is a benchmark
(benchmarks/bench_cli_startup.py)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof import cli, commands

REPO = Path(__file__).resolve().parents[2]
# analyze's help lists each analysis and engine: read from the analysis registry, which imports no numpy
ANALYZE_REGISTRY = {"xpuprof.analysis", "xpuprof.analysis.cluster", "xpuprof.analysis.cluster.result",
                    "xpuprof.analysis.engines", "xpuprof.analysis.engines.base"}
# commands whose parser adds another command's options (diff --history takes the gate's)
SHARES_OPTIONS = {"diff": ("gate",)}
JSON_READERS = {"xpuprof.trace.read.kineto", "xpuprof.trace.read.kineto_rows", "xpuprof.trace.read.kineto_stream",
                "xpuprof.trace.read.load", "xpuprof.trace.read.scan", "xpuprof._native.tracescan"}


# The xpuprof executable (console_main), reporting at exit every module the process imported: -X importtime
# does not list modules loaded through importlib.import_module, as the command modules are.
LAUNCH = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\n@@MODULES" + json.dumps(sorted(sys.modules)) + "\\n"))
from xpuprof.cli import console_main
sys.argv = ["xpuprof", *sys.argv[1:]]
raise SystemExit(console_main())
"""


def imported(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``xpuprof ARGS`` in a fresh interpreter; its result and every module it imported."""
    env = {k: v for k, v in os.environ.items() if k != "XPUPROF_REEXECED"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)
    line = next(x for x in reversed(proc.stderr.splitlines()) if x.startswith("@@MODULES"))
    return proc, set(json.loads(line[len("@@MODULES"):]))


def _heavy(modules: set[str], allowed: set[str] = frozenset()) -> list[str]:
    return sorted(m for m in modules if m == "numpy" or m.startswith("numpy.") or
                  (m.startswith("xpuprof.analysis") and m not in allowed))


def test_top_level_help_imports_no_command_and_lists_every_one():
    proc, modules = imported("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _heavy(modules) == []
    assert sorted(m for m in modules if m.startswith("xpuprof.commands.") and m != "xpuprof.commands._options") == []
    for name in commands.names():
        assert name in proc.stdout and commands.SUMMARIES[name].split(" (")[0] in " ".join(proc.stdout.split())


@pytest.mark.parametrize("name", commands.names())
def test_a_command_s_help_imports_its_module_only_and_no_numpy(name):
    proc, modules = imported(name, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"usage: xpuprof {name}" in proc.stdout
    assert _heavy(modules, ANALYZE_REGISTRY if name == "analyze" else set()) == []
    shared = {f"xpuprof.commands.{n}" for n in SHARES_OPTIONS.get(name, ())}
    assert sorted(m for m in modules if m.startswith("xpuprof.commands.") and m != "xpuprof.commands._options"
                  and m not in shared) == [f"xpuprof.commands.{name}"]


def test_report_of_a_store_imports_no_json_reader(tmp_path):
    pytest.importorskip("pyarrow", reason="the trace store needs pyarrow (pip install 'xpuprof[scale]')")
    import xpuprof

    with xpuprof.profile(backends=["sim"], activities=["cpu", "kernel"]) as prof:
        for _ in range(5):
            with xpuprof.record_function("step"):
                pass
    store = prof.export_parquet(tmp_path / "store")
    proc, modules = imported("report", str(tmp_path / "store"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sim_step" in proc.stdout and store.exists()
    assert sorted(modules & JSON_READERS) == []
    assert not any(m == "rich" or m.startswith("rich.") for m in modules)  # the text tables are ours


def test_every_command_is_listed_with_the_help_its_parser_gives():
    """The listing (commands.SUMMARIES) and each module's parser say the same line: the full parser, every
    module imported, as build_parser() without an argument list builds it."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert set(helps) == set(commands.names()) == set(commands.SUMMARIES)
    assert helps == {k: cli.plain(v) for k, v in commands.SUMMARIES.items()}


def test_a_command_module_not_listed_is_still_found(tmp_path, monkeypatch):
    monkeypatch.delitem(commands.SUMMARIES, "merge")
    parser = cli.build_parser(["--help"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "merge" in sub.choices and sub.choices["merge"]._actions[-1].dest == "align"  # its real parser


def test_the_parser_names_the_analysis_constants_it_offers():
    from xpuprof.analysis import diff as analysis_diff, merge as analysis_merge, report_render
    from xpuprof.commands import diff as diff_cmd, merge as merge_cmd, report as report_cmd

    assert diff_cmd.TIME_FIELDS == analysis_diff.TIME_FIELDS
    assert merge_cmd.ALIGN_MODES == analysis_merge.ALIGN_MODES
    assert report_cmd.FORMATS == report_render.FORMATS


@pytest.mark.parametrize("argv,command", [(["report", "x"], "report"), (["--version"], None), ([], None),
                                          (["-h"], None), (["--", "report"], None), (["bogus"], "bogus")])
def test_the_command_an_argument_list_runs(argv, command):
    assert cli.command_of(argv) == command


def test_a_mistyped_command_is_said_with_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["reprot"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "reprot" in err and "report" in err
