"""Rank and world size of this process, from the usual launcher variables.

Checked in order (the first launcher whose variables are all present wins): torchrun /
torch.distributed (``RANK``/``WORLD_SIZE``), Open MPI, MPICH/Intel MPI (PMI), PMIx, MVAPICH,
Cray/Aurora PALS, then Slurm (``srun`` sets its variables even when an MPI or torchrun
launcher runs inside it, so it comes last).

The result feeds the trace's ``distributedInfo`` block and the ``.rank<r>`` part of trace names.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from . import diagnostics
from typing import Mapping

# launcher name, rank var, size var, local-rank var (optional), local-size var (optional)
_LAUNCHERS: tuple[tuple[str, str, str, str, str], ...] = (
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("pmix", "PMIX_RANK", "PMIX_SIZE", "", ""),
    ("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
     "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("pals", "PALS_RANKID", "PALS_SIZE", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


MAX_RANKS = 1 << 31  # no launcher runs more processes; larger values are garbage, not ranks

log = logging.getLogger("xpuprof")


class RankEnvError(ValueError):
    """Launcher variables that are present but not usable (not integers, rank >= world size)."""


def _warn_once(message: str) -> None:
    diagnostics.warn_once(log, ("bad-setting", "rank", message), "xpuprof: %s", message)


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    launcher: str

    @property
    def trace_suffix(self) -> str:
        """The ``.rank<r>`` part of a trace file name."""
        return f".rank{self.rank}"

    def distributed_info(self, backend: str = "") -> dict:
        """The trace's ``distributedInfo`` block (``rank`` first: HTA scans for ``"rank": N``)."""
        info = {"rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank,
                "local_world_size": self.local_world_size, "launcher": self.launcher}
        if backend:
            info["backend"] = backend
        return info


def _int(env: Mapping[str, str], var: str) -> int:
    text = env[var].strip()
    # Slurm writes per-node task counts like "4(x2)"; the leading count is the local size.
    head = text.split("(", 1)[0].split(",", 1)[0]
    # ASCII digits only: str.isdigit() and int() accept other scripts' digits ('²' passes one, fails the other)
    if not (head.isascii() and head.isdigit()) or int(head) >= MAX_RANKS:
        raise RankEnvError(f"environment variable {var}={text[:40]!r} is not a rank or size (an integer "
                           f"0..{MAX_RANKS - 1})")
    return int(head)


def detect(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """This process's rank, or None when no launcher variables are set (a single process)."""
    env = os.environ if env is None else env
    for launcher, rank_var, size_var, local_var, local_size_var in _LAUNCHERS:
        if rank_var not in env or size_var not in env:
            continue
        rank, size = _int(env, rank_var), _int(env, size_var)
        if size < 1 or not 0 <= rank < size:
            raise RankEnvError(f"{launcher}: {rank_var}={rank} is not within {size_var}={size}")
        local, local_size = rank, size
        try:  # the local pair is secondary: a bad one falls back to the global pair, said once
            if local_var and local_var in env:
                local = _int(env, local_var)
            if local_size_var and local_size_var in env:
                local_size = _int(env, local_size_var)
        except RankEnvError as exc:
            _warn_once(f"{exc}; the local rank and size are taken as the global ones ({rank} of {size})")
            local, local_size = rank, size
        return RankInfo(rank, size, local, local_size, launcher)
    return None


def detect_or_none(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """``detect``, with unusable launcher variables said once (a warning naming them) and read as no
    launcher: a process with a garbage ``RANK`` still profiles and writes its trace."""
    try:
        return detect(env)
    except RankEnvError as exc:
        _warn_once(f"ignoring launcher rank variables: {exc}")
        return None


def distributed_info(env: Mapping[str, str] | None = None, backend: str = "") -> dict | None:
    """``distributedInfo`` for this process, or None outside a multi-process launch."""
    info = detect(env)
    return None if info is None else info.distributed_info(backend)


def trace_suffix(env: Mapping[str, str] | None = None) -> str:
    """``.rank<r>`` under a launcher, ``""`` otherwise."""
    info = detect(env)
    return "" if info is None else info.trace_suffix


def process_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This process's rank: the launcher's, else a bare integer ``RANK``; None for a single process (or
    launcher variables that are not usable: the profiler warns about those where it reads them)."""
    env = os.environ if env is None else env
    info = detect_or_none(env)
    if info is not None:
        return info.rank
    return bare_rank(env)


def bare_rank(env: Mapping[str, str] | None = None) -> int | None:
    """A bare ``RANK`` (without ``WORLD_SIZE``) as an integer, or None; a value that is not one is said
    once and ignored."""
    env = os.environ if env is None else env
    if "RANK" not in env:
        return None
    try:
        return _int(env, "RANK")
    except RankEnvError as exc:
        _warn_once(f"{exc}; ignored (the trace is named without a rank)")
        return None
