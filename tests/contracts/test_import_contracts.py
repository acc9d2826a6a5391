"""The layer rules, written down as import-linter contracts (pyproject [tool.importlinter])
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

pytestmark = pytest.mark.slow

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


# One violation per contract: (file that gains the import, the import, the module it reaches, contract).
BREAKS = [
    ("backends/rocm/emit.py", "from ..cuda import emit as _sibling", "xpuprof.backends.cuda.emit",
     "vendor backends never import each other"),
    ("trace/builder/builder.py", "from ...backends import registry as _up", "xpuprof.backends.registry", "trace/"),
    ("analysis/summary.py", "from ..backends import sim as _up", "xpuprof.backends.sim", "analysis/"),
    ("backends/cuda/emit.py", "from ... import profiler as _up", "xpuprof.profiler",
     "backends and collectors import no front end"),
    ("collectors/host.py", "from ..commands import run as _up", "xpuprof.commands.run",
     "backends and collectors import no front end"),
    ("backends/registry.py", "from ..plugins import loader as _up", "xpuprof.plugins.loader",
     "backends and collectors import no plugin code"),
    ("collectors/registry.py", "from ..plugins import faults as _up", "xpuprof.plugins.faults",
     "backends and collectors import no plugin code"),
    ("analysis/summary.py", "from .. import profiler as _up", "xpuprof.profiler", "layers run one way"),
    ("config/options.py", "from ..analysis import summary as _up", "xpuprof.analysis.summary",
     "layers run one way"),
    ("config/yamlconfig.py", "from ..workloads import runner as _up", "xpuprof.workloads.runner", "config/"),
    ("collectors/nvml.py", "from . import amdsmi as _sibling", "xpuprof.collectors.amdsmi",
     "vendor collectors never import each other"),
    ("host/recorder.py", "from ..backends import registry as _up", "xpuprof.backends.registry", "layers run one way"),
    ("outputs.py", "from .trace.builder import builder as _up", "xpuprof.trace.builder.builder", "layers run one way"),
    ("diagnostics.py", "from .plugins import faults as _up", "xpuprof.plugins.faults", "layers run one way"),
    ("analysis/report.py", "import duckdb as _heavy", "duckdb", "duckdb, pyarrow and ray"),
    ("profiler/api.py", "import pyarrow.parquet as _heavy", "pyarrow", "duckdb, pyarrow and ray"),
    ("collectors/xpu_metrics.py", "from ..backends.xpu import metrics_scope as _up",
     "xpuprof.backends.xpu.metrics_scope", "collectors import no backend"),
    ("vendors/pti.py", "from ..backends.xpu import emit as _up", "xpuprof.backends.xpu.emit",
     "vendors/ imports no backend"),
    ("backends/cuda/records.py", "from cupti import cupti as _vendor", "cupti",
     "vendor packages are imported only in vendors/"),
    ("collectors/nvml.py", "import pynvml as _vendor", "pynvml", "vendor packages are imported only in vendors/"),
    # on-demand tracing is a front end: it drives the profiler, never the reverse
    ("profiler/api.py", "from ..ondemand import steps as _up", "xpuprof.ondemand.steps", "layers run one way"),
    ("backends/xpu/backend.py", "from ...ondemand import fabric as _up", "xpuprof.ondemand.fabric",
     "backends and collectors import no front end"),
]


@needs_linter
@pytest.mark.parametrize("module,line,imported,contract", BREAKS, ids=[b[0] for b in BREAKS])
def test_breaking_a_contract_fails_naming_both_modules(tmp_path, module, line, imported, contract):
    pkg = tmp_path / "pkg"
    shutil.copytree(REPO / "xpuprof", pkg / "xpuprof", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    target = pkg / "xpuprof" / module
    # Inside a function, as lazy imports are written: the contract still sees it.
    target.write_text(target.read_text() + f"\n\ndef _issue18_violation():\n    {line}\n")
    config = tmp_path / ".importlinter.toml"
    config.write_text((REPO / "pyproject.toml").read_text())
    proc = _lint(tmp_path, config, pythonpath=pkg)
    out = proc.stdout
    assert proc.returncode != 0, out
    importer = "xpuprof." + module[:-3].replace("/", ".")
    assert "BROKEN" in out and contract in out, out[-3000:]
    # The report line names both ends: "<importer> -> <imported> (l.N)".
    assert any(importer in ln and imported in ln and "->" in ln for ln in out.splitlines()), out[-3000:]


VENDOR_MODULES = ("torch", "dpctl", "dpnp", "cupti", "pynvml", "pyzes", "amdsmi", "cuda", "intel_pti", "duckdb", "pyarrow",
                  "ray")


def _vendor_modules_after(imports: str) -> list[str]:
    code = textwrap.dedent(f"""
        import json, sys
        {imports}
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {VENDOR_MODULES!r})))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_xpuprof_loads_no_vendor_package():
    assert _vendor_modules_after("import xpuprof, xpuprof.profiler, xpuprof.backends.registry, "
                                 "xpuprof.collectors") == []


def test_every_xpuprof_module_imports_its_vendor_package_lazily():
    # Importing every module (not only the package) must load none: vendor packages are imported inside
    # the function that needs them, so a machine without them can still import, list and report.
    walk = textwrap.dedent("""
        import importlib, pkgutil, xpuprof
        for info in pkgutil.walk_packages(xpuprof.__path__, "xpuprof."):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                importlib.import_module(info.name)
    """).replace("\n", "\n        ")
    assert _vendor_modules_after(walk) == []


def test_the_store_and_its_commands_import_no_scale_package():
    # The scale extra (duckdb, pyarrow, ray) is imported when a store is read or written, never before.
    assert _vendor_modules_after("import xpuprof; xpuprof.profile; import xpuprof.trace.write.parquet, "
                                 "xpuprof.trace.read.store, xpuprof.analysis.engines, xpuprof.analysis.cluster, "
                                 "xpuprof.trace.read.store_table, xpuprof.trace.table.arrow, xpuprof.commands.analyze, "
                                 "xpuprof.commands.convert; from xpuprof.cli import build_parser; "
                                 "build_parser()") == []


# Vendor ABIs live in xpuprof/vendors/: a ctypes struct, callback type or library load anywhere in a
# vendor backend or a collector is a binding outside its room.
BINDING_PLACES = ("backends/xpu", "backends/cuda", "backends/rocm", "collectors")


def _ctypes_bindings(path: Path) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith(("Structure", "Union")) for b in node.bases):
            found.append(f"{path.name}:{node.lineno} defines the ctypes struct {node.name}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("CFUNCTYPE", "CDLL", "LoadLibrary"):
            found.append(f"{path.name}:{node.lineno} calls {ast.unparse(node.func)}")
    return found


def test_vendor_abis_are_bound_only_in_vendors():
    package = REPO / "xpuprof"
    found = [hit for place in BINDING_PLACES for path in sorted((package / place).rglob("*.py"))
             for hit in _ctypes_bindings(path)]
    assert found == [], "ctypes bindings outside xpuprof/vendors/:\n" + "\n".join(found)
    assert _ctypes_bindings(package / "vendors" / "pti_metrics.py"), "the scan finds the structs it looks for"
