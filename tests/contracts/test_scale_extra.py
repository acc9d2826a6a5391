"""Without the scale extra (duckdb, pyarrow, ray) xpuprof imports, profiles and writes JSON traces; the
store's commands and export_parquet say in one line what to install."""
from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK = textwrap.dedent("""
    import sys
    class _NoScale:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("duckdb", "pyarrow", "ray"):
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None
    sys.meta_path.insert(0, _NoScale())
""")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=180)


def test_profiling_works_without_the_scale_packages(tmp_path):
    done = _run(f"""
        import xpuprof
        with xpuprof.profile(activities=["cpu"]) as prof:
            with xpuprof.record_function("x"):
                pass
        prof.export_chrome_trace({str(tmp_path / 't.json')!r})
        try:
            prof.export_parquet({str(tmp_path / 'store')!r})
        except ValueError as exc:
            print("REFUSED", exc)
    """)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t.json").exists()
    assert "REFUSED" in done.stdout and "pip install 'xpuprof[scale]'" in done.stdout
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_store_commands_say_what_to_install(tmp_path):
    (tmp_path / "xpuprof-store.json").write_text('{"format": "xpuprof-store", "schema_version": 1}')
    for argv, what in ((["analyze", str(tmp_path), "temporal"], "pyarrow"),
                       (["convert", str(tmp_path / "none.json"), "-o", str(tmp_path / "s")], "pyarrow")):
        done = _run(f"""
            import sys
            from xpuprof.cli import main
            sys.exit(main({argv!r}))
        """)
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 2, done.stderr
        assert any(what in ln and "xpuprof[scale]" in ln for ln in lines), lines


def test_analyses_of_trace_files_need_no_scale_package(tmp_path):
    """The analyses are numpy over the trace table: JSON traces need neither pyarrow, duckdb nor ray."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 5, "pid": 0, '
                     '"tid": 7, "args": {"stream": 7, "correlation": 1}}]}')
    done = _run(f"""
        import sys
        from xpuprof.cli import main
        sys.exit(main(["analyze", {str(trace)!r}, "temporal", "--format", "json"]))
    """)
    assert done.returncode == 0, done.stderr
    assert '"kernel_us":5.0' in done.stdout
