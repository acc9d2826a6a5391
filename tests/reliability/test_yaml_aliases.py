"""A recursive YAML alias gave a RecursionError traceback; a 300-byte alias bomb took
11.75 s and 1.5 GB before rejection. Both are refused at once with one ConfigError naming the line."""
from __future__ import annotations

import pytest

from xpuprof.config.yamlconfig import ConfigError, parse_config

BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(8)])


def test_alias_bomb_is_refused_at_once():
    assert len(BOMB) < 1000
    with pytest.raises(ConfigError, match=r"bench.yaml:\d+: YAML aliases here expand to more than 100,000 nodes"):
        parse_config(BOMB + "\nworkload: {builtin: gemm}\n", "bench.yaml")


def test_recursive_alias_is_refused_without_a_traceback():
    with pytest.raises(ConfigError, match="recursive alias"):
        parse_config("workload: &w {builtin: gemm, kwargs: {again: *w}}\n", "bench.yaml")


def test_ordinary_aliases_still_work():
    cfg = parse_config("name: &n quick\ndescription: *n\nworkload: {builtin: gemm}\n", "bench.yaml")
    assert cfg.name == "quick"


def _one_line_set_bomb() -> str:
    """The alias bomb above as one --set value (a flow mapping): 9**9 leaves from ~300 bytes."""
    parts = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "custom={" + ", ".join(parts) + "}"


def test_set_override_alias_bomb_is_refused_at_once(tmp_path):
    """--set parsed its value with plain yaml.safe_load: this ran 203 s and took 10 GB."""
    from xpuprof.config.yamlconfig import load_config

    cfg = tmp_path / "bench.yaml"
    cfg.write_text("workload: {builtin: gemm}\n")
    with pytest.raises(ConfigError, match=r"--set custom:1: YAML aliases here expand to more than 100,000 nodes"):
        load_config(cfg, overrides=[_one_line_set_bomb()])


def test_set_override_recursive_alias_is_one_line(tmp_path, capsys):
    """--set 'custom=&a [*a]' gave a RecursionError traceback."""
    from xpuprof.cli import main

    cfg = tmp_path / "bench.yaml"
    cfg.write_text("workload: {builtin: gemm}\n")
    assert main(["run", str(cfg), "--set", "custom=&a [*a]", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["xpuprof run: --set custom:1: a YAML alias refers to a node that contains it (a "
                                "recursive alias); refusing the config"], err


def test_set_override_ordinary_values_and_bad_yaml(tmp_path):
    from xpuprof.config.yamlconfig import parse_override

    assert parse_override("workload.kwargs.n=1024") == (("workload", "kwargs", "n"), 1024)
    assert parse_override("tags=&t [a, b]") == (("tags",), ["a", "b"])
    assert parse_override("name=") == (("name",), "")
    with pytest.raises(ConfigError, match=r"--set x:1:\d+: invalid YAML"):
        parse_override("x=[1, 2")
