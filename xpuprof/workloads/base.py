"""What a workload is (``Workload``) and the one error a workload raises (``WorkloadError``): the names every
workload module shares, so none of them imports the package that lists them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


class WorkloadError(RuntimeError):
    """A workload that cannot be built or run here; the message says what and why."""


@dataclass
class Workload:
    """A ready-to-run workload: ``step()`` is one iteration, ``sync()`` waits for device work."""

    name: str
    step: Callable[[], Any]
    sync: Callable[[], None] = lambda: None
    device: str = "cpu"
    info: dict[str, Any] = field(default_factory=dict)  # flops/bytes per step, library, shapes
