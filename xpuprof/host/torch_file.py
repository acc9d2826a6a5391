"""torch's Kineto trace of a cycle, saved by torch's own exporter into a private directory and read back once."""
from __future__ import annotations

import os
import shutil
import tempfile


class TorchOpsError(RuntimeError):
    """torch ops cannot be recorded as asked (a conflicting profiler, an unusable torch)."""


def saved_trace(result) -> bytes:
    """torch's ``result.save()`` read back. Kineto writes ``PATH.tmp``, follows whatever it finds under that name
    (O_CREAT without O_EXCL), then renames it over ``PATH``: both lie in a directory of our own (mode 0700), so no
    other user can plant a file or a link there. A save that wrote nothing (Kineto logs the failure and returns:
    a full or read-only temporary directory) raises, instead of reading as a cycle without ops."""
    folder = tempfile.mkdtemp(prefix="xpuprof-torch-")
    path = os.path.join(folder, "trace.json")
    try:
        result.save(path)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = b""
        if not raw:
            raise TorchOpsError(f"torch's profiler wrote no trace to {path} (its exporter could not write there: is "
                                f"the temporary directory {os.path.dirname(folder)} full or read-only? TMPDIR "
                                "chooses another); this cycle's torch ops are missing")
        return raw
    finally:  # PATH, a PATH.tmp a failed save left, anything else Kineto put there: the directory is ours
        shutil.rmtree(folder, ignore_errors=True)
