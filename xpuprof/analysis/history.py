"""Run history: every accepted run's per-kernel and per-range call statistics, in a directory.

Layout (docs/cli.md, "Run history"): ``DIR/xpuprof-history.json`` marks the directory as a history
(format and version); each *series* - one experiment on one kind of machine: the config hash, the device
and the machine fingerprint - is a subdirectory ``DIR/<series id>/`` holding one JSON file per run,
``<UTC date>-<host>-<pid>-<random>.json`` (names sort by date). JSON, so a history is read with the
standard library alone (no pyarrow), diffed by git and inspected by hand.

- **Concurrent writers**: each run is its own file, written to a private temporary name beside it and
  renamed into place (``outputs.write_output_bytes``: exclusive, symlink-safe). Two processes appending at
  once write two files; a reader sees a run whole or not at all (temporary names start with ``.``).
- **Retention**: a series keeps its newest ``keep`` runs (``DEFAULT_KEEP``); appending a run deletes the
  oldest beyond that. The gate reads the newest ``window`` of them as its baseline.
- **Trust**: only regular files owned by the user running xpuprof (or root) are read; links, other
  users' files and files that are not a run are skipped, and the caller says how many and why. Each
  file is read with a size bound.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import secrets
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson

from .machine_probe import ProbeResult
from .samples import SampleStats

FORMAT = "xpuprof-history"
RUN_KIND = "xpuprof-history-run"
VERSION = 1
MARKER = "xpuprof-history.json"
DEFAULT_KEEP = 200
DEFAULT_WINDOW = 20
MAX_RUN_BYTES = 64 << 20
DOMAINS = ("kernel", "range")  # device work; host ranges (record_function, user_annotation)
_SERIES = re.compile(r"^[0-9a-f]{16}$")
_RUN_FILE = re.compile(r"^[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[A-Za-z0-9_.\-]{1,64}-[0-9]+-[0-9a-f]{8}\.json$")


class HistoryError(ValueError):
    """A history directory that cannot be used as asked; the message names it and what is wrong."""


def canonical_hash(value, length: int = 16) -> str:
    """A short, stable hash of a JSON-able value (keys sorted)."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:length]


# ----------------------------------------------------------------------------- where a run ran
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_fingerprint() -> dict:
    """The hardware a run's timings belong to. ``id`` hashes what makes timings comparable (OS, CPU
    architecture and model, logical CPUs, memory); the host name is recorded but not part of it (CI
    runners of one kind share a history)."""
    import psutil

    info = {"system": platform.system(), "arch": platform.machine(), "cpu": _cpu_model(),
            "cpus": os.cpu_count() or 0, "memory_gib": round(psutil.virtual_memory().total / 2**30)}
    return {"id": canonical_hash(info, 12), **info, "hostname": socket.gethostname()}


def git_revision(directory: str | Path | None = None) -> dict | None:
    """``{"revision", "dirty"}`` of the git checkout holding ``directory`` (the current one by default),
    ``XPUPROF_GIT_REVISION`` when set (a CI checkout without .git), else None (no git, not a checkout)."""
    given = os.environ.get("XPUPROF_GIT_REVISION", "").strip()
    if given:
        return {"revision": given[:80], "dirty": None}
    cwd = str(directory) if directory is not None else None
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"revision": rev.stdout.strip()[:80], "dirty": bool(status.stdout.strip()) if status.returncode == 0
            else None}


# ----------------------------------------------------------------------------- one run
@dataclass
class KernelRecord:
    """One kernel's (or host range's) calls in one run: their summary, their per-kernel metric means."""

    name: str
    domain: str  # "kernel" (device work) or "range" (a host range)
    stats: SampleStats
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        from .kernel_identity import identity

        out = {"name": self.name, "domain": self.domain, "identity": identity(self.name).to_dict(),
               **self.stats.to_dict()}
        if self.metrics:
            out["metrics"] = self.metrics
        return out

    @classmethod
    def from_dict(cls, d) -> "KernelRecord":
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise ValueError("a kernel entry must be an object with a string name")
        domain = d.get("domain")
        if domain not in DOMAINS:
            raise ValueError(f"kernel {d['name'][:80]!r}: domain must be one of {', '.join(DOMAINS)}, not {domain!r}")
        metrics = d.get("metrics") or {}
        if not isinstance(metrics, dict) or not all(type(v) in (int, float) for v in metrics.values()):
            raise ValueError(f"kernel {d['name'][:80]!r}: metrics must map names to numbers")
        try:
            stats = SampleStats.from_dict(d)
        except ValueError as exc:
            raise ValueError(f"kernel {d['name'][:80]!r}: {exc}") from None
        return cls(d["name"], domain, stats, {str(k): float(v) for k, v in metrics.items()})


