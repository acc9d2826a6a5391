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

Run as a program (``python sanitize_plugin.py verdict LOGS PYTEST_STATUS``), it reads the tier's sanitizer
logs after pytest ends and says what they hold (``verdict`` below): the tier script decides from that
whether the tier passed, failed, or must run again because LeakSanitizer itself died in the leak check.
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


# Reports that fail the tier whatever pytest said: a memory error, undefined behaviour, or a sanitizer that
# stopped the process (its own CHECK, or LeakSanitizer's tracer). Found in any log file of the tier.
_FAILURE_LINES = re.compile(rb"^.*(?:ERROR: AddressSanitizer|runtime error:|Sanitizer CHECK failed"
                            rb"|Sanitizer has encountered a fatal error|Tracer caught signal).*$", re.M)
# LeakSanitizer's own death while it stops the threads to look for leaks: the tracer crashed or could not
# attach. It says nothing about the code under test; it is a known intermittent failure of the sanitizer
# runtime's leak check in a process with other threads (google/sanitizers#1193, #723).
_LEAK_CHECK_DIED = re.compile(rb"LeakSanitizer has encountered a fatal error")
_CODE_FAILURE = re.compile(rb"ERROR: AddressSanitizer|runtime error:")
TESTS_DONE = "tests-done"  # in the logs directory: pytest's exit status, written before the leak check

PASSED, FAILED, RUN_AGAIN = 0, 1, 75


def verdict(logs: Path, pytest_status: int) -> tuple[int, list[str]]:
    """(PASSED, FAILED or RUN_AGAIN, the lines that explain it) for one run of the tier's tests: ``logs``
    holds the sanitizer logs and the plugin's ``tests-done`` file, ``pytest_status`` is pytest's exit status.

    RUN_AGAIN only when every test passed, the leak check started, and the process then died of
    LeakSanitizer's own fatal error with no memory error or undefined behaviour reported anywhere: the
    leak check, not the code, failed, so only a second run can check for leaks."""
    said, code_failed, leak_check_died = [], False, False
    for log in sorted(p for p in logs.iterdir() if p.is_file() and p.name != TESTS_DONE):
        text = log.read_bytes()
        failures = _FAILURE_LINES.findall(text)
        if not failures:
            continue
        code_failed |= bool(_CODE_FAILURE.search(text))
        leak_check_died |= bool(_LEAK_CHECK_DIED.search(text))
        said.append(f"sanitize: report in {log.name}:")
        said.append(text.decode(errors="replace").rstrip())
    done = logs / TESTS_DONE
    tests_status = int(done.read_text() or -1) if done.exists() else None
    if said and leak_check_died and not code_failed and tests_status == 0 and pytest_status != 0:
        said.append("sanitize: every test passed; then LeakSanitizer itself died while it stopped the threads to "
                    "look for leaks (above): the leak check did not run to its end")
        return RUN_AGAIN, said
    if said:
        said.append("sanitize: FAILED: the sanitizers reported errors (above)")
        return FAILED, said
    if pytest_status != 0:
        where = ("after the tests, in the leak check (pytest's summary never came)" if tests_status == 0
                 else "in the tests")
        said.append(f"sanitize: FAILED: pytest exited with status {pytest_status}, {where}")
        return FAILED, said
    return PASSED, said


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
    if prefix:  # the tests are over: a death from here on is the leak check's (see verdict)
        Path(prefix).with_name(TESTS_DONE).write_text(str(int(exitstatus)))
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


if __name__ == "__main__":  # python sanitize_plugin.py verdict LOGS PYTEST_STATUS
    if len(sys.argv) != 4 or sys.argv[1] != "verdict":
        sys.exit("usage: sanitize_plugin.py verdict LOGS_DIRECTORY PYTEST_EXIT_STATUS")
    outcome, lines = verdict(Path(sys.argv[2]), int(sys.argv[3]))
    for line in lines:
        print(line, file=sys.stderr if outcome == FAILED else sys.stdout)
    sys.exit(outcome)
