"""Control commands' parse and refusal paths: which config text is a command, what is refused (with the key
and what is valid), the outcome on a real profile, the process's log when no capture runs, and the
trigger options that cannot go with a command."""
from __future__ import annotations

import logging

import pytest

import xpuprof
from xpuprof.cli import main
from xpuprof.ondemand import answers, control
from xpuprof.ondemand.client import DaemonClient
from xpuprof.config.kineto import KinetoConfig
from xpuprof.ondemand.request import RequestError, from_kineto_text


def test_control_text_round_trips_and_capture_configs_are_not_commands():
    assert control.parse(control.control_text("pause")) == "pause"
    assert control.parse(control.control_text("cancel")) == "cancel"
    name = "xpuproftrigger" + "ab" * 16
    assert control.parse(control.control_text("resume", answer_to=name)) == "resume"
    assert answers.answer_name(control.control_text("resume", answer_to=name)) == name
    # what a daemon appends to any config it hands out is accepted beside the command
    assert control.parse("XPUPROF_CONTROL=Pause\nREQUEST_TRACE_ID=123\n") == "pause"
    assert control.parse("ACTIVITIES_LOG_FILE=/tmp/x.json\nACTIVITIES_DURATION_MSECS=500\n") is None
    with pytest.raises(ValueError, match="stop"):
        control.control_text("stop")


def test_a_command_is_no_trace_request_to_a_client_that_does_not_know_it():
    """Kineto schedules a trace for any on-demand config unless ACTIVITIES_ENABLED is false; so does a
    request parser without control commands."""
    text = control.control_text("pause") + "REQUEST_TRACE_ID=7\n"
    kc = KinetoConfig()
    kc.set_on_demand(True)
    kc.parse(text)
    assert kc.activities_enabled is False
    with pytest.raises(RequestError, match="ACTIVITIES_ENABLED=false"):
        from_kineto_text(text)


def test_a_control_text_that_cannot_be_obeyed_is_refused_naming_what_is_wrong():
    with pytest.raises(RequestError) as bad:
        control.parse("XPUPROF_CONTROL=stop\n")
    assert "'stop'" in str(bad.value) and "pause, resume, cancel" in str(bad.value)
    with pytest.raises(RequestError) as mixed:
        control.parse("XPUPROF_CONTROL=pause\nACTIVITIES_DURATION_MSECS=500\nPROFILE_WITH_STACK=true\n")
    assert "ACTIVITIES_DURATION_MSECS, PROFILE_WITH_STACK" in str(mixed.value)


def test_pause_and_resume_outcomes_on_a_running_profile():
    with xpuprof.profile(activities=["cpu"]) as prof:
        assert [control.toggle(prof, c) for c in ("resume", "pause", "pause", "resume", "resume")] == [
            control.NOT_PAUSED, control.PAUSED, control.ALREADY_PAUSED, control.RESUMED, control.NOT_PAUSED]
    (note,) = prof.builder.metadata["collection_paused"]
    assert note["source"] == "host" and note["dur"] > 0


class _Agent:
    def __init__(self, active=None):
        self.cur = active
        self.submitted = []

    def active(self):
        return self.cur

    def submit(self, request):
        self.submitted.append(request)


class _NotRecording:
    def control(self, command):
        return control.NOT_RECORDING


def test_a_command_without_a_recording_capture_is_logged_by_the_process(caplog):
    client = DaemonClient(_Agent(), directory="/nonexistent")
    with caplog.at_level(logging.INFO, logger="xpuprof.ondemand"):
        client.handle_config("XPUPROF_CONTROL=pause\n")
    assert "pause request ignored" in caplog.text and "no capture is running" in caplog.text
    caplog.clear()
    assert control.apply(_Agent(_NotRecording()), "resume") == control.NOT_RECORDING
    assert "resume request ignored" in caplog.text and "is not recording" in caplog.text


def test_a_refused_command_is_logged_and_starts_no_capture(caplog):
    agent = _Agent()
    client = DaemonClient(agent, directory="/nonexistent")
    with caplog.at_level(logging.WARNING, logger="xpuprof.ondemand"):
        client.handle_config("XPUPROF_CONTROL=pause\nACTIVITIES_DURATION_MSECS=500\n")
    assert "on-demand request refused" in caplog.text and "ACTIVITIES_DURATION_MSECS" in caplog.text
    assert agent.submitted == []


@pytest.mark.parametrize("extra, named", [(["--iterations", "3"], "--iterations"),
                                          (["--log-file", "/tmp/x.json"], "--log-file"),
                                          (["--set", "A=1"], "--set")])
def test_trigger_refuses_trace_options_beside_a_command(extra, named, capsys):
    assert main(["trigger", "--pause", *extra]) == 2
    err = capsys.readouterr().err
    assert named in err and "--pause" in err


def test_trigger_takes_one_command(capsys):
    with pytest.raises(SystemExit) as out:
        main(["trigger", "--pause", "--resume"])
    assert out.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
