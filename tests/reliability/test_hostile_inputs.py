"""Every command reads untrusted input with bounds: size caps with one clear line, numbers range-checked,
exit status 2 for bad input (never 1, which ``diff`` documents as "regression found"), never a
traceback. Fixed cases for each defect found, then a seeded fuzz of every command over hostile traces."""
from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xpuprof.cli import main

REPO = Path(__file__).resolve().parents[2]
KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5, "dur": 2, "pid": 1, "tid": 1}


def _trace(path: Path, *events, **top) -> Path:
    path.write_text(json.dumps({"traceEvents": list(events) or [KERNEL], **top}))  # json: ints past 64 bits too
    return path


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"xpuprof {command}: "), err[-3000:]
    return lines[0]


# ----------------------------------------------------------------------------- sizes
def _limited_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a runaway read fails fast instead of swapping


def _zeros(tmp_path) -> Path:
    """A regular file of 4 GiB of zeros (sparse: nothing written), under the 8 GiB input limit."""
    path = tmp_path / "zeros.json"
    with open(path, "wb") as f:
        f.truncate(4 << 30)
    return path


ZEROS = {"/dev/zero": "/dev/zero: trace file is a character device, not a regular file",
         "zeros.json": "zeros.json: not a JSON trace file (it starts with byte 0x00, not '{' or '[')"}


@pytest.mark.parametrize("source", sorted(ZEROS))
@pytest.mark.parametrize("command", [["report"], ["report", "--by", "op"], ["merge", "-o", "{tmp}/m.json"]])
def test_a_stream_of_zeros_is_refused_at_its_first_bytes(command, source, tmp_path):
    """/dev/zero is no regular file: refused before it is opened; a regular file of zeros at its first bytes."""
    zeros = source if source.startswith("/") else str(_zeros(tmp_path))
    argv = [a.format(tmp=tmp_path) for a in command]
    argv = argv[:1] + [zeros] + argv[1:] if argv[0] != "merge" else ["merge", zeros, zeros, *argv[1:]]
    done = subprocess.run([sys.executable, "-m", "xpuprof", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_limited_memory)
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line_refusing_zeros(done.stderr, argv[0], source)


def _one_line_refusing_zeros(stderr: str, command: str, source: str) -> None:
    """One line: the command and the file; /dev/zero refused as no regular file, a regular file of zeros by its
    first byte and the bytes a trace opens with (JSON's '{' or '[', a Perfetto protobuf trace's 0x0a)."""
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"xpuprof {command}: ") and ZEROS[source] in line, line
    if source == "zeros.json":
        assert "0x00" in line and "'{' or '['" in line and "Perfetto" in line and "0x0a" in line, line


def test_a_file_over_the_input_limit_is_one_line(tmp_path, monkeypatch, capsys):
    big = _trace(tmp_path / "big.json", *[dict(KERNEL, ts=i) for i in range(200)])
    monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", "4K")
    assert main(["report", str(big)]) == 2
    line = _one_error_line(capsys, "report")
    assert f"{big}: trace file is larger than the 4 KiB input limit" in line and "XPUPROF_MAX_INPUT_BYTES" in line


def test_a_gzip_bomb_is_refused_by_its_decompressed_size(tmp_path, monkeypatch, capsys):
    doc = b'{"traceEvents": [' + orjson.dumps(KERNEL) + b"]" + b" " * (4 << 20) + b"}"
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    bomb.write_bytes(gzip.compress(doc))
    assert bomb.stat().st_size < 64 << 10
    monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", "1M")
    assert main(["report", str(bomb)]) == 2
    assert "trace file (decompressed) is larger than the 1 MiB input limit" in _one_error_line(capsys, "report")


def test_a_bad_input_limit_setting_is_one_warning_and_the_default(tmp_path, monkeypatch, caplog):
    from xpuprof import diagnostics, inputs

    diagnostics.forget("bad-setting")
    monkeypatch.setenv("XPUPROF_MAX_INPUT_BYTES", "lots")
    assert inputs.max_input_bytes() == inputs.DEFAULT_MAX_INPUT_BYTES
    assert inputs.max_input_bytes() == inputs.DEFAULT_MAX_INPUT_BYTES
    said = [r.getMessage() for r in caplog.records if "XPUPROF_MAX_INPUT_BYTES" in r.getMessage()]
    assert len(said) == 1 and "'lots' is not a size in bytes" in said[0]


