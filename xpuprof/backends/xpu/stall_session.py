"""EU stall sampling as part of an XPU session: when it is asked for, its life cycle beside PTI's views.

``StallPart.from_config`` answers None unless the config asks (``ExperimentalConfig.stall_sampling``).
The session calls ``enable`` after its views (PTI needs the kernel view first; a machine that cannot
sample raises ``StallSamplingError`` here, before anything runs), ``start``/``stop`` with its own,
``collect`` before writing its kernels (``kernel_args``) and ``finish`` after (metadata, disable).
A failure after enable is no exception: the trace's ``xpu_stall_sampling_error`` says what was lost.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable

from ... import diagnostics
from ...vendors import pti_pc_sampling as pcs
from ..base import BackendError
from .stall_emit import STALL_ERROR_KEY, STALL_METADATA_KEY, StallJoin, stall_metadata
from .stall_sampling import ZET_ENABLE_METRICS, StallResults, StallSampler, StallSamplingError

log = logging.getLogger("xpuprof")


def wants_stall_sampling(config) -> bool:
    exp = getattr(config, "experimental", None) if config is not None else None
    return bool(getattr(exp, "stall_sampling", False))


def prepare_metrics_env(environ=None) -> None:
    """PTI reads the EuStallSampling metric group through Level Zero's metrics API, which needs
    ZET_ENABLE_METRICS=1 before Level Zero initializes: set it while that can still matter (if it is too
    late, a refusal names it as a likely cause)."""
    from ...vendors.levelzero import loader_mapped

    env = os.environ if environ is None else environ
    if env.get(ZET_ENABLE_METRICS) != "1" and not loader_mapped():
        env[ZET_ENABLE_METRICS] = "1"


def load_pcsample():
    from ... import _native

    try:
        return _native.load("pcsample", "EU stall sampling (it reads PTI's per-instruction source info)")
    except _native.NativeUnavailable as exc:
        raise StallSamplingError(str(exc)) from exc


class StallPart:
    """One session's EU stall sampling. PTI allows one collection per process: a session that was
    configured and never processed (an aborted profile) gives its collection up to the next one."""

    _active: "StallPart | None" = None

    def __init__(self, lib, period_ns: int, device_names: list[str], fns: dict | None = None) -> None:
        load_pcsample()
        fns = fns if fns is not None else pcs.bind_functions(lib._lib)
        self.sampler = StallSampler(fns, version=lib.version(), period_ns=period_ns, result_name=lib.result_name,
                                    device_names=device_names)
        self.results: StallResults | None = None
        self.error: str | None = None
        self.join: StallJoin | None = None
        self.paused = False  # the session paused once: PTI's sampler kept sampling through it

    @classmethod
    def from_config(cls, config, lib, device_names: list[str]) -> "StallPart | None":
        if not wants_stall_sampling(config):
            return None
        return cls(lib, int(getattr(config.experimental, "stall_sampling_period_ns", 0) or 0), device_names)

    def _lost(self, what: str, exc: Exception) -> None:
        self.error = f"EU stall samples not collected: {what} failed: {exc}"
        diagnostics.warn_once(log, ("xpu-stall-lost", self.error), "xpuprof: %s", self.error)

    def note_paused(self) -> None:
        self.paused = True

    def enable(self) -> None:
        previous = StallPart._active
        if previous is not None and previous is not self:
            previous.abandon()
        self.sampler.enable()
        StallPart._active = self

    def start(self) -> None:
        try:
            self.sampler.start()
        except StallSamplingError as exc:
            self._lost("starting the collection", exc)

    def stop(self) -> None:
        try:
            self.sampler.stop()
        except StallSamplingError as exc:
            self._lost("stopping the collection", exc)

    def collect(self, keep: Callable[[str], bool] | None = None) -> None:
        """Read what PTI sampled (after stop); ``keep``: the kernel-name filter of the trace."""
        if self.error is None and self.sampler.stopped:
            try:
                self.results = self.sampler.collect()
            except (StallSamplingError, BackendError) as exc:
                self._lost("reading the samples", exc)
        if self.results is not None:
            self.join = StallJoin(self.results, keep)

    def kernel_args(self, text_of: Callable[[int], str]):
        """An ``emit.KernelArgs`` source adding each kernel's stall mix, or None without samples."""
        if self.join is None:
            return None
        join = self.join
        return lambda records, name_ids: join.kernel_args(name_ids, text_of)

    def finish(self, builder, device_index: Callable[[int], Any] | None = None) -> None:
        """Metadata into the trace, then free PTI's collection."""
        try:
            if self.join is not None:
                md = stall_metadata(self.join, device_index)
                if self.paused:
                    md["paused_spans_included"] = ("PTI's EU stall sampling has no pause: samples of kernels that "
                                                   "ran while collection was paused are in these totals")
                builder.set_metadata(STALL_METADATA_KEY, md)
            if self.error is not None:
                builder.set_metadata(STALL_ERROR_KEY, self.error)
        finally:
            self.abandon()

    def abandon(self) -> None:
        self.sampler.disable()
        if StallPart._active is self:
            StallPart._active = None

    def errors(self) -> list[str]:
        return [self.error] if self.error else []
