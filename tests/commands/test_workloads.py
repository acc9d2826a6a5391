import importlib.util
import sys

import numpy as np
import pytest

from xpuprof.workloads import WorkloadError, make_builtin, make_callable, make_script


def test_numpy_gemm_computes_the_product():
    wl = make_builtin("gemm", "numpy", "cpu", {"n": 16, "dtype": "float64", "seed": 3})
    c = wl.step()
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    np.testing.assert_allclose(c, a @ b)
    assert wl.info["flops"] == 2 * 16 ** 3 and wl.device == "cpu"


def test_numpy_elementwise_computes_sin_axpy():
    wl = make_builtin("elementwise", "numpy", "auto", {"size": 100, "dtype": "float64", "alpha": 3.0, "seed": 1})
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    np.testing.assert_allclose(wl.step(), np.sin(x) * 3.0 + y)


def test_numpy_rejects_accelerator_devices_and_bfloat16():
    with pytest.raises(WorkloadError, match="host CPU only; device 'xpu' is not valid"):
        make_builtin("gemm", "numpy", "xpu", {})
    with pytest.raises(WorkloadError, match="numpy has no bfloat16"):
        make_builtin("gemm", "numpy", "cpu", {"dtype": "bfloat16"})


@pytest.mark.parametrize("library", ["torch", "dpnp"])
def test_missing_library_is_a_clear_error(library):
    if importlib.util.find_spec(library) is not None:
        pytest.skip(f"{library} is installed here; the missing-library path cannot be exercised")
    with pytest.raises(WorkloadError, match=f"needs the '{library}' package, which cannot be imported here.*install it"):
        make_builtin("gemm", library, "auto", {"n": 8})


@pytest.mark.slow  # imports torch
def test_torch_gemm_runs_when_installed():
    torch = pytest.importorskip("torch")
    wl = make_builtin("gemm", "torch", "cpu", {"n": 8, "dtype": "float32"})
    out = wl.step()
    wl.sync()
    assert out.shape == (8, 8) and wl.device == "cpu" and torch.isfinite(out).all()


def test_unknown_builtin_and_parameter():
    with pytest.raises(WorkloadError, match="unknown built-in workload 'conv'"):
        make_builtin("conv", "numpy", "cpu", {})
    with pytest.raises(WorkloadError, match="has no parameter"):
        make_builtin("gemm", "numpy", "cpu", {"size": 3})


def test_callable_and_factory_workloads(tmp_path):
    (tmp_path / "userwork.py").write_text(
        "calls = []\n"
        "def step(k):\n    calls.append(k)\n"
        "def make(k):\n    state = []\n    return (lambda: state.append(k)), (lambda: calls.append('sync'))\n")
    wl = make_callable("userwork:step", {"k": 5}, base_dir=tmp_path)
    wl.step()
    mod = sys.modules["userwork"]
    assert mod.calls == [5]
    fac = make_callable("userwork:make", {"k": 1}, factory=True, base_dir=tmp_path)
    fac.step()
    fac.sync()
    assert mod.calls == [5, "sync"]
    with pytest.raises(WorkloadError, match="has no attribute 'nope'; callables there: make, step"):
        make_callable("userwork:nope", {}, base_dir=tmp_path)
    with pytest.raises(WorkloadError, match="cannot import module 'no_such_module_xyz'"):
        make_callable("no_such_module_xyz:f", {})


def test_script_workload_gets_argv_and_reports_failure(tmp_path):
    out = tmp_path / "out.txt"
    script = tmp_path / "s.py"
    script.write_text("import sys\nopen(sys.argv[2], 'a').write(sys.argv[1])\nif sys.argv[1] == 'bad': sys.exit(3)\n")
    make_script(script, ["ok", str(out)]).step()
    assert out.read_text() == "ok"
    with pytest.raises(WorkloadError, match="exited with status 3"):
        make_script(script, ["bad", str(out)]).step()
    with pytest.raises(WorkloadError, match="does not exist"):
        make_script(tmp_path / "none.py", [])


@pytest.mark.parametrize("size, dtype", [(65536, "float32"), (1000, "float64"), (1, "float32")])
def test_elementwise_arrays_sit_at_distinct_page_offsets(size, dtype):
    """The numpy elementwise workload's arrays are carved from one buffer a third of a page apart: allocated
    one by one, 256 KiB arrays were mapped pages at one page offset, and a loop reading one while storing to
    another ran ~1.5x slower in some runs (4 KiB aliasing; the gate's host history read it as a regression)."""
    from xpuprof.workloads import numpy_ops

    arrays = numpy_ops._staggered(np, 3, size, np.dtype(dtype))
    offsets = sorted(a.ctypes.data % numpy_ops.PAGE_BYTES for a in arrays)
    assert len(set(offsets)) == 3 and offsets[0] == 0
    assert all(b - a >= numpy_ops.PAGE_BYTES // 3 - 8 for a, b in zip(offsets, offsets[1:]))
    assert all(a.shape == (size,) and a.dtype == np.dtype(dtype) for a in arrays)
    starts = sorted(a.ctypes.data for a in arrays)
    assert all(b - a >= size * np.dtype(dtype).itemsize for a, b in zip(starts, starts[1:]))  # no overlap
    wl = numpy_ops.elementwise(np, "cpu", size=size, dtype=dtype, alpha=2.0, seed=0)
    rng = np.random.default_rng(0)  # the same inputs as before the arrays were carved
    x = rng.standard_normal(size).astype(dtype)
    y = rng.standard_normal(size).astype(dtype)
    np.testing.assert_allclose(wl.step(), np.sin(x) * np.dtype(dtype).type(2.0) + y, rtol=1e-5, atol=1e-6)