# ----------------------------------------------------------------------------- numbers
INT64_MIN = -(2**63)
TIMES = [("ts", 1e300), ("ts", -1e20), ("ts", 10**20), ("ts", INT64_MIN), ("ts", 2**64), ("dur", 1e300),
         ("dur", "soon"), ("dur", "x"), ("dur", 2**64), ("dur", INT64_MIN)]


def _argv(command: str, t: Path, tmp_path: Path) -> list[str]:
    return {"report": ["report", str(t)], "report-html": ["report", str(t), "--format", "html", "-o",
                                                          str(tmp_path / "r.html")],
            "diff": ["diff", str(t), str(t)], "convert": ["convert", str(t), "-o", str(tmp_path / "s.store")],
            "merge": ["merge", str(t), str(t), "-o", str(tmp_path / "m.json")]}[command]


@pytest.mark.parametrize("field,value", TIMES, ids=[f"{f}={v}" for f, v in TIMES])
@pytest.mark.parametrize("command", ["report", "report-html", "diff", "convert"])
def test_timestamps_out_of_range_are_one_line(field, value, command, tmp_path, capsys):
    """Every command refuses the trace alike. Before: ``convert`` stored dur 1e300 / "x" / 2**64 as null and
    INT64_MIN as 0 with exit status 0 and nothing said, and ``report`` of ts -2**63 was an OverflowError
    (then, once the scanner's columns took it, a table with the event at ts 0)."""
    t = _trace(tmp_path / "t.json", dict(KERNEL, **{field: value}), KERNEL)
    argv = _argv(command, t, tmp_path)
    assert main(argv) == 2
    line = _one_error_line(capsys, argv[0])
    assert f"{t}: event 'gemm' has {field} " in line and "not a time a trace can hold" in line
    assert not (tmp_path / "s.store").exists()


@pytest.mark.parametrize("value", [1e300, "soon", 2**64, INT64_MIN])
@pytest.mark.parametrize("command", ["report", "convert"])
def test_a_base_time_out_of_range_is_one_line(value, command, tmp_path, capsys):
    """Before: ``convert`` stored baseTimeNanoseconds "soon" as 0, exit status 0, nothing said."""
    t = _trace(tmp_path / "t.json", KERNEL, baseTimeNanoseconds=value)
    argv = _argv(command, t, tmp_path)
    assert main(argv) == 2
    line = _one_error_line(capsys, command)
    assert f"{t}: baseTimeNanoseconds " in line and "is not a time" in line
    assert not (tmp_path / "s.store").exists()


# ----------------------------------------------------------------------------- diff
GOOD_ROW = {"name": "gemm", "calls": 2, "total_ns": 200, "avg_ns": 100.0, "min_ns": 90, "max_ns": 110}
MALFORMED_SUMMARIES = {
    "point not an object": {"points": [1]},
    "kernel row without a name": {"points": [{"label": "p", "kernels": [{"calls": 1}]}]},
    "text where a number goes": {"points": [{"label": "p", "kernels": [dict(GOOD_ROW, avg_ns="fast")]}]},
    "kernels not a list": {"points": [{"label": "p", "kernels": {"gemm": 1}}]},
    "label a list": {"points": [{"label": ["p"], "kernels": [GOOD_ROW]}]},
    "kernel row a string": {"kernels": ["gemm"]},
    "metrics a list": {"kernels": [dict(GOOD_ROW, metrics=[1, 2])]},
    "rank a string": {"kernels": [dict(GOOD_ROW, rank="zero")]},
    "telemetry row without fields": {"kernels": [GOOD_ROW], "telemetry": [{"track": "t"}]},
    "telemetry not a list": {"kernels": [GOOD_ROW], "telemetry": "busy"},
    "huge number": {"kernels": [dict(GOOD_ROW, total_ns=1e400)]},
}


