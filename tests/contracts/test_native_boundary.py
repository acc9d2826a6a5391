"""The C boundary (issue 37 item 7): every C extension is reached through one loader (``xpuprof._native``),
has a ``.pyi`` stub that ``mypy.stubtest`` checks against the built module, is built from the sources
``EXTENSIONS`` lists (shared C as ``.c`` sources; headers only declare), and runs under the sanitizer
tier (``.ci/sanitize``)."""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from xpuprof import _native

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "xpuprof"
NATIVE = PACKAGE / "_native"
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


# ----------------------------------------------------------------------------- one loader
def direct_imports(package: Path, extensions) -> list[str]:
    """Where a module of ``package`` imports one of its ``_native`` extensions itself: ``from .._native import
    x``, ``import pkg._native.x``, ``from pkg._native.x import y``, or the extension's full name as a string
    (``importlib.import_module("pkg._native.x")``, a list of modules to import). The loader is exempt."""
    top = package.name
    names = {f"{top}._native.{name}" for name in extensions}
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        if rel.as_posix() == f"{top}/_native/__init__.py":
            continue
        parts = list(rel.with_suffix("").parts)
        module_package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom):
                base = module_package[:len(module_package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                if module in names:
                    found.append(f"{where} from {module} import ...")
                elif module == f"{top}._native":
                    found += [f"{where} from {module} import {a.name}" for a in node.names
                              if f"{module}.{a.name}" in names]
            elif isinstance(node, ast.Import):
                found += [f"{where} import {a.name}" for a in node.names
                          if any(a.name == n or a.name.startswith(n + ".") for n in names)]
            elif isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings:
                found.append(f"{where} {node.value!r}")
    return found


def test_no_module_imports_a_c_extension_but_the_loader():
    found = direct_imports(PACKAGE, _native.EXTENSIONS)
    assert not found, "import these through xpuprof._native.load/optional:\n" + "\n".join(found)


def test_the_import_check_finds_every_form(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "_native").mkdir(parents=True)
    (pkg / "sub").mkdir()
    for folder in (pkg, pkg / "_native", pkg / "sub"):
        (folder / "__init__.py").write_text("")
    (pkg / "_native" / "__init__.py").write_text("import importlib\nimportlib.import_module('pkg._native.fast')\n")
    (pkg / "sub" / "a.py").write_text("from .._native import fast\n")
    (pkg / "sub" / "b.py").write_text("from pkg._native import fast as f, load\n")
    (pkg / "sub" / "c.py").write_text("import pkg._native.fast\n")
    (pkg / "sub" / "d.py").write_text("from pkg._native.fast import thing\n")
    (pkg / "sub" / "e.py").write_text("import importlib\nSTAGES = ('pkg.x', 'pkg._native.fast')\n")
    (pkg / "sub" / "fine.py").write_text('"""pkg._native.fast"""\nfrom .. import _native\n'
                                         "m = _native.load('fast', 'a test')\nMSG = 'pkg._native.fast is gone'\n")
    found = direct_imports(pkg, ["fast"])
    assert [f.split(":")[0] for f in found] == [f"pkg/sub/{n}.py" for n in "abcde"], found


def test_import_xpuprof_loads_no_extension_but_the_recorder():
    """record_function is the C type at import (users enter it right away); every other extension loads on
    first use."""
    code = "import sys, xpuprof; print(sorted(m for m in sys.modules if m.startswith('xpuprof._native.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own subprocess's list of names
    assert loaded in ([], ["xpuprof._native.hostrec"]), loaded


def test_load_and_optional_give_the_module():
    if _native.optional("keyindex") is None:
        pytest.skip("xpuprof._native.keyindex is not built (python setup.py build_ext --inplace)")
    module = _native.load("keyindex", "a test")
    assert module is sys.modules["xpuprof._native.keyindex"] is _native.optional("keyindex")
    assert callable(module.factorize)


def test_an_unknown_extension_is_a_programming_error():
    with pytest.raises(ValueError, match="no C extension 'nope'; the extensions are: hostrec, keyindex"):
        _native.load("nope", "a test")
    with pytest.raises(ValueError, match="no C extension 'nope'"):
        _native.optional("nope")


def test_a_blocked_import_says_so_and_what_needs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "xpuprof._native.zemem", None)
    with pytest.raises(_native.NativeUnavailable) as info:
        _native.load("zemem", "the allocation tracer")
    err = info.value
    assert isinstance(err, ImportError) and err.module == err.name == "xpuprof._native.zemem"
    assert str(err).startswith("xpuprof._native.zemem cannot be imported (its import is blocked: None in "
                               "sys.modules); it is needed for the allocation tracer.")
    assert _native.optional("zemem") is None


def test_a_missing_build_names_the_file_the_folder_and_the_compiler(tmp_path, monkeypatch):
    (tmp_path / "zemem.c").write_text("/* the source is there */\n")
    monkeypatch.setenv("CC", sys.executable)  # a compiler that is found
    what, why, advice = _native._why_not("zemem", ImportError("No module named 'xpuprof._native.zemem'"),
                                         str(tmp_path))
    assert (what, why) == ("is not built", f"no zemem{SUFFIX} in {tmp_path}")
    assert f"The C compiler {sys.executable} is at {shutil.which(sys.executable)}" in advice
    assert "python setup.py build_ext --inplace" in advice and "pip install -e ." in advice

    monkeypatch.setenv("CC", "no-such-compiler-here")
    advice = _native._why_not("zemem", ImportError("gone"), str(tmp_path))[2]
    assert "There is no C compiler to build it: no-such-compiler-here ($CC) is not on PATH" in advice

    (tmp_path / "zemem.c").unlink()  # an installation without the sources
    why, advice = _native._why_not("zemem", ImportError("gone"), str(tmp_path))[1:]
    assert why.endswith("and no C sources to build it from") and "Reinstall xpuprof" in advice


def test_a_build_that_does_not_load_shows_the_loaders_error(tmp_path):
    broken = tmp_path / f"zemem{SUFFIX}"
    broken.write_bytes(b"not an ELF file")
    spec = importlib.util.spec_from_file_location("xpuprof._native.zemem", broken)
    with pytest.raises(ImportError) as info:
        importlib.util.module_from_spec(spec)
    what, why, advice = _native._why_not("zemem", info.value, str(tmp_path))
    assert what == "is built but does not load"
    assert str(broken) in why and ("invalid ELF header" in why or "too short" in why), why
    assert advice.startswith("Rebuild it for this Python.")


def test_every_caller_gets_its_own_reason_in_the_message(monkeypatch):
    from xpuprof.backends.base import BackendError
    from xpuprof.backends.xpu import activity_api

    monkeypatch.setitem(sys.modules, "xpuprof._native.ptibuf", None)
    with pytest.raises(BackendError, match=r"^xpuprof\._native\.ptibuf cannot be imported .*needed for the XPU "
                                           r"backend's PTI buffer callbacks"):
        activity_api.load_ptibuf()


# ----------------------------------------------------------------------------- sources and headers
def test_every_c_file_is_an_extension_or_a_source_of_one():
    extensions = set(_native.EXTENSIONS)
    assert {p.stem for p in NATIVE.glob("*.c")} == extensions
    listed = {source for sources in _native.EXTENSIONS.values() for source in sources}
    for name, sources in _native.EXTENSIONS.items():
        assert sources[0] == f"{name}.c", name
        assert all((NATIVE / s).is_file() for s in sources), sources
        assert all(s.startswith("shared/") for s in sources[1:]), sources
    unused = {p.relative_to(NATIVE).as_posix() for p in (NATIVE / "shared").glob("*.c")} - listed
    assert not unused, f"shared sources no extension lists: {unused}"
    for c in (NATIVE / "shared").glob("*.c"):
        assert c.with_suffix(".h").is_file(), f"{c.name} has no header declaring it"


def _compiler() -> str:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    path = shutil.which(cc.split()[0])
    if path is None:
        pytest.skip(f"no C compiler ({cc}) to compile the headers with")
    return path


def _symbols(source: str, where: Path, include: list[Path]) -> set[str]:
    """The symbols a C translation unit defines, static and inline ones kept."""
    cc = _compiler()
    stem = Path(os.environ.get("TMPDIR", "/tmp")) / f"xpuprof-{os.getpid()}-{abs(hash(source))}"
    src, obj = stem.with_suffix(".c"), stem.with_suffix(".o")
    src.write_text(source)
    flags = [f"-I{p}" for p in include] + ["-I" + sysconfig.get_paths()["include"]]
    try:
        compiled = subprocess.run([cc, "-c", "-O0", "-std=c11", "-fkeep-inline-functions", "-fkeep-static-functions",
                                   *flags, str(src), "-o", str(obj)], capture_output=True, text=True)
        assert compiled.returncode == 0, f"{where} does not compile on its own (a header includes what it " \
                                         f"needs):\n{compiled.stderr[-3000:]}"
        nm = subprocess.run(["nm", "--defined-only", str(obj)], check=True, capture_output=True, text=True)
    finally:
        src.unlink(missing_ok=True)
        obj.unlink(missing_ok=True)
    return {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}


def defined_symbols(header: Path, include: list[Path]) -> list[str]:
    """What a header itself defines (functions, variables, static and inline ones too): the symbols of a unit
    that includes it less those of a unit that includes only what it includes (Python.h's and the C
    library's own inline functions). [] for a header that only declares (types, prototypes, macros)."""
    includes = "".join(line + "\n" for line in header.read_text().splitlines() if line.lstrip().startswith("#include"))
    own = _symbols(f'#include "{header}"\n', header, [header.parent, *include])
    theirs = _symbols(includes, header, [header.parent, *include])
    return sorted(own - theirs)


def test_headers_only_declare():
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    headers = sorted(NATIVE.rglob("*.h"))
    assert headers
    carrying = {h.relative_to(NATIVE).as_posix(): syms for h in headers
                if (syms := defined_symbols(h, [NATIVE, h.parent]))}
    assert not carrying, f"headers that carry code (move it into a .c source): {carrying}"


def test_the_header_check_finds_code_in_a_header(tmp_path):
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    (tmp_path / "decl.h").write_text("#include <stddef.h>\ntypedef struct { int a; } thing;\n"
                                     "#define TWICE(x) (2 * (x))\nextern int counter;\nsize_t length(const char *s);\n")
    (tmp_path / "code.h").write_text("static inline int twice(int x) { return 2 * x; }\nstatic int table[4];\n")
    assert defined_symbols(tmp_path / "decl.h", [tmp_path]) == []
    assert sorted(defined_symbols(tmp_path / "code.h", [tmp_path])) == ["table", "twice"]


# ----------------------------------------------------------------------------- stubs
def test_an_extension_builds_without_link_time_optimization_where_the_toolchain_has_none(tmp_path):
    """setup.py builds an extension of several sources with -flto (the recorder's calls across its shared sources
    stay inlined); a compiler or
    linker that refuses it (clang with a linker lacking its LTO plugin) gets the extension built again without
    it, and a line saying so, rather than an optional extension silently missing."""
    cc = _compiler()
    tree = tmp_path / "src"
    (tree / "xpuprof" / "_native").mkdir(parents=True)
    shutil.copy(ROOT / "setup.py", tree / "setup.py")
    (tree / "xpuprof" / "_native" / "shared").mkdir()
    for source in ("rowfmt.c", "shared/jsonstr.c", "shared/jsonstr.h"):  # one built from two sources
        shutil.copy(NATIVE / source, tree / "xpuprof" / "_native" / source)
    (tree / "xpuprof" / "_native" / "__init__.py").write_text(
        'EXTENSIONS = {"rowfmt": ("rowfmt.c", "shared/jsonstr.c")}\n')
    calls = tmp_path / "calls.log"
    wrapper = tmp_path / "cc-without-lto"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nfor a in "$@"; do\n'
                       f'  [ "$a" = -flto ] && {{ echo "cc-without-lto: LTO is not supported" >&2; exit 1; }}\n'
                       f'done\nexec {cc} "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, CC=str(wrapper), LDSHARED=f"{wrapper} -shared")
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tree / "xpuprof" / "_native" / f"rowfmt{SUFFIX}").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rowfmt does not build with -flto" in proc.stdout and "without link-time optimization" in proc.stdout
    lines = calls.read_text().splitlines()
    assert "-flto" in lines[0].split() and "-flto" not in lines[-1].split(), lines


