import importlib.metadata

import pytest

pytestmark = pytest.mark.slow


def _plugin_args():
    # Once the pytest11 entry point is installed the plugin autoloads; do not register it twice.
    eps = importlib.metadata.entry_points(group="pytest11")
    return [] if any(ep.value.startswith("xpuprof.pytest_plugin") for ep in eps) else ["-p", "xpuprof.pytest_plugin"]


_FRESH_PROBES = """
import json
from xpuprof.pytest_plugin import probe_device
print(json.dumps({name: probe_device(name) for name in ("xpu", "cuda", "rocm")}))
"""


def test_device_markers_skip_with_probe_reason(pytester):
    import json
    import subprocess
    import sys

    pytester.makeini("[pytest]\nxpuprof_device_markers = true\n")  # a suite whose plain markers are ours
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xpu
        def test_x(): pass

        @pytest.mark.cuda
        def test_c(): pass

        @pytest.mark.rocm
        def test_r(): pass

        def test_plain(): pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args(), "-rs")
    # The reasons expected are a fresh process's, as the inner session's are: this process's may differ (a
    # library an earlier test loaded here is found in its memory maps: tests/rocm's double made the rocm
    # probe say "no /dev/kfd" here and "rocprofiler-sdk not found" in the inner session, once in CI).
    fresh = subprocess.run([sys.executable, "-c", _FRESH_PROBES], capture_output=True, text=True, check=True)
    probes = json.loads(fresh.stdout)
    skipped = sum(not ok for ok, _ in probes.values())
    res.assert_outcomes(passed=4 - skipped, skipped=skipped)
    for name, (ok, reason) in probes.items():
        if not ok:
            assert reason
            res.stdout.fnmatch_lines([f"*{name} device not available: {reason[:40]}*"])


def test_other_projects_plain_device_markers_are_left_alone(pytester):
    """Another suite's `cuda` test was skipped by xpuprof. Plain markers are acted on only for
    tests that use xpuprof; the namespaced xpuprof_<device> markers always."""
    from xpuprof.pytest_plugin import probe_device

    missing = [n for n in ("xpu", "cuda", "rocm") if not probe_device(n)[0]]
    if not missing:
        pytest.skip("every device is present here: no marker would skip")
    name = missing[0]
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.{name}
        def test_theirs():
            pass

        @pytest.mark.xpuprof_{name}
        def test_ours_namespaced():
            pass

        @pytest.mark.{name}
        def test_ours_plain_with_fixture(xpuprof_trace):
            pass

        @pytest.mark.{name}
        @pytest.mark.xpuprof(activities=["cpu"])
        def test_ours_plain_with_marker():
            pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args(), "-rs", "-v")
    res.assert_outcomes(passed=1, skipped=3)
    res.stdout.fnmatch_lines(["*test_theirs PASSED*"])
    res.stdout.fnmatch_lines([f"*{name} device not available*"])


def test_annotations_count_each_host_range_once(pytester):
    """annotations(name=...) counted the gpu_user_annotation device copies too (3 for 1)."""
    pytester.makepyfile("""
        import pytest
        import xpuprof

        @pytest.mark.xpuprof(backends=["sim"], activities=["user_annotation", "runtime", "kernel", "gpu_memcpy",
                                                          "gpu_user_annotation"])
        def test_once(xpuprof_trace):
            with xpuprof.record_function("one_range"):
                pass
            assert xpuprof_trace.device_annotations(name="^one_range$").count >= 1  # the copies exist...
            assert xpuprof_trace.annotations(name="^one_range$").count == 1  # ...and are not counted here
    """)
    res = pytester.runpytest_subprocess(*_plugin_args())
    res.assert_outcomes(passed=1)


def test_fixture_profiles_the_test_body_with_sim(pytester):
    pytester.makepyfile("""
        import pytest
        import xpuprof

        @pytest.mark.xpuprof(backends=["sim"], metrics=["XVE_STALL"],
                             activities=["user_annotation", "runtime", "kernel", "gpu_memcpy", "xpu_scope_profiler"])
        def test_kernels(xpuprof_trace):
            for i in range(8):
                with xpuprof.record_function(f"step {i}"):
                    pass
            step3 = xpuprof_trace.kernels(name="step 3")  # the sim names each range's kernel after it
            assert step3.count == 1 and step3.total_ms > 0
            assert xpuprof_trace.kernels().count >= 8
            assert xpuprof_trace.total_ms >= step3.total_ms
            stall = xpuprof_trace.metric("XVE_STALL")
            assert len(stall) >= 8 and 0 <= stall.mean() <= 100
            assert xpuprof_trace.annotations(name="step").count == 8
            assert xpuprof_trace.metadata["backend"] == "sim"
            with pytest.raises(KeyError, match="no metric 'NOPE'.*XVE_STALL"):
                xpuprof_trace.metric("NOPE")

        def test_host_only(xpuprof_trace):
            with xpuprof.record_function("work"):
                sum(range(1000))
            assert xpuprof_trace.annotations(name="^work$").count == 1
            assert xpuprof_trace.kernels().count == 0 and xpuprof_trace.total_ms == 0
    """)
    res = pytester.runpytest_subprocess(*_plugin_args())
    res.assert_outcomes(passed=2)


def test_keep_failed_traces(pytester, tmp_path):
    keep = tmp_path / "kept"
    pytester.makepyfile("""
        import xpuprof

        def test_fails(xpuprof_trace):
            with xpuprof.record_function("before failure"):
                pass
            assert xpuprof_trace.annotations().count == 2

        def test_passes(xpuprof_trace):
            with xpuprof.record_function("ok"):
                pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args(), f"--xpuprof-keep-failed={keep}")
    res.assert_outcomes(passed=1, failed=1)
    kept = list(keep.glob("*.pt.trace.json"))
    assert [p.name for p in kept] == ["test_keep_failed_traces.py_test_fails.pt.trace.json"]
    assert "before failure" in kept[0].read_text()


def test_unknown_marker_option_is_a_usage_error(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xpuprof(backend="sim")
        def test_x(xpuprof_trace): pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args())
    assert res.ret != 0
    res.stdout.fnmatch_lines(["*unknown option(s)*backend*valid: backends*"])


def test_a_device_skip_is_reported_at_the_test(pytester):
    from xpuprof.pytest_plugin import probe_device

    missing = [n for n in ("xpu", "cuda", "rocm") if not probe_device(n)[0]]
    if not missing:
        pytest.skip("every device is present here: no marker would skip")
    pytester.makepyfile(test_where=f"""
        import pytest


        @pytest.mark.xpuprof_{missing[0]}
        def test_needs_the_device():
            pass
    """)
    res = pytester.runpytest_subprocess(*_plugin_args(), "-rs")
    res.assert_outcomes(skipped=1)
    # where the test starts (its decorator), as pytest reports a skipif
    res.stdout.fnmatch_lines([f"SKIPPED [[]1[]] test_where.py:4: {missing[0]} device not available*"])
    assert "pytest_plugin.py" not in res.stdout.str()


def test_docs_name_every_marker_option_and_the_keep_failed_option():
    from pathlib import Path

    from xpuprof.pytest_plugin import MARKER_OPTIONS

    text = (Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text()
    for option in MARKER_OPTIONS:
        assert f"| `{option}` |" in text, option
    assert "--xpuprof-keep-failed" in text and "xpuprof_device_markers" in text
    for query in ("kernels(", "annotations(", "device_annotations(", "metric(", "total_ms", "metadata"):
        assert f"`{query}" in text, query