@pytest.mark.parametrize("case", sorted(MALFORMED_SUMMARIES))
@pytest.mark.parametrize("side", ["a", "b"])
def test_diff_of_a_malformed_summary_exits_2_never_1(case, side, tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps({"kernels": [GOOD_ROW]}))
    bad = tmp_path / "summary.jsonl"
    bad.write_bytes(json.dumps(MALFORMED_SUMMARIES[case]).encode())  # json: 1e400 written as Infinity
    a, b = (bad, good) if side == "a" else (good, bad)
    assert main(["diff", str(a), str(b)]) == 2
    assert str(bad) in _one_error_line(capsys, "diff")


@pytest.mark.parametrize("source", sorted(ZEROS))
def test_diff_of_a_stream_of_zeros_exits_2(source, tmp_path):
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps({"kernels": [GOOD_ROW]}))
    zeros = source if source.startswith("/") else str(_zeros(tmp_path))
    done = subprocess.run([sys.executable, "-m", "xpuprof", "diff", str(good), zeros], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=_limited_memory)
    assert done.returncode == 2, done.stderr[-2000:]
    _one_line_refusing_zeros(done.stderr, "diff", source)


# ----------------------------------------------------------------------------- replay
MAGIC = b"XPUPROF-PTI-RAW 1\n"


def _capture(path: Path, body: bytes = b"", **header) -> Path:
    h = {"pti_version": "0.1", "record_sizes": {}, "clock_offset_ns": 0, "device_uuids": [], "strings": {},
         "api_names": [], "activities": [], "buffer_lengths": [len(body)] if body else [], "window": None}
    h.update(header)
    path.write_bytes(MAGIC + orjson.dumps(h) + b"\n" + body)
    return path


RECORD = b"\x01\x00\x00\x00" + b"\x00" * 12
MALFORMED_CAPTURES = {
    "zero record size": dict(record_sizes={"1": 0}, body=RECORD),
    "a 4 TiB kind table": dict(record_sizes={str(1 << 40): 64}),
    "empty window": dict(window=[]),
    "negative buffer length": dict(buffer_lengths=[-16, 16], body=RECORD),
    "record of an unknown kind": dict(record_sizes={"2": 16}, body=RECORD),
    "record sizes a list": dict(record_sizes=[16]),
    "api names of the wrong shape": dict(api_names=[[1]]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CAPTURES))
def test_replay_of_a_malformed_capture_is_one_line_and_status_2(case, tmp_path, capsys):
    spec = dict(MALFORMED_CAPTURES[case])
    raw = _capture(tmp_path / "bad.ptiraw", spec.pop("body", b""), **spec)
    rc = main(["replay", str(raw), "-o", str(tmp_path / "out.json")])
    assert rc == 2
    assert str(raw) in _one_error_line(capsys, "replay") or case == "record of an unknown kind"
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("source", sorted(ZEROS))
def test_replay_of_a_stream_of_zeros_is_refused_at_once(source, tmp_path):
    zeros = source if source.startswith("/") else str(_zeros(tmp_path))
    done = subprocess.run([sys.executable, "-m", "xpuprof", "replay", zeros, "-o", str(tmp_path / "o.json")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=_limited_memory)
    said = {"/dev/zero": "/dev/zero: PTI capture is a character device, not a regular file",
            "zeros.json": "zeros.json is not an xpuprof PTI capture"}[source]
    assert done.returncode == 2 and said in done.stderr, done.stderr[-2000:]


# ----------------------------------------------------------------------------- YAML configs
def test_a_nul_byte_in_the_output_dir_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "b.yaml"
    cfg.write_text('workload: {builtin: gemm, kwargs: {n: 8}}\niterations: 1\noutput: {dir: "traces\\0evil"}\n')
    assert main(["run", str(cfg), "--no-progress"]) == 2
    line = _one_error_line(capsys, "run")
    assert f"{cfg}:3: output.dir: must not contain a NUL character" in line


@pytest.mark.slow
def test_a_long_alias_free_list_loads():
    """The alias guard counts what aliases add, not the document's plain size (bounded by the file's)."""
    from xpuprof.config.yamlconfig import parse_config

    items = ", ".join(str(i) for i in range(120_000))
    cfg = parse_config(f"workload: {{builtin: gemm}}\ncustom: {{sizes: [{items}]}}\n", "long.yaml")
    assert cfg.points[0].custom["sizes"] == list(range(120_000))


def test_a_config_over_its_size_limit_is_one_line(tmp_path, capsys, monkeypatch):
    from xpuprof.config import yamlconfig

    monkeypatch.setattr(yamlconfig, "MAX_CONFIG_BYTES", 1024)
    cfg = tmp_path / "b.yaml"
    cfg.write_text("workload: {builtin: gemm}\n# " + "x" * 2000 + "\n")
    assert main(["run", str(cfg), "--dry-run"]) == 2
    assert "config file is larger than the 1 KiB input limit" in _one_error_line(capsys, "run")


# ----------------------------------------------------------------------------- fuzz
HOSTILE_NUMBERS = st.sampled_from([0, -1, 1, 2**63, -(2**63), 2**64, 10**20, 1e300, -1e300, 1e-300, -0.0, 0.5,
                                   4.6e15, 9.2e12, True, False])
HOSTILE = st.one_of(HOSTILE_NUMBERS, st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8), st.sampled_from(["", "1.25", "nan", "inf", "-1e999", "0x10"]), st.none(),
                    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "C", "i", "M", "s", "f", "B", "E", 1, None])},
    optional={"cat": st.one_of(st.sampled_from(["kernel", "gpu_memcpy", "user_annotation", "cpu_op", "gpu_user_annotation"]),
                               HOSTILE),
              "name": st.one_of(st.sampled_from(["gemm", "metrics: gemm", "ProfilerStep#3", "aten::mm"]), HOSTILE),
              "ts": HOSTILE, "dur": HOSTILE, "pid": HOSTILE, "tid": HOSTILE, "id": HOSTILE,
              "args": st.one_of(st.dictionaries(st.sampled_from(["External id", "kernel_id", "occupancy", "v"]),
                                                HOSTILE, max_size=3), HOSTILE)})
