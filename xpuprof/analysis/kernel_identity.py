"""A kernel's identity across problem sizes: its name without parameters (the *base*) plus its parameters.

Two spellings carry parameters in a name:
- trailing ``key=value`` words, as ``xpuprof run``'s built-ins name their work (``sim_gemm[numpy] n=128
  float32``: base ``sim_gemm[numpy]``, parameters ``n=128``, ``dtype=float32``). A dtype word or a number
  beside them is a parameter too (a dtype word named ``dtype``, a number a positional ``#i``); any other
  word there is prose and the name is not split, nor is a name without a ``key=value`` word
  (``Memcpy H2D (Host -> Device)``);
- C++/SYCL template arguments (``gemm_kernel<float, 128, 64>(float*)``: base ``gemm_kernel<…>(float*)``,
  parameters ``t0=float``, ``t1=128``, ``t2=64``): every top-level ``<…>`` list before the signature's
  ``(``, in order (the signature's types stay in the base).
  Operators whose name holds ``<`` (``operator<``, ``operator<<``) and mangled names are left whole.

``pair`` matches two sets of names for ``diff``: equal names first ("name"); then, for a base that names
exactly one kernel on each side, the two as one kernel whose parameters changed ("params"). A base that
names more than one kernel on either side (templated instantiations, two problem sizes) cannot say which
became which: its unpaired kernels are not matched and the pairing says so ("ambiguous"). ``gate``
compares equal names (equal base and parameters) only and lists the rest as new, or as unmatched when
the history holds the same base with other parameters (``unmatched_note``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# dtype words that name a parameter by what they are (a trailing positional word otherwise gets "#i")
DTYPE_WORDS = frozenset("""
    float16 float32 float64 bfloat16 half float double fp16 fp32 fp64 bf16 tf32 fp8 float8 e4m3 e5m2
    int4 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool complex64 complex128
""".split())
_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\-]*)=(\S+)$")
_OPERATOR_LT = re.compile(r"operator\s*<<?=?(?![^(]*>)")
TEMPLATE_MARK = "<…>"


@dataclass(frozen=True)
class KernelIdentity:
    """``name`` as written; ``base`` without its parameters; ``params`` ((key, value), ...) in name order."""

    name: str
    base: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def has_params(self) -> bool:
        return bool(self.params)

    def params_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params)

    def to_dict(self) -> dict:
        return {"base": self.base, "params": dict(self.params)}


def identity(name: str) -> KernelIdentity:
    """The identity of one kernel (or range) name; a name without parameters is its own base."""
    name = str(name)
    words = name.split(" ")
    if len(words) > 1 and any(_KEY_VALUE.match(w) for w in words[1:]):
        return _split_words(name, words)
    if "<" in name and ">" in name and not name.startswith("_Z"):
        got = _split_templates(name)
        if got is not None:
            return got
    return KernelIdentity(name, name)


def _split_words(name: str, words: list[str]) -> KernelIdentity:
    """Trailing words that are parameters: ``key=value`` ones, and plain words among them (after the
    first ``key=value``, or right after the base when a ``key=value`` follows)."""
    first = next(i for i, w in enumerate(words) if i > 0 and _KEY_VALUE.match(w))
    start = first
    while start > 1 and _plain_param(words[start - 1]):  # "gemm float32 n=128": float32 is a parameter too
        start -= 1
    if not all(_KEY_VALUE.match(w) or _plain_param(w) for w in words[first:]):
        return KernelIdentity(name, name)  # prose after a key=value word: not a parameter list
    params: list[tuple[str, str]] = []
    for i, w in enumerate(words[start:]):
        m = _KEY_VALUE.match(w)
        if m:
            params.append((m.group(1), m.group(2)))
        elif w.lower() in DTYPE_WORDS and not any(k == "dtype" for k, _ in params):
            params.append(("dtype", w))
        else:
            params.append((f"#{i}", w))
    base = " ".join(words[:start])
    if not base:
        return KernelIdentity(name, name)
    return KernelIdentity(name, base, tuple(params))


def _plain_param(word: str) -> bool:
    return bool(word) and (word.lower() in DTYPE_WORDS or re.fullmatch(r"[0-9][0-9xX.:]*", word) is not None)


def _split_templates(name: str) -> KernelIdentity | None:
    """Every top-level ``<…>`` argument list becomes parameters t0, t1, ...; None when the brackets do
    not balance (a comparison operator, a truncated name)."""
    if _OPERATOR_LT.search(name):
        return None
    out, params, depth, start, args_start = [], [], 0, 0, 0
    for i, ch in enumerate(name):
        if ch == "(" and depth == 0:
            break  # the signature's types after the name are not parameters of the instantiation
        if ch == "<":
            if depth == 0:
                out.append(name[start:i])
                args_start = i + 1
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                params.extend(_top_level_args(name[args_start:i]))
                out.append(TEMPLATE_MARK)
                start = i + 1
        elif ch == ">":
            return None
    if depth != 0 or not params:
        return None
    out.append(name[start:])
    return KernelIdentity(name, "".join(out), tuple((f"t{i}", a) for i, a in enumerate(params)))


def _top_level_args(text: str) -> list[str]:
    args, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    args.append(text[start:].strip())
    return [a for a in args if a]


def changed_params(a: KernelIdentity, b: KernelIdentity) -> list[tuple[str, str | None, str | None]]:
    """(key, value in a, value in b) for each parameter that differs (None: absent on that side)."""
    da, db = dict(a.params), dict(b.params)
    return [(k, da.get(k), db.get(k)) for k in dict.fromkeys([*da, *db]) if da.get(k) != db.get(k)]


def describe_change(a: KernelIdentity, b: KernelIdentity) -> str:
    """'n 128 -> 512' (each changed parameter), for the pairing's note."""
    parts = []
    for k, va, vb in changed_params(a, b):
        key = "" if k.startswith("#") else f"{k} "
        parts.append(f"{key}{va if va is not None else '(none)'} -> {vb if vb is not None else '(none)'}")
    return ", ".join(parts)


