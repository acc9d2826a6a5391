"""Which host activity launches which simulated device work, and how much work it is.

The rule (docs/backends.md states it for users):
- When the cycle recorded torch ops (``cpu_op``), every innermost computing aten op launches one kernel
  named after it (``aten::addmm`` -> ``sim_addmm``), linked to it. An aten op computes unless it is a
  view or a metadata/allocation op, or the in-place form of one (``computes``, ``NON_COMPUTING``:
  ``aten::as_strided_`` launches nothing, so a convolution launches its own kernel); innermost: no
  computing aten op runs inside it on its thread. The BLAS ops that add a bias (``OWN_KERNEL_WITH_BIAS``:
  addmm, addmv, addbmm, baddbmm, addr) launch their GEMM too although the bias copy inside them
  computes first, as on a GPU.
- Without torch ops, every innermost range (``record_function``, ours or torch's) launches one kernel
  named after it (``sim_<range name>``).
- Collectives launch a communication kernel named as the flavour's collective library names it
  (``collectives``: oneCCL on XPU, NCCL on CUDA, RCCL on HIP) on the device's communication stream:
  each ``c10d::*`` op, or, in a cycle without one, each ``gloo:*``/``nccl:*`` range (the collective's
  work on the process group's thread).
- How long: ``KERNEL_FLOOR_NS`` plus the work at the simulated device's rates: the FLOPs (2·M·N·K for
  the matrix products, from torch's ``Input Dims``; torch's ``flops`` arg when with_flops gave one; one
  per element otherwise) at ``FLOPS_PER_NS``, or the bytes read and written at ``BYTES_PER_NS``, whichever
  takes longer; a range's work comes from its args (``{"flops": ..., "bytes": ...}``; ``xpuprof run``'s
  built-in workloads put theirs there), else from a kernel class picked by its name. Collectives move
  their tensor's bytes at ``COMM_BYTES_PER_NS``, and last at least what the process group's own range
  (``gloo:*``/``nccl:*``: the work, the wait for the other ranks included) took on this machine. The seeded
  jitter (+-5 %) is the only randomness.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from . import collectives

# The simulated device: a small accelerator (2 TFLOP/s, 100 GB/s, a 10 GB/s link).
FLOPS_PER_NS = 2_000.0
BYTES_PER_NS = 100.0
KERNEL_FLOOR_NS = 1_500
COMM_BYTES_PER_NS = 10.0
COMM_FLOOR_NS = 8_000
BLOCK_THREADS = 256
JITTER = 0.05

# Kernel classes for ranges that say nothing of their work: (name, base duration ns, grid x, bytes per launch).
KERNEL_CLASSES = (
    ("gemm", 48_000, 512, 6 << 20),
    ("elementwise", 9_000, 1024, 8 << 20),
    ("softmax", 14_000, 256, 2 << 20),
    ("layernorm", 12_000, 256, 2 << 20),
    ("reduce", 7_000, 128, 4 << 20),
)

# aten ops that launch no kernel: views, metadata, allocation (c10 names without the "aten::" namespace
# and without the trailing "_" of an in-place form: as_strided_ restrides in place, as as_strided views).
NON_COMPUTING = frozenset("""
    as_strided view view_as reshape _reshape_alias _unsafe_view t transpose permute expand expand_as
    squeeze unsqueeze detach alias slice select narrow unfold split split_with_sizes unsafe_split
    unsafe_split_with_sizes chunk unsafe_chunk unbind flatten unflatten diagonal movedim moveaxis swapaxes
    swapdims numpy_T mT mH adjoint real imag view_as_real view_as_complex conj resolve_conj resolve_neg
    _conj _neg_view broadcast_tensors broadcast_to lift lift_fresh empty empty_like empty_strided new_empty
    new_empty_strided resize resize_as set size stride numel dim is_same_size result_type contiguous is_nonzero
    _has_compatible_shallow_copy_type to _to_copy_meta requires_grad retain_grad _version
