"""``xpuprof report STORE`` from the ranks' summaries (issue 41: >= 10x the report of the same ranks' JSON):
the same document as the report of the rows, whatever the trace (every golden producer, HTA's traces, many
ranks, --by-rank, any sort and top); the rows are read whenever a summary cannot answer (a category, a name, a
window, the HTML charts, a rank without a summary or with one that does not parse); ``convert`` and
``export_parquet`` keep them; and such a report imports neither numpy, the JSON readers nor rich's tables."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from xpuprof.analysis.report import build_report  # noqa: E402
from xpuprof.analysis.report_summary import build_report as summary_report  # noqa: E402
from xpuprof.analysis.report_render import to_dict  # noqa: E402
from xpuprof.analysis.report_summary import FILE, SummaryRows, write_summary  # noqa: E402
from xpuprof.trace.write.kineto_store import convert_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden"
HTA = REPO / "tests" / "data" / "hta"
CORPUS = [GOLDEN / f"{n}.pt.trace.json" for n in ("sim_xpu_metrics", "sim_cuda", "sim_hip", "host", "torch_ops",
                                                  "xpu_double", "cuda_decoder", "rocm_decoder", "plugins",
                                                  "xpu_stalls")] + sorted(HTA.glob("*/*.json.gz"))
CORPUS = [p for p in CORPUS if p.exists() and "rank-0.Apr_03" not in p.name]  # 70k events: the slow tier


def _store(paths, out: Path) -> Path:
    for i, p in enumerate(paths):
        got = convert_trace(p, out, position=i)
        write_summary(out / f"rank={got.rank}")  # as `xpuprof convert` does
    return out


def _doc(report) -> dict:
    doc = to_dict(report)
    doc.pop("sources")
    return doc


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_a_report_from_the_summary_equals_the_report_of_the_rows(path, tmp_path):
    store = _store([path], tmp_path / "s")
    for kw in ({}, {"by_rank": True}, {"sort_by": "calls", "top": 3}, {"sort_by": "name"}):
        fast = summary_report([store], **kw)
        rows = build_report([store], **kw)
        if (store / "rank=0" / FILE).exists():
            assert isinstance(fast.table, SummaryRows)
        assert _doc(fast) == _doc(rows), kw  # metrics and times exactly
        assert _doc(fast) == _doc(build_report([path], **kw)), kw  # and the JSON file's report
        assert fast.sources == rows.sources


def test_many_ranks_from_their_summaries_equal_their_files_in_any_order(tmp_path):
    ranks = [GOLDEN / "sim_rank0.pt.trace.json", GOLDEN / "sim_rank1.pt.trace.json"]
    store = _store(ranks, tmp_path / "s")
    assert sorted(p.name for p in store.glob(f"rank=*/{FILE}")) == [FILE, FILE]
    for kw in ({}, {"by_rank": True}, {"sort_by": "avg", "top": 5}):
        fast = summary_report([store], **kw)
        assert isinstance(fast.table, SummaryRows)
        assert _doc(fast) == _doc(build_report(ranks, **kw)) == _doc(build_report(ranks[::-1], **kw))
    assert _doc(summary_report([store], by_rank=True))["ranks"] == [0, 1]


def test_what_a_summary_cannot_answer_reads_the_rows(tmp_path):
    path = GOLDEN / "sim_xpu_metrics.pt.trace.json"
    store = _store([path], tmp_path / "s")
    for kw in ({"categories": ["kernel"]}, {"name": "gemm"}, {"start_ms": 0.0}, {"end_ms": 1e9}):
        got = summary_report([store], **kw)
        assert not isinstance(got.table, SummaryRows), kw
        assert _doc(got) == _doc(build_report([path], **kw))
    # a store given with a file, and the report of the rows itself, read the rows
    assert not isinstance(summary_report([store, path]).table, SummaryRows)
    assert not isinstance(build_report([store]).table, SummaryRows)


@pytest.mark.parametrize("damage", ["missing", "garbage", "other_rank", "old_version"])
def test_a_rank_without_a_usable_summary_reads_every_rank_s_rows(damage, tmp_path):
    ranks = [GOLDEN / "sim_rank0.pt.trace.json", GOLDEN / "sim_rank1.pt.trace.json"]
    store = _store(ranks, tmp_path / "s")
    target = store / "rank=1" / FILE
    if damage == "missing":
        target.unlink()
    elif damage == "garbage":
        target.write_bytes(b"{not json")
    else:
        data = json.loads(target.read_bytes())
        data.update({"rank": 7} if damage == "other_rank" else {"version": 0})
        target.write_text(json.dumps(data))
    got = summary_report([store], by_rank=True)
    assert not isinstance(got.table, SummaryRows)
    assert _doc(got) == _doc(build_report(ranks, by_rank=True))


def test_a_rank_with_telemetry_keeps_no_summary_and_its_report_reads_the_rows(tmp_path):
    path = GOLDEN / "telemetry.pt.trace.json"
    store = _store([path], tmp_path / "s")
    assert not (store / "rank=0" / FILE).exists()
    got = summary_report([store])
    assert got.telemetry and _doc(got) == _doc(build_report([path]))


def test_export_parquet_and_convert_keep_the_summary(tmp_path):
    import xpuprof

    with xpuprof.profile(activities=["cpu"]) as prof:
        for i in range(50):
            with xpuprof.record_function(f"step {i % 3}"):
                pass
    part = prof.export_parquet(tmp_path / "store")
    assert (Path(part) / FILE).is_file()
    got = summary_report([tmp_path / "store"])
    assert isinstance(got.table, SummaryRows) and {s.name for s in got.stats} == {"step 0", "step 1", "step 2"}
    assert _doc(got) == _doc(build_report([tmp_path / "store"]))

    from xpuprof.cli import main

    assert main(["convert", str(GOLDEN / "sim_cuda.pt.trace.json"), "-o", str(tmp_path / "c")]) == 0
    assert list((tmp_path / "c").glob(f"rank=*/{FILE}"))


def test_report_of_a_store_from_its_summaries_imports_no_numpy_json_reader_or_rich_table(tmp_path):
    store = _store([GOLDEN / "sim_rank0.pt.trace.json", GOLDEN / "sim_rank1.pt.trace.json"], tmp_path / "s")
    code = ("import sys, argparse\n"
            "from xpuprof.commands import report as R\n"
            "ap = argparse.ArgumentParser(); R.register(ap.add_subparsers(dest='command'))\n"
            f"args = ap.parse_args(['report', {str(store)!r}, '-o', {str(tmp_path / 'r.txt')!r}])\n"
            "assert args.func(args) == 0\n"
            "print(sorted(m for m in ('numpy', 'pyarrow', 'xpuprof.trace.read.kineto', 'xpuprof.trace.read.kineto_stream',"
            " 'rich.table', 'xpuprof.analysis.event_table') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr
    text = (tmp_path / "r.txt").read_text()
    assert text.startswith("Kernels and copies (2 traces, ranks 0, 1, 20 instances") and "sim_layer0" in text
    doc = code.replace("'-o', ", "'--format', 'json', '-o', ").replace("r.txt", "r.json")  # the JSON document too
    out = subprocess.run([sys.executable, "-c", doc], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr
    assert json.loads((tmp_path / "r.json").read_text())["ranks"] == [0, 1]


def _lanes_trace(path: Path) -> Path:
    """A rank trace whose ranges overlap without nesting on one thread (asyncio tasks): convert writes it twice,
    the second time laid out (the rows kept of the first pass are dropped)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"task{i}", "pid": 9, "tid": 9, "ts": 10.0 + 5 * i, "dur": 50.0}
          for i in range(4)]
    ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": 11.0 + 5 * i, "dur": 2.0}
           for i in range(4)]
    path.write_text(json.dumps({"distributedInfo": {"rank": 5}, "baseTimeNanoseconds": 1_000_000, "traceEvents": ev}))
    return path


