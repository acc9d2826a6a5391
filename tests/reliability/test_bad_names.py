"""A range, instant or thread name that is not a str (a list, an object whose
``__str__`` raises, None, a number) must not reach ``stop()`` (an unhashable name, a failing
``str()``) and lose every range recorded: it is one TypeError at the call
naming the bad type, and the trace keeps everything else; a str subclass is stored as its plain str
value (its own ``__hash__``, ``__eq__`` and ``__str__`` never run later). Range and instant names may
also be bytes (written as UTF-8, bad bytes replaced); thread names must be a str."""
from __future__ import annotations

import json
import threading

import pytest

import xpuprof
from xpuprof.host.recorder import PurePythonRecordFunction


class StrRaises:
    def __str__(self):
        raise RuntimeError("no str for you")

    __repr__ = __str__


class HashRaises:
    def __hash__(self):
        raise RuntimeError("no hash for you")


class OddStr(str):
    """A str subclass whose own methods all fail: only its plain str value may be used."""

    def __str__(self):
        raise RuntimeError("subclass __str__ ran")

    def __hash__(self):
        raise RuntimeError("subclass __hash__ ran")

    def __eq__(self, other):
        raise RuntimeError("subclass __eq__ ran")


BAD_NAMES = {"list": ["a"], "dict": {"a": 1}, "__str__ raises": StrRaises(), "__hash__ raises": HashRaises(),
             "None": None, "bytearray": bytearray(b"op"), "int": 7, "float": 1.5}
RANGE_KINDS = {"C fast path": lambda: xpuprof.record_function, "pure Python": lambda: PurePythonRecordFunction}


@pytest.mark.parametrize("kind", list(RANGE_KINDS))
@pytest.mark.parametrize("label", list(BAD_NAMES))
def test_bad_range_name_is_refused_at_the_call_and_the_trace_kept(kind, label, tmp_path):
    rf = RANGE_KINDS[kind]()
    bad = BAD_NAMES[label]
    with xpuprof.profile(activities=["cpu"]) as prof:
        with rf("good before"):
            pass
        refused = rf"name must be a str \(or UTF-8 bytes\), not {type(bad).__name__} "
        with pytest.raises(TypeError, match="record_function " + refused):
            rf(bad)
        with pytest.raises(TypeError, match="record_function " + refused):
            rf(name=bad, args={"i": 1})
        with pytest.raises(TypeError, match="instant " + refused):
            xpuprof.instant(bad, {"i": 1})
        with pytest.raises(TypeError, match=rf"thread name must be a str, not {type(bad).__name__} "):
            xpuprof.set_thread_name(bad)
        with rf("good after"):
            pass
    assert prof.builder is not None, "the trace was lost"
    names = [e["name"] for e in json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())["traceEvents"]
             if e.get("cat") == "user_annotation"]
    assert names == ["good before", "good after"]


@pytest.mark.parametrize("kind", list(RANGE_KINDS))
def test_range_name_cannot_be_replaced_after_the_check(kind):
    r = RANGE_KINDS[kind]()("ok")
    with pytest.raises(AttributeError):
        r.name = ["a"]
    assert r.name == "ok"


@pytest.mark.parametrize("kind", list(RANGE_KINDS))
def test_str_subclass_names_are_stored_as_plain_str(kind, tmp_path):
    rf = RANGE_KINDS[kind]()
    with xpuprof.profile(activities=["cpu"]) as prof:
        with rf(OddStr("sub range")):
            pass

        @rf(OddStr("decorated"))
        def f():
            pass

        f()
        xpuprof.instant(OddStr("sub instant"))

        def named_thread():  # on its own thread: the override outlives the test
            xpuprof.set_thread_name(OddStr("sub thread"))
            with rf("in thread"):
                pass

        t = threading.Thread(target=named_thread)
        t.start()
        t.join()
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") in ("X", "i")}
    assert {"sub range", "decorated", "sub instant"} <= names
    rows = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert any("sub thread" in row for row in rows), rows


class OddBytes(bytes):
    def __hash__(self):
        raise RuntimeError("subclass __hash__ ran")


@pytest.mark.parametrize("kind", list(RANGE_KINDS))
def test_bytes_names_are_written_as_utf8_and_thread_names_must_be_str(kind, tmp_path):
    rf = RANGE_KINDS[kind]()
    with xpuprof.profile(activities=["cpu"]) as prof:
        with rf(b"bytes range"):
            pass
        with rf(OddBytes(b"bad \xff byte")):
            pass
        xpuprof.instant(b"bytes instant")
        with pytest.raises(TypeError, match="thread name must be a str, not bytes"):
            xpuprof.set_thread_name(b"t")
    trace = json.loads(prof.export_chrome_trace(tmp_path / "t.json").read_text())
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") in ("X", "i")}
    assert {"bytes range", "bad \ufffd byte", "bytes instant"} <= names
    assert trace["invalid_utf8_names"] == 1
