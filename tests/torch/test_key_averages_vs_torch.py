"""key_averages() side by side with torch.profiler's own on the same script: the same rows in the same order
for every CPU sort key torch documents, the same numbers where they do not depend on timing (calls, memory),
and one table with torch's labels. The script's ops differ in cost by 10x or more, the rows that could tie
in time are nested (a range always outlasts the op inside it), and a row's time is its least over five
profiles of each kind (a preemption on a loaded machine only ever adds time), so the order does not depend on
the load."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

import xpuprof  # noqa: E402

pytestmark = pytest.mark.slow

P = torch.profiler
# torch's documented CPU sort keys (EventList.table) and its self time, with the attribute each sorts by
CPU_KEYS = {"cpu_time": "cpu_time", "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
            "cpu_memory_usage": "cpu_memory_usage", "self_cpu_memory_usage": "self_cpu_memory_usage",
            "count": "count"}
DETERMINISTIC = ("count", "cpu_memory_usage", "self_cpu_memory_usage")  # no timing in them: equal values too
TOP = 3
# self time: mm and add are 10x apart and 10x above the rest; below them ops and the range's own Python tie
TOP_BY_KEY = {"self_cpu_time_total": 2}


def _script():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    a, b = torch.randn(384, 384), torch.randn(384, 384)  # mm: ~113 MFLOP, the most time by 10x
    x, y = torch.randn(500_000), torch.randn(500_000)  # add: 2 MB out, ~10x less time than mm
    z = torch.randn(20_000)  # relu (clamp_min inside): 5 calls a step, ~10x less again
    kept = []

    def step():
        with P.record_function("step_range"):
            c = torch.mm(a, b)
            d = torch.add(x, y)
            for _ in range(5):
                kept.append(torch.relu(z))
        kept.append((c, d))  # nothing freed inside a range: memory is deterministic

    step()  # warm up outside the profiles
    step.kept = kept
    return step


def _profile(profiler_cls, step):
    step.kept.clear()  # the last profile's outputs go before this one starts: memory stays flat, frees outside
    with profiler_cls(activities=[P.ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        for _ in range(3):
            step()
    return prof


def _order(avgs, attr):
    return sorted(avgs, key=lambda e: getattr(e, attr), reverse=True)  # torch's table order for sort_by


RUNS = 5


@pytest.fixture(scope="module")
def runs():
    step = _script()
    ours, theirs = [], []
    for _ in range(RUNS):  # interleaved: both profilers see the machine in the same state
        theirs.append(_profile(P.profile, step).key_averages())
        ours.append(_profile(xpuprof.profile, step).key_averages())
    return ours, theirs


@pytest.fixture(scope="module")
def both(runs):
    ours, theirs = runs
    return ours[0], theirs[0]


def _least(avgs_of_runs, attr) -> list[tuple[str, float]]:
    """(key, the least of the runs' values), largest first; ties in the first run's (torch's) order."""
    first = [e.key for e in avgs_of_runs[0]]
    values = {k: min(getattr(e, attr) for avgs in avgs_of_runs for e in avgs if e.key == k) for k in first}
    return sorted(values.items(), key=lambda kv: kv[1], reverse=True)


@pytest.mark.parametrize("key", list(CPU_KEYS))
def test_top_rows_match_torch_for_every_cpu_sort_key(runs, key):
    ours, theirs = runs
    attr = CPU_KEYS[key]
    # ours sorted by key as its table sorts (sorted() is what table() prints), each run
    assert all([e.key for e in avgs.sorted(key)] == [e.key for e in _order(avgs, attr)] for avgs in ours)
    top = TOP_BY_KEY.get(key, TOP)
    mine, torchs = _least(ours, attr)[:top], _least(theirs, attr)[:top]
    assert [k for k, _ in mine] == [k for k, _ in torchs], (key, mine, torchs)
    if key in DETERMINISTIC:
        assert mine == torchs, key


def test_the_same_rows_with_the_same_counts_and_memory(both):
    ours, theirs = both
    mine = {e.key: (e.count, e.cpu_memory_usage, e.self_cpu_memory_usage) for e in ours}
    torchs = {e.key: (e.count, e.cpu_memory_usage, e.self_cpu_memory_usage) for e in theirs}
    assert mine == torchs


def test_one_table_with_torchs_columns(both):
    ours, theirs = both
    text = ours.table(sort_by="self_cpu_time_total", row_limit=TOP, width=250)
    for label in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "CPU Mem",
                  "Self CPU Mem", "# of Calls"):
        assert label in theirs.table(sort_by="self_cpu_time_total", row_limit=TOP) and label in text, label
    assert text.count("┏") == 1 and "Self CPU time total:" in text
    first = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")][0]
    assert first == ours.sorted("self_cpu_time_total")[0].key  # the table is in sort order


def test_grouped_by_input_shape_as_torch(both):
    step = _script()
    ours = _profile(xpuprof.profile, step).key_averages(group_by_input_shape=True)
    theirs = _profile(P.profile, step).key_averages(group_by_input_shape=True)
    shapes = lambda avgs: {(e.key, str(e.input_shapes), e.count) for e in avgs}  # noqa: E731
    assert shapes(ours) == shapes(theirs)
