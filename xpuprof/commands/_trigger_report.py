"""What ``xpuprof trigger`` prints: per daemon, who matched and was triggered; per process, what it answered
(where its trace was written, why not, a control command's outcome); and its exit status.

A process under xpuprof answers over the IPC fabric (``ondemand.answers``) when the trigger runs on its
machine; the trigger waits for those answers: for a trace request until each triggered process has written
its trace (or said why not, or exited without writing it) or ``--timeout`` passes; for ``--no-wait``, until
each said whether it started. A process that answers nothing (torch's own Kineto client, another machine)
is said to have answered nothing: the daemon's word is all there is for it.
"""
from __future__ import annotations

import json
import time

from ..ondemand import answers as ans
from ..ondemand import control

NO_ANSWER = ("no answer (torch's own Kineto client, or a process on another machine, answers nothing; its log "
             "says where it wrote)")


def wait_for_answers(box, results, *, answer_window_s: float, timeout_s: float, final: bool, embedded: bool) -> None:
    """Read answers until every triggered process of ``results`` said what it needed to say (``final``: the
    end of its capture, else whether it started), or exited, or ``timeout_s`` passed. A process that has
    answered nothing once ``answer_window_s`` (its next poll) has passed is not waited for."""
    pids = {pid for res in results for pid in res.triggered}
    if not pids:
        return
    if embedded:  # the kernel's pids: exits are watched from the start
        for pid in pids:
            box.watch(pid)
    start = time.monotonic()

    def settled(pid: int) -> bool:
        got = box.of(pid)
        if got is None:
            return box.has_exited(pid) or time.monotonic() - start >= answer_window_s
        if got.final() or box.has_exited(pid):
            return True
        return not final and got.last["state"] == ans.ACCEPTED

    box.wait(lambda _box: all(settled(pid) for pid in pids), start + timeout_s)


def process_line(pid: int, box) -> tuple[str, str]:
    """``(category, text)`` for one triggered process: category written / started / failed / notriggered /
    unanswered / outcome / nothing (a control command that changed nothing)."""
    got = box.of(pid) if box is not None else None
    exited = box is not None and box.has_exited(pid)
    if got is None:
        if exited:
            return "failed", "exited before answering (it wrote no trace for this request)"
        return "unanswered", NO_ANSWER
    last = got.last
    state = last["state"]
    path, why = last.get("path"), last.get("why")
    if state == ans.OUTCOME:
        outcome = str(last.get("outcome"))
        return ("nothing" if outcome in control.NOTHING_DONE else "outcome"), outcome
    if state == ans.WRITTEN:
        return "written", f"wrote {path}"
    if state == ans.FAILED:
        return "failed", f"failed: {why}"
    if state == ans.BUSY:
        where = f" ({path})" if path else ""
        return "notriggered", f"busy: {why}{where}"
    if state == ans.REFUSED:
        return "notriggered", f"refused: {why}"
    if state == ans.CANCELLED:
        return "notriggered", "cancelled before it recorded (no trace)"
    if exited:
        return "failed", f"exited before writing its trace (it would have been {path})"
    return "started", f"capture accepted; its trace will be {path} (not written yet)"


def report_trace_request(results, box, *, as_json: bool, start_ms: int, log_file: str | None = None) -> int:
    """Print the outcome of a trace request; the exit status (0: at least one process triggered and none of
    them failed to write; 1 otherwise). ``log_file``: the ``--log-file`` given, for what Kineto's rule names
    a process's file when the process cannot answer."""
    from ..ondemand.request import log_file_for_pid

    triggered_total = 0
    failed = 0
    out = []
    for res in results:
        processes = {}
        files = []
        not_triggered = 0
        host = res.where.rsplit(":", 1)[0]
        for pid in res.triggered:
            category, text = process_line(pid, box)
            if category == "unanswered" and log_file:
                text += (f"; by Kineto's rule its trace is {log_file_for_pid(log_file.replace('{host}', host), pid)} "
                         "on its host")
            got = box.of(pid) if box is not None else None
            processes[pid] = {"state": category, "text": text, **({"answers": got.states} if got else {})}
            if category == "written":
                files.append(text[len("wrote "):])
            elif category == "failed":
                failed += 1
            elif category == "notriggered":
                not_triggered += 1
        triggered = len(res.triggered) - not_triggered
        triggered_total += triggered
        out.append({"where": res.where, "matched": res.matched, "triggered": res.triggered, "busy": res.busy,
                    "processes": {str(k): v for k, v in processes.items()}, "trace_files": files,
                    "error": res.error, "triggered_count": triggered})
    status = 2 if any(res.bad_answer for res in results) else 0 if triggered_total and not failed else 1
    if as_json:
        print(json.dumps({"results": out, "start_time_ms": start_ms or None}, indent=2))
        return status
    for item in out:
        where = item["where"]
        if _said_unmatched(item):
            continue
        line = f"{where}: {len(item['matched'])} matched, {item['triggered_count']} triggered"
        if item["busy"]:
            line += f", {item['busy']} busy (a request is still pending in that process; try again later)"
        untraced = len(item["matched"]) - len(item["triggered"]) - item["busy"]
        if untraced > 0:
            line += f", {untraced} over --process-limit"
        print(line)
        if item["error"]:
            print(f"    {item['error']}")
        for pid, info in item["processes"].items():
            print(f"    pid {pid}: {info['text']}")
    if start_ms:
        print(f"start time: {start_ms} ms since the epoch ({max(0.0, start_ms / 1e3 - time.time()):.1f} s from now)")
    return status


def report_control(results, box, command: str, as_json: bool) -> int:
    """Print what a control command did in each process; 0 when it changed something somewhere."""
    done = 0
    out = []
    for res in results:
        outcomes = {}
        for pid in res.triggered:
            category, text = process_line(pid, box)
            outcomes[str(pid)] = text
            if category == "outcome" or (category == "unanswered" and box is None):
                done += 1
        out.append({"where": res.where, "matched": res.matched, "sent": res.triggered, "busy": res.busy,
                    "outcomes": outcomes, "error": res.error})
    status = 2 if any(res.bad_answer for res in results) else 0 if done else 1
    if as_json:
        print(json.dumps({"command": command, "results": out}, indent=2))
        return status
    for item in out:
        where = item["where"]
        if _said_unmatched(item):
            continue
        line = f"{where}: {len(item['matched'])} matched, {command} sent to {len(item['sent'])}"
        if item["busy"]:
            line += f", {item['busy']} busy (a request is still pending in that process; try again later)"
        print(line)
        for pid, text in item["outcomes"].items():
            print(f"    pid {pid}: {text}")
    return status


def _said_unmatched(item: dict) -> bool:
    """Print the one line of a daemon that failed or matched no process (the same for a trace request and a
    control command); True when printed (nothing else follows for that daemon)."""
    where = item["where"]
    if item["error"] and not item["matched"]:
        print(f"{where}: {item['error']}")
        return True
    if not item["matched"]:
        print(f"{where}: no process matched (check --job-id / --pid, and that the processes run with "
              "KINETO_USE_DAEMON=1 or under `xpuprof exec --on-demand`)")
        return True
    return False
