"""Fuzzed names and args through every public path, written by the C and
the pure-Python writers (and gzip), each output parsed by json AND orjson, every name round-tripped.

Paths: ``record_function`` (C fast path and the pure-Python class), ``instant``, metadata, thread names
(``set_thread_name`` and ``threading.Thread(name=...)``) and names a plugin backend registered through
the Python registry emits. Fixed seed, >= 10,000 names per run. Invalid UTF-8 (lone surrogates) must
come back as U+FFFD; names longer than the string bound come back cut with a marker. Names that are
str or bytes (numbers, bytearrays, None, lists, dicts, objects whose ``__str__``/``__hash__`` raise) are
refused at the call with a TypeError, interleaved with the good ones, and lose nothing; str
subclasses whose own methods raise are written as their plain str value.
"""
from __future__ import annotations

import collections
import gzip
import json
import random
import re
import threading

import numpy as np
import orjson
import pytest

import xpuprof
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult, Session
from xpuprof.host.recorder import PurePythonRecordFunction
from xpuprof.trace.builder.strings import MAX_STRING_CHARS
from xpuprof.trace.write.chrome import write_chrome_trace

pytestmark = pytest.mark.slow

SEED = 14_2026
N_RECORD_C, N_RECORD_PY, N_INSTANT, N_THREADS, N_PLUGIN = 4_000, 2_000, 2_000, 40, 2_500
N_METADATA = 40
N_NOT_STR = 600  # names neither str nor bytes tried (each refused at the call), spread over the paths above
FUZZ_TOTAL = N_METADATA + N_RECORD_C + N_RECORD_PY + N_INSTANT + N_THREADS + N_PLUGIN + N_NOT_STR
_SURROGATE = re.compile("[\ud800-\udfff]")

ALPHABETS = [
    [chr(c) for c in range(0x20, 0x7f)],
    [chr(c) for c in range(0x00, 0x20)] + ['"', "\\", "/", "\x7f", "\u2028", "\u2029", "\ufeff"],
    [chr(c) for c in range(0xa0, 0x800)],
    ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"],  # lone surrogates: not valid UTF-8
    ["😀", "𝄞", "\U0010ffff", "中", "ß", "\u0301"],
    ["[", "]", "[red]", "{", "}", "%s", "%(x)s", "\\u0000", "</script>", "&amp;"],
]


def fuzz_name(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.01:
        return ""
    if roll < 0.015:  # longer than the bound: must come back cut, not lost
        return "L" * (MAX_STRING_CHARS + rng.randrange(1, 50))
    n = rng.randrange(1, 40)
    return "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(n))


def fuzz_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(11 if depth < 3 else 8)
    return [lambda: rng.randrange(-2**63, 2**63), lambda: rng.choice([2**64, -2**70, 10**30]),
            lambda: rng.choice([float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 5e-324, rng.random()]),
            lambda: fuzz_name(rng), lambda: None, lambda: rng.random() < 0.5,
            lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(8))),
            lambda: np.int64(rng.randrange(-1000, 1000)),
            lambda: [fuzz_value(rng, depth + 1) for _ in range(rng.randrange(4))],
            lambda: {fuzz_name(rng): fuzz_value(rng, depth + 1) for _ in range(rng.randrange(3))},
            lambda: (fuzz_value(rng, depth + 1),)][kind]()


class _Raises:
    def __init__(self, what: str) -> None:
        self.what = what

    def __str__(self):
        raise RuntimeError(f"{self.what}: __str__")

    __repr__ = __str__

    def __hash__(self):
        raise RuntimeError(f"{self.what}: __hash__")


class _HostileStr(str):
    """A str whose own methods raise: only its plain str value may ever be used."""

    def __str__(self):
        raise RuntimeError("str subclass __str__ ran")

    def __hash__(self):
        raise RuntimeError("str subclass __hash__ ran")

    def __eq__(self, other):
        raise RuntimeError("str subclass __eq__ ran")


