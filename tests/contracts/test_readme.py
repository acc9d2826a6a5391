"""The README is a user's first contact: short, two set-up commands, a first example that runs on
any machine, links that resolve and command lines the CLI accepts."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 300
# Pages written on other branches; until they land a link to them skips, naming the page.
PAGES_FROM_OTHER_BRANCHES = {"trace-a-running-job.md", "store.md", "reliability.md"}
# Commands those branches add; until they land a README line using one skips, naming it.
COMMANDS_FROM_OTHER_BRANCHES = {"exec", "trigger", "convert", "analyze"}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _text(path: Path = README) -> str:
    return path.read_text(encoding="utf-8")


def _blocks(lang: str, path: Path = README) -> list[str]:
    return [body for kind, body in FENCE.findall(_text(path)) if kind == lang]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    body = FENCE.sub("", _text(page))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", body, re.M)}


def test_readme_is_at_most_300_lines():
    lines = _text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; at most {MAX_LINES}"


def test_exactly_two_setup_commands():
    bash = [b.strip() for b in _blocks("bash")]
    assert len(bash) == 2, f"README.md has {len(bash)} ```bash blocks; the set-up is exactly two: {bash}"
    install, tests = bash
    assert len(install.splitlines()) == 1 and len(tests.splitlines()) == 1, bash
    assert "pip install -e '.[dev]'" in install and "xpuprof run configs/" in install
    config = install.split("xpuprof run ", 1)[1].split()[0]
    assert (ROOT / config).is_file(), f"the set-up command runs {config}, which is not in the checkout"
    assert tests == "bash .ci/run"


def _run_python_block(code: str, cwd: Path) -> subprocess.CompletedProcess:
    script = cwd / "example.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_first_python_example_runs_as_written_and_writes_a_trace(tmp_path):
    first = _blocks("python")[0]
    done = _run_python_block(first, tmp_path)
    assert done.returncode == 0, f"the README's first example failed:\n{done.stderr[-3000:]}"
    traces = list(tmp_path.rglob("*.pt.trace.json"))
    assert len(traces) == 1, f"expected one trace, found {traces}"
    events = json.loads(traces[0].read_text())["traceEvents"]
    assert any(e.get("name") == "matmul" and e.get("ph") == "X" for e in events)
    assert "sim" not in first, "the first example profiles host work; the sim comes after it"


def test_sim_example_writes_device_rows(tmp_path):
    (sim,) = [b for b in _blocks("python") if 'export_chrome_trace("sim.pt.trace.json")' in b]
    done = _run_python_block(sim, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    trace = json.loads((tmp_path / "sim.pt.trace.json").read_text())
    assert trace["backend"] == "sim"
    cats = {e.get("cat") for e in trace["traceEvents"]}
    assert "kernel" in cats, sorted(c for c in cats if c)


def test_every_python_block_compiles():
    for i, block in enumerate(_blocks("python")):
        compile(block, f"README.md python block {i}", "exec")


def _doc_links(path: Path) -> list[str]:
    return [link for link in LINK.findall(_text(path)) if not re.match(r"[a-z]+:", link)]


# The README and the pages its depth moved to.
PAGES = ["README.md", "docs/backends.md", "docs/collectors.md", "docs/consumers.md", "docs/cli.md",
         "docs/torch-ops.md", "CHANGELOG.md"]
LINKS = sorted({(page, link) for page in PAGES for link in _doc_links(ROOT / page)})


@pytest.mark.parametrize(("page", "link"), LINKS)
def test_links_resolve(page, link):
    source = ROOT / page
    target, _, anchor = link.partition("#")
    path = (source.parent / target).resolve() if target else source
    if not path.exists() and path.parent == ROOT / "docs" and path.name in PAGES_FROM_OTHER_BRANCHES:
        pytest.skip(f"docs/{path.name} is written on another branch and has not landed here yet")
    assert path.exists(), f"{page} links {link}, which does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in _anchors(path), f"{page} links {link}: {target or page} has no heading '#{anchor}'"


def _xpuprof_lines(path: Path) -> list[str]:
    lines = []
    for kind, body in FENCE.findall(_text(path)):
        if kind not in {"bash", "console"}:
            continue
        for line in body.splitlines():
            line = line.split("  #", 1)[0].strip().rstrip("&").strip()
            line = re.sub(r"^\.venv/bin/", "", line.split("&& ")[-1])
            if line.startswith("xpuprof "):
                lines.append(re.sub(r"\$\{?\w+\}?", "1", line))  # the shell expands $SLURM_JOB_ID and the like
    return lines


COMMAND_LINES = [(page, line) for page in ("README.md", "docs/cli.md") for line in _xpuprof_lines(ROOT / page)]


def test_the_pages_show_command_lines():
    assert {page for page, _ in COMMAND_LINES} == {"README.md", "docs/cli.md"}


@pytest.mark.parametrize(("page", "line"), COMMAND_LINES)
def test_command_lines_are_accepted_by_the_cli(page, line):
    from xpuprof.cli import build_parser

    parser = build_parser()
    known = next(a for a in parser._actions if a.dest == "command").choices
    argv = shlex.split(line)[1:]
    if argv[0] not in known and argv[0] in COMMANDS_FROM_OTHER_BRANCHES:
        pytest.skip(f"xpuprof {argv[0]} comes with another branch and has not landed here yet")
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{page}: `{line}` is refused by the CLI (exit {exc.code})")
