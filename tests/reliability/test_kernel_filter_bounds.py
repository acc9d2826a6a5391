"""Huge kernel-filter lists (issue 40 item 8): a 15 MiB file of 754 k patterns, under the 16 MiB file limit,
kept `xpuprof run --dry-run` compiling for more than 90 s; now it is refused in one line, at once, before
anything is compiled (every front end: YAML files and lists, the CLI's -file flags, Kineto keys)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xpuprof.config.kernel_filter import (MAX_FILTER_PATTERNS, KernelFilter, KernelFilterError, read_filter_file,
                                          split_filter_list)
from xpuprof.config.options import ProfilerConfig

REPO = Path(__file__).resolve().parents[2]


def test_a_15_mib_filter_file_is_refused_in_one_line_within_seconds(tmp_path):
    huge = tmp_path / "kernels.txt"
    huge.write_text("".join(f"kern_{i:09d}_gemm\n" for i in range(754_000)))
    assert 14 << 20 < huge.stat().st_size < 16 << 20
    (tmp_path / "c.yaml").write_text(f"workload: {{builtin: gemm}}\nkernels: {{exclude_file: {huge}}}\n")
    for extra in ([], ["--include-kernels-file", str(huge)]):
        config = "c.yaml" if not extra else "plain.yaml"
        (tmp_path / "plain.yaml").write_text("workload: {builtin: gemm}\n")
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "xpuprof", "run", config, "--dry-run", *extra], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
        took = time.monotonic() - t0
        assert out.returncode == 2, out.stderr[-2000:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "754,000 patterns" in lines[0] and f"{MAX_FILTER_PATTERNS:,}" in lines[0]
        assert str(huge) in lines[0] and "Traceback" not in out.stderr
        assert took < 20, took


def test_the_bound_holds_for_every_front_end(tmp_path):
    many = [f"k{i}" for i in range(MAX_FILTER_PATTERNS + 1)]
    with pytest.raises(KernelFilterError, match="exclude_kernels holds 10,001 patterns"):
        KernelFilter((), tuple(many))
    with pytest.raises(ValueError, match="include_kernels holds 10,001 patterns"):
        ProfilerConfig(include_kernels=many)
    with pytest.raises(ValueError, match="XPUPTI_EXCLUDE_KERNELS.*10,001 patterns"):
        ProfilerConfig.from_kineto("XPUPTI_EXCLUDE_KERNELS=" + ",".join(many))
    f = tmp_path / "many.txt"
    f.write_text("\n".join(many))
    with pytest.raises(KernelFilterError, match=f"{f} holds 10,001 patterns"):
        read_filter_file(f)
    # at the bound: accepted, and it filters
    f.write_text("\n".join(many[:MAX_FILTER_PATTERNS]))
    kf = KernelFilter((), tuple(read_filter_file(f)))
    assert not kf.keep("k9999") and kf.keep("gemm")


def test_lists_without_quotes_split_as_before():
    for text in ("a,b , c,,", " gemm ", "x{1,3}", ",,", "a\\b,c"):
        slow = split_filter_list(text + ',"q"')[:-1]  # the quoted path
        assert split_filter_list(text) == slow


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_filter_file_that_is_no_regular_file_is_one_line(kind, tmp_path):
    """Before: a FIFO hung ``read_text`` and ``/dev/zero`` (size 0 to ``stat``) grew until memory ran out."""
    path = tmp_path / "filters.txt"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from xpuprof.config.kernel_filter import KernelFilterError, read_filter_file\n"
            f"try:\n    read_filter_file({str(path)!r})\nexcept KernelFilterError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{path}: kernel filter file is a {'FIFO' if kind == 'fifo' else 'character device'}, not a regular file" \
        in done.stdout
