"""``xpuprof exec [options] -- COMMAND [ARGS...]``: run an unmodified command with xpuprof in every Python
process it starts (a script, ``python -m``, torchrun, mpirun/srun launching Python; their children too),
and Intel PTI's view library preloaded so SYCL programs are captured from their first call.

What is recorded (one trace per process, in --out, named <host>_<pid>.<ts>.pt.trace.json, or .pftrace with
--format perfetto, with the rank inside; each process says on stderr where it wrote its trace):
  (default)                 the whole run of each process
  --delay S --duration S    a window of the run
  --iterations N            N iterations (torch optimizer steps or xpuprof.step()), from --start-iteration
  --on-demand               nothing until a request arrives: dynolog (``dyno gputrace``) or ``xpuprof trigger``;
                            with --out, those traces go to --out too (else where each request names them)
What each trace holds: a Kineto config (--config FILE, --set KEY=VALUE: ACTIVITY_TYPES,
XPUPTI_PROFILER_METRICS, PROFILE_WITH_STACK, ...).

--out is checked before the command starts (created if missing, a file written and removed there): a
directory that cannot hold the traces is one line, exit 2, and nothing runs.

The command runs as this process's child: its exit status, output and signals are its own (signals sent
to exec are passed on; a command killed by a signal ends exec by the same signal). A process that crashes
or is killed (SIGSEGV, SIGABRT, SIGBUS, SIGKILL) keeps what it recorded: its trace is written when it is
gone, marked "truncated" (docs/reliability.md; XPUPROF_EXEC_WATCHDOG_S=S also writes the recording of a
process that records nothing for S seconds).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from ._options import non_negative_int, non_negative_seconds, positive_int

DEFAULT_OUT = "xpuprof-traces"


def register(subparsers) -> None:
    p = subparsers.add_parser("exec", help="run a command with xpuprof in every Python process it starts",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="a Kineto config file (KEY=VALUE lines)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="one more Kineto config line (repeatable; after --config, so it wins)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"trace directory (default ./{DEFAULT_OUT}); with --on-demand, requests' traces go there too")
    p.add_argument("--format", default="json", choices=("json", "perfetto"),
                   help="the traces written in --out: Kineto JSON (default) or Perfetto protobuf (.pftrace)")
    when = p.add_argument_group("when (default: the whole run)")
    when.add_argument("--delay", type=non_negative_seconds, default=None, metavar="S",
                      help="start S seconds after each process starts")
    when.add_argument("--duration", type=non_negative_seconds, default=None, metavar="S", help="record S seconds")
    when.add_argument("--iterations", type=positive_int, default=None, metavar="N", help="record N iterations")
    when.add_argument("--start-iteration", type=non_negative_int, default=0, metavar="K",
                      help="with --iterations: the first one to record (default 0)")
    when.add_argument("--on-demand", action="store_true",
                      help="record nothing until dynolog or `xpuprof trigger` asks (each process polls)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")
    p.set_defaults(func=run)


def _fail(msg: str) -> int:
    print(f"xpuprof exec: {msg}", file=sys.stderr)
    return 2


def policy_from_args(args):
    """The ExecPolicy the options mean; ValueError with one line naming the problem."""
    from ..config.kineto import KinetoConfig
    from ..config.options import ProfilerConfig
    from ..ondemand.launcher import ExecPolicy

    text = ""
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ValueError(f"--config {args.config}: {exc.strerror or exc}") from None
    for line in args.sets:
        if "=" not in line:
            raise ValueError(f"--set {line!r}: expected KEY=VALUE")
        text += ("\n" if text and not text.endswith("\n") else "") + line + "\n"
    kc = KinetoConfig()
    if not kc.parse(text):
        raise ValueError(f"the config does not parse: {'; '.join(kc.errors)}")
    try:
        ProfilerConfig.from_kineto(kc)
    except ValueError as exc:
        raise ValueError(f"the config cannot be recorded: {exc}") from None
    out_given = args.out is not None
    out = os.path.abspath(args.out if out_given else DEFAULT_OUT)  # one directory, whatever cwd each process has
    fmt = getattr(args, "format", "json")
    timed = args.delay is not None or args.duration is not None
    if sum([timed, args.iterations is not None, args.on_demand]) > 1:
        raise ValueError("--delay/--duration, --iterations and --on-demand choose different captures: give one")
    if args.start_iteration and args.iterations is None:
        raise ValueError("--start-iteration needs --iterations")
    if timed:
        if args.duration is None:
            raise ValueError("--delay needs --duration S (a positive number of seconds)")
        if not args.duration:
            raise ValueError("--duration must be a positive number of seconds")
        return ExecPolicy(mode="window", out_dir=out, out_given=out_given, config_text=text, delay_s=args.delay or 0.0,
                          duration_s=args.duration, trace_format=fmt)
    if args.iterations is not None:
        return ExecPolicy(mode="iterations", out_dir=out, out_given=out_given, config_text=text,
                          iterations=args.iterations, start_iteration=args.start_iteration, trace_format=fmt)
    if args.on_demand:
        return ExecPolicy(mode="on-demand", out_dir=out, out_given=out_given, config_text=text, trace_format=fmt)
    if kc.iteration_mode:  # the config itself asks for iterations (Kineto's keys)
        return ExecPolicy(mode="iterations", out_dir=out, out_given=out_given, config_text=text,
                          iterations=kc.activities_iterations, start_iteration=max(0, kc.profile_start_iteration),
                          trace_format=fmt)
    return ExecPolicy(mode="run", out_dir=out, out_given=out_given, config_text=text, trace_format=fmt)


def check_out_writable(policy) -> str | None:
    """``--out`` can hold the traces: created when missing, a real file written and removed there (a read-only
    filesystem, missing permissions, a file in the way are found now, not after the whole command ran). The
    one-line problem, or None. With ``--on-demand`` and no ``--out``, nothing is written there: not checked."""
    import tempfile

    if policy.mode == "on-demand" and not policy.out_given:
        return None
    try:
        os.makedirs(policy.out_dir, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=policy.out_dir, prefix=".xpuprof-write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"--out {policy.out_dir}: cannot write traces there: {exc.strerror or exc}"
    return None


def _isolating_flags(command: list[str]) -> str:
    """The flags of a Python command that keep xpuprof's bootstrap out (-I, -E, -S), '' when none."""
    if not os.path.basename(command[0]).startswith("python"):
        return ""
    found = []
    for arg in command[1:]:
        if not arg.startswith("-") or arg in ("-c", "-m") or arg.startswith("--"):
            break
        found += [f"-{c}" for c in arg[1:] if c in "IES"]
        if any(c in arg for c in "cmWXQ"):  # an option taking a value (or ending the flags)
            break
    return " ".join(dict.fromkeys(found))


def run(args) -> int:
    from ..ondemand.launcher import child_environment

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return _fail("no command: xpuprof exec [options] -- COMMAND [ARGS...]")
    try:
        policy = policy_from_args(args)
    except ValueError as exc:
        return _fail(str(exc))
    problem = check_out_writable(policy)
    if problem:
        return _fail(problem)
    env = child_environment(policy)
    isolating = _isolating_flags(command)
    if isolating:
        print(f"xpuprof exec: note: {command[0]} {isolating} ignores PYTHONPATH or site: xpuprof cannot start in that "
              "process (its children without the flag still get it; SYCL calls are still hooked by the preloaded "
              "view library)", file=sys.stderr)
    program = shutil.which(command[0], path=env.get("PATH")) if os.sep not in command[0] else command[0]
    if program is None or not os.access(program, os.X_OK):
        print(f"xpuprof exec: {command[0]}: command not found", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    from ..ondemand.crashsafe import run_supervised  # the crash-safe parent (ondemand/crashsafe.py)

    try:
        return run_supervised(program, command, env, os.path.abspath(policy.out_dir))
    except OSError as exc:
        print(f"xpuprof exec: {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126
