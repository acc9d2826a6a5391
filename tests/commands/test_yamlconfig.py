from pathlib import Path

import pytest

from xpuprof.config.yamlconfig import ConfigError, load_config, parse_config, parse_override
from xpuprof.workloads import run_names

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def parse(text, **kw):
    return parse_config(text, "bench.yaml", names=run_names(), **kw)


def test_shipped_configs_validate():
    assert any(p.name == "quickstart.yaml" for p in CONFIGS)
    for path in CONFIGS:
        cfg = load_config(path, names=run_names())
        assert cfg.points, path


def test_defaults_and_profiler_config():
    cfg = parse("workload: {builtin: gemm}\nmetrics: {names: [XVE_STALL], max_scopes: 7}\nactivities: [kernel]")
    (pt,) = cfg.points
    assert (pt.warmup, pt.iterations, pt.repeats, pt.device) == (1, 5, 1, "auto")
    assert pt.workload.kind == "builtin" and pt.workload.library == "numpy"
    assert pt.output.dir == Path("traces/bench") and pt.output.worker_name is None  # trace_file_name: <host>_<pid>
    pc = pt.profiler_config()
    assert pc.experimental.profiler_metrics == ["XVE_STALL"] and pc.experimental.max_scopes == 7
    assert [a.value for a in pc.activities] == ["kernel"]


def test_matrix_expands_to_cartesian_points():
    cfg = parse("workload: {builtin: gemm}\nmatrix:\n  workload.kwargs.n: [8, 16, 32]\n  workload.kwargs.dtype: [float32, float64]\n")
    assert len(cfg.points) == 6
    assert [p.workload.kwargs["n"] for p in cfg.points] == [8, 8, 16, 16, 32, 32]
    assert cfg.points[1].label == "n=8 dtype=float64"
    assert len({p.slug for p in cfg.points}) == 6


def test_set_overrides_parse_values_as_yaml():
    cfg = parse("workload: {builtin: gemm}", overrides=["iterations=9", "workload.kwargs.n=12", "backends=[sim]"],
                out_dir="/tmp/x")
    (pt,) = cfg.points
    assert pt.iterations == 9 and pt.workload.kwargs == {"n": 12} and pt.backends == ["sim"]
    assert pt.output.dir == Path("/tmp/x")
    assert parse_override("a.b=[1, 2]") == (("a", "b"), [1, 2])


@pytest.mark.parametrize("text, expected", [
    ("workload: {builtin: gem}", "bench.yaml:1: workload.builtin: unknown built-in workload 'gem'; valid: gemm, elementwise"),
    ("workload: {builtin: gemm}\nitterations: 3", "bench.yaml:2: itterations: unknown key; did you mean 'iterations'?"),
    ("workload:\n  builtin: gemm\n  kwargs:\n    m: 3", "bench.yaml:4: workload.kwargs.m: built-in workload 'gemm' has no parameter(s) 'm'"),
    ("workload: {builtin: gemm}\niterations: 0", "bench.yaml:2: iterations: must be >= 1, got 0"),
    ("workload: {builtin: gemm}\nwarmup: many", "bench.yaml:2: warmup: must be an integer"),
    ("workload: {builtin: gemm}\nactivities: [kernel, kernal]", "bench.yaml:2: activities: unknown activity type 'kernal'; did you mean 'kernel'?"),
    ("workload: {builtin: gemm}\nbackends: [simm]", "bench.yaml:2: backends.0: unknown backend 'simm'"),
    ("workload: {builtin: gemm}\nwarmup: 1\nwarmup: 2", "bench.yaml:3: duplicate key 'warmup' (first set on line 2)"),
    ("workload: {builtin: gemm, library: jax}", "bench.yaml:1: workload.library: unknown library 'jax'; valid: numpy, torch, dpnp"),
    ("workload: {builtin: gemm, callable: 'a:b'}", "bench.yaml:1: workload: give exactly one of builtin"),
    ("iterations: 3", "workload: missing"),
    ("workload: {callable: nocolon}", "bench.yaml:1: workload.callable: 'nocolon' must be written 'module:function'"),
    ("workload: {script: missing_script.py}", "workload.script: script 'missing_script.py' not found"),
    ("workload: {builtin: gemm}\noutput: {compression: zstd}", "bench.yaml:2: output.compression: unknown compression 'zstd'; valid: none, gzip"),
    ("workload: {builtin: gemm}\nschedule: {wait: 1, activ: 2}", "bench.yaml:2: schedule.activ: unknown key; did you mean 'active'?"),
    ("workload: {builtin: gemm}\nzzz: 1", "bench.yaml:2: zzz: unknown key; Valid keys here: name, description"),
    ("workload: {builtin: gemm}\nmatrix:\n  workload.kwargs.dtype: [float32, int8]", "bench.yaml:3: workload.kwargs.dtype: dtype 'int8' is not supported"),
    ("workload: {builtin: gemm}\nmatrix:\n  sizes: [1, 2]", "bench.yaml:3: matrix.sizes: 'sizes' does not name a config key"),
    ("workload: {builtin: gemm}\nmatrix:\n  iterations: []", "bench.yaml:3: matrix.iterations: must be a non-empty list"),
    ("- a\n- b", "bench.yaml:1: a benchmark config must be a mapping"),
    ("workload: {builtin: gemm\n", "bench.yaml:2:1: invalid YAML"),
])
def test_errors_name_file_line_and_key(text, expected):
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert expected in str(info.value)


def test_override_errors_point_at_the_override():
    with pytest.raises(ConfigError, match=r"^--set iterations=-1: iterations: must be >= 1"):
        parse("workload: {builtin: gemm}", overrides=["iterations=-1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        parse("workload: {builtin: gemm}", overrides=["iterations"])


def test_missing_file_and_script_relative_to_config(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "work.py").write_text("print('hi')\n")
    (tmp_path / "c.yaml").write_text("workload: {script: work.py, argv: [--n, 3]}\n")
    (pt,) = load_config(tmp_path / "c.yaml").points
    assert pt.workload.target == str(tmp_path / "work.py") and pt.workload.argv == ["--n", "3"]