TOP = st.fixed_dictionaries({"traceEvents": st.lists(EVENT, max_size=12)},
                            optional={"baseTimeNanoseconds": HOSTILE, "distributedInfo": st.one_of(
                                st.fixed_dictionaries({"rank": HOSTILE}), HOSTILE),
                                "mergedRanks": st.one_of(st.fixed_dictionaries({"ranks": HOSTILE}), HOSTILE)})


@pytest.mark.slow
@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=TOP)
def test_every_command_reads_a_hostile_trace_without_a_traceback(doc, tmp_path_factory, capsys):
    d = tmp_path_factory.mktemp("fuzz")
    t = d / "t.pt.trace.json"
    t.write_bytes(orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS) if _orjson_ok(doc) else json.dumps(doc).encode())
    for argv in (["report", str(t)], ["report", str(t), "--by", "op"], ["report", str(t), "--format", "html", "-o",
                                                                          str(d / "r.html")],
                 ["merge", str(t), str(t), "-o", str(d / "m.json")], ["diff", str(t), str(t)]):
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc in (0, 2), (argv, rc, err[-2000:])
        if rc == 2:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith(f"xpuprof {argv[0]}: "), (argv, err[-2000:])


def _orjson_ok(doc) -> bool:
    try:
        orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
        return True
    except TypeError:  # ints past 64 bits: the standard encoder writes them
        return False


@pytest.mark.parametrize("key, value", [("pid", 2**64), ("tid", -(2**70)), ("pid", 123456789012345678901234567890)])
def test_an_id_past_64_bits_is_kept_as_its_digits(key, value, tmp_path, capsys):
    """An id no int64 holds is a text label with the digits written - before, orjson's float of it
    (``1.8446744073709552e+19``): a value silently replaced."""
    pq = pytest.importorskip("pyarrow.parquet")
    t = _trace(tmp_path / "t.json", dict(KERNEL, **{key: value}), KERNEL)
    assert main(["convert", str(t), "-o", str(tmp_path / "s.store")]) == 0, capsys.readouterr().err
    rows = pq.read_table(tmp_path / "s.store" / "rank=0" / "slices.parquet", columns=[key, f"{key}_label"]).to_pylist()
    assert {(r[key], r[f"{key}_label"]) for r in rows} == {(1, None), (None, str(value))}
