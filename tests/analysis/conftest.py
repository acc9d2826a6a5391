"""Analysis tests: rank traces written by xpuprof itself (``make_rank_trace``), shared with the command tests."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_commands_conftest", Path(__file__).parents[1] / "commands" / "conftest.py")
_commands = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_commands)
make_rank_trace = _commands.make_rank_trace