""".split())


OWN_KERNEL_WITH_BIAS = frozenset({"addmm", "addmv", "addbmm", "baddbmm", "addr"})
_ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
                  "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
                  "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}


@dataclass
class Launches:
    """One row per launch (sorted by host start): the host interval its calls are made in, and its work."""

    ext: np.ndarray
    tid: np.ndarray
    enter: np.ndarray  # epoch ns
    exit_: np.ndarray
    names: list
    work_ns: np.ndarray  # nominal device duration
    grid_x: np.ndarray
    bytes: np.ndarray  # what the kernel moves (the copy before it moves a quarter of it)
    comm: np.ndarray  # bool: a communication kernel (own stream)
    synthetic_copies: bool  # range mode: every COPY_EVERY-th launch copies its inputs first

    def __len__(self) -> int:
        return len(self.ext)

    def take(self, rows: np.ndarray) -> "Launches":
        """The launches at ``rows`` (indices), in that order."""
        rows = np.asarray(rows, np.int64)
        return Launches(self.ext[rows], self.tid[rows], self.enter[rows], self.exit_[rows],
                        [self.names[i] for i in rows.tolist()], self.work_ns[rows], self.grid_x[rows],
                        self.bytes[rows], self.comm[rows], self.synthetic_copies)

    def sorted(self) -> "Launches":
        return self.take(np.lexsort((self.ext, self.enter)))


def innermost(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the intervals with no other interval of the set inside them on their thread (intervals on a
    thread nest; at an equal start the longer one is the outer one)."""
    n = len(tid)
    if n == 0:
        return np.zeros(0, bool)
    order = np.lexsort((-end, start, tid))
    t, s, e = tid[order], start[order], end[order]
    has_child = np.zeros(n, bool)
    has_child[:-1] = (t[1:] == t[:-1]) & (s[1:] < e[:-1])
    out = np.empty(n, bool)
    out[order] = ~has_child
    return out


def _short(name: str) -> str:
    return name.split("::", 1)[-1]


def computes(op_name: str) -> bool:
    """Whether an aten op launches device work: any ``aten::`` op but a view, metadata or allocation op
    (``NON_COMPUTING``), in its plain or in-place form (``aten::as_strided_``)."""
    return op_name.startswith("aten::") and _short(op_name).removesuffix("_") not in NON_COMPUTING


def _tensors(args: dict) -> list[tuple[list, str]]:
    """(shape, element type) of each tensor input (TensorList inputs give each of their tensors)."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    out = []
    for i, d in enumerate(dims):
        kind = types[i] if i < len(types) else ""
        if kind in ("Scalar", "ScalarList", "") and not d:
            continue
        if d and isinstance(d[0], list):  # a TensorList: one shape per tensor
            out += [(sub, "float" if kind == "TensorList" else kind) for sub in d]
        elif kind not in ("Scalar", "ScalarList"):
            out.append((d, kind))
    return out


def _numel(shape) -> int:
    n = 1
    for x in shape:
        n *= int(x)
    return n


def op_work(name: str, args: dict) -> tuple[float, float, int]:
    """(FLOPs, bytes, output elements) of one aten op from torch's shape args."""
    tensors = _tensors(args)
    short = _short(name)
    nbytes = float(sum(_numel(s) * _ELEMENT_BYTES.get(k, 4) for s, k in tensors))
    shapes = [s for s, _ in tensors]
    out = _numel(shapes[0]) if shapes else 1
    flops = float(args["flops"]) if isinstance(args.get("flops"), (int, float)) and args["flops"] > 0 else None
    if short in ("mm", "addmm", "bmm", "baddbmm", "addbmm") and len(shapes) >= 2:
        a, b = shapes[-2], shapes[-1]
        if len(a) >= 2 and len(b) >= 2:
            batch = _numel(a[:-2]) if len(a) > 2 else 1
            out = batch * a[-2] * b[-1]
            flops = flops or 2.0 * batch * a[-2] * a[-1] * b[-1]
    elif short in ("addmv", "mv") and len(shapes) >= 2 and len(shapes[-2]) == 2:
        out = shapes[-2][0]
        flops = flops or 2.0 * shapes[-2][0] * shapes[-2][1]
    elif "convolution" in short and len(shapes) >= 2 and len(shapes[0]) >= 3 and len(shapes[1]) >= 3:
        x, w = shapes[0], shapes[1]
        out = x[0] * w[0] * _numel(x[2:])
        flops = flops or 2.0 * out * _numel(w[1:])
    nbytes += out * 4
    return (flops if flops is not None else float(max(out, 1))), nbytes, int(out)


