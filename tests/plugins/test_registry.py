"""register_backend: validation at registration time, double registration, early registrations,
entry points, and a registered backend taking part in a profile run (with fault isolation)."""
from __future__ import annotations

import logging
import sys

import pytest
from plugintest_helpers import events, run_profile

from xpuprof.activity import ActivityType
from xpuprof.backends import registry as core
from xpuprof.backends.base import Backend, ProbeResult, Session
from xpuprof.config.options import ProfilerConfig
from xpuprof.plugins import BackendRegistrationError, faults, register_backend
from xpuprof.plugins import registry as plugin_registry


class _Session(Session):
    def __init__(self, tag: str = "ok") -> None:
        self.tag = tag
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True

    def process(self, builder, window):
        builder.set_process_name("Dev", "Demo device")
        builder.add_slice(f"{self.tag}_kernel", window.start_ns + 1, 50, "Dev", 1, cat=ActivityType.CONCURRENT_KERNEL)
        builder.add_counter("demo util", window.start_ns + 2, {"busy": 1.0}, "Dev", 0)


def make_backend(backend_name: str, **overrides):
    name = backend_name
    ns = {
        "__module__": __name__,
        "name": name,
        "probe": classmethod(lambda cls: ProbeResult.ok("demo")),
        "supported_activities": classmethod(lambda cls: frozenset({ActivityType.CONCURRENT_KERNEL,
                                                                   ActivityType.GPU_PM_COUNTER})),
        "configure": lambda self, activity_types, config: _Session(name),
    }
    ns.update(overrides)
    return type(f"{str(name).title()}Backend", (Backend,), ns)


# ----------------------------------------------------------------------------- validation
def test_decorator_returns_class_and_backend_joins_registry():
    @register_backend
    class Demo(Backend):
        name = "demo"

        @classmethod
        def probe(cls):
            return ProbeResult.ok()

        @classmethod
        def supported_activities(cls):
            return frozenset({ActivityType.CONCURRENT_KERNEL})

        def configure(self, activity_types, config):
            return None

    assert Demo.__name__ == "Demo" and Demo.name == "demo"
    assert "demo" in core.backend_names()
    got = core.get_backend_class("demo")
    assert issubclass(got, Demo)  # the isolation wrapper subclasses the user's class
    assert plugin_registry.origin_of("demo").startswith("register_backend(")


def test_decorator_with_arguments():
    cls = register_backend(replace=False)(make_backend("withargs"))
    assert cls.name == "withargs"
    assert "withargs" in core.backend_names()


@pytest.mark.parametrize("bad, message", [
    (42, "register_backend expects a class, got int"),
    (type("Plain", (), {"name": "plain"}), "must subclass xpuprof.backends.base.Backend"),
])
def test_rejects_non_backends(bad, message):
    with pytest.raises(TypeError, match=message):
        register_backend(bad)


def test_rejects_missing_abstract_methods():
    class Half(Backend):
        name = "half"

        @classmethod
        def probe(cls):
            return ProbeResult.ok()

    with pytest.raises(TypeError, match=r"does not implement the abstract method\(s\) configure, supported_activities"):
        register_backend(Half)
    assert "half" not in core.backend_names()


def test_rejects_incompatible_configure_signature():
    bad = make_backend("badsig", configure=lambda self, activity_types: None)
    with pytest.raises(TypeError, match=r"configure.*not compatible with Backend.configure.*"
                                        r"configure\(self, activity_types, config\)"):
        register_backend(bad)


def test_rejects_extra_required_parameter():
    bad = make_backend("extra", configure=lambda self, activity_types, config, device: None)
    with pytest.raises(TypeError, match="missing a required argument: 'device'"):
        register_backend(bad)


def test_accepts_compatible_variants():
    ok = make_backend("variant", configure=lambda self, types, cfg=None, *rest, **kw: None,
                      probe=staticmethod(lambda: ProbeResult.ok()))
    assert register_backend(ok) is ok


