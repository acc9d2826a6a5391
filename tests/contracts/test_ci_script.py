""".ci/run: every pytest run it makes prints why each skipped test skipped (``-rs``), and the README says
exactly what it installs."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _pytest_runs() -> list[str]:
    return [line for line in CI.splitlines() if re.search(r"-m pytest\b", line) and not line.lstrip().startswith("#")]


def test_every_pytest_run_prints_its_skip_reasons():
    runs = _pytest_runs()
    assert len(runs) == 2, runs  # the fast tier, then the slow files
    for line in runs:
        flags = line.split("-m pytest", 1)[1].split()
        assert any(f == "-rs" or (f.startswith("-r") and "s" in f[2:]) for f in flags), line


def _installed() -> set[str]:
    """The extras and packages .ci/run installs with pip, and what it installs with apt."""
    names = set()
    for line in CI.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0]  # a comment after the command
        if "pip install" in line and not line.lstrip().startswith("#"):
            for word in line.split("pip install", 1)[1].split():
                word = word.strip("'\"")
                if word.startswith("-") or word in ("||", "&&") or not word:
                    continue
                if word.startswith("."):
                    names.add(word)  # the checkout with its extras, e.g. .[dev,scale]
                    continue
                if word in ("echo", ">&2", "download"):
                    break
                names.add(re.split(r"[=<>]", word, maxsplit=1)[0])
        if "apt-get install" in line:
            for word in line.split("apt-get install", 1)[1].split():
                if word[:1] in (">", "|", ")", "&"):
                    break
                if word[:1].isalpha():
                    names.add(word)
    return names - {"pip", "upgrade"}


def test_the_readme_says_what_ci_installs():
    installed = _installed()
    assert ".[dev,scale]" in installed, installed
    assert "`.[dev,scale]`" in README  # not .[dev]: the store's packages are part of it
    for name in installed - {".[dev,scale]"}:
        short = {"HolisticTraceAnalysis": "HolisticTraceAnalysis", "dpcpp-cpp-rt": "SYCL runtime",
                 "intel-sycl-rt": "SYCL runtime", "intel-cmplr-lib-ur": "SYCL runtime",
                 "intel-opencl-rt": "SYCL runtime", "onemkl-sycl-blas": "oneMKL", "onemkl-sycl-dft": "oneMKL",
                 "onemkl-sycl-lapack": "oneMKL", "onemkl-sycl-rng": "oneMKL", "onemkl-sycl-vm": "oneMKL",
                 "mkl": "oneMKL", "xprof": "xprof"}.get(name, name)
        assert short in README, f".ci/run installs {name}; the README's set-up paragraph does not say so"