def test_every_extension_has_a_stub_and_ships_it():
    assert {p.stem for p in NATIVE.glob("*.pyi")} == set(_native.EXTENSIONS)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for pattern in ('"_native/*.pyi"', '"_native/shared/*.c"', '"_native/shared/*.h"'):
        assert pattern in text, f"pyproject.toml's package-data does not ship {pattern}"


@pytest.mark.slow
def test_the_stubs_match_the_built_extensions(tmp_path):
    """mypy.stubtest imports each built extension and compares it with its stub: every name, its kind, the
    parameters of each function (from its text signature) and the classes' shapes."""
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed (pip install -e .[dev])")
    unbuilt = [name for name in _native.EXTENSIONS if _native.optional(name) is None]
    if unbuilt:
        pytest.skip(f"not built here, so stubtest cannot import them: {', '.join(unbuilt)}")
    modules = [f"xpuprof._native.{name}" for name in _native.EXTENSIONS]
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", *modules], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_every_c_function_has_a_text_signature():
    """What lets stubtest check parameters: inspect.signature works on every function of every extension."""
    import inspect

    missing = []
    for name in _native.EXTENSIONS:
        module = _native.optional(name)
        if module is None:
            continue
        for attr, value in vars(module).items():
            if attr.startswith("_") or not callable(value):
                continue
            try:
                inspect.signature(value)
            except (TypeError, ValueError):
                missing.append(f"{name}.{attr}")
    assert not missing, f"C functions without a text signature (\"name($module, a, /)\\n--\\n\\n\"): {missing}"