def test_rejects_probe_that_is_not_a_classmethod():
    bad = make_backend("instprobe", probe=lambda self: ProbeResult.ok())
    with pytest.raises(TypeError, match=r"probe must be a @classmethod"):
        register_backend(bad)


def test_rejects_async_configure():
    async def configure(self, activity_types, config):
        return None

    with pytest.raises(TypeError, match="must be a plain \\(synchronous\\) method, not async"):
        register_backend(make_backend("asyncy", configure=configure))


@pytest.mark.parametrize("name", ["", "Has Space", "UPPER", None])
def test_rejects_bad_names(name):
    with pytest.raises(TypeError, match=r"\.name must be a non-empty lowercase string"):
        register_backend(make_backend("x", name=name))


# ----------------------------------------------------------------------------- names
def test_double_registration_is_an_error_unless_replace():
    first = register_backend(make_backend("twice"))
    second = make_backend("twice")
    with pytest.raises(BackendRegistrationError, match=r"a backend named 'twice' is already provided by "
                                                       r"register_backend\(.*pass replace=True"):
        register_backend(second)
    assert register_backend(first) is first  # the very same class again is not a conflict
    register_backend(second, replace=True)
    assert issubclass(core.get_backend_class("twice"), second)


def test_builtin_names_need_replace():
    with pytest.raises(BackendRegistrationError, match="already provided by the built-in backends"):
        register_backend(make_backend("cuda"))
    mine = register_backend(make_backend("cuda"), replace=True)
    assert issubclass(core.get_backend_class("cuda"), mine)
    plugin_registry.unregister_backend("cuda")
    assert "cuda" in core.BUILTIN_BACKENDS and "cuda" not in core.registered()


def test_a_backend_registered_before_first_use_is_there_at_first_use():
    register_backend(make_backend("early"))
    with pytest.raises(BackendRegistrationError):
        register_backend(make_backend("early"))  # the name is taken from the start
    assert "early" in core.backend_names()  # first use discovers entry points; the early one stays
    register_backend(make_backend("late"))
    assert "late" in core.backend_names()


# ----------------------------------------------------------------------------- entry points
def _fake_distribution(tmp_path, module_body: str, entry_points: str):
    (tmp_path / "fakevendor_backend.py").write_text(module_body)
    info = tmp_path / "fakevendor-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakevendor\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(entry_points)


ENTRY_MODULE = '''
from xpuprof.activity import ActivityType
from xpuprof.backends.base import Backend, ProbeResult

class VendorBackend(Backend):
    name = "fakevendor"
    @classmethod
    def probe(cls): return ProbeResult.ok("fake vendor device")
    @classmethod
    def supported_activities(cls): return frozenset({ActivityType.CONCURRENT_KERNEL})
    def configure(self, activity_types, config): return None

class Broken:  # not a Backend
    name = "broken"
'''


def test_entry_point_discovery(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, ENTRY_MODULE, "[xpuprof.backends]\nfakevendor = fakevendor_backend:VendorBackend\n"
                                               "broken = fakevendor_backend:Broken\n"
                                               "missing = fakevendor_nonexistent:Nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fakevendor_backend", raising=False)
    names = core.backend_names()
    assert "fakevendor" in names
    assert core.get_backend_class("fakevendor").probe().reason == "fake vendor device"
    origin = plugin_registry.origin_of("fakevendor")
    assert origin == "entry point fakevendor = fakevendor_backend:VendorBackend from fakevendor 1.2"
    reasons = {f.origin.split(" = ")[0]: f.reason for f in faults.faults()}
    assert "must subclass xpuprof.backends.base.Backend" in reasons["entry point broken"]
    assert "ModuleNotFoundError" in reasons["entry point missing"]
    core.backend_names()  # discovery happens once: no second round of faults
    assert len(faults.faults()) == 2


