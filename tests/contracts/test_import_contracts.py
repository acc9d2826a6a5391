"""Issue 18: the layer rules, written down as import-linter contracts (pyproject [tool.importlinter])
and checked here so CI runs them; and the vendor packages `import xpuprof` must never load.

import-linter (not a hand-written import walker) because it reads every import statement, lazy
function-level ones included, and names both modules of a broken rule with the line.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"
needs_linter = pytest.mark.skipif(not LINT.exists(), reason=f"import-linter is not installed ({LINT}); "
                                  "it is in the dev extra: pip install -e '.[dev]'")


def _lint(cwd: Path, config: Path | None = None, pythonpath: Path | None = None):
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [str(LINT), "--no-cache"] + (["--config", str(config)] if config else [])
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@needs_linter
def test_the_import_contracts_hold():
    proc = _lint(REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@needs_linter
@pytest.mark.parametrize("module,line,contract", [
    ("backends/rocm/decode.py", "from ..cuda import decode as _sibling", "vendor backends never import each other"),
    ("trace/builder.py", "from ..backends import registry as _up", "trace/"),
    ("config/yamlconfig.py", "from .. import workloads as _up", "config/"),
])
def test_breaking_a_contract_fails_naming_both_modules(tmp_path, module, line, contract):
    pkg = tmp_path / "pkg"
    shutil.copytree(REPO / "xpuprof", pkg / "xpuprof", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    target = pkg / "xpuprof" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    config = tmp_path / ".importlinter.toml"
    config.write_text((REPO / "pyproject.toml").read_text())
    proc = _lint(tmp_path, config, pythonpath=pkg)
    out = proc.stdout
    assert proc.returncode != 0, out
    importer = "xpuprof." + module[:-3].replace("/", ".")
    assert importer in out and "BROKEN" in out and contract in out, out[-3000:]


VENDOR_MODULES = ("torch", "dpctl", "dpnp", "cupti", "pynvml", "pyzes", "amdsmi", "cuda", "intel_pti")


def test_import_xpuprof_loads_no_vendor_package():
    code = textwrap.dedent(f"""
        import json, sys
        import xpuprof, xpuprof.profiler, xpuprof.backends.registry, xpuprof.collectors
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {VENDOR_MODULES!r})))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
