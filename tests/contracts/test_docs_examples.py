"""Every example in the README and docs/ runs as pasted, with its documented exit status.

What runs: ```python blocks (a block defining ``test_*`` functions runs under pytest, as a test file would) and
the command lines of ```console / ```bash / ```sh blocks, each page's examples in order in one scratch directory
holding a copy of configs/ and examples/ (a page's later examples read what its earlier ones wrote). ``xpuprof``
is this checkout's (``python -m xpuprof``). A command line's comment ``# exit N`` is its expected status (0
otherwise). ```yaml and ```json blocks must parse. Lines that install packages (``pip install``, ``python3 -m
venv``) are the set-up CI does itself and are not run again.

An example that needs hardware or a service this machine lacks carries ``<!-- needs: <what> -->`` on the line
before its fence; it is listed as a skipped test with that reason (``pytest -rs`` shows them), never dropped
silently.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
         "configs/README.md", "examples/plugins/README.md"]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NEEDS = re.compile(r"<!--\s*needs:\s*(.+?)\s*-->")
EXIT = re.compile(r"#.*?\bexit (\d+)")
SHELL_KINDS = {"console", "bash", "sh", "shell"}
SETUP = re.compile(r"^(pip3? install|python3? -m venv|python3? -m pip install)\b")
TIMEOUT_S = 300


@dataclass
class Block:
    page: str
    line: int  # of the opening fence
    kind: str
    body: str
    needs: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        needs = NEEDS.search(before)
        out.append(Block(page, line, m.group(1).lower(), m.group(2), needs.group(1) if needs else None))
    return out


ALL = [b for page in PAGES for b in blocks(page)]
RUNNABLE = {"python"} | SHELL_KINDS


def _runs(b: Block) -> bool:
    return b.kind in RUNNABLE or (b.kind in ("", "text") and any(
        ln.strip().startswith("xpuprof ") for ln in b.body.splitlines()))


def test_every_fence_says_what_it_holds():
    """A block that runs is labelled as what runs it; an unlabelled one holding commands would be skipped."""
    unlabelled = [b.where for b in ALL if b.kind == "" and _runs(b)]
    assert not unlabelled, f"fences holding xpuprof commands without a language (```console): {unlabelled}"


def test_data_blocks_parse():
    for b in ALL:
        if b.kind == "yaml":
            yaml.safe_load(b.body)
        elif b.kind == "json":
            json.loads(b.body)


NEEDING = [b for b in ALL if b.needs and _runs(b)]


@pytest.mark.parametrize("block", NEEDING, ids=[b.where for b in NEEDING])
def test_examples_that_need_hardware_or_a_service_are_listed(block):
    assert len(block.needs) > 10, f"{block.where}: say what the example needs and why it cannot run here"
    pytest.skip(f"{block.where} needs {block.needs}")


def _shell_script(b: Block) -> str:
    """The block as a bash script: each command line run, its status compared with its ``# exit N``."""
    lines = ["set -u", 'xpuprof() { "$PYTHON" -m xpuprof "$@"; }', 'python() { "$PYTHON" "$@"; }',
             'python3() { "$PYTHON" "$@"; }', 'pytest() { "$PYTHON" -m pytest -p no:cacheprovider "$@"; }']
    joined, buf = [], ""
    for raw in b.body.splitlines():  # backslash continuations make one command
        raw = raw[2:] if raw.startswith("$ ") else raw
        buf += raw[:-1] + " " if raw.rstrip().endswith("\\") else raw
        if not raw.rstrip().endswith("\\"):
            joined.append(buf)
            buf = ""
    for number, line in enumerate(joined, b.line + 1):
        command = re.split(r"\s#", line, maxsplit=1)[0].strip()
        if not command or command.startswith("#") or SETUP.match(command):
            continue
        expect = EXIT.search(line)
        want = int(expect.group(1)) if expect else 0
        lines.append(f"{{ {command}\n}}; s=$?; if [ $s -ne {want} ]; then echo '{b.where} line {number}: "
                     f"`{command.replace(chr(39), '')}` exited '$s', expected {want}' >&2; exit 97; fi")
    return "\n".join(lines) + "\n"


def _run_block(b: Block, cwd: Path, env: dict) -> None:
    if b.kind == "python":
        script = cwd / f"example_{b.line}.py"
        if re.search(r"^def test_", b.body, re.M):
            script = cwd / f"test_example_{b.line}.py"
            script.write_text(b.body, encoding="utf-8")
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
        else:
            script.write_text(b.body, encoding="utf-8")
            cmd = [sys.executable, str(script)]
    else:
        script = cwd / f"example_{b.line}.sh"
        script.write_text(_shell_script(b), encoding="utf-8")
        cmd = ["bash", str(script)]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (f"the example at {b.where} failed (exit {done.returncode}):\n{b.body}\n"
                                  f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


RUN_PAGES = sorted({b.page for b in ALL if _runs(b) and not b.needs})


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES)
def test_every_example_of_the_page_runs_as_pasted(page, tmp_path):
    for d in ("configs", "examples"):
        shutil.copytree(ROOT / d, tmp_path / d)
    env = {**os.environ, "PYTHON": sys.executable, "HOME": str(tmp_path), "COLUMNS": "100",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for b in blocks(page):
        if _runs(b) and not b.needs:
            _run_block(b, tmp_path, env)