def test_convert_computes_the_summary_from_the_rows_it_writes(tmp_path, monkeypatch, capsys):
    """``xpuprof convert`` keeps each rank's summary without reading the rank back from Parquet (it was 0.13 of
    a 0.60 s convert): computed from the rows it streamed into the store, by the one per-name rule
    (``summary_of``), it is the same document as the summary of the partition read back - for ranks with
    per-kernel metrics, with telemetry (no summary either way), several ranks in one store, a .pftrace input
    and a trace laid out on a second pass."""
    from xpuprof.cli import main

    pf = tmp_path / "in" / "rank1.pftrace"
    pf.parent.mkdir()
    assert main(["convert", str(GOLDEN / "sim_rank1.pt.trace.json"), "-o", str(pf)]) == 0
    groups = {"ranks": [GOLDEN / "sim_rank0.pt.trace.json", pf], "lanes": [_lanes_trace(tmp_path / "in" / "l.json")],
              **{n: [GOLDEN / f"{n}.pt.trace.json"] for n in ("sim_xpu_metrics", "telemetry", "xpu_stalls",
                                                               "torch_ops", "host", "sim_hip")},
              **{p.parent.name: [p] for p in sorted(HTA.glob("*/*.json.gz")) if "rank-0.Apr_03" not in p.name}}

    written = {}
    with _never_read_back(monkeypatch, "convert"):
        for name, paths in groups.items():
            store = tmp_path / f"{name}.store"
            assert main(["convert", *map(str, paths), "-o", str(store)]) == 0, capsys.readouterr().err
            for part in sorted(store.glob("rank=*")):
                f = part / FILE
                written[part] = json.loads(f.read_text()) if f.exists() else None
    capsys.readouterr()
    assert len(written) == len(groups) + 1 and sum(v is not None for v in written.values()) >= len(groups) - 1
    assert written[tmp_path / "telemetry.store" / "rank=0"] is None  # telemetry series: the report reads the rows
    assert any(v and v["partial"] and any(row[-1] for row in v["partial"]) for v in written.values())  # metrics
    _assert_each_equals_its_partition_read_back(written)


