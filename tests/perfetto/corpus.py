"""The traces the Perfetto tests write and read: the golden corpus (one JSON per producer, and the builder
snapshots they were written from) and HTA's test traces (torch.profiler's CUDA and ROCm traces)."""
from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = TESTS / "data" / "golden"
HTA = TESTS / "data" / "hta"

GOLDEN_JSON = sorted(GOLDEN.glob("*.json"))
HTA_JSON = sorted(HTA.rglob("*.json.gz"))
CORPUS = GOLDEN_JSON + HTA_JSON
SNAPSHOTS = sorted(p.name[:-len(".snap.npz")] for p in GOLDEN.glob("*.snap.npz"))


def ids(paths) -> list[str]:
    return [p.name.split(".")[0] if p.parent == GOLDEN else f"hta-{p.parent.name}-{p.name.split('.')[0]}"
            for p in paths]


def snapshot(name: str):
    """The TraceBuilder a golden producer filled (tests/golden/snapshot.py), against this process's base time."""
    sys.path.insert(0, str(TESTS / "golden"))
    import snapshot as snap  # noqa: E402

    from xpuprof.clock import BASE_TIME_NS

    return snap.load(GOLDEN / f"{name}.snap.npz", BASE_TIME_NS)
