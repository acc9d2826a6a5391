"""``xpuprof trigger``: ask running processes for a trace, as ``dyno gputrace`` asks them.

Sends dynolog's ``setKinetOnDemandRequest`` (the dyno CLI's request) to the dynolog at ``--host``/``--port``
(default localhost:1778), or to every ``--hosts H[:P],...`` with one shared future start time. With no dynolog on
this machine (and no address given), it acts as the daemon itself for one poll interval: the local processes of
your user that poll (processes that imported xpuprof with KINETO_USE_DAEMON=1, or run under ``xpuprof exec``)
get the request.

On this machine (embedded, or a dynolog at localhost), each xpuprof process answers: the trigger prints, per
process, where its trace was written - waiting for it, up to --timeout - or why not (busy with another capture,
refused, exited before writing). Without --log-file, each process names its trace by the project's one rule,
<its trace dir>/<host>_<pid>.<ts>.pt.trace.json (KINETO_ONDEMAND_TRACE_DIR, default /tmp/), which
``xpuprof report DIR``, TensorBoard and HTA find.

``--pause`` / ``--resume`` instead control the processes' running capture (a process under ``xpuprof exec``: its
whole run, or an on-demand capture); ``--cancel`` drops a pending capture (nothing recorded) or stops a recording
one now (its trace is written). Each process's outcome is printed.

Exit status: 0 when at least one process was triggered (or its capture paused, resumed, cancelled) and none of
the triggered ones failed to write its trace; 1 when none was (no match, all busy, no daemon, no capture
running) or a triggered process exited or failed before writing; 2 for bad options, a request every process
would refuse (a config over 64 KiB, a start more than an hour ahead, a kernel pattern that backtracks), or a
daemon answer that is not dynolog's.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import socket
import sys
import time

from ._options import non_negative_int, positive_int, positive_seconds, tcp_port

DEFAULT_START_DELAY_S = 10.0  # dynolog's unitrace.py --start-time-delay
CONTROL_PROCESS_LIMIT = 1 << 30  # --pause/--resume/--cancel reach every matching process (dynolog reads an int32)
ANSWER_GRACE_S = 2.0  # past a process's next poll, how long its first answer is awaited
WRITE_MARGIN_S = 60.0  # past the end of a duration capture, how long its trace's build and write are awaited
ITERATIONS_TIMEOUT_S = 300.0  # an iteration capture: how long it is awaited by default
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def register(subparsers) -> None:
    p = subparsers.add_parser("trigger", help="ask running processes for a trace (dynolog's on-demand request)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_argument_group("where")
    where.add_argument("--host", default=None, help="dynolog host (default localhost)")
    where.add_argument("--port", type=tcp_port, default=None, help="dynolog RPC port (default 1778)")
    where.add_argument("--hosts", default=None, metavar="H[:P],...",
                       help="one request per host, all starting at one future time (a multi-node job)")
    where.add_argument("--embedded", action="store_true",
                       help="act as the daemon here even if a dynolog answers (local processes of your user)")
    where.add_argument("--wait", type=positive_seconds, default=None, metavar="S",
                       help="embedded: how long to wait for processes to poll (default: their poll interval + 1 s)")
    who = p.add_argument_group("which processes")
    who.add_argument("--job-id", type=non_negative_int, default=0, help="SLURM_JOB_ID of the job (default 0)")
    who.add_argument("--pid", "--pids", dest="pids", default="0", metavar="PID[,PID...]",
                     help="processes, or ancestors of them (a launcher's pid reaches its ranks); 0 = every one")
    who.add_argument("--process-limit", type=positive_int, default=None,
                     help="at most this many processes per host are traced (dyno's default: 3; --pause/--resume: "
                          "every matching process)")
    what = p.add_argument_group("what to record")
    what.add_argument("--duration-ms", type=positive_int, default=500, help="trace length (default 500 ms)")
    what.add_argument("--iterations", type=positive_int, default=None, help="trace N iterations instead")
    what.add_argument("--iteration-roundup", type=positive_int, default=1,
                      help="start at the next multiple of this iteration (aligns ranks; default 1)")
    what.add_argument("--start-time", type=non_negative_int, default=0, metavar="MS",
                      help="start at this Unix time in ms (default: as soon as each process is ready)")
    what.add_argument("--start-delay", type=positive_seconds, default=None, metavar="S",
                      help=f"start S seconds from now (--hosts default: {DEFAULT_START_DELAY_S:g})")
    what.add_argument("--log-file", default=None, metavar="PATH",
                      help="trace file; each process writes PATH with _<pid> before .json, as Kineto names it "
                           "(default: each xpuprof process writes <its KINETO_ONDEMAND_TRACE_DIR or /tmp>/"
                           "<host>_<pid>.<ts>.pt.trace.json, the one naming rule)")
    what.add_argument("--record-shapes", action="store_true")
    what.add_argument("--with-stacks", action="store_true")
    what.add_argument("--with-flops", action="store_true")
    what.add_argument("--with-modules", action="store_true")
    what.add_argument("--profile-memory", action="store_true", help="torch's [memory] events (allocations, frees)")
    what.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                      help="another Kineto config line (ACTIVITY_TYPES, XPUPTI_PROFILER_METRICS, ...)")
    ctl = p.add_argument_group("control a running capture (instead of a trace request)")
    ctl = ctl.add_mutually_exclusive_group()
    ctl.add_argument("--pause", dest="control", action="store_const", const="pause",
                     help="pause collection in the processes' running capture (xpuprof exec's whole run, or an "
                          "on-demand capture); the paused span is marked in the trace")
    ctl.add_argument("--resume", dest="control", action="store_const", const="resume",
                     help="resume collection paused by --pause")
    ctl.add_argument("--cancel", dest="control", action="store_const", const="cancel",
                     help="cancel the processes' pending capture (waiting for its start time, first step or start "
                          "iteration: no trace), or stop a recording one now (its trace is written)")
    waiting = p.add_argument_group("answers (processes on this machine)")
    waiting.add_argument("--no-wait", action="store_true",
                         help="return once each process said whether its capture started (default: wait for the "
                              "traces to be written)")
    waiting.add_argument("--timeout", type=positive_seconds, default=None, metavar="S",
                         help="wait at most S seconds for the traces (default: the capture's length + 60 s; "
                              f"{ITERATIONS_TIMEOUT_S:g} s for --iterations)")
    p.add_argument("--json", action="store_true", help="print the answers as JSON")
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------- argument types
def _hosts(text: str) -> list[tuple[str, int | None]]:
    """``H[:P],...``; IPv6 hosts with a port in brackets (``[::1]:1778``)."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        elif item.count(":") == 1:
            host, port = item.split(":")
        else:
            host, port = item, ""
        try:
            out.append((host, tcp_port(port) if port else None))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"--hosts {item!r}: {exc}") from None
    if not out:
        raise ValueError("--hosts names no host (expected H[:P],...)")
    return out