@dataclass
class HistoryRun:
    """One run of one series: where and when it ran, and its kernels (name -> record)."""

    key: dict  # config_hash, device, machine (its id): what the series id hashes
    kernels: dict[str, KernelRecord]
    label: dict = field(default_factory=dict)  # what it is, for people: name, config, point, test
    machine: dict = field(default_factory=dict)
    git: dict | None = None
    source: str = "run"  # what appended it: "run --history", "gate --accept", "pytest"
    time: float = field(default_factory=time.time)
    run_id: str = ""
    xpuprof_version: str = ""
    probe: ProbeResult | None = None  # the machine probe taken around the workload (older runs: none)

    @property
    def series(self) -> str:
        return canonical_hash({k: self.key.get(k) for k in ("config_hash", "device", "machine")})

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.time, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def stats(self) -> dict[str, SampleStats]:
        return {n: k.stats for n, k in self.kernels.items()}

    def domains(self) -> dict[str, str]:
        return {n: k.domain for n, k in self.kernels.items()}

    def to_dict(self) -> dict:
        return {"kind": RUN_KIND, "version": VERSION, "run_id": self.run_id, "series": self.series,
                "date": self.date, "time": self.time, "key": self.key, "label": self.label,
                "machine": self.machine, "git": self.git, "source": self.source,
                "xpuprof_version": self.xpuprof_version, "kernels": [k.to_dict() for k in self.kernels.values()],
                **({"machine_probe": self.probe.to_dict()} if self.probe is not None else {})}

    @classmethod
    def from_dict(cls, d) -> "HistoryRun":
        """A run as ``to_dict`` wrote it; ``ValueError`` naming what is wrong for anything else."""
        if not isinstance(d, dict) or d.get("kind") != RUN_KIND:
            raise ValueError(f'not a history run (no "kind": "{RUN_KIND}")')
        if d.get("version") != VERSION:
            raise ValueError(f"history run version {d.get('version')!r}; this xpuprof reads version {VERSION}")
        key, kernels = d.get("key"), d.get("kernels")
        if not isinstance(key, dict) or not all(isinstance(key.get(k), str) for k in ("config_hash", "device", "machine")):
            raise ValueError("key must hold config_hash, device and machine strings")
        if not isinstance(kernels, list):
            raise ValueError("kernels must be a list")
        t = d.get("time")
        if type(t) not in (int, float) or not 0 <= t < 1e11:
            raise ValueError(f"time must be seconds since the epoch, not {t!r}"[:120])
        records = [KernelRecord.from_dict(k) for k in kernels]
        for name, field_ in (("label", d.get("label")), ("machine", d.get("machine"))):
            if field_ is not None and not isinstance(field_, dict):
                raise ValueError(f"{name} must be an object")
        git = d.get("git")
        probe = d.get("machine_probe")  # absent from runs recorded before the probe: still read
        return cls(dict(key), {r.name: r for r in records}, dict(d.get("label") or {}), dict(d.get("machine") or {}),
                   git if isinstance(git, dict) else None, str(d.get("source", "")), float(t), str(d.get("run_id", "")),
                   str(d.get("xpuprof_version", "")), None if probe is None else ProbeResult.from_dict(probe))


