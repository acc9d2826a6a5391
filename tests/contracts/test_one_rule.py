"""Each rule once (issue 37): the function that holds it is named here, and the copies it replaced stay gone.

- the per-name report: ``analysis.report.name_stats`` (over ``EventTable.from_table``, whichever reader made
  the table: the DuckDB SQL copy, ``analysis/store_report.py``, is gone);
- the metric join: ``analysis.event_table.join_metrics``;
- which files a directory holds: ``trace.read.inputs.expand_inputs`` (no other module lists a directory
  for traces);
- the Kineto JSON reader: ``trace.read.kineto`` over ``kineto_stream`` (one C scanner, ``tracescan``);
- the store's rows: ``trace.write.parquet.StoreRows`` (a builder's and ``convert``'s);
- the Parquet writer imports nothing of the Chrome writer;
- key_averages' rows: ``analysis.trace_columns.columns_of_table`` (a builder's and a parsed document's
  through ``KeyAverages.from_table``: the builder walk and the dict walk are gone);
- the cluster analyses: numpy over a rank group's table (``analysis.cluster.frame``), no SQL of their own;
  the engines read and distribute rank groups (``Engine.map``);
- a diff side: ``analysis.diff.read_side`` (one table per side, read once by the command);
- merge: the one reader in, a merged TraceTable out through the writers (``analysis.merge.merged_table``).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "xpuprof"


def _source(rel: str) -> str:
    return (PACKAGE / rel).read_text(encoding="utf-8")


def _defined(rel: str) -> set[str]:
    tree = ast.parse(_source(rel))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
    return out


def _imports(rel: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(_source(rel))):
        if isinstance(node, ast.ImportFrom):
            out.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_one_functions_exist():
    assert "name_stats" in _defined("analysis/report.py")
    assert {"join_metrics", "EventTable"} <= _defined("analysis/event_table.py")
    assert "expand_inputs" in _defined("trace/read/inputs.py")
    assert {"read_trace", "TraceReader", "read_header"} <= _defined("trace/read/kineto.py")
    assert "StoreRows" in _defined("trace/write/parquet.py")


def test_the_copies_they_replaced_are_gone():
    assert not (PACKAGE / "analysis" / "store_report.py").exists()
    assert not (PACKAGE / "trace" / "read" / "stream.py").exists()
    assert not (PACKAGE / "_native" / "tracestream.c").exists()
    assert {"from_trace", "from_scan", "from_builder"}.isdisjoint(_defined("analysis/event_table.py"))
    assert {"_BuilderRows", "_Rows"}.isdisjoint(_defined("trace/write/parquet.py") | _defined("trace/write/kineto_store.py"))
    assert {"expand_paths", "TraceFile", "load_traces", "_read_for_report"}.isdisjoint(_defined("analysis/report.py"))


def test_the_parquet_writer_imports_nothing_of_the_chrome_writer():
    for rel in ("trace/write/parquet.py", "trace/write/kineto_store.py"):
        assert not any(m.endswith(("chrome", "rows", "rows_native")) for m in _imports(rel)), rel


def test_no_module_but_the_directory_rule_lists_a_directory_for_traces():
    listing = ("rglob(", ".glob(", "iterdir(", "os.walk(", "scandir(")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "trace/read/inputs.py" or not rel.startswith(("analysis/", "commands/", "trace/read/")):
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}: {word}" for word in listing if word in text and ".json" in text]
    # Listings that are not trace inputs: merge looks beside its output for what HTA would take for a rank there
    # (a warning); the run history lists its own series directory; convert removes a store it made and could not
    # fill (a failed convert leaves nothing behind).
    assert found == ["analysis/history.py: iterdir(", "analysis/merge.py: iterdir(", "commands/convert.py: iterdir("], found


def _calls(rel: str, function: str) -> set[str]:
    """Names of the functions and attributes ``function`` (a def or method in ``rel``) calls."""
    for node in ast.walk(ast.parse(_source(rel))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            return {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                    for c in ast.walk(node) if isinstance(c, ast.Call)}
    raise AssertionError(f"{rel} defines no {function}")


def test_key_averages_rows_come_from_the_table_only():
    assert "columns_of_table" in _defined("analysis/trace_columns.py")
    assert {"columns_of_builders", "columns_of_events", "_memory_of_builder"}.isdisjoint(
        _defined("analysis/trace_columns.py"))
    assert "columns_of_table" in _calls("analysis/summary.py", "from_table")
    for entry in ("from_builder", "from_events"):  # each a TraceTable first, then the one path
        assert "from_table" in _calls("analysis/summary.py", entry), entry


def test_the_cluster_analyses_hold_no_sql_and_import_no_duckdb():
    for path in sorted((PACKAGE / "analysis" / "cluster").glob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        assert not any(m.startswith("duckdb") for m in _imports(rel)), rel
        assert not any(word in text for word in ("SELECT ", "CREATE VIEW", "CREATE TABLE", "con.execute(")), rel
    assert {"hta_map", "Frame"} <= _defined("analysis/cluster/frame.py")
    assert {"create_base", "create_frame", "register_kernel_types"}.isdisjoint(_defined("analysis/cluster/frame.py"))
    assert "map" in _defined("analysis/engines/base.py")


def test_a_diff_side_is_read_once_by_one_function():
    assert "read_side" in _defined("analysis/diff.py")
    assert {"load_telemetry", "metric_units"}.isdisjoint(_defined("analysis/diff.py"))  # second reads of a side
    calls = [c for c in ast.walk(ast.parse(_source("commands/diff.py"))) if isinstance(c, ast.Call)
             and getattr(c.func, "id", getattr(c.func, "attr", "")) in ("read_side", "load_side", "read_trace")]
    assert [c.func.id for c in calls] == ["read_side", "read_side"]


def test_merge_reads_and_writes_through_the_table():
    """``xpuprof merge``: ranks read by the one reader (``read_inputs``: the files ``report DIR`` reads), the view a
    TraceTable rendered by the writers every command uses (``write_trace``); the dict path (``trace_files``, the
    per-event dict walk and merge's own JSON writer) is gone."""
    assert not (PACKAGE / "analysis" / "trace_files.py").exists()
    assert {"_rank_events", "_write", "_encode_event", "_may_need_layout", "_lay_out"}.isdisjoint(
        _defined("analysis/merge.py"))
    imports = _imports("analysis/merge.py")
    assert not any(m.endswith(("read.load", "trace_files", "orjson")) for m in imports), imports
    assert "read_inputs" in _calls("analysis/merge.py", "read_ranks")
    assert "write_trace" in _calls("analysis/merge.py", "merge_traces")
