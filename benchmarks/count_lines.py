"""Logical lines and docstring coverage of the ``xpuprof`` package at any git revision (issue 37, "Smaller").

    python benchmarks/count_lines.py REV [REV]          # the package at REV (and the change to the second REV)
    python benchmarks/count_lines.py REV REV --files    # per file: lines at each, the largest changes first
    python benchmarks/count_lines.py REV REV --paths P [P ...]   # only files under these paths
    python benchmarks/count_lines.py --own 93da605..table 9912574..table2   # what these branches' commits did

``--own RANGE ...``: the change a branch's own commits made, without the work of other branches merged into
it: along each range's first-parent chain, a commit counts its change against its first parent, and a merge
of another branch only its own part (its change against its first parent less what the merged side brought:
``L(merge) - L(first parent) - L(merged side) + L(their merge base)``, per file). Files are split into those
a counted commit added and those that existed before (changed or removed): the refactor's own delta.

A *logical line* is a physical line that holds a token of code: blank lines, comment lines and the lines of
docstrings (a string that is the first statement of a module, class or function) are not counted; a line
that holds code and a comment counts once; every line of a multi-line expression counts. The tokens come
from ``tokenize``, the docstrings from ``ast``; the files from ``git show REV:PATH``, so any revision is
counted without checking it out (the working tree is ``WORKTREE``).

Docstring coverage: the share of modules, and of functions and methods (``def``/``async def``, nested ones
included), that have a docstring.
"""
from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "xpuprof"
WORKTREE = "WORKTREE"
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER, tokenize.ENCODING}


@dataclass
class Counts:
    lines: int = 0
    modules: int = 0
    modules_doc: int = 0
    functions: int = 0
    functions_doc: int = 0

    def add(self, other: "Counts") -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def count_source(text: str) -> Counts:
    """The logical lines and docstring counts of one module's source."""
    tree = ast.parse(text)
    doc_lines: set[int] = set()
    out = Counts(modules=1, modules_doc=int(ast.get_docstring(tree, clean=False) is not None))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.functions += 1
            out.functions_doc += ast.get_docstring(node, clean=False) is not None
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in _NOT_CODE:
            continue
        if tok.type == tokenize.STRING and tok.start[0] in doc_lines:
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    out.lines = len(code - {ln for ln in doc_lines if ln not in code})
    return out


def files_at(rev: str, paths: list[str]) -> dict[str, str]:
    """path -> source of every ``*.py`` under ``paths`` at ``rev`` (``WORKTREE``: the files on disk)."""
    if rev == WORKTREE:
        out = {}
        for top in paths:
            for p in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else [ROOT / top]:
                if p.is_file() and "__pycache__" not in p.parts:
                    out[str(p.relative_to(ROOT))] = p.read_text(encoding="utf-8")
        return out
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "--", *paths],
                           check=True, capture_output=True, text=True).stdout.split()
    out = {}
    for name in names:
        if name.endswith(".py"):
            out[name] = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{name}"], check=True,
                                       capture_output=True, text=True).stdout
    return out


_BLOB_LINES: dict[str, int] = {}


def lines_at(rev: str, paths: list[str]) -> dict[str, int]:
    """path -> logical lines of every ``*.py`` under ``paths`` at ``rev``, each blob counted once."""
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", rev, "--", *paths], check=True,
                             capture_output=True, text=True).stdout.splitlines()
    blobs = {}
    for line in listing:
        meta, name = line.split("\t", 1)
        if name.endswith(".py"):
            blobs[name] = meta.split()[2]
    todo = sorted({b for b in blobs.values() if b not in _BLOB_LINES})
    if todo:
        out = subprocess.run(["git", "-C", str(ROOT), "cat-file", "--batch"], input=("\n".join(todo) + "\n").encode(),
                             check=True, capture_output=True, text=False).stdout
        at = 0
        for sha in todo:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            text = out[header_end + 1:header_end + 1 + size].decode("utf-8")
            at = header_end + 1 + size + 1
            _BLOB_LINES[sha] = count_source(text).lines
    return {name: _BLOB_LINES[sha] for name, sha in blobs.items()}