def new_run_id(t: float) -> str:
    stamp = datetime.fromtimestamp(t, timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    host = re.sub(r"[^A-Za-z0-9_.\-]+", "-", socket.gethostname())[:64] or "host"
    return f"{stamp}-{host}-{os.getpid()}-{secrets.token_hex(4)}"


# ----------------------------------------------------------------------------- the directory
@dataclass
class SeriesRead:
    """The runs of one series (oldest first) and what was skipped, one line each."""

    runs: list[HistoryRun]
    skipped: list[str]
    total: int  # run files in the series, read or not (the window may leave older ones unread)


class History:
    """A history directory (module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- writing
    def ensure(self) -> None:
        """Create the directory (and its marker) or check it is a history; ``HistoryError`` otherwise."""
        root = self.root
        if root.is_symlink() and not _trusted(root.lstat()):
            raise HistoryError(f"{root}: a symlink owned by another user; refusing to write a history through it")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"{root}: cannot create the history directory ({exc.strerror or exc})") from None
        if not root.is_dir():
            raise HistoryError(f"{root}: not a directory")
        marker = root / MARKER
        if marker.exists():
            self._check_marker()
            return
        if any(p.name != MARKER and not p.name.startswith(".") for p in root.iterdir()):
            raise HistoryError(f"{root}: the directory holds files but no {MARKER}: not an xpuprof history; "
                               "name an empty or new directory")
        from ..outputs import write_output_bytes

        write_output_bytes(marker, orjson.dumps({"format": FORMAT, "version": VERSION}) + b"\n")

    def append(self, run: HistoryRun, *, keep: int = DEFAULT_KEEP) -> Path:
        """Write ``run`` as a new file of its series, then apply retention; returns its path."""
        from ..version import __version__
        from ..outputs import write_output_bytes

        if keep < 1:
            raise HistoryError(f"keep must be at least 1 run, got {keep}")
        self.ensure()
        run.run_id = run.run_id or new_run_id(run.time)
        run.xpuprof_version = run.xpuprof_version or __version__
        directory = self.root / run.series
        directory.mkdir(exist_ok=True)
        from ..trace.builder.columns import encode_json  # valid JSON whatever bytes a kernel name holds

        path = write_output_bytes(directory / f"{run.run_id}.json", encode_json(run.to_dict()) + b"\n")
        self.prune(run.series, keep)
        return path

    def prune(self, series: str, keep: int) -> int:
        """Delete the oldest run files of ``series`` beyond the newest ``keep``; returns how many went.
        Another writer deleting the same file first is no error."""
        files = self._run_files(series)
        gone = 0
        for name in files[:max(len(files) - keep, 0)]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.root / series / name)
                gone += 1
        return gone

    # -- reading
    def exists(self) -> bool:
        return (self.root / MARKER).is_file()

    def _check_marker(self) -> None:
        marker = self.root / MARKER
        try:
            data = orjson.loads(_read_trusted(marker, 4096))
        except (OSError, ValueError) as exc:
            raise HistoryError(f"{marker}: not a readable history marker ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise HistoryError(f"{marker}: not an xpuprof history marker")
        if data.get("version") != VERSION:
            raise HistoryError(f"{self.root}: history format version {data.get('version')!r}; this xpuprof reads "
                               f"version {VERSION}")

    def check_readable(self) -> None:
        """``HistoryError`` when the directory is not a history (missing, or no marker)."""
        if not self.root.is_dir():
            raise HistoryError(f"{self.root}: no such history directory (xpuprof run --history DIR creates one)")
        if not (self.root / MARKER).exists():
            raise HistoryError(f"{self.root}: not an xpuprof history (no {MARKER})")
        self._check_marker()

    def _run_files(self, series: str) -> list[str]:
        try:
            names = os.listdir(self.root / series)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if _RUN_FILE.match(n))

    def series_ids(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.root) if _SERIES.match(n) and (self.root / n).is_dir())
        except FileNotFoundError:
            return []

    def read(self, series: str, *, window: int | None = None) -> SeriesRead:
        """The newest ``window`` runs of ``series`` (all when None), oldest first."""
        files = self._run_files(series)
        chosen = files if window is None else files[-window:] if window > 0 else []
        runs, skipped = [], []
        for name in chosen:
            path = self.root / series / name
            try:
                data = orjson.loads(_read_trusted(path, MAX_RUN_BYTES))
                run = HistoryRun.from_dict(data)
                if run.series != series:
                    raise ValueError(f"its key belongs to series {run.series}, not {series}")
                runs.append(run)
            except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
                skipped.append(f"{path}: skipped ({exc})"[:300])
        runs.sort(key=lambda r: (r.time, r.run_id))
        return SeriesRead(runs, skipped, len(files))

    def find(self, key: dict) -> str:
        """The series id of a key (it may hold no runs yet)."""
        return HistoryRun(key, {}).series


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid in (os.geteuid(), 0)


def _read_trusted(path: Path, limit: int) -> bytes:
    """The bytes of a regular file owned by this user or root, not through a symlink, at most ``limit``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file")
        if not _trusted(st):
            raise OSError(f"owned by uid {st.st_uid}, not by this user: a history is trusted only for its owner's runs")
        if st.st_size > limit:
            raise OSError(f"{st.st_size:,} bytes, over the {limit:,}-byte limit for one run")
        return f.read(limit + 1)
