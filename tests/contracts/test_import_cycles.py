"""No import cycle anywhere in xpuprof: the graph of every import statement (grimp reads them all - at module
level, inside functions, under ``if TYPE_CHECKING:``) has no strongly connected component of two modules or
more. A package's ``__init__`` counts as the package's module, so a submodule importing names from its own
package while the package imports it is a cycle too."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def import_cycles(package: str) -> list[list[str]]:
    """The cycles of a package's import graph: its strongly connected components of two modules or more
    (Tarjan's algorithm, iterative), each sorted; sorted by their first module."""
    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)
    modules = sorted(graph.modules)
    edges = {m: sorted(x for x in graph.find_modules_directly_imported_by(m) if x in graph.modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def test_xpuprof_has_no_import_cycle():
    cycles = import_cycles("xpuprof")
    assert not cycles, "import cycles (each line one strongly connected set of modules):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_check_finds_cycles_through_function_and_type_checking_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "cyclepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")  # function-local
    (pkg / "b.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from . import a
    """))
    (pkg / "sub" / "__init__.py").write_text("y = 2\nfrom .leaf import x\n")
    (pkg / "sub" / "leaf.py").write_text("from . import y\nx = 1\n")  # a name of its own package, which imports it
    (pkg / "sub" / "helper.py").write_text("from . import leaf\n")  # a submodule: no cycle
    (pkg / "c.py").write_text("import cyclepkg.a\n")  # reaches a cycle, is in none
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclepkg") == [["cyclepkg.a", "cyclepkg.b"], ["cyclepkg.sub", "cyclepkg.sub.leaf"]]
    sys.modules.pop("cyclepkg", None)
