"""``xpuprof convert INPUT… -o STORE``: Kineto JSON traces (``.json``/``.json.gz``; torch's, xpuprof's,
any Kineto's) or Perfetto protobuf traces (``.pftrace``) into a trace store, one rank partition per trace,
JSON streamed in bounded memory.

``xpuprof convert INPUT -o OUT.json[.gz]`` or ``-o OUT.pftrace``: one trace (any of those) into a trace every
viewer shows whole: slices that overlap without nesting on a thread (torch.profiler's asyncio tasks) on lanes of
their own, ids within 32 bits (what the trace's ``laneLayout``/``idMap`` metadata then say); ``.pftrace`` is
Perfetto's native protobuf, which Perfetto's UI opens far bigger than JSON. A store is laid out the same way.

Inputs are files, or directories whose ``*.json``/``*.json.gz`` files are read, recursively (the rule every
command shares: symbolic links, hidden entries and stores inside are skipped, and said). Each trace's rank: ``distributedInfo.rank``, else ``rank<N>``/``rank-N``
in its file name, else its position among the inputs (the rank's metadata says which). A store that
exists gets the ranks it lacks; a rank it has is refused unless ``--replace``. A bad input gets one
line and the others are still converted (exit status 2 then)."""
from __future__ import annotations

import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("convert", help="traces into a columnar trace store (Parquet), or one trace into a "
                              "trace every viewer shows whole (-o X.json, X.json.gz or X.pftrace)", description=__doc__)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="trace files (.json/.json.gz/.pftrace) or directories of them")
    p.add_argument("-o", "--output", required=True, metavar="STORE|TRACE",
                   help="the store directory (created when new), or a .json/.json.gz/.pftrace trace file (one INPUT)")
    p.add_argument("--replace", action="store_true", help="replace ranks the store already holds")
    p.add_argument("--rank", type=int, default=None, metavar="N",
                   help="the rank of the one INPUT (default: from the trace, its name or its position)")
    from ._options import add_progress_option

    add_progress_option(p)
    p.set_defaults(func=run)


def expand_inputs(inputs: list[str], store: Path) -> tuple[list[Path], list[str], list[str]]:
    """(trace files in order, one error line per input that names nothing to convert, one line per directory
    on what it held that is not read) by the one directory rule (``trace.read.inputs``)."""
    from ..trace.read.inputs import expand_inputs as expand

    got = expand(inputs, strict=False)
    errors = list(got.errors)
    store = store.resolve()
    for s in got.stores:
        errors.append(f"{s}: is the output store itself" if s.resolve() == store else
                      f"{s}: is a trace store, not a trace file (convert reads Kineto JSON traces)")
    return got.traces, errors, got.notes


