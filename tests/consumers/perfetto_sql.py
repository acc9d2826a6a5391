"""SQL over what Perfetto's own trace processor imports from a trace (v58.2, built in ../shared/perfetto/).

Found through ``XPUPROF_TRACE_PROCESSOR`` (the shell's path) or ``../shared/perfetto/bin`` beside the
checkout (its ``lib/`` on ``LD_LIBRARY_PATH``); tests skip with the precise reason where it is absent.

``query`` runs one statement; ``imported`` runs every check of ``viewer_problems`` in ONE trace processor run
(a run costs ~0.2 s to start: CI batches its questions into one statement of JSON columns).
"""
from __future__ import annotations

import csv
import sys
import gzip
import io
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

csv.field_size_limit(sys.maxsize)  # a JSON column of a big trace
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "perfetto"


def trace_processor() -> tuple[Path, dict]:
    """(the shell, its environment), or a skip saying what is missing."""
    given = os.environ.get("XPUPROF_TRACE_PROCESSOR")
    shell = Path(given) if given else SHARED / "bin" / "trace_processor_shell"
    if not shell.is_file():
        pytest.skip(f"Perfetto's trace processor is not at {shell} (set XPUPROF_TRACE_PROCESSOR, or build "
                    f"../shared/perfetto with its build.sh)")
    env = dict(os.environ)
    lib = shell.parent.parent / "lib"
    if lib.is_dir():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), env.get("LD_LIBRARY_PATH", "")]))
    return shell, env


def query(trace: Path, sql: str, tmp_path: Path) -> list[dict]:
    """The rows ``sql`` gives over ``trace`` as Perfetto imports it (values as the shell prints them)."""
    shell, env = trace_processor()
    script = tmp_path / "query.sql"
    script.write_text(sql)
    done = subprocess.run([str(shell), "-q", str(script), str(trace)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(done.stdout)))


# One row of JSON columns (hex: the shell's CSV does not escape quotes): what Perfetto made of the trace.
FACTS = """
select
  (select count(*) from slice) as slices,
  (select count(*) from track where type = 'thread_overlapping_slice') as overflow_tracks,
  hex((select json_group_array(json_object('name', name, 'idx', idx, 'severity', severity, 'value', value))
     from stats where severity != 'info' and value > 0)) as problems,
  hex((select json_group_array(json_object('pid', pid, 'processes', n))
     from (select pid, count(*) as n from process where pid is not null and upid != 0 group by pid))) as processes,
  hex((select json_group_array(json_object('pid', p.pid, 'tid', t.tid, 'slices', x.n))
     from (select tt.utid as utid, count(*) as n from slice s join thread_track tt on s.track_id = tt.id
           group by tt.utid) x join thread t using (utid) left join process p using (upid))) as threads,
  hex((select json_group_array(json_object('out_cat', so.category, 'out_name', so.name, 'in_cat', si.category,
                                       'out_corr', (select int_value from args a where a.arg_set_id = so.arg_set_id
                                                    and a.key = 'args.correlation'),
                                       'in_corr', (select int_value from args a where a.arg_set_id = si.arg_set_id
                                                   and a.key = 'args.correlation')))
     from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id)) as flows,
  (select count(*) from counter) as counters
"""


def imported(trace: Path, tmp_path: Path) -> dict:
    """What Perfetto imported from ``trace``: the FACTS row with its JSON columns parsed (``processes``: those of
    the trace; Perfetto's own placeholder process, upid 0, left out)."""
    (row,) = query(trace, FACTS, tmp_path)
    out = {}
    for k, v in row.items():
        out[k] = int(v) if k in ("slices", "overflow_tracks", "counters") else json.loads(bytes.fromhex(v) or b"[]")
    return out


def _events(trace: Path) -> list[dict]:
    raw = Path(trace).read_bytes()
    return json.loads(gzip.decompress(raw) if str(trace).endswith(".gz") else raw)["traceEvents"]


