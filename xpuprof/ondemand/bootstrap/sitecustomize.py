"""Put on PYTHONPATH by ``xpuprof exec``: start xpuprof in this Python process, then hand over to the
``sitecustomize`` this one shadows (the environment's own, if any)."""


def _xpuprof_exec_boot():
    import sys

    try:
        from xpuprof.ondemand import boot
    except Exception as exc:  # another interpreter without xpuprof: the program still runs, unprofiled
        sys.stderr.write(f"xpuprof exec: {sys.executable} cannot import xpuprof ({type(exc).__name__}: {exc}); "
                         "this process runs without it\n")
        return
    try:
        boot.main()
    except Exception as exc:  # never stop the program because its profiler could not start
        sys.stderr.write(f"xpuprof exec: xpuprof could not start in this process: {type(exc).__name__}: {exc}\n")


def _chain_to_shadowed():
    import importlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.get(__name__)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        del sys.modules[__name__]
        try:
            importlib.import_module("sitecustomize")
        except ModuleNotFoundError as exc:
            if exc.name != "sitecustomize":
                raise
    finally:
        sys.path[:] = saved
        if __name__ not in sys.modules and me is not None:
            sys.modules[__name__] = me


_xpuprof_exec_boot()
_chain_to_shadowed()