def fuzz_not_str(rng: random.Random):
    """A name value that is not a str (each must be refused at the call)."""
    return [lambda: rng.randrange(-2**70, 2**70), lambda: rng.random(), lambda: None, lambda: True,
            lambda: bytearray(fuzz_name(rng).encode("utf-8", "surrogatepass")), lambda: [fuzz_name(rng)],
            lambda: {fuzz_name(rng): 1}, lambda: (fuzz_name(rng),), lambda: _Raises(fuzz_name(rng)),
            lambda: np.int64(rng.randrange(100)),
            lambda: bytearray(b"x")][rng.randrange(11)]()


def maybe_hostile(rng: random.Random, name: str):
    """``name``, sometimes as a str subclass whose own methods raise."""
    return _HostileStr(name) if rng.random() < 0.05 else name


def try_not_str(rng: random.Random, refused: collections.Counter) -> None:
    """One name neither str nor bytes through one public path: a TypeError at the call, nothing recorded."""
    bad = fuzz_not_str(rng)
    path = rng.choice(["record_function", "pure-python", "instant", "thread"])
    call = {"record_function": lambda: xpuprof.record_function(bad, fuzz_args(rng)),
            "pure-python": lambda: PurePythonRecordFunction(bad, fuzz_args(rng)),
            "instant": lambda: xpuprof.instant(bad, fuzz_args(rng)),
            "thread": lambda: xpuprof.set_thread_name(bad)}[path]
    with pytest.raises(TypeError, match=r"name must be a str( \(or UTF-8 bytes\))?, not "):
        call()
    refused[path] += 1


def fuzz_args(rng: random.Random):
    if rng.random() < 0.3:
        return None
    return {fuzz_name(rng): fuzz_value(rng) for _ in range(rng.randrange(1, 4))}


def expected(name: str) -> str:
    """What a name must read back as (independent of the writer's code: the documented rules)."""
    text = _SURROGATE.sub("\ufffd", name)
    if len(text) > MAX_STRING_CHARS:
        return text[:MAX_STRING_CHARS] + f"...[{len(text) - MAX_STRING_CHARS} more chars]"
    return text


PLUGIN_NAMES: list[str] = []


class _FuzzSession(Session):
    def start(self):
        pass

    def stop(self):
        pass

    def process(self, builder, window):
        n = len(PLUGIN_NAMES)
        ts = window.start_ns + 1_000 + np.arange(n, dtype=np.int64) * 10
        builder.add_slices(names=list(PLUGIN_NAMES), ts=ts, dur=np.full(n, 5, np.int64), pid=7_000_000, tid=1,
                           cat=ActivityType.CONCURRENT_KERNEL)
        builder.set_process_name(7_000_000, PLUGIN_NAMES[0])


class _FuzzBackend(Backend):
    name = "fuzzplug"

    @classmethod
    def probe(cls):
        return ProbeResult.ok()

    @classmethod
    def supported_activities(cls):
        return frozenset({ActivityType.CONCURRENT_KERNEL})

    def configure(self, types, config):
        return _FuzzSession()


