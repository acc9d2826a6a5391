"""pytest plugin (entry point ``pytest11``): device markers and the ``xpuprof_trace`` fixture.

- ``@pytest.mark.xpuprof_xpu`` / ``xpuprof_cuda`` / ``xpuprof_rocm``: the test is skipped, with the
  backend probe's reason, when that device is not usable here.
- Plain ``xpu`` / ``cuda`` / ``rocm`` markers may belong to another project's suite: they are acted on
  only for tests that use xpuprof (the ``xpuprof_trace`` fixture or the ``xpuprof`` marker), or for
  every test when the project opts in with the ini option ``xpuprof_device_markers = true``.
- ``xpuprof_trace``: profiles the test body. The first query (``kernels()``, ``total_ms``,
  ``metric()``, ``annotations()``) stops the profiler, so everything the test did before it is
  in the trace::

      @pytest.mark.xpuprof(backends=["sim"], metrics=["XVE_STALL"])
      def test_gemm(xpuprof_trace):
          run_my_gemm()
          gemm = xpuprof_trace.kernels(name="gemm")
          assert gemm.count > 0 and gemm.total_ms < 5
          assert xpuprof_trace.metric("XVE_STALL").mean() < 40

- ``--xpuprof-keep-failed DIR``: keep the trace of every failing test that used the fixture.
- ``@pytest.mark.xpuprof(max_regression=3, history="perf-history")``: after the test body passes, its
  kernels and host ranges are gated against the run history of this test (``xpuprof gate``'s rule); a
  regression fails the test with the gate's explanation, and an HTML history plot of the kernels is
  written beside the trace. ``--xpuprof-accept`` adds each gated test's run to its history when it did
  not regress; ``--xpuprof-history DIR`` is the history of tests that name none.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DEVICE_MARKERS = {  # plain names; ours are namespaced "xpuprof_<name>"
    "xpu": "needs an Intel GPU with a Level Zero driver (skipped otherwise, with the probe's reason)",
    "cuda": "needs an NVIDIA GPU with CUPTI (skipped otherwise, with the probe's reason)",
    "rocm": "needs an AMD GPU with rocprofiler-sdk (skipped otherwise, with the probe's reason)",
}
HOST_RANGE_CATEGORIES = ("user_annotation", "cpu_op")
MARKER_OPTIONS = ("backends", "activities", "metrics", "per_kernel", "max_scopes", "record_shapes", "max_regression",
                  "history")
GATE_OPTIONS = ("max_regression", "history")  # the rest configure the profiler (and key the test's history)
_probes: dict[str, tuple[bool, str]] = {}


def pytest_addoption(parser) -> None:
    parser.addini("xpuprof_device_markers", type="bool", default=False,
                  help="xpuprof: skip every test marked plain xpu/cuda/rocm when that device is absent (by "
                       "default only tests using xpuprof_trace; xpuprof_xpu/_cuda/_rocm always)")
    group = parser.getgroup("xpuprof")
    group.addoption("--xpuprof-keep-failed", metavar="DIR", default=None,
                    help="copy the xpuprof_trace trace (and history plot) of each failing test into DIR")
    group.addoption("--xpuprof-history", metavar="DIR", default=None,
                    help="run history for tests marked with max_regression= but no history= (relative paths: to "
                         "the rootdir)")
    group.addoption("--xpuprof-accept", action="store_true", default=False,
                    help="add each gated test's run to its history when it did not regress (build the baseline)")


def pytest_configure(config) -> None:
    for name, text in DEVICE_MARKERS.items():
        config.addinivalue_line("markers", f"xpuprof_{name}: {text}")
        config.addinivalue_line("markers", f"{name}: {text} (xpuprof acts on it only for tests using "
                                           "xpuprof_trace, or with the ini option xpuprof_device_markers = true)")
    config.addinivalue_line("markers", "xpuprof(backends=None, activities=None, metrics=None, per_kernel=True, "
                                       "max_scopes=0, record_shapes=False, max_regression=None, history=None): options "
                                       "for the xpuprof_trace fixture; max_regression (percent) gates the test's "
                                       "kernels against the run history")


def probe_device(name: str) -> tuple[bool, str]:
    """(available, reason) from the backend's probe, cached per session; never raises."""
    if name not in _probes:
        from .backends.registry import get_backend_class

        try:
            result = get_backend_class(name).probe()
            _probes[name] = (bool(result.available), result.reason)
        except Exception as exc:  # a backend that cannot even load is a reason to skip, not an error
            _probes[name] = (False, f"backend {name!r} could not be loaded: {type(exc).__name__}: {exc}")
    return _probes[name]


