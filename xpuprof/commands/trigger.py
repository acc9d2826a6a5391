"""``xpuprof trigger``: ask running processes for a trace, as ``dyno gputrace`` asks them.

Sends dynolog's ``setKinetOnDemandRequest`` (the dyno CLI's request) to the dynolog at ``--host``/``--port``
(default localhost:1778), or to every ``--hosts H[:P],...`` with one shared future start time, and prints
what matched and where the traces will be. With no dynolog on this machine (and no address given), it
acts as the daemon itself for one poll interval: the local processes of your user that poll (processes
that imported xpuprof with KINETO_USE_DAEMON=1, or run under ``xpuprof exec --on-demand``) get the request.

``--pause`` / ``--resume`` instead control the processes' running capture (a process under ``xpuprof exec``:
its whole run, or an on-demand capture); through the embedded daemon each process's outcome is printed.

Exit status: 0 when at least one process was triggered (paused or resumed), 1 when none was (no match, all
busy, no daemon, no capture running), 2 for bad options.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import socket
import sys
import time

from ..config.kineto import ondemand_trace_dir
from ._options import non_negative_int, positive_int, positive_seconds, tcp_port

DEFAULT_START_DELAY_S = 10.0  # dynolog's unitrace.py --start-time-delay
CONTROL_PROCESS_LIMIT = 1 << 30  # --pause/--resume reach every matching process (dynolog reads an int32)


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
                      help="trace file; each process writes PATH with _<pid> before .json "
                           "(default: <KINETO_ONDEMAND_TRACE_DIR or /tmp>/xpuprof_<host>.json)")
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
    host_label = socket.gethostname() if not hosts else "{host}"
    log_file = args.log_file or f"{ondemand_trace_dir()}xpuprof_{host_label}.json"
    if not os.path.isabs(log_file.replace("{host}", "h")) or ".." in log_file:
        return _fail(f"--log-file {log_file!r}: give an absolute path without '..' (processes confine traces to "
                     "/tmp/ or their KINETO_ONDEMAND_TRACE_DIR)")

    def config_for(host: str) -> str:
        return trigger.gputrace_config(
            log_file=log_file.replace("{host}", host), duration_ms=args.duration_ms, iterations=args.iterations or 0,
            start_time_ms=start_ms, iteration_roundup=args.iteration_roundup, record_shapes=args.record_shapes,
            with_stacks=args.with_stacks, with_flops=args.with_flops, with_modules=args.with_modules,
            profile_memory=args.profile_memory, extra=args.extra)

    try:  # the text the processes will parse, checked here first: a bad key fails now, not in every rank
        checked = from_kineto_text(config_for(hosts[0][0] if hosts else "local"))
    except RequestError as exc:
        return _fail(f"the request would be refused by every process: {exc}")
    notes = {k: v for k, v in checked.notes.items() if k != "ACTIVITIES_LOG_FILE"}
    for key, why in notes.items():
        print(f"xpuprof trigger: note: {key}: {why}", file=sys.stderr)
    if hosts and args.iterations and args.iteration_roundup == 1:
        print("xpuprof trigger: note: ranks on different hosts may receive the request at different iterations; "
              "pass --iteration-roundup R (e.g. 100) to start them all at one iteration", file=sys.stderr)

    if hosts:
        results = _send_all(trigger, hosts, config_for, args.job_id, pids, args.process_limit)
    elif args.embedded or (args.host is None and args.port is None
                           and not trigger.daemon_listening("localhost", trigger.DEFAULT_PORT)):
        results = [_embedded(trigger, config_for("local"), args, pids)]
    else:
        host, port = args.host or "localhost", args.port or trigger.DEFAULT_PORT
        try:
            results = [trigger.send_request(host, port, config_for(host), job_id=args.job_id, pids=pids,
                                            process_limit=args.process_limit)]
        except trigger.TriggerError as exc:
            results = [trigger.TriggerResult(f"{host}:{port}", error=str(exc))]
    return _report(results, log_file, args.json, start_ms)


def _control(trigger, args, hosts, pids) -> int:
    """``--pause`` / ``--resume``: the control text to every matching process (no process limit unless given)."""
    from ..ondemand import control

    asked = [name for name, given in (("--iterations", args.iterations), ("--start-time", args.start_time),
                                      ("--start-delay", args.start_delay), ("--log-file", args.log_file),
                                      ("--set", args.extra)) if given]
    if asked:
        return _fail(f"--{args.control} controls a running capture; {', '.join(asked)} describe a trace request "
                     "(send that separately)")
    text = control.control_text(args.control)
    limit = args.process_limit if args.process_limit_given else CONTROL_PROCESS_LIMIT
    args.process_limit = limit
    if hosts:
        results = _send_all(trigger, hosts, lambda host: text, args.job_id, pids, limit)
    elif args.embedded or (args.host is None and args.port is None
                           and not trigger.daemon_listening("localhost", trigger.DEFAULT_PORT)):
        results = [_embedded(trigger, text, args, pids)]
    else:
        host, port = args.host or "localhost", args.port or trigger.DEFAULT_PORT
        try:
            results = [trigger.send_request(host, port, text, job_id=args.job_id, pids=pids, process_limit=limit)]
        except trigger.TriggerError as exc:
            results = [trigger.TriggerResult(f"{host}:{port}", error=str(exc))]
    return _report_control(results, args.control, args.json)


def _report_control(results, command: str, as_json: bool) -> int:
    from ..ondemand import control

    done = 0
    out = []
    for res in results:
        answers = res.answers
        if answers is None:  # through dynolog: delivered is all the protocol tells
            done += len(res.triggered)
        else:
            done += sum(1 for o in answers.values() if o not in (control.NO_CAPTURE, control.NOT_RECORDING))
        out.append({"where": res.where, "matched": res.matched, "sent": res.triggered, "busy": res.busy,
                    "outcomes": {str(k): v for k, v in (answers or {}).items()} if answers is not None else None,
                    "error": res.error})
    if as_json:
        print(json.dumps({"command": command, "results": out}, indent=2))
        return 0 if done else 1
    for item, res in zip(out, results):
        where = item["where"]
        if item["error"]:
            print(f"{where}: {item['error']}")
            continue
        if not item["matched"]:
            print(f"{where}: no process matched (check --job-id / --pid, and that the processes run under "
                  "`xpuprof exec` or with KINETO_USE_DAEMON=1)")
            continue
        line = f"{where}: {len(item['matched'])} matched, {command} sent to {len(item['sent'])}"
        if item["busy"]:
            line += f", {item['busy']} busy (a request is still pending in that process; try again later)"
        print(line)
        if res.answers is None:
            if item["sent"]:
                print(f"    (dynolog does not carry answers back: each process logs whether a capture was running)")
            continue
        for pid in item["sent"]:
            outcome = res.answers.get(pid, "no answer (the process may have exited)")
            print(f"    pid {pid}: {outcome}")
    return 0 if done else 1


def _send_all(trigger, hosts, config_for, job_id, pids, limit):
    def one(host_port):
        host, port = host_port
        port = port or trigger.DEFAULT_PORT
        try:
            return trigger.send_request(host, port, config_for(host), job_id=job_id, pids=pids, process_limit=limit)
        except trigger.TriggerError as exc:
            return trigger.TriggerResult(f"{host}:{port}", error=str(exc))

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def _embedded(trigger, config: str, args, pids):
    from ..ondemand.client import read_base_config

    wait_s = args.wait or read_base_config().on_demand_config_update_interval_s + 1.0
    try:
        daemon = trigger.EmbeddedDaemon()
    except trigger.TriggerError as exc:
        return trigger.TriggerResult("embedded", error=str(exc))
    print(f"xpuprof trigger: no dynolog at localhost:{trigger.DEFAULT_PORT}; answering this machine's polling "
          f"processes directly for {wait_s:g} s", file=sys.stderr)
    try:
        return daemon.serve(config, wait_s=wait_s, job_id=args.job_id, pids=pids, process_limit=args.process_limit)
    finally:
        daemon.close()


def _report(results, log_file: str, as_json: bool, start_ms: int) -> int:
    from ..ondemand.request import log_file_for_pid

    triggered = 0
    out = []
    for res in results:
        host = res.where.rsplit(":", 1)[0] if res.where != "embedded" else socket.gethostname()
        files = [log_file_for_pid(log_file.replace("{host}", host), pid) for pid in res.triggered]
        triggered += len(res.triggered)
        out.append({"where": res.where, "matched": res.matched, "triggered": res.triggered, "busy": res.busy,
                    "trace_files": files, "error": res.error})
    if as_json:
        print(json.dumps({"results": out, "start_time_ms": start_ms or None}, indent=2))
    else:
        for item in out:
            where = item["where"]
            if item["error"]:
                print(f"{where}: {item['error']}")
                continue
            if not item["matched"]:
                print(f"{where}: no process matched (check --job-id / --pid, and that the processes run with "
                      "KINETO_USE_DAEMON=1 or under `xpuprof exec --on-demand`)")
                continue
            line = f"{where}: {len(item['matched'])} matched, {len(item['triggered'])} triggered"
            if item["busy"]:
                line += f", {item['busy']} busy (a request is still pending in that process; try again later)"
            untraced = len(item["matched"]) - len(item["triggered"]) - item["busy"]
            if untraced > 0:
                line += f", {untraced} over --process-limit"
            print(line)
            for path in item["trace_files"]:
                print(f"    {path}")
        if start_ms:
            print(f"start time: {start_ms} ms since the epoch ({max(0.0, start_ms / 1e3 - time.time()):.1f} s from now)")
    return 0 if triggered else 1
