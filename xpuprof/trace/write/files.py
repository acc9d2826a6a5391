"""Which writer a trace file gets: the one rule for every place a trace path is accepted (``export_chrome_trace``,
``export_perfetto``, ``trace_handler``, YAML ``output.format``, ``xpuprof exec --format``, on-demand requests'
``ACTIVITIES_LOG_FILE``, ``convert``).

A path ending in ``.pftrace`` or ``.perfetto-trace`` is written as Perfetto protobuf (``perfetto``); any other as
Kineto JSON (``chrome``: ``.json``, gzip-compressed for ``.gz``). ``FORMATS`` names the formats a user picks by
name (``json``, ``perfetto``) and ``suffix(format, gzip)`` what a trace file of that format is called.
"""
from __future__ import annotations

from pathlib import Path

FORMATS = ("json", "perfetto")
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")  # (no import of the writers here: the profiler's names use it)


def is_perfetto_path(path) -> bool:
    """Whether a path names a Perfetto protobuf trace (``.pftrace`` / ``.perfetto-trace``)."""
    return str(path).endswith(PERFETTO_SUFFIXES)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown trace format {fmt!r}; valid: {', '.join(FORMATS)}")
    return fmt


def suffix(fmt: str = "json", gzip: bool = False) -> str:
    """The file name ending of a trace in ``fmt`` (``.pt.trace.json[.gz]``, torch's, or ``.pftrace``)."""
    if check_format(fmt) == "perfetto":
        if gzip:
            raise ValueError("a Perfetto trace is not gzip-compressed (it is several times smaller than JSON "
                             "already): use format json for .json.gz")
        return PERFETTO_SUFFIXES[0]
    return ".pt.trace.json" + (".gz" if gzip else "")


def format_of(path) -> str:
    """The format a trace path is written in (see the module docstring)."""
    return "perfetto" if is_perfetto_path(path) else "json"


def write_trace(source, path, *, vendor_categories: bool = True, trace_name: str | None = None,
                fmt: str | None = None) -> Path:
    """Write a TraceBuilder or a one-trace TraceTable to ``path`` in the format its name says (or ``fmt``);
    returns the path."""
    if (fmt or format_of(path)) == "perfetto":
        from .perfetto import write_perfetto

        return write_perfetto(source, path, vendor_categories=vendor_categories, trace_name=trace_name)
    from .chrome import write_chrome_trace

    return write_chrome_trace(source, path, vendor_categories=vendor_categories, trace_name=trace_name)


__all__ = ["FORMATS", "PERFETTO_SUFFIXES", "check_format", "format_of", "is_perfetto_path", "suffix", "write_trace"]
