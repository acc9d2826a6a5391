"""pytest plugin of the sanitizer tier (``.ci/sanitize`` loads it with ``-p sanitize_plugin``).

The process runs with AddressSanitizer's runtime preloaded and the C extensions built with
``-fsanitize=address,undefined``: a memory error or undefined behaviour aborts it with a report. This
plugin adds what aborting cannot give:

* the proof that the extensions under test are the sanitized build: a test after which an
  ``xpuprof._native`` module is loaded from anywhere but the checkout the tier built
  (``XPUPROF_SANITIZE_ROOT``) fails, and the summary says which extensions ran under the sanitizers and
  which did not (their tests skipped, with the reason);
* a leak check when the tests are done (LeakSanitizer, after a full garbage collection): memory that
  nothing points to any more fails the run when its allocation stack passes through xpuprof's C code.
  The stacks are unwound by frame pointers (the cheap way: the slow one multiplies the run time), which
  CPython's own frames lack: an allocation made by our code directly (malloc, PyMem_Raw*, realloc) shows
  our frame; a Python object leaked by a wrong reference count usually does not, and neither do leaks of
  CPython or other libraries. Those are counted and reported, not failed on.
"""
from __future__ import annotations

import ctypes
import gc
import os
import re
import sys
from pathlib import Path

import pytest

_REPORT_START = b"==ERROR: LeakSanitizer: detected memory leaks"
_LEAK_BLOCK = re.compile(rb"^(?:Direct|Indirect) leak of .*?(?=^(?:Direct|Indirect) leak of |^SUMMARY: |\Z)",
                         re.M | re.S)
_OURS = b"/xpuprof/_native/"  # in a frame: our extension's file, or its C source's path


def leaks_in_our_code(log: bytes) -> tuple[list[str], int]:
    """(the leak reports of the last LeakSanitizer report in ``log`` whose stack passes through xpuprof's C
    code, how many other leaks it holds)."""
    start = log.rfind(_REPORT_START)
    if start < 0:
        return [], 0
    blocks = _LEAK_BLOCK.findall(log[start:])
    ours = [b.decode(errors="replace").rstrip() for b in blocks if _OURS in b]
    return ours, len(blocks) - len(ours)


_root = Path(os.environ.get("XPUPROF_SANITIZE_ROOT", ".")).resolve()


def _loaded_extensions() -> dict[str, Path]:
    """The xpuprof C extensions loaded in this process, by name, with their files."""
    from xpuprof import _native

    loaded = {}
    for name in _native.EXTENSIONS:
        module = sys.modules.get(f"xpuprof._native.{name}")
        if module is not None and getattr(module, "__file__", None):
            loaded[name] = Path(module.__file__).resolve()
    return loaded


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield
    foreign = {name: str(path) for name, path in _loaded_extensions().items() if not path.is_relative_to(_root)}
    if foreign:
        raise AssertionError(f"C extensions loaded from outside the sanitized build in {_root}: {foreign}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from xpuprof import _native

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    write = reporter.write_line if reporter else print
    loaded = _loaded_extensions()
    missing = [name for name in _native.EXTENSIONS if name not in loaded]
    write(f"sanitize: C extensions run under the sanitizers in this process: {', '.join(loaded) or 'none'}")
    if missing:
        write(f"sanitize: not loaded in this process (their tests skipped: the reasons are above): {', '.join(missing)}")
    prefix = os.environ.get("XPUPROF_SANITIZE_LOG")
    if not prefix or os.environ.get("XPUPROF_SANITIZE_LEAKS") != "1":
        write("sanitize: leaks not checked")
        return
    gc.collect()
    check = getattr(ctypes.CDLL(None), "__lsan_do_recoverable_leak_check")
    log = Path(f"{prefix}.{os.getpid()}")
    if not check():
        write("sanitize: no leaks")
        return
    ours, others = leaks_in_our_code(log.read_bytes() if log.exists() else b"")
    if others:
        write(f"sanitize: {others} leak(s) whose stacks do not reach xpuprof's C code (CPython, other libraries, "
              f"or a stack the frame-pointer unwinder lost): not checked; LeakSanitizer's report is in {log}")
    if ours:
        write(f"sanitize: FAILED: {len(ours)} leak(s) allocated through xpuprof's C code:")
        for block in ours:
            write(block)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        write("sanitize: no leaks allocated through xpuprof's C code")