def work_ns(flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    return KERNEL_FLOOR_NS + np.maximum(flops / FLOPS_PER_NS, nbytes / BYTES_PER_NS)


def comm_work_ns(nbytes: np.ndarray) -> np.ndarray:
    return COMM_FLOOR_NS + 2.0 * nbytes / COMM_BYTES_PER_NS  # a ring all-reduce moves each byte twice


def _comm_name(name: str, args: dict, vendor: str) -> str:
    """The kernel the collective launches, as ``vendor``'s collective library names it (``collectives``)."""
    tensors = _tensors(args)
    return collectives.kernel_name(vendor, name, tensors[0][1] if tensors else "float")


def from_ops(ops, vendor: str = "xpu") -> Launches | None:
    """The launches of torch's ops (``HostOps``), None when the cycle recorded no torch op; collectives'
    kernels named as ``vendor``'s library names them."""
    is_op = np.asarray(ops.cats == "cpu_op", bool) if len(ops) else np.zeros(0, bool)
    if not is_op.any():
        return None
    table = list(ops.name_table)
    computing = np.array([computes(n) for n in table], bool)
    with_bias = np.array([n.startswith("aten::") and _short(n) in OWN_KERNEL_WITH_BIAS for n in table], bool)
    c10d = np.array([bool(collectives.COLLECTIVE_OP.match(n)) for n in table], bool)
    codes = ops.name_codes
    compute_rows = np.flatnonzero(is_op & computing[codes])
    leaf = innermost(ops.tid[compute_rows], ops.start_ns[compute_rows], ops.end_ns[compute_rows])
    kernel_rows = compute_rows[leaf | with_bias[codes[compute_rows]]]
    comm_rows = np.flatnonzero(is_op & c10d[codes])
    ranges = np.array([bool(collectives.COLLECTIVE_RANGE.match(n)) for n in table], bool)
    # the collectives' own work: gloo's/nccl's ranges on the process group's thread, in issue order
    work_rows = np.flatnonzero((ops.cats == "user_annotation") & ranges[codes])
    work_rows = work_rows[np.argsort(ops.start_ns[work_rows], kind="stable")]
    if not len(comm_rows):  # torch without c10d ops: the collective's range launches
        comm_rows = work_rows
    rows = np.concatenate([kernel_rows, comm_rows]).astype(np.int64)
    args = ops.args(rows.tolist())
    names, flops, nbytes, grid = [], [], [], []
    for i, r in enumerate(rows.tolist()):
        name = table[codes[r]]
        is_comm = i >= len(kernel_rows)
        f, b, out = op_work(name, args[i])
        if is_comm:  # a collective moves its tensors
            b = float(sum(_numel(sh) * _ELEMENT_BYTES.get(k, 4) for sh, k in _tensors(args[i])))
        names.append(_comm_name(name, args[i], vendor) if is_comm else f"sim_{_short(name)}")
        flops.append(f)
        nbytes.append(b)
        grid.append(max(1, -(-out // BLOCK_THREADS)))
    comm = np.arange(len(rows)) >= len(kernel_rows)
    flops_a, bytes_a = np.array(flops, np.float64), np.array(nbytes, np.float64)
    dur = np.where(comm, comm_work_ns(bytes_a), work_ns(flops_a, bytes_a))
    if len(work_rows) == len(comm_rows) and len(comm_rows):
        # A collective lasts at least what it took on this machine (its wait for the slowest rank included,
        # as on a GPU): the k-th collective issued is the k-th range the process group ran.
        order = np.argsort(ops.start_ns[comm_rows], kind="stable")
        real = np.empty(len(comm_rows), np.float64)
        real[order] = ops.end_ns[work_rows] - ops.start_ns[work_rows]
        dur[comm] = np.maximum(dur[comm], real)
    enter, exit_ = _own_time(ops, is_op, rows)
    return Launches(ops.external_id[rows], ops.tid[rows], enter, exit_, names,
                    dur.astype(np.int64), np.array(grid, np.int64), bytes_a.astype(np.int64), comm, False).sorted()


def _own_time(ops, is_op: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each launching op, the longest stretch of its time no other op nested in it covers (the last one
    on a tie): its calls are made there, so the innermost op around them is the launching op itself."""
    enter, exit_ = ops.start_ns[rows].copy(), ops.end_ns[rows].copy()
    op_rows = np.flatnonzero(is_op)
    by_thread = {}
    for t in np.unique(ops.tid[rows]).tolist():
        mine = op_rows[ops.tid[op_rows] == t]
        order = np.lexsort((-ops.end_ns[mine], ops.start_ns[mine]))
        by_thread[t] = (ops.start_ns[mine][order], ops.end_ns[mine][order], mine[order])
    for i, r in enumerate(rows.tolist()):
        starts, ends, ids = by_thread[int(ops.tid[r])]
        s, e = int(ops.start_ns[r]), int(ops.end_ns[r])
        lo, hi = np.searchsorted(starts, s, "left"), np.searchsorted(starts, e, "left")
        best, cursor = (s, s), s
        for a, b, row in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist(), ids[lo:hi].tolist()):
            if row == r or b > e:
                continue
            if a - cursor > best[1] - best[0]:
                best = (cursor, a)
            cursor = max(cursor, b)
        if e - cursor >= best[1] - best[0]:
            best = (cursor, e)
        if best[1] > best[0]:
            enter[i], exit_[i] = best
    return enter, exit_


def kernel_class(range_name: str) -> int:
    """The kernel class (``KERNEL_CLASSES`` index) a range without work args launches: fixed by its name."""
    return zlib.crc32(str(range_name).encode()) % len(KERNEL_CLASSES)


def from_ranges(ext: np.ndarray, tid: np.ndarray, enter: np.ndarray, exit_: np.ndarray, names: list,
                args: list, vendor: str = "xpu") -> Launches:
    """The launches of innermost ranges (already the leaves): named after each range, their work from the
    range's args when it gives ``flops``/``bytes``, else from the kernel class its name picks."""
    n = len(ext)
    cls = np.array([kernel_class(nm) for nm in names], np.int64) if n else np.zeros(0, np.int64)
    base = np.array([k[1] for k in KERNEL_CLASSES], np.float64)[cls]
    grid = np.array([k[2] for k in KERNEL_CLASSES], np.int64)[cls]
    nbytes = np.array([k[3] for k in KERNEL_CLASSES], np.float64)[cls]
    comm = np.array([collectives.is_collective(str(nm)) for nm in names], bool)
    dur = base.copy()
    out_names = []
    for i, (nm, a) in enumerate(zip(names, args)):
        a = a if isinstance(a, dict) else {}
        f, b = a.get("flops"), a.get("bytes")
        given = [isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in (f, b)]
        if any(given):
            fl = float(f) if given[0] else 0.0
            by = float(b) if given[1] else 0.0
            dur[i] = work_ns(np.float64(fl), np.float64(by))
            nbytes[i] = by
            grid[i] = max(1, int(max(fl, by / 4) // (BLOCK_THREADS * 64)) or 1)
        if comm[i]:
            tensors = _tensors(a)  # torch's gloo:/nccl: ranges carry the collective's tensors
            if tensors and not given[1]:
                nbytes[i] = sum(_numel(s) * _ELEMENT_BYTES.get(k, 4) for s, k in tensors)
            dur[i] = comm_work_ns(nbytes[i])
            out_names.append(_comm_name(str(nm), a, vendor))
        else:
            out_names.append(f"sim_{nm}")
    return Launches(np.asarray(ext, np.int64), np.asarray(tid, np.int64), np.asarray(enter, np.int64),
                    np.asarray(exit_, np.int64), out_names, dur.astype(np.int64), grid, nbytes.astype(np.int64), comm,
                    True).sorted()
