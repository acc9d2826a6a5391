"""``xpuprof convert INPUT… -o STORE``: Kineto JSON traces (``.json``/``.json.gz``; torch's, xpuprof's,
any Kineto's) into a trace store, one rank partition per trace, streamed in bounded memory.

Inputs are files, or directories whose ``*.json``/``*.json.gz`` files are read, recursively (the rule every
command shares: symbolic links, hidden entries and stores inside are skipped, and said). Each trace's rank: ``distributedInfo.rank``, else ``rank<N>``/``rank-N``
in its file name, else its position among the inputs (the rank's metadata says which). A store that
exists gets the ranks it lacks; a rank it has is refused unless ``--replace``. A bad input gets one
line and the others are still converted (exit status 2 then)."""
from __future__ import annotations

import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("convert", help="Kineto JSON traces into a columnar trace store (Parquet)",
                              description=__doc__)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="trace files (.json/.json.gz) or directories of them")
    p.add_argument("-o", "--output", required=True, metavar="STORE", help="the store directory (created when new)")
    p.add_argument("--replace", action="store_true", help="replace ranks the store already holds")
    p.add_argument("--rank", type=int, default=None, metavar="N",
                   help="the rank of the one INPUT (default: from the trace, its name or its position)")
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


def run(args) -> int:
    from ..trace.write.kineto_store import ConvertError, convert_trace
    from ..trace.write.rankwriter import StoreWriteError, prepare_store

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
    taken: dict[int, str] = {}
    done = 0
    for position, path in enumerate(files):
        try:
            got = convert_trace(path, store, rank=args.rank, position=position, replace=args.replace, taken=taken)
        except ConvertError as exc:
            print(f"xpuprof convert: {exc}", file=sys.stderr)
            errors.append(str(exc))
            continue
        except OSError as exc:  # a full disk, a read-only store: the store stays as it was for this rank
            print(f"xpuprof convert: {path}: cannot write {store}: {exc.strerror or exc}", file=sys.stderr)
            errors.append(str(exc))
            continue
        done += 1
        _keep_summary(store, got.rank)
        print(f"xpuprof convert: rank {got.rank} <- {path} ({got.events} events, {got.rows['slices']} slices; rank "
              f"from {got.rank_source})", file=sys.stderr)
    if not done and created:
        _remove_empty_store(store)  # a failed convert leaves nothing behind (not an empty store)
        print(f"xpuprof convert: no trace converted; {store} was not created", file=sys.stderr)
        return 2
    print(f"xpuprof convert: {done} of {len(files)} trace(s) into {store}", file=sys.stderr)
    return 2 if errors else 0


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


def _keep_summary(store: Path, rank: int) -> None:
    """The rank's report summary beside its rows (``analysis.report_summary``: ``report STORE`` reads it instead
    of the events); one that cannot be written is said, and the rank stays as converted."""
    from ..analysis.report_summary import write_summary
    from ..trace.store_schema import rank_dir_name

    try:
        write_summary(store / rank_dir_name(rank))
    except OSError as exc:
        print(f"xpuprof convert: {store}: rank {rank}'s report summary was not written ({exc.strerror or exc}); "
              "`xpuprof report` reads its rows instead", file=sys.stderr)
