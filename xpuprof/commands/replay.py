"""``xpuprof replay CAPTURE -o TRACE``: turn a raw PTI capture (saved with ``raw_capture_path``)
into a trace, through the same decoder and writer as a live XPU session. Needs no PTI or GPU."""
from __future__ import annotations

import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("replay", help="decode a raw PTI capture into a trace (no GPU needed)",
                              description=__doc__)
    p.add_argument("capture", metavar="CAPTURE", help="raw PTI capture file")
    p.add_argument("-o", "--output", default=None, metavar="TRACE",
                   help="trace file to write (.json or .json.gz; default: CAPTURE with .json)")
    p.add_argument("--all", action="store_true", help="keep records outside the capture's window")
    p.add_argument("--legacy-categories", action="store_true",
                   help="accepted for compatibility: xpu_runtime/xpu_driver category names are the default")
    p.add_argument("--generic-categories", action="store_true",
                   help="write the generic category names (runtime, driver) instead of xpu_runtime/xpu_driver")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..backends.xpu import capture
    from ..backends.xpu.records import BufferDecodeError
    from ..outputs import names_stdout, write_error_line
    from ..trace.builder.builder import TraceBuilder
    from ..trace.write.chrome import write_chrome_trace

    out = Path(args.output) if args.output else Path(args.capture).with_suffix(".json")
    builder = TraceBuilder()
    try:
        cap = capture.load(args.capture)
        result = capture.replay(args.capture, builder, use_window=not args.all)
    except (capture.CaptureError, BufferDecodeError) as exc:  # bad input: one line, status 2
        print(f"xpuprof replay: {exc}", file=sys.stderr)
        return 2
    if cap.window is not None:
        builder.set_window(cap.window.start_ns, cap.window.end_ns)
    try:
        path = write_chrome_trace(builder, out, vendor_categories=not args.generic_categories)
    except OSError as exc:  # a full disk, a directory or a read-only place at -o: one line, no traceback
        print(f"xpuprof replay: {write_error_line(out, exc)}", file=sys.stderr)
        return 1
    counts = ", ".join(f"{n} {cat}" for cat, n in sorted(result.counts.items())) or "no events"
    dropped = f"; dropped: {builder.dropped}" if builder.dropped else ""
    print(f"wrote {path} (PTI {cap.context.pti_version}: {counts}{dropped})",
          file=sys.stderr if names_stdout(out) else sys.stdout)  # -o /dev/stdout: stdout holds only the trace
    return 0