# ----------------------------------------------------------------------------- profile runs
def test_registered_backend_takes_part_in_a_profile_run(tmp_path):
    register_backend(make_backend("demo2"))
    trace, _, sessions = run_profile(["demo2"], tmp_path)
    assert [e["name"] for e in events(trace, "X", cat="kernel")] == ["demo2_kernel"]
    assert events(trace, "C", name="demo util")[0]["args"] == {"busy": 1.0}
    assert events(trace, "M", name="process_name")[0]["args"] == {"name": "Demo device"}


class _Raising(_Session):
    def __init__(self, stage):
        super().__init__("raising")
        self.stage = stage

    def start(self):
        if self.stage == "start":
            raise RuntimeError("boom in start")

    def stop(self):
        if self.stage == "stop":
            raise RuntimeError("boom in stop")

    def process(self, builder, window):
        if self.stage == "process":
            builder.add_slice("partial", window.start_ns, 1, "Dev", 1)
            raise RuntimeError("boom in process")
        if self.stage == "events":  # malformed bulk events: the builder refuses them
            builder.add_slices(names=["a"], ts=[1, 2], dur=[1, 1], pid=1, tid=1, cat=ActivityType.CONCURRENT_KERNEL)
        super().process(builder, window)


def _raising_backend(stage):
    def probe(cls):
        if stage == "probe":
            raise OSError("boom in probe")
        return ProbeResult.ok()

    def supported(cls):
        if stage == "supported_activities":
            raise KeyError("boom in supported_activities")
        return frozenset({ActivityType.CONCURRENT_KERNEL})

    def configure(self, activity_types, config):
        if stage == "configure":
            raise ValueError("boom in configure")
        if stage == "configure_returns":
            return "not a session"
        return _Raising(stage)

    def init(self):
        if stage == "init":
            raise RuntimeError("boom in __init__")

    return make_backend(f"raise_{stage}", probe=classmethod(probe), supported_activities=classmethod(supported),
                        configure=configure, __init__=init)


@pytest.mark.parametrize("stage, fault_stage, reason", [
    ("probe", "probe", "OSError: boom in probe"),
    ("supported_activities", "supported_activities", "KeyError: 'boom in supported_activities'"),
    ("init", "configure", "RuntimeError: boom in __init__"),
    ("configure", "configure", "ValueError: boom in configure"),
    ("configure_returns", "configure", "configure() returned str, not a Session or None"),
    ("start", "start", "RuntimeError: boom in start"),
    ("stop", "stop", "RuntimeError: boom in stop"),
    ("process", "process", "RuntimeError: boom in process"),
    ("events", "process", "ValueError: names has 1 rows, expected 2"),
])
def test_failing_backend_is_reported_once_and_the_trace_survives(tmp_path, caplog, stage, fault_stage, reason):
    register_backend(make_backend("healthy"))
    register_backend(_raising_backend(stage))
    caplog.set_level(logging.WARNING, logger="xpuprof.plugins")
    for run in range(2):  # a second run does not report again
        trace, _, _ = run_profile(["healthy", f"raise_{stage}"], tmp_path, file_name=f"t{run}.json")
        assert [e["name"] for e in events(trace, "X", cat="kernel")] == ["healthy_kernel"]
    got = faults.faults()
    assert len(got) == 1, got
    assert got[0].stage == fault_stage and got[0].reason.startswith(reason)
    assert got[0].origin.startswith("register_backend(") and f"raise_{stage}".title().replace("_", "") in \
        got[0].origin.replace("_", "")
    logged = [r for r in caplog.records if r.name == "xpuprof.plugins"]
    assert len(logged) == 1 and reason in logged[0].getMessage()


def test_errors_of_a_failed_session_reach_the_profiler(tmp_path):
    register_backend(_raising_backend("process"))
    _, _, sessions = run_profile(["raise_process"], tmp_path)
    (session,) = sessions
    assert any("process failed: RuntimeError: boom in process" in e for e in session.errors())