# ----------------------------------------------------------------------------- the sanitizer tier
def _sanitize_plugin():
    spec = importlib.util.spec_from_file_location("sanitize_plugin", ROOT / ".ci" / "sanitize_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sanitizer_tier_lists_tests_that_exist():
    listed = [line.strip() for line in (ROOT / ".ci" / "sanitize.tests").read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")]
    assert len(listed) >= 10
    assert [p for p in listed if not (ROOT / p).is_file()] == []
    assert os.access(ROOT / ".ci" / "sanitize", os.X_OK)
    assert '"$repo/.ci/sanitize"' in (ROOT / ".ci" / "run").read_text()


def test_the_sanitizer_tier_fails_on_leaks_through_our_code_only():
    report = b"""
=================================================================
==7==ERROR: LeakSanitizer: detected memory leaks

Direct leak of 64 byte(s) in 1 object(s) allocated from:
    #0 0x7f in __interceptor_malloc ../../asan_malloc_linux.cpp:69
    #1 0x7f in bq_alloc_buffer /tmp/x/xpuprof/xpuprof/_native/shared/bufqueue.c:30

Indirect leak of 256 byte(s) in 1 object(s) allocated from:
    #0 0x7f in __interceptor_malloc ../../asan_malloc_linux.cpp:69
    #1 0x7f in gc_alloc Modules/gcmodule.c:2283

Direct leak of 70 byte(s) in 1 object(s) allocated from:
    #0 0x7f in __interceptor_malloc ../../asan_malloc_linux.cpp:69
    #1 0x7f in PyUnicode_New Objects/unicodeobject.c:1425
    #2 0x7f  (/tmp/x/xpuprof/xpuprof/_native/hostrec.cpython-311-x86_64-linux-gnu.so+0x1234)

SUMMARY: AddressSanitizer: 390 byte(s) leaked in 3 allocation(s).
"""
    earlier = b"==7==ERROR: LeakSanitizer: detected memory leaks\nDirect leak of 1 byte(s) in 1 object(s) " \
              b"allocated from:\n    #1 0x7f in f /x/xpuprof/_native/old.c:1\n\nSUMMARY: x\n"
    ours, others = _sanitize_plugin().leaks_in_our_code(earlier + report)
    assert others == 1 and len(ours) == 2
    assert "bufqueue.c:30" in ours[0] and "hostrec.cpython" in ours[1]
    assert _sanitize_plugin().leaks_in_our_code(b"") == ([], 0)


_LEAK_CHECK_DEATH = b"""Tracer caught signal 11: addr=0x8 pc=0x7f52 sp=0x7f52
==4971==LeakSanitizer has encountered a fatal error.
==4971==HINT: For debugging, try setting environment variable LSAN_OPTIONS=verbosity=1:log_threads=1
==4971==HINT: LeakSanitizer does not work under ptrace (strace, gdb, etc)
"""


def _tier_logs(tmp_path, tests_done=None, **logs):
    for name, text in logs.items():
        (tmp_path / name.replace("_", ".")).write_bytes(text)
    if tests_done is not None:
        (tmp_path / "tests-done").write_text(str(tests_done))
    return tmp_path


def test_the_sanitizer_tier_runs_again_only_when_leaksanitizer_itself_died_after_passing_tests(tmp_path):
    # CI once ended the tier with 'pytest exited with status 1' and nothing else: the process died in the
    # leak check after every test passed, and the log that said why was never printed.
    plugin = _sanitize_plugin()
    logs = _tier_logs(tmp_path, tests_done=0, asan_4971=_LEAK_CHECK_DEATH)
    outcome, said = plugin.verdict(logs, 1)
    assert outcome == plugin.RUN_AGAIN
    text = "\n".join(said)
    assert "asan.4971" in text and "Tracer caught signal 11" in text and "leak check" in text
    # the same death with a test failed, or with a memory error anywhere, fails the tier
    assert plugin.verdict(_tier_logs(tmp_path, tests_done=1), 1)[0] == plugin.FAILED
    error = b"==5==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6\n"
    assert plugin.verdict(_tier_logs(tmp_path, tests_done=0, asan_5=error), 1)[0] == plugin.FAILED


def test_the_sanitizer_tier_says_why_it_failed(tmp_path):
    plugin = _sanitize_plugin()
    for run in "abc":
        (tmp_path / run).mkdir()
    ub = b"xpuprof/_native/lanes.c:12:5: runtime error: signed integer overflow\n"
    outcome, said = plugin.verdict(_tier_logs(tmp_path / "a", tests_done=0, ubsan_9=ub), 0)
    assert outcome == plugin.FAILED and any("lanes.c:12:5" in line for line in said)
    outcome, said = plugin.verdict(tmp_path / "b", 1)  # died in the tests: no tests-done file
    assert outcome == plugin.FAILED and "in the tests" in said[-1]
    outcome, said = plugin.verdict(_tier_logs(tmp_path / "c", tests_done=0), 1)
    assert outcome == plugin.FAILED and "leak check" in said[-1]


def test_the_sanitizer_tier_passes_a_clean_run_and_leaks_it_does_not_check(tmp_path):
    plugin = _sanitize_plugin()
    not_ours = (b"==7==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 8 byte(s) in 1 object(s) "
                b"allocated from:\n    #1 0x7f in gc_alloc Modules/gcmodule.c:2283\n\n"
                b"SUMMARY: AddressSanitizer: 8 byte(s) leaked in 1 allocation(s).\n")
    assert plugin.verdict(_tier_logs(tmp_path, tests_done=0, asan_7=not_ours), 0) == (plugin.PASSED, [])
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "sanitize_plugin.py"), "verdict", str(tmp_path), "0"],
                         capture_output=True, text=True)
    assert run.returncode == 0
    (tmp_path / "asan.8").write_bytes(_LEAK_CHECK_DEATH)
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "sanitize_plugin.py"), "verdict", str(tmp_path), "1"],
                         capture_output=True, text=True)
    assert run.returncode == plugin.RUN_AGAIN and "fatal error" in run.stdout