def _uses_xpuprof(item) -> bool:
    return "xpuprof_trace" in getattr(item, "fixturenames", ()) or item.get_closest_marker("xpuprof") is not None


def pytest_runtest_setup(item) -> None:
    plain = None  # whether plain xpu/cuda/rocm markers are ours for this test (decided only when one is present)
    for name in DEVICE_MARKERS:
        ours = item.get_closest_marker(f"xpuprof_{name}") is not None
        if not ours and item.get_closest_marker(name) is not None:
            if plain is None:
                plain = bool(item.config.getini("xpuprof_device_markers")) or _uses_xpuprof(item)
            ours = plain
        if ours:
            ok, reason = probe_device(name)
            if not ok:
                item._xpuprof_device_skip = True
                pytest.skip(f"{name} device not available: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test whose body passed is gated when its marker asks (``max_regression=``): a regression fails it
    here, in the call phase, with the gate's explanation."""
    trace = getattr(item, "funcargs", {}).get("xpuprof_trace")
    gated = isinstance(trace, ProfiledTrace) and trace.gate.get("max_regression") is not None
    probe = None
    if gated:  # the machine's own speed before the body (and after it, in gate_test): the gate reads it
        from .analysis.machine_probe import GuardedProbe

        probe = GuardedProbe()
        probe.traced = trace.traces_python_calls
        if not probe.traced:  # inside the profiled window: not when Python calls are traced (it would show)
            probe.before()
    result = yield
    if gated:
        from .pytest_gate import gate_test

        gate_test(item, trace, probe)
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and getattr(item, "_xpuprof_device_skip", False) and isinstance(report.longrepr, tuple):
        # A device marker is a skip mark: report it at the test, as pytest does for skipif, not at this file.
        filename, line = item.reportinfo()[:2]
        report.longrepr = (str(filename), (line or 0) + 1, report.longrepr[2])
    setattr(item, f"_xpuprof_report_{report.when}", report)


# ----------------------------------------------------------------------------- query objects
class MetricValues:
    """One metric's per-kernel values (NaN-free)."""

    def __init__(self, name: str, values: np.ndarray, unit: str = "") -> None:
        self.name, self.values, self.unit = name, values, unit

    def __len__(self) -> int:
        return len(self.values)

    def _need(self, what: str) -> None:
        if not len(self.values):
            raise ValueError(f"metric {self.name!r} has no values for the selected kernels; cannot take the {what}")

    def mean(self) -> float:
        self._need("mean")
        return float(self.values.mean())

    def min(self) -> float:
        self._need("min")
        return float(self.values.min())

    def max(self) -> float:
        self._need("max")
        return float(self.values.max())

    def __repr__(self) -> str:
        return f"MetricValues({self.name!r}, n={len(self)})"


class KernelSelection:
    """Kernels (and copies) matching a query: counts, times in ms and metric values."""

    def __init__(self, table) -> None:
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    @property
    def count(self) -> int:
        return len(self._table)

    @property
    def names(self) -> list[str]:
        return sorted(set(self._table.name.tolist()))

    @property
    def total_ms(self) -> float:
        return float(self._table.dur_ns.sum()) / 1e6

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    @property
    def durations_ms(self) -> np.ndarray:
        return self._table.dur_ns / 1e6

    def metric(self, name: str) -> MetricValues:
        col = self._table.metrics.get(name)
        if col is None:
            known = ", ".join(self._table.metrics) or "none (no per-kernel metrics were collected)"
            raise KeyError(f"no metric {name!r} in this trace; metrics present: {known}")
        return MetricValues(name, col[np.isfinite(col)], self._table.units.get(name, ""))

    def __repr__(self) -> str:
        return f"KernelSelection(count={self.count}, total_ms={self.total_ms:.4f}, names={self.names[:5]})"


class ProfiledTrace:
    """The ``xpuprof_trace`` fixture's object: profiles until the first query (or ``stop()``)."""

    def __init__(self, path: Path, **options: Any) -> None:
        bad = sorted(set(options) - set(MARKER_OPTIONS))
        if bad:
            raise ValueError(f"@pytest.mark.xpuprof got unknown option(s) {bad}; valid: {', '.join(MARKER_OPTIONS)}")
        self.path = Path(path)
        self.gate = {k: options.pop(k) for k in GATE_OPTIONS if k in options}
        if self.gate.get("history") is not None and self.gate.get("max_regression") is None:
            self.gate["max_regression"] = 3.0
        mr = self.gate.get("max_regression")
        if mr is not None and (isinstance(mr, bool) or not isinstance(mr, (int, float)) or not 0 < mr < 1000):
            raise ValueError(f"@pytest.mark.xpuprof(max_regression=...) must be a percentage above 0 (3 for 3 %), "
                             f"got {mr!r}")
        self.options = options
        self._prof = None
        self._device = None
        self._host = None
        self._device_annotations = None
        self._error: str | None = None

    @property
    def traces_python_calls(self) -> bool:
        """Whether the profile records Python calls (the gate's probe then runs outside it); before it
        started, assumed so."""
        return self._prof is None or self._prof.config.traces_python_calls

    def start(self) -> None:
        from .config.options import ExperimentalConfig
        from .profiler import profile

        o = self.options
        exp = ExperimentalConfig(profiler_metrics=list(o.get("metrics") or []),
                                 profiler_measure_per_kernel=o.get("per_kernel", True),
                                 max_scopes=o.get("max_scopes", 0))
        self._prof = profile(activities=o.get("activities"), backends=o.get("backends"), experimental_config=exp,
                             record_shapes=o.get("record_shapes", False))
        self._prof.start()

    @property
    def stopped(self) -> bool:
        return self._device is not None

    def stop(self) -> "ProfiledTrace":
        """Stop profiling and write the trace (idempotent)."""
        if self.stopped:
            return self
        from .analysis.event_table import DEVICE_CATEGORIES, EventTable
        from .trace.read.kineto import read_trace

        if self._error is not None:
            raise RuntimeError(f"the profiled trace could not be written: {self._error}")
        try:
            self._prof.stop()
            self._prof.export_chrome_trace(self.path)
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"
            raise
        table = read_trace(self.path)
        self._device = EventTable.from_table(table, DEVICE_CATEGORIES)
        # Host ranges only: each also has gpu_user_annotation copies on the device rows it launched work on
        # (one per device row), which would count one range several times.
        self._host = EventTable.from_table(table, HOST_RANGE_CATEGORIES)
        self._device_annotations = EventTable.from_table(table, ("gpu_user_annotation",))
        return self

    def kernels(self, name: str | None = None) -> KernelSelection:
        """Device kernels/copies/fills whose name matches the regex ``name`` (all when None)."""
        self.stop()
        return KernelSelection(self._device.filter(name=name))

    def annotations(self, name: str | None = None) -> KernelSelection:
        """Host ranges (record_function, ops) whose name matches the regex ``name``: each range once."""
        self.stop()
        return KernelSelection(self._host.filter(name=name))

    def device_annotations(self, name: str | None = None) -> KernelSelection:
        """The ``gpu_user_annotation`` copies of host ranges on device rows (one per row with work)."""
        self.stop()
        return KernelSelection(self._device_annotations.filter(name=name))

    @property
    def total_ms(self) -> float:
        """Total device time of every kernel, copy and fill."""
        return self.kernels().total_ms

    def metric(self, name: str) -> MetricValues:
        return self.kernels().metric(name)

    @property
    def metadata(self) -> dict:
        self.stop()
        from .trace.read.load import load

        return {k: v for k, v in load(self.path).items() if k != "traceEvents"}


def _safe_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", nodeid).strip("_")[:180]


@pytest.fixture
def xpuprof_trace(request, tmp_path):
    marker = request.node.get_closest_marker("xpuprof")
    trace = ProfiledTrace(tmp_path / "xpuprof.pt.trace.json", **(dict(marker.kwargs) if marker else {}))
    trace.start()
    try:
        yield trace
    finally:
        if trace._error is None:
            trace.stop()
        keep = request.config.getoption("xpuprof_keep_failed")
        report = getattr(request.node, "_xpuprof_report_call", None)
        if keep and report is not None and report.failed and trace.path.exists():
            dest = Path(keep) / f"{_safe_name(request.node.nodeid)}.pt.trace.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(trace.path, dest)
            request.node.user_properties.append(("xpuprof_trace", str(dest)))
            plot = trace.path.parent / "xpuprof-history.html"
            if plot.exists():
                dest = Path(keep) / f"{_safe_name(request.node.nodeid)}.history.html"
                shutil.copyfile(plot, dest)
                request.node.user_properties.append(("xpuprof_history_plot", str(dest)))