@dataclass(frozen=True)
class Pair:
    """One row of a pairing: ``a``/``b`` names (None on the side that lacks it) and how they matched:
    "name" (equal names), "params" (one kernel whose parameters changed: ``note`` says which), "ambiguous"
    (its base names several kernels, so it is not paired: ``note`` names them), or "" (only on one side)."""

    a: str | None
    b: str | None
    how: str
    note: str = ""


def pair(names_a, names_b) -> list[Pair]:
    """Match two runs' kernel names by identity (module docstring), in A's order, then B's leftovers."""
    a_list, b_list = list(dict.fromkeys(names_a)), list(dict.fromkeys(names_b))
    b_set = set(b_list)
    ids_a = {n: identity(n) for n in a_list}
    ids_b = {n: identity(n) for n in b_list}
    by_base_a: dict[str, list[str]] = {}
    by_base_b: dict[str, list[str]] = {}
    for n, i in ids_a.items():
        by_base_a.setdefault(i.base, []).append(n)
    for n, i in ids_b.items():
        by_base_b.setdefault(i.base, []).append(n)

    paired_b: set[str] = set()
    out: list[Pair] = []
    for n in a_list:
        if n in b_set:
            out.append(Pair(n, n, "name"))
            paired_b.add(n)
            continue
        base = ids_a[n].base
        sa, sb = by_base_a.get(base, []), by_base_b.get(base, [])
        if len(sa) == 1 and len(sb) == 1:  # the one kernel of this base on each side: its parameters changed
            out.append(Pair(n, sb[0], "params", describe_change(ids_a[n], ids_b[sb[0]])))
            paired_b.add(sb[0])
        elif any(m not in a_list for m in sb):
            out.append(Pair(n, None, "ambiguous", _ambiguity(base, sa, sb)))
        else:
            out.append(Pair(n, None, ""))
    for n in b_list:
        if n in paired_b:
            continue
        base = ids_b[n].base
        sa, sb = by_base_a.get(base, []), by_base_b.get(base, [])
        if any(m not in b_set for m in sa):
            out.append(Pair(None, n, "ambiguous", _ambiguity(base, sa, sb)))
        else:
            out.append(Pair(None, n, ""))
    return out


def _ambiguity(base: str, sa: list[str], sb: list[str]) -> str:
    def params(names):
        return "; ".join(identity(n).params_text() or n for n in names)

    return (f"{base}: {len(sa)} kernel(s) in A ({params(sa)}) and {len(sb)} in B ({params(sb)}) differ only in "
            "parameters; which became which cannot be told, so they are not paired")


def unmatched_note(name: str, known) -> str:
    """Why a kernel of a new run has nothing to be compared with: "new" (its base is unknown), or the
    parameters the known names of its base have ("history has n=128 dtype=float32")."""
    mine = identity(name)
    others = [identity(k) for k in dict.fromkeys(known) if k != name]
    same_base = [o for o in others if o.base == mine.base]
    if not same_base:
        return "new: no history of this kernel"
    shown = "; ".join(o.params_text() or o.name for o in same_base[:4])
    more = f" and {len(same_base) - 4} more" if len(same_base) > 4 else ""
    return f"unmatched: no history with these parameters ({mine.params_text() or name}); history has {shown}{more}"