def _pids(text: str) -> list[int]:
    try:
        pids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--pid {text!r}: expected process ids separated by commas") from None
    if any(p < 0 for p in pids):
        raise ValueError(f"--pid {text!r}: process ids are >= 0")
    return pids or [0]


# ----------------------------------------------------------------------------- the command
def _fail(msg: str) -> int:
    print(f"xpuprof trigger: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    from ..ondemand import trigger
    from ..ondemand.request import RequestError, from_kineto_text

    args.process_limit_given = args.process_limit is not None
    if args.process_limit is None:
        args.process_limit = trigger.DEFAULT_PROCESS_LIMIT
    try:
        pids = _pids(args.pids)
        hosts = _hosts(args.hosts) if args.hosts else None
    except ValueError as exc:
        return _fail(str(exc))
    if hosts and (args.host or args.embedded):
        return _fail("--hosts sends to dynolog on each host; it cannot be combined with --host or --embedded")
    if args.control:
        return _control(trigger, args, hosts, pids)
    if args.start_time and args.start_delay:
        return _fail("--start-time and --start-delay both set the start: give one")
    for line in args.extra:
        if "=" not in line:
            return _fail(f"--set {line!r}: expected KEY=VALUE")
    start_ms = args.start_time
    if not start_ms and (args.start_delay or (hosts and not args.iterations)):
        start_ms = int((time.time() + (args.start_delay or DEFAULT_START_DELAY_S)) * 1000)
    log_file = args.log_file
    if log_file is not None and (not os.path.isabs(log_file.replace("{host}", "h")) or ".." in log_file):
        return _fail(f"--log-file {log_file!r}: give an absolute path without '..' (processes confine traces to "
                     "/tmp/ or their KINETO_ONDEMAND_TRACE_DIR)")

    def config_for(host: str, extra_lines=()) -> str:
        return trigger.gputrace_config(
            log_file=log_file.replace("{host}", host) if log_file else None, duration_ms=args.duration_ms,
            iterations=args.iterations or 0, start_time_ms=start_ms, iteration_roundup=args.iteration_roundup,
            record_shapes=args.record_shapes, with_stacks=args.with_stacks, with_flops=args.with_flops,
            with_modules=args.with_modules, profile_memory=args.profile_memory, extra=[*args.extra, *extra_lines])

    try:  # the text the processes will parse, checked here first: a bad key fails now, not in every rank
        checked = from_kineto_text(config_for(hosts[0][0] if hosts else "local", [_ANSWER_LINE_PLACEHOLDER]))
    except RequestError as exc:
        return _fail(f"the request would be refused by every process: {exc}")
    notes = {k: v for k, v in checked.notes.items() if k != "ACTIVITIES_LOG_FILE"}
    for key, why in notes.items():
        print(f"xpuprof trigger: note: {key}: {why}", file=sys.stderr)
    if hosts and args.iterations and args.iteration_roundup == 1:
        print("xpuprof trigger: note: ranks on different hosts may receive the request at different iterations; "
              "pass --iteration-roundup R (e.g. 100) to start them all at one iteration", file=sys.stderr)

    embedded = _use_embedded(trigger, args, hosts)
    box = _answer_box(hosts, args, embedded)
    extra = [box.config_line()] if box is not None else []
    try:
        try:
            results = _deliver(trigger, args, hosts, pids, args.process_limit, embedded,
                               lambda host: config_for(host, extra))
        except trigger.BadAnswer as exc:
            return _fail(str(exc))
        if box is not None:
            from ._trigger_report import wait_for_answers

            wait_for_answers(box, results, answer_window_s=_answer_window(embedded), final=not args.no_wait,
                             timeout_s=args.timeout or _default_timeout(args, start_ms), embedded=embedded)
        from ._trigger_report import report_trace_request

        return report_trace_request(results, box, as_json=args.json, start_ms=start_ms, log_file=log_file)
    finally:
        if box is not None:
            box.close()


_ANSWER_LINE_PLACEHOLDER = "XPUPROF_ANSWER_TO=xpuproftrigger" + "0" * 32  # counted in the size check


def _use_embedded(trigger, args, hosts) -> bool:
    return not hosts and (args.embedded or (args.host is None and args.port is None
                                            and not trigger.daemon_listening("localhost", trigger.DEFAULT_PORT)))


def _answer_box(hosts, args, embedded: bool):
    """The endpoint the processes answer to: on this machine only (a remote dynolog's processes cannot reach
    it). None, with a note, when it cannot be set up."""
    local = embedded or (not hosts and (args.host is None or args.host in LOCAL_HOSTS
                                        or args.host == socket.gethostname()))
    if not local:
        return None
    from ..ondemand import answers, fabric

    try:
        return answers.AnswerBox()
    except fabric.FabricError as exc:
        print(f"xpuprof trigger: note: the processes' answers cannot be received ({exc.strerror or exc}); only the "
              "daemon's word is printed", file=sys.stderr)
        return None


def _answer_window(embedded: bool) -> float:
    """How long a triggered process may take to answer at all: its next poll, through dynolog."""
    if embedded:
        return ANSWER_GRACE_S
    from ..ondemand.client import read_base_config

    return read_base_config().on_demand_config_update_interval_s + ANSWER_GRACE_S


def _default_timeout(args, start_ms: int) -> float:
    ahead = max(0.0, start_ms / 1e3 - time.time()) if start_ms else 0.0
    if args.iterations:
        return ahead + ITERATIONS_TIMEOUT_S
    return ahead + args.duration_ms / 1e3 + WRITE_MARGIN_S


def _deliver(trigger, args, hosts, pids, limit, embedded: bool, config_for):
    """The request to every daemon: dynolog on each host, or this trigger as the daemon; the results."""
    if hosts:
        return _send_all(trigger, hosts, config_for, args.job_id, pids, limit)
    if embedded:
        return [_embedded(trigger, config_for("local"), args, pids, limit)]
    host, port = args.host or "localhost", args.port or trigger.DEFAULT_PORT
    try:
        return [trigger.send_request(host, port, config_for(host), job_id=args.job_id, pids=pids, process_limit=limit)]
    except trigger.BadAnswer:
        raise
    except trigger.TriggerError as exc:
        return [trigger.TriggerResult(f"{host}:{port}", error=str(exc))]


def _control(trigger, args, hosts, pids) -> int:
    """``--pause`` / ``--resume`` / ``--cancel``: the control text to every matching process (no process limit
    unless given)."""
    from ..ondemand import control

    asked = [name for name, given in (("--iterations", args.iterations), ("--start-time", args.start_time),
                                      ("--start-delay", args.start_delay), ("--log-file", args.log_file),
                                      ("--set", args.extra)) if given]
    if asked:
        return _fail(f"--{args.control} controls a capture; {', '.join(asked)} describe a trace request "
                     "(send that separately)")
    limit = args.process_limit if args.process_limit_given else CONTROL_PROCESS_LIMIT
    embedded = _use_embedded(trigger, args, hosts)
    box = _answer_box(hosts, args, embedded)
    text = control.control_text(args.control, answer_to=box.name if box is not None else None)
    try:
        try:
            results = _deliver(trigger, args, hosts, pids, limit, embedded, lambda host: text)
        except trigger.BadAnswer as exc:
            return _fail(str(exc))
        if box is not None:
            from ._trigger_report import wait_for_answers

            wait_for_answers(box, results, answer_window_s=_answer_window(embedded), final=True,
                             timeout_s=_answer_window(embedded) + ANSWER_GRACE_S, embedded=embedded)
        from ._trigger_report import report_control

        return report_control(results, box, args.control, args.json)
    finally:
        if box is not None:
            box.close()


def _send_all(trigger, hosts, config_for, job_id, pids, limit):
    def one(host_port):
        host, port = host_port
        port = port or trigger.DEFAULT_PORT
        try:
            return trigger.send_request(host, port, config_for(host), job_id=job_id, pids=pids, process_limit=limit)
        except trigger.TriggerError as exc:  # a broken answer from one host is that host's line (and exit 2)
            return trigger.TriggerResult(f"{host}:{port}", error=str(exc),
                                         bad_answer=isinstance(exc, trigger.BadAnswer))

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def _embedded(trigger, config: str, args, pids, limit):
    from ..ondemand.client import read_base_config

    wait_s = args.wait or read_base_config().on_demand_config_update_interval_s + 1.0
    try:
        daemon = trigger.EmbeddedDaemon()
    except trigger.TriggerError as exc:
        return trigger.TriggerResult("embedded", error=str(exc))
    print(f"xpuprof trigger: no dynolog at localhost:{trigger.DEFAULT_PORT}; answering this machine's polling "
          f"processes directly for {wait_s:g} s", file=sys.stderr)
    try:
        return daemon.serve(config, wait_s=wait_s, job_id=args.job_id, pids=pids, process_limit=limit)
    finally:
        daemon.close()