def _git(*args: str) -> list[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.split()


def own_change(ranges: list[str], paths: list[str]) -> tuple[dict[str, int], set[str], int]:
    """Per file, the logical lines the first-parent commits of ``ranges`` added (+) or removed (-) on their
    own; the files those commits created; and how many commits counted."""
    per_file: dict[str, int] = {}
    created: set[str] = set()
    commits = 0
    for rng in ranges:
        for commit in _git("rev-list", "--first-parent", "--reverse", rng):
            parents = _git("rev-list", "--parents", "-n", "1", commit)[1:]
            after, before = lines_at(commit, paths), lines_at(parents[0], paths)
            delta = {f: after.get(f, 0) - before.get(f, 0) for f in set(after) | set(before)}
            created |= set(after) - set(before)
            if len(parents) > 1:  # a merge: only what it did beyond what the merged side brought
                theirs, base = lines_at(parents[1], paths), lines_at(_git("merge-base", *parents[:2])[0], paths)
                for f in set(theirs) | set(base):
                    delta[f] = delta.get(f, 0) - (theirs.get(f, 0) - base.get(f, 0))
                created -= set(theirs) - set(base)
            for f, d in delta.items():
                if d:
                    per_file[f] = per_file.get(f, 0) + d
            commits += 1
    return per_file, created, commits


def count_rev(rev: str, paths: list[str]) -> tuple[Counts, dict[str, int]]:
    total, per_file = Counts(), {}
    for name, text in files_at(rev, paths).items():
        c = count_source(text)
        total.add(c)
        per_file[name] = c.lines
    return total, per_file


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f} %" if d else "-"


def describe(rev: str, c: Counts) -> str:
    return (f"{rev}: {c.lines:,} logical lines in {c.modules} modules; docstrings: modules "
            f"{c.modules_doc}/{c.modules} ({_pct(c.modules_doc, c.modules)}), functions "
            f"{c.functions_doc}/{c.functions} ({_pct(c.functions_doc, c.functions)})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("revs", nargs="*", metavar="REV", help=f"git revisions ({WORKTREE}: the files on disk)")
    ap.add_argument("--own", nargs="+", metavar="RANGE", help="first-parent commit ranges (A..B): the change "
                    "their own commits made, merged work left out")
    ap.add_argument("--paths", nargs="+", default=[PACKAGE], help="files or folders to count (default: xpuprof)")
    ap.add_argument("--files", action="store_true", help="per-file lines, the largest changes first")
    args = ap.parse_args(argv)
    if len(args.revs) > 2 or not (args.revs or args.own):
        ap.error("one or two revisions, or --own RANGE ...")
    if args.own:
        per_file, created, commits = own_change(args.own, args.paths)
        new = sum(d for f, d in per_file.items() if f in created)
        old = sum(d for f, d in per_file.items() if f not in created)
        print(f"own change of {commits} first-parent commits in {' '.join(args.own)}: {new + old:+,} logical lines "
              f"= {old:+,} in files that existed before (changed or removed) {new:+,} in files they added "
              f"({len(created & set(per_file))})")
        if args.files:
            for f in sorted(per_file, key=lambda n: (-abs(per_file[n]), n)):
                print(f"{per_file[f]:+7,}  {'added  ' if f in created else 'changed'}  {f}")
        if not args.revs:
            return 0
    results = [count_rev(rev, args.paths) for rev in args.revs]
    for rev, (c, _) in zip(args.revs, results):
        print(describe(rev, c))
    if len(results) == 2:
        (a, fa), (b, fb) = results
        print(f"change: {b.lines - a.lines:+,} logical lines ({len(set(fb) - set(fa))} files added, "
              f"{len(set(fa) - set(fb))} removed)")
        if args.files:
            names = sorted(set(fa) | set(fb), key=lambda n: (-abs(fb.get(n, 0) - fa.get(n, 0)), n))
            for n in names:
                d = fb.get(n, 0) - fa.get(n, 0)
                if d:
                    print(f"{d:+7,}  {fa.get(n, 0):6,} -> {fb.get(n, 0):6,}  {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