@pytest.fixture(scope="module")
def fuzzed_profile(tmp_path_factory):
    """One recording through every path; returns (profile, expected names per category, thread names)."""
    from xpuprof.backends import registry

    rng = random.Random(SEED)
    PLUGIN_NAMES[:] = [fuzz_name(rng) for _ in range(N_PLUGIN)]
    registry.register(_FuzzBackend, replace=True)
    want: dict[str, list[str]] = collections.defaultdict(list)
    thread_names: list[str] = []
    refused: collections.Counter = collections.Counter()
    n_good = N_RECORD_C + N_RECORD_PY + N_INSTANT
    not_str_at = set(random.Random(SEED + 1).sample(range(n_good), N_NOT_STR))  # interleaved with the good ones
    try:
        prof = xpuprof.profile(activities=["user_annotation", "cpu_instant_event", "kernel"], backends=["fuzzplug"])
        with prof:
            for _ in range(N_METADATA):  # top-level metadata keys and values
                prof.add_metadata("fuzz:" + fuzz_name(rng), fuzz_value(rng))
            for i in range(n_good):
                if i in not_str_at:
                    try_not_str(rng, refused)
                name = fuzz_name(rng)
                if i < N_RECORD_C:
                    with xpuprof.record_function(maybe_hostile(rng, name), fuzz_args(rng)):
                        pass
                elif i < N_RECORD_C + N_RECORD_PY:
                    with PurePythonRecordFunction(maybe_hostile(rng, name), fuzz_args(rng)):
                        pass
                else:
                    xpuprof.instant(maybe_hostile(rng, name), fuzz_args(rng))
                want["user_annotation" if i < N_RECORD_C + N_RECORD_PY else "cpu_instant_event"].append(name)
            for i in range(N_THREADS):
                tname = fuzz_name(rng)
                thread_names.append(tname)

                def work(tname=tname, explicit=i % 2 == 0):
                    if explicit:
                        xpuprof.set_thread_name(tname)
                    with xpuprof.record_function("in thread"):
                        pass

                t = threading.Thread(target=work, name=tname)
                t.start()
                t.join()
                want["user_annotation"].append("in thread")
        want["kernel"] = list(PLUGIN_NAMES)
    finally:
        registry.unregister("fuzzplug")
    assert prof.builder is not None
    assert sum(refused.values()) == N_NOT_STR and len(refused) == 4, refused
    return prof, want, thread_names, tmp_path_factory.mktemp("fuzz")


def _load_both(raw: bytes) -> dict:
    data = json.loads(raw)
    # The same document through both parsers (orjson refuses NaN/Infinity, which json.loads would accept).
    assert orjson.loads(raw) == data
    return data


@pytest.mark.parametrize("writer, suffix", [("c", ".json"), ("python", ".json"), ("c", ".json.gz")])
def test_every_fuzzed_name_round_trips(fuzzed_profile, writer, suffix):
    prof, want, thread_names, out_dir = fuzzed_profile
    assert sum(len(v) for v in want.values()) >= 10_000 and FUZZ_TOTAL >= 10_000
    path = write_chrome_trace(prof.builder, out_dir / f"fuzz-{writer}{suffix}", columnar=writer == "c")
    raw = path.read_bytes()
    if suffix.endswith(".gz"):
        raw = gzip.decompress(raw)
    data = _load_both(raw)
    events = data["traceEvents"]
    for cat in ("user_annotation", "cpu_instant_event", "kernel"):
        got = collections.Counter(e["name"] for e in events if e.get("cat") == cat and e.get("ph") in ("X", "i"))
        assert got == collections.Counter(map(expected, want[cat])), cat
    # Every range keeps its args or says why they could not be written: none lost.
    ranges = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    assert len(ranges) == N_RECORD_C + N_RECORD_PY + N_THREADS
    rows = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for tname in thread_names:
        assert any(expected(tname)[:200] in row for row in rows), tname[:40]
    assert sum(k.startswith("fuzz:") for k in data) == N_METADATA
    procs = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert expected(PLUGIN_NAMES[0]) in procs


def test_fuzzed_args_never_lose_a_range(fuzzed_profile):
    prof, _want, _threads, out_dir = fuzzed_profile
    data = _load_both(write_chrome_trace(prof.builder, out_dir / "args.json").read_bytes())
    with_args = [e for e in data["traceEvents"] if e.get("cat") in ("user_annotation", "cpu_instant_event")
                 and e.get("args")]
    assert len(with_args) > 0.5 * (N_RECORD_C + N_RECORD_PY + N_INSTANT)
    notes = sum("xpuprof_invalid_args" in e["args"] for e in with_args)
    assert data.get("invalid_args", 0) == notes  # every replaced args value is counted in the trace
