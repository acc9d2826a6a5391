"""The on-demand client's prewarm leaves nothing for a capture to import: the first capture's start and
stop would otherwise import on the program's time (holding the GIL against its training thread)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter, with torch when installed

CHILD = """
import json, sys
try:
    import torch
except ImportError:
    torch = None
import xpuprof
from xpuprof.ondemand import capture, client  # what a process under `xpuprof exec` has loaded
client.prewarm()
before = set(sys.modules)
prof = xpuprof.profile(activities=["cpu"], profile_memory=torch is not None)
prof.start()
with xpuprof.record_function("step"):
    if torch is not None:
        torch.ones(8) * 2
prof.stop()
prof.export_chrome_trace(sys.argv[1])
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("xpuprof", "isal"))))
"""


def test_after_prewarm_a_capture_starts_stops_and_writes_without_importing(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "t.json.gz")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported during the capture: {imported}"
    assert (tmp_path / "t.json.gz").stat().st_size > 0
