"""Kernel identity: a name without its parameters plus the parameters; diff pairs one kernel whose
parameters changed, and says (without pairing) when several kernels of one base make a pairing a guess."""
from __future__ import annotations

import pytest

from xpuprof.analysis.kernel_identity import identity, pair, unmatched_note


@pytest.mark.parametrize(("name", "base", "params"), [
    ("sim_gemm[numpy] n=128 float32", "sim_gemm[numpy]", (("n", "128"), ("dtype", "float32"))),
    ("elementwise[numpy] size=65536 float64", "elementwise[numpy]", (("size", "65536"), ("dtype", "float64"))),
    ("gemm float32 n=3", "gemm", (("dtype", "float32"), ("n", "3"))),
    ("void gemm_kernel<float, 128, 64>(float*, int)", "void gemm_kernel<…>(float*, int)",
     (("t0", "float"), ("t1", "128"), ("t2", "64"))),
    ("k<std::array<char*, 3>, 4>(int)", "k<…>(int)", (("t0", "std::array<char*, 3>"), ("t1", "4"))),
])
def test_names_split_into_base_and_parameters(name, base, params):
    got = identity(name)
    assert (got.name, got.base, got.params) == (name, base, params)


@pytest.mark.parametrize("name", [
    "Memcpy H2D (Host (Driver Allocated) -> Device)", "ProfilerStep#*", "sim_addmm", "operator<<", "operator<",
    "a n=1 then some prose", "_ZTSN4sycl3_V16detail19__pf_kernel_wrapperIZ4mainE3fooEE", "f<int(", "x > y",
    "ncclKernel_AllReduce_RING_LL_Sum_float", "", "void f(std::vector<int>)",
])
def test_names_without_parameters_are_their_own_base(name):
    got = identity(name)
    assert got.base == name and got.params == ()


def test_one_kernel_per_base_pairs_across_sizes_and_says_what_changed():
    (gemm, copy) = pair(["sim_gemm[numpy] n=128 float32", "Memcpy H2D"], ["sim_gemm[numpy] n=512 float32", "Memcpy H2D"])
    assert (gemm.a, gemm.b, gemm.how) == ("sim_gemm[numpy] n=128 float32", "sim_gemm[numpy] n=512 float32", "params")
    assert gemm.note == "n 128 -> 512"
    assert (copy.a, copy.b, copy.how) == ("Memcpy H2D", "Memcpy H2D", "name")


def test_templated_instantiations_differing_only_in_parameters_are_not_paired_and_said():
    rows = pair(["k<float, 128>", "k<float, 64>"], ["k<float, 256>"])
    assert [(r.a, r.b, r.how) for r in rows] == [("k<float, 128>", None, "ambiguous"), ("k<float, 64>", None, "ambiguous"),
                                                 (None, "k<float, 256>", "ambiguous")]
    assert "2 kernel(s) in A" in rows[0].note and "not paired" in rows[0].note
    # an exact match stays a match; the others of that base are still a guess
    rows = pair(["k<float, 128>", "k<float, 64>"], ["k<float, 128>", "k<float, 32>"])
    assert [(r.a, r.b, r.how) for r in rows] == [("k<float, 128>", "k<float, 128>", "name"),
                                                 ("k<float, 64>", None, "ambiguous"), (None, "k<float, 32>", "ambiguous")]


def test_kernels_on_one_side_only_are_plain_adds_and_removes():
    rows = pair(["a", "b"], ["b", "c"])
    assert [(r.a, r.b, r.how) for r in rows] == [("a", None, ""), ("b", "b", "name"), (None, "c", "")]


def test_unmatched_note_names_the_parameters_the_history_has():
    assert unmatched_note("g n=512", ["g n=128", "other"]) == \
        "unmatched: no history with these parameters (n=512); history has n=128"
    assert unmatched_note("brand_new", ["g n=128"]).startswith("new:")