@contextlib.contextmanager
def _never_read_back(monkeypatch, command: str):
    """Inside: reading a rank back from the store fails, naming ``command``."""
    from xpuprof.trace.read import store_table

    def no_read_back(*a, **kw):
        raise AssertionError(f"{command} read the rank back from the store")

    with monkeypatch.context() as m:
        m.setattr(store_table, "read_store", no_read_back)
        yield


def _assert_each_equals_its_partition_read_back(written: dict) -> None:
    """Each summary kept from the rows written (partition -> its document, None for none) is the document
    the summary of the partition read back from Parquet gives, as before."""
    for part, got in written.items():
        (part / FILE).unlink(missing_ok=True)
        again = write_summary(part)
        assert (None if again is None else json.loads(again.read_text())) == got, part


def _sim_profile(vendor: str, metrics=(), activities=None):
    import xpuprof

    acts = activities or ["cpu", "xpu" if vendor == "xpu" else "cuda"] + (["xpu_scope_profiler"] if metrics else [])
    cfg = xpuprof.ProfilerConfig(custom={"sim_seed": 3, "sim_vendor": vendor})
    exp = xpuprof.ExperimentalConfig(profiler_metrics=list(metrics)) if metrics else None
    with xpuprof.profile(activities=acts, backends=["sim"], config=cfg, experimental_config=exp,
                         schedule=xpuprof.schedule(wait=0, warmup=0, active=3, repeat=1)) as prof:
        for _ in range(3):
            for i in range(4):
                with xpuprof.record_function(f"layer{i}", {"i": i}):
                    pass
            prof.step()
    return prof


def test_export_parquet_computes_the_summary_from_the_rows_it_writes(tmp_path, monkeypatch):
    """``profile.export_parquet`` keeps its rank's summary from the rows it writes (as ``convert`` does), not from
    the partition read back from Parquet: the same document as the summary of the partition read back, for a
    rank with per-kernel metrics, CUDA and HIP sim ranks, a host-only rank, two ranks of one store and a rank
    with telemetry (no summary either way)."""
    profiles = {"metrics": _sim_profile("xpu", ["GpuTime", "XVE_ACTIVE"]), "cuda": _sim_profile("cuda"),
                "hip": _sim_profile("hip"), "host": _sim_profile("cuda", activities=["cpu"]),
                "telemetry": _sim_profile("xpu", ["GpuTime", "process_rss"])}

    written = {}
    with _never_read_back(monkeypatch, "export_parquet"):
        for name, prof in profiles.items():
            part = prof.export_parquet(tmp_path / name)
            written[part] = json.loads((part / FILE).read_text()) if (part / FILE).exists() else None
        prof = profiles["cuda"]
        prof.builder.set_distributed_info({"rank": 1, "world_size": 2})
        part = prof.export_parquet(tmp_path / "metrics")  # a second rank beside the first
        written[part] = json.loads((part / FILE).read_text())
    assert written[tmp_path / "telemetry" / "rank=0"] is None  # telemetry series: the report reads the rows
    assert sum(v is not None for v in written.values()) == len(written) - 1
    assert any(row[-1] for row in written[tmp_path / "metrics" / "rank=0"]["partial"])  # the metric join's values
    _assert_each_equals_its_partition_read_back(written)
