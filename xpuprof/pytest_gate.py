"""The pytest plugin's gate: a test body's kernels and host ranges against the run history of that test
(``@pytest.mark.xpuprof(max_regression=3, history="perf-history")``), with ``xpuprof gate``'s rule.

The test's series is keyed by its node id, its profiler options, its device and this machine. A
regression fails the test in its call phase with the gate's explanation; every gated test gets the
whole verdict table as a report section and an HTML history plot beside its trace
(``xpuprof-history.html``); ``--xpuprof-accept`` adds the run to the history when it did not regress.
Without a history yet (or too short a one) the test passes, and says so in a warning.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from .analysis.event_table import EventTable


class XpuprofGateWarning(UserWarning):
    """A gated test whose history could not judge it (none yet, too short): said, never silent."""


def _history_dir(item, trace) -> Path:
    given = trace.gate.get("history") or item.config.getoption("xpuprof_history")
    if not given:
        pytest.fail(f"{item.nodeid}: @pytest.mark.xpuprof(max_regression=...) needs history= or --xpuprof-history "
                    "DIR (where the test's runs are kept)", pytrace=False)
    path = Path(given)
    return path if path.is_absolute() else Path(item.config.rootpath) / path


def gate_test(item, trace, probe=None) -> None:
    """Gate the test body's run (``probe``: the ``machine_probe.GuardedProbe`` taken before the body; taken
    again here, after it)."""
    from .analysis.gate import GateOptions, accept, gate_runs
    from .analysis.gate_text import explanation, render, summary_line
    from .analysis.history import History, HistoryError
    from .analysis.history_html import render_gate_page
    from .analysis.run_records import RANGE_CATEGORIES, _device_names, run_from_table
    from .outputs import write_output_bytes

    if probe is not None and not probe.traced:  # before the profiler stops: next to the body, as before()
        probe.after()
    trace.stop()
    if probe is not None and probe.traced:  # Python calls traced: the probe only once the profiler stopped
        probe.take()
    host = trace._host
    table = EventTable.concat([trace._device, host.take(np.isin(host.cat, list(RANGE_CATEGORIES)))])
    meta = trace.metadata
    devices = _device_names(meta)
    device = f"{meta.get('backend') or 'host'}" + (f" [{', '.join(devices)}]" if devices else "")
    options = {k: v for k, v in trace.options.items()}
    run = run_from_table(table, test=item.nodeid, options=options, device=device, source="pytest --xpuprof-accept",
                         directory=item.config.rootpath, probe=probe.result() if probe is not None else None)
    history = History(_history_dir(item, trace))
    accepting = item.config.getoption("xpuprof_accept")
    gate_options = GateOptions(max_regression_pct=float(trace.gate["max_regression"]))
    try:
        if accepting:
            history.ensure()
        if not history.exists():
            warnings.warn(XpuprofGateWarning(
                f"{item.nodeid}: no run history at {history.root} yet: the test was not gated; run pytest with "
                "--xpuprof-accept to build it"))
            return
        result = gate_runs([run], history, gate_options, source=item.nodeid)
        if accepting:
            accept(result, policy="passed")
    except HistoryError as exc:
        pytest.fail(f"{item.nodeid}: the run history cannot be used: {exc}", pytrace=False)
    text = render(result)
    item.add_report_section("call", "xpuprof gate", text)
    plot = trace.path.parent / "xpuprof-history.html"
    write_output_bytes(plot, render_gate_page(result).encode())
    item.user_properties.append(("xpuprof_gate", summary_line(result)))
    point = result.points[0]
    short = [v for v in point.rule.kernels if v.verdict == "inconclusive" and "runs, need" in v.reason]
    if short:
        warnings.warn(XpuprofGateWarning(
            f"{item.nodeid}: {short[0].reason} in the history at {history.root} ({len(short)} kernel(s)); "
            "run pytest with --xpuprof-accept to add runs"))
    if result.regressed:
        pytest.fail(f"xpuprof gate: regression against {len(point.baseline)} baseline run(s) in {history.root} "
                    f"(max_regression={gate_options.max_regression_pct:g}%):\n{explanation(result)}\n"
                    f"history plot: {plot}", pytrace=False)
