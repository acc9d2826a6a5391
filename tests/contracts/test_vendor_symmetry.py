"""One emit-stage shape for every vendor (issue 37 item 6): the emitters derive from one base with the
same public verbs, and the simulated device writes no row of its own (its vendor-shaped records go
through the real emitters)."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from xpuprof.backends import emitter
from xpuprof.backends.cuda import emit as cuda_emit
from xpuprof.backends.rocm import emit as rocm_emit
from xpuprof.backends.xpu import emit as xpu_emit

VERBS = ("write", "write_kernels", "write_copies", "write_fills", "write_syncs", "write_api")
EMITTERS = {"xpu": xpu_emit.XpuEmitter, "cuda": cuda_emit.CudaEmitter, "rocm": rocm_emit.RocmEmitter}
SIM = Path(emitter.__file__).parent / "sim"
# TraceBuilder calls that write rows or name them: only an emit stage (or a metric writer) makes them.
ROW_WRITERS = {"add_slice", "add_slices", "add_instant", "add_instants", "add_counter", "add_counters",
               "add_per_kernel_metrics", "add_flow", "add_flows", "set_process_name", "set_thread_name"}


def _public(cls) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def test_every_vendor_emitter_derives_from_one_base_with_the_same_verbs():
    assert emitter.EMITTER_VERBS == VERBS
    for vendor, cls in EMITTERS.items():
        assert issubclass(cls, emitter.Emitter), vendor
        assert cls.__module__ == f"xpuprof.backends.{vendor}.emit" and cls.__name__ == f"{vendor.capitalize()}Emitter"
        assert not inspect.isabstract(cls), (vendor, cls.__abstractmethods__)
        assert set(VERBS) <= _public(cls), vendor
        for verb in VERBS[1:]:  # each vendor writes its own kinds (the batch entry point is the base's)
            assert getattr(cls, verb) is not getattr(emitter.Emitter, verb), (vendor, verb)
        assert cls.write is emitter.Emitter.write, vendor
    # the verbs all three share are exactly the base's public ones, besides their own kinds' verbs
    shared = set.intersection(*(_public(c) for c in EMITTERS.values()))
    assert {v for v in shared if v.startswith("write")} == set(VERBS) | {"write_batch"}


def test_the_old_emit_stage_names_are_gone():
    for module, old in ((xpu_emit, "RecordWriter"), (cuda_emit, "CuptiDecoder"), (rocm_emit, "RocprofDecoder")):
        assert not hasattr(module, old)


def test_rocm_records_no_fills_and_says_so():
    with pytest.raises(ValueError, match="no fills.*kernel dispatch"):
        rocm_emit.RocmEmitter(pid=1).write_fills(np.zeros(2))
    rocm_emit.RocmEmitter(pid=1).write_fills(np.zeros(0))  # nothing to write: nothing said


def test_the_sim_writes_no_rows_of_its_own():
    """backends/sim/ hands vendor records to the emitters: no TraceBuilder row call anywhere in it."""
    calls = []
    for path in sorted(SIM.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ROW_WRITERS:
                calls.append(f"{path.name}:{node.lineno} {node.func.attr}")
    assert not calls, calls


def test_the_sims_cupti_records_have_cupti_pythons_field_layout():
    """The CUDA flavour's records are cupti-python's record dtypes narrowed to the fields the emit stage
    reads, as records.gather_records hands them over."""
    c = pytest.importorskip("cupti.cupti", reason="cupti-python (the [cuda] extra) is not installed")
    from xpuprof.backends.cuda import records
    from xpuprof.backends.sim.cuda_records import CUPTI_DTYPES

    real = {records.KIND_RUNTIME: c.activity_api_dtype, records.KIND_CONCURRENT_KERNEL: c.activity_kernel13_dtype,
            records.KIND_MEMCPY: c.activity_memcpy6_dtype, records.KIND_SYNCHRONIZATION: c.activity_synchronization2_dtype,
            records.KIND_EXTERNAL_CORRELATION: c.activity_external_correlation_dtype}
    for kind, dtype in real.items():
        narrow = [(n, dtype.fields[n][0]) for n in dtype.names if n in records.EMITTED_FIELDS]
        assert [(n, CUPTI_DTYPES[kind].fields[n][0]) for n in CUPTI_DTYPES[kind].names] == narrow, kind