RUNTIME_SUFFIXES = ("runtime", "_driver")


def viewer_problems(trace: Path, tmp_path: Path, *, flows: int | None = None) -> list[str]:
    """Everything a viewer would get wrong about ``trace``, as Perfetto imports it (empty: nothing):
    - an event not imported: every X and i event a slice, every C event's numbers counter samples;
    - a slice off its thread's track (an overflow track, a ``slice_spill_overlapping_complete_event``);
    - a thread's slices drawn elsewhere: each (pid, tid) of the file's X events holds its own count (Perfetto
      draws tid 0 as the process's own thread, tid = pid: two threads of the file must not become one);
    - a pid that is not one process (two processes, or two pids merged into one);
    - a flow the file holds that Perfetto does not draw (``flows``: how many it draws of the trace this one was
      converted from, when that one's own do not all draw), or an ``ac2g`` launch arrow that does not start
      at the launch call (the runtime call of its correlation) and end at its device item;
    - an error or data-loss row in ``stats``."""
    events = _events(trace)
    got = imported(trace, tmp_path)
    problems = []
    xs = [e for e in events if e.get("ph") == "X"]
    instants = [e for e in events if e.get("ph") == "i"]
    if got["slices"] != len(xs) + len(instants):
        problems.append(f"{got['slices']} slices imported of {len(xs)} X and {len(instants)} i events")
    samples = sum(sum(1 for v in (e.get("args") or {}).values() if isinstance(v, (int, float)) and not isinstance(v, bool))
                  for e in events if e.get("ph") == "C")
    if got["counters"] != samples:
        problems.append(f"{got['counters']} counter samples imported of the file's {samples}")
    if got["overflow_tracks"]:
        problems.append(f"{got['overflow_tracks']} overflow track(s): slices moved off their thread's track")
    for p in got["problems"]:
        problems.append(f"stats: {p['name']} = {p['value']} ({p['severity']})")
    int_pids = {e["pid"] for e in events if isinstance(e.get("pid"), int) and not isinstance(e.get("pid"), bool)}
    by_pid = {p["pid"]: p["processes"] for p in got["processes"]}
    for pid in sorted(int_pids):
        if by_pid.get(pid) != 1:
            problems.append(f"pid {pid}: {by_pid.get(pid, 0)} processes in Perfetto")
    threads = Counter()
    for t in got["threads"]:
        threads[(t["pid"], t["tid"])] += t["slices"]
    want: Counter = Counter()
    tids_of: dict = {}
    for e in xs + [i for i in instants if i.get("s", "t") == "t"]:
        if isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int):
            key = (e["pid"], e["tid"] or e["pid"])  # Perfetto gives tid 0 the process's own thread: tid = pid
            want[key] += 1
            tids_of.setdefault(key, set()).add(e["tid"])
    for (pid, _), tids in tids_of.items():
        if len(tids) > 1:
            problems.append(f"tids {sorted(tids)} of pid {pid} are one thread in Perfetto")
    for key, n in want.items():
        if threads.get(key) != n:
            problems.append(f"thread {key}: {threads.get(key, 0)} slices in Perfetto, {n} in the file")
    starts = Counter((e.get("cat"), e.get("id")) for e in events if e.get("ph") == "s")
    ends = Counter((e.get("cat"), e.get("id")) for e in events if e.get("ph") == "f")
    pairs = sum(min(n, ends[k]) for k, n in starts.items()) if flows is None else flows
    if len(got["flows"]) != pairs:
        problems.append(f"{len(got['flows'])} flows drawn of the file's {pairs}")
    ac2g = {e.get("id") for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    for f in got["flows"]:
        if f["out_corr"] in ac2g or f["in_corr"] in ac2g:
            if not str(f["out_cat"]).endswith(RUNTIME_SUFFIXES) or f["out_corr"] != f["in_corr"]:
                problems.append(f"launch arrow {f}: does not start at its launch call")
                break
    return problems