def _installed(package: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


TRACE_SUFFIXES = (".json", ".json.gz")


def run(args) -> int:
    from ..trace.write.files import is_perfetto_path

    if str(args.output).endswith(TRACE_SUFFIXES) or is_perfetto_path(args.output):
        return run_to_trace(args)
    from ..trace.write.kineto_store import ConvertError, convert_trace
    from ..trace.write.rankwriter import StoreWriteError, prepare_store

    if args.rank is not None and args.rank < 0:
        print(f"xpuprof convert: --rank must be 0 or more, not {args.rank}", file=sys.stderr)
        return 2
    if not _installed("pyarrow"):  # checked before any input is read
        print("xpuprof convert: a trace store needs the pyarrow package: pip install 'xpuprof[scale]'",
              file=sys.stderr)
        return 2
    store = Path(args.output)
    files, errors, notes = expand_inputs(args.inputs, store)
    for line in notes + errors:
        print(f"xpuprof convert: {line}", file=sys.stderr)
    if args.rank is not None and len(files) != 1:
        print(f"xpuprof convert: --rank names the rank of one input; {len(files)} inputs given", file=sys.stderr)
        return 2
    if args.rank is not None and args.rank < 0:
        print(f"xpuprof convert: --rank must be 0 or more, not {args.rank}", file=sys.stderr)
        return 2
    if not files:  # nothing to convert: said above, and no store is created for it
        print(f"xpuprof convert: nothing converted; {store} was not created" if not store.exists() else
              f"xpuprof convert: nothing converted into {store}", file=sys.stderr)
        return 2
    created = not store.exists()
    try:
        prepare_store(store)
    except (StoreWriteError, OSError) as exc:
        print(f"xpuprof convert: {exc}", file=sys.stderr)
        return 2
    from ..progress import bar
    from ..trace.read.inputs import input_bytes

    from ..analysis.report_summary import RankRows

    taken: dict[int, str] = {}
    done: list = []
    alone = len(files) == 1  # one input: its error is the one line (with what became of the store)
    with bar("converting", len(files), unit="traces", size_bytes=input_bytes(files)) as shown:
        for position, path in enumerate(files):
            kept = RankRows()  # the rank's rows as written: its report summary is computed from them
            try:
                got = convert_trace(path, store, rank=args.rank, position=position, replace=args.replace,
                                    taken=taken, keep=kept)
            except ConvertError as exc:
                errors.append(str(exc))
            except OSError as exc:  # a full disk, a read-only store: the store stays as it was for this rank
                errors.append(f"{path}: cannot write {store}: {exc.strerror or exc}")
            else:
                done.append(got)
                _keep_summary(store, got, kept)
                continue
            finally:
                shown.advance()
            if not alone:
                print(f"xpuprof convert: {errors[-1]}", file=sys.stderr)
    if not done and created:
        _remove_empty_store(store)  # a failed convert leaves nothing behind (not an empty store)
        print(f"xpuprof convert: {errors[-1]}; {store} was not created" if alone else
              f"xpuprof convert: no trace converted; {store} was not created", file=sys.stderr)
        return 2
    if alone and not done:
        print(f"xpuprof convert: {errors[-1]}", file=sys.stderr)
        return 2
    print(f"xpuprof convert: {summary_line(done, len(files), store)}", file=sys.stderr)
    return 2 if errors else 0


def run_to_trace(args) -> int:
    """One trace into a laid-out trace, Kineto JSON or Perfetto protobuf by the output's name (``-o OUT.json[.gz]``,
    ``-o OUT.pftrace``)."""
    from ..outputs import names_stdout, write_error_line
    from ..trace.layout import lay_out
    from ..trace.read.inputs import read_file
    from ..trace.read.kineto import time_error
    from ..trace.read.source import TraceLoadError
    from ..trace.write.files import write_trace

    out = Path(args.output)
    if args.rank is not None or args.replace:
        print(f"xpuprof convert: --rank and --replace name a store's rank; {out} is a trace file", file=sys.stderr)
        return 2
    if out.is_dir():
        print(f"xpuprof convert: {out} is a directory; a trace output is a .json, .json.gz or .pftrace file",
              file=sys.stderr)
        return 2
    files, errors, notes = expand_inputs(args.inputs, out)
    for line in notes + errors:
        print(f"xpuprof convert: {line}", file=sys.stderr)
    if len(files) != 1:
        print(f"xpuprof convert: a trace output holds one trace; {len(files)} inputs given (merge several ranks "
              f"with xpuprof merge, or convert them into a store)", file=sys.stderr)
        return 2
    (path,) = files
    try:
        table = read_file(path)
        bad = next(filter(None, map(time_error, table.traces)), None)  # the rule report and convert -o STORE use
        if bad:
            raise TraceLoadError(f"{path}: {bad}; nothing of it written")
        table = lay_out(table)
        written = write_trace(table, out)
    except (TraceLoadError, ValueError) as exc:
        print(f"xpuprof convert: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"xpuprof convert: {write_error_line(out, exc)}", file=sys.stderr)
        return 1
    print(f"xpuprof convert: {path} -> {written} ({table.traces[0].events} events; {table.layout})",
          file=sys.stderr if names_stdout(out) else sys.stdout)
    return 2 if errors else 0


def summary_line(done: list, inputs: int, store: Path) -> str:
    """The one line at the end of a convert, whatever the number of ranks: how many traces went in, the
    ranks in numeric order as ranges (``ranks 0-999``), the rows, and where each rank number came from.
    One trace names its file, as the per-rank line did."""
    from ..analysis.text import format_ranks

    if not done:
        return f"0 of {inputs:,} trace(s) into {store}: no rank converted"
    events = sum(c.events for c in done)
    slices = sum(c.rows.get("slices", 0) for c in done)
    sources: dict[str, int] = {}
    for c in done:
        sources[c.rank_source] = sources.get(c.rank_source, 0) + 1
    source = (f"rank from {next(iter(sources))}" if len(sources) == 1 else
              "ranks from " + ", ".join(f"{k} {n:,}" for k, n in sorted(sources.items(), key=lambda kv: -kv[1])))
    ranks = sorted(c.rank for c in done)
    which = f"rank {ranks[0]} <- {done[0].path}" if len(done) == 1 else f"ranks {format_ranks(ranks)}"
    return (f"{len(done):,} of {inputs:,} trace(s) into {store}: {which} ({events:,} events, {slices:,} slices; "
            f"{source})")


def _remove_empty_store(store: Path) -> None:
    """The store this run created and put no rank into: only its manifest (and temp files) to remove."""
    from ..trace.write.rankwriter import MANIFEST

    for entry in store.iterdir():
        if entry.name != MANIFEST and not entry.name.startswith("."):
            return  # something else arrived meanwhile (another writer): leave it all
    for entry in store.iterdir():
        if entry.is_file() and not entry.is_symlink():
            entry.unlink()
    store.rmdir()


def _keep_summary(store: Path, got, kept) -> None:
    """The rank's report summary beside its rows (``analysis.report_summary``: ``report STORE`` reads it instead
    of the events), computed from the rows convert wrote (``kept``), not read back; one that cannot be written
    is said, and the rank stays as converted."""
    from ..analysis.report_summary import write_summary
    from ..trace.store_schema import rank_dir_name

    rank = got.rank
    try:
        write_summary(store / rank_dir_name(rank), kept, got.metadata)
    except OSError as exc:
        print(f"xpuprof convert: {store}: rank {rank}'s report summary was not written ({exc.strerror or exc}); "
              "`xpuprof report` reads its rows instead", file=sys.stderr)
