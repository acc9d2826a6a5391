"""Record strides of the real intel-pti core against the mirrored layouts.

PTI's core (``<lib>/pti/libpti.so``) only loads next to a Level Zero loader that exports every
symbol it references. A stub loader (every function fails like "no driver"; ``zeDriverGet``
reports none) is enough for ``ptiViewGetNextRecord``, which needs no device: it walks a buffer
by PTI's own record-size table. So the real library tells us the stride of every record kind,
and walks a buffer built with our numpy dtypes end to end.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xpuprof.vendors import pti

try:
    WHEEL = pti.find_pti_library()
except pti.PtiNotFound:
    WHEEL = None
CORE = WHEEL.resolve().parent / "pti" / "libpti.so" if WHEEL else None
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
NM = shutil.which("nm")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    WHEEL is None or CORE is None or not CORE.exists() or CC is None or NM is None,
    reason="needs the intel-pti wheel (pip install --no-deps intel-pti intel-cmplr-lib-rt), a C compiler and nm")]

_OVERRIDES = {
    "zeInit": "int zeInit(uint32_t f) { return 0; }",
    "zesInit": "int zesInit(uint32_t f) { return 0; }",
    "zeDriverGet": "int zeDriverGet(uint32_t *c, void **d) { *c = 0; return 0; }",
    "zelLoaderGetVersions": "int zelLoaderGetVersions(uint64_t *c, void *v) { *c = 0; return 0; }",
}

_CHILD = r"""
import ctypes, json, sys
import numpy as np
from xpuprof.backends.xpu import records as decode
from xpuprof.vendors import pti
lib = pti.PtiLibrary.load()
nxt = lib.ptiViewGetNextRecord
strides = {}
for kind in pti.RECORD_STRUCTS:
    buf = ctypes.create_string_buffer(4096)
    ctypes.memmove(buf, int(kind).to_bytes(4, "little"), 4)
    ctypes.memmove(ctypes.addressof(buf) + 2048, (7).to_bytes(4, "little"), 4)  # a second record to step onto
    rec = ctypes.c_void_p()
    first = nxt(buf, 4096, ctypes.byref(rec))
    second = nxt(buf, 4096, ctypes.byref(rec))
    strides[int(kind)] = (rec.value - ctypes.addressof(buf)) if first == 0 and second == 0 and rec.value else None
kinds = [k for k, v in strides.items() if v]
parts = []
for k in kinds:
    a = np.zeros(1, pti.record_dtype(k)); a["_view_kind"] = k
    parts.append(a.tobytes())
walked = decode.PtiWalker(lib.next_record_address())(b"".join(parts)).tolist()
print(json.dumps({"version": lib.version(), "strides": strides, "kinds": kinds, "walked": walked}))
"""


@pytest.fixture(scope="module")
def stub_loader_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stub_ze")
    syms = subprocess.run([NM, "-D", "--undefined-only", str(CORE)], capture_output=True, text=True, check=True)
    names = sorted({ln.split()[-1] for ln in syms.stdout.splitlines()
                    if ln.split() and ln.split()[-1].startswith(("ze", "zet", "zes", "zel"))})
    src = ["#include <stdint.h>"] + [_OVERRIDES.get(n, f"int {n}(void) {{ return 0x78000001; }}") for n in names]
    (out / "stub.c").write_text("\n".join(src) + "\n")
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out / "libze_loader.so.1"), str(out / "stub.c")], check=True)
    return out


def test_real_pti_strides_equal_the_mirrored_record_sizes(stub_loader_dir):
    env = pti.environment_with_library_path(WHEEL)
    env["LD_LIBRARY_PATH"] = f"{stub_loader_dir}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    env[pti.PTI_LIBRARY_ENV] = str(WHEEL)
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=60)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.skip(f"PTI's core did not come up with a stub Level Zero loader (exit {proc.returncode}): "
                    f"{proc.stderr.strip()[-400:]}")
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    strides = {int(k): v for k, v in got["strides"].items()}
    sizes = pti.record_sizes()
    # Every kind PTI writes has exactly the size of our mirror (the _v2 layouts for kernel/copy/fill/p2p).
    known = {k: v for k, v in strides.items() if v is not None}
    assert known == {k: sizes[k] for k in known}, (got["version"], known)
    for kind in (pti.ViewKind.DEVICE_GPU_KERNEL, pti.ViewKind.DEVICE_GPU_MEM_COPY, pti.ViewKind.DEVICE_GPU_MEM_FILL,
                 pti.ViewKind.DEVICE_GPU_MEM_COPY_P2P, pti.ViewKind.DRIVER_API, pti.ViewKind.RUNTIME_API,
                 pti.ViewKind.EXTERNAL_CORRELATION, pti.ViewKind.COLLECTION_OVERHEAD):
        assert int(kind) in known, f"PTI {got['version']} does not walk kind {kind.name}"
    # PTI's walker finds each of our dtype-built records where we put it.
    offsets, pos = [], 0
    for k in got["kinds"]:
        offsets.append(pos)
        pos += sizes[k]
    assert got["walked"] == offsets
