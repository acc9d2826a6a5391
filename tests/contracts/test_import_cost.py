"""What ``import xpuprof`` loads: the host recorder, the API and PTI's view library (which must load
before SYCL initializes), and not the trace writer, the reader, PTI's ctypes bindings or
``importlib.metadata``; those load when a profile first prepares a cycle (never at stop or export).
The time itself is measured by benchmarks/bench_import.py."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Modules of the stages after recording (or of the library lookup at session time) that `import xpuprof`
# must leave unloaded.
NOT_AT_IMPORT = ("xpuprof.trace.write.chrome", "xpuprof.trace.write.rows", "xpuprof.trace.read.load",
                 "xpuprof.trace.builder.builder", "xpuprof.profiler.assemble", "xpuprof.backends.xpu.pti",
                 "importlib.metadata", "ctypes.util", "subprocess", "difflib", "socket")


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_xpuprof_leaves_the_later_stages_unloaded():
    out = _run(f"""
        import json, sys
        import xpuprof
        from xpuprof.backends.xpu import early_load
        print(json.dumps({{"loaded": sorted(m for m in {NOT_AT_IMPORT!r} if m in sys.modules),
                          "status": early_load.status()}}))
    """)
    assert out["loaded"] == []
    pti_wheel = Path(sys.prefix, "lib", "libpti_view.so")
    if pti_wheel.is_file():  # PTI's view library still loads at import, from the wheel, without metadata
        assert out["status"] == f"loaded at import: {pti_wheel.resolve()}" or \
            out["status"] == f"loaded at import: {pti_wheel}", out["status"]


def test_a_profile_loads_the_trace_stages_before_recording_and_writes():
    out = _run("""
        import json, sys, tempfile, os
        import xpuprof
        before = "xpuprof.trace.write.chrome" in sys.modules
        prof = xpuprof.profile(activities=["cpu"])
        prof.start()
        at_start = all(m in sys.modules for m in ("xpuprof.trace.write.chrome", "xpuprof.profiler.assemble"))
        with xpuprof.record_function("step"):
            pass
        prof.stop()
        path = os.path.join(tempfile.mkdtemp(), "t.json")
        prof.export_chrome_trace(path)
        names = [e["name"] for e in json.load(open(path))["traceEvents"]]
        print(json.dumps({"before": before, "at_start": at_start, "step": "step" in names}))
    """)
    assert out == {"before": False, "at_start": True, "step": True}


def test_the_trace_package_names_resolve_on_first_use():
    import xpuprof.trace as trace
    from xpuprof.trace import TraceBuilder, write_chrome_trace
    from xpuprof.trace.builder.builder import TraceBuilder as direct
    from xpuprof.trace.write.chrome import write_chrome_trace as direct_writer

    assert TraceBuilder is direct and write_chrome_trace is direct_writer
    assert {"TraceBuilder", "load", "write_chrome_trace"} <= set(dir(trace))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        trace.nonexistent  # noqa: B018


def test_the_light_pti_lookup_finds_what_importlib_metadata_finds():
    from importlib import metadata

    from xpuprof.vendors import pti_locate as locate

    try:
        dist = metadata.distribution("intel-pti")
    except metadata.PackageNotFoundError:
        pytest.skip("intel-pti is not installed here: nothing for the two lookups to agree on")
    expected = [Path(dist.locate_file(f)).resolve() for f in dist.files or () if f.name.startswith("libpti_view.so")]
    assert expected, "the intel-pti wheel lists no libpti_view.so"
    assert locate.wheel_candidates()[:len(expected)] == expected


def test_the_light_pti_lookup_reads_a_wheel_record(tmp_path, monkeypatch):
    from xpuprof.vendors import pti_locate as locate

    site = tmp_path / "lib" / "python3" / "site-packages"
    info = site / "intel_pti-9.9.dist-info"
    info.mkdir(parents=True)
    lib = tmp_path / "lib" / "libpti_view.so"
    lib.write_bytes(b"\x7fELF")
    info.joinpath("RECORD").write_text("../../libpti_view.so,sha256=x,4\n../../pti/libpti.so,sha256=y,4\n"
                                       "intel_pti-9.9.dist-info/RECORD,,\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nowhere"), str(site)])
    monkeypatch.delenv(locate.PTI_LIBRARY_ENV, raising=False)
    assert locate.wheel_candidates()[0] == lib.resolve()
    assert locate.installed_view_library() == lib.resolve()
