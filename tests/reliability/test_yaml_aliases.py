"""Issue 14: a recursive YAML alias gave a RecursionError traceback; a 300-byte alias bomb took
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
