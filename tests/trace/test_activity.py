"""ActivityType: canonical names, deprecated aliases, parsing, defaults, vendor category names."""
import pytest

from xpuprof.activity import ActivityType, category_name, default_activity_types, parse_activity_types

ALIASES = {
    "CUDA_RUNTIME": "RUNTIME", "MTIA_RUNTIME": "RUNTIME", "GLOW_RUNTIME": "RUNTIME", "HPU_OP": "RUNTIME",
    "XPU_RUNTIME": "RUNTIME", "PRIVATEUSE1_RUNTIME": "RUNTIME", "CUDA_DRIVER": "DRIVER", "XPU_DRIVER": "DRIVER",
    "PRIVATEUSE1_DRIVER": "DRIVER", "MTIA_CCP_EVENTS": "CONCURRENT_KERNEL", "MTIA_COUNTERS": "GPU_PM_COUNTER",
}


@pytest.mark.parametrize("alias,target", sorted(ALIASES.items()))
def test_aliases_are_the_same_member(alias, target):
    assert getattr(ActivityType, alias) is ActivityType[target]
    assert ActivityType[alias] is ActivityType[target]
    assert ActivityType.parse(alias.lower()) is ActivityType[target]
    assert ActivityType.parse(alias) is ActivityType[target]  # case-insensitive
    assert ActivityType(alias.lower()) is ActivityType[target]


def test_iteration_yields_canonical_members_only():
    names = [m.value for m in ActivityType]
    assert len(names) == len(set(names)) == 21
    assert "cuda_runtime" not in names and "runtime" in names and "kernel" in names


def test_parse_canonical_and_members():
    assert ActivityType.parse("cuda_runtime") is ActivityType.RUNTIME
    assert ActivityType.parse(" Kernel ") is ActivityType.CONCURRENT_KERNEL
    assert ActivityType.parse(ActivityType.XPU_SYNC) is ActivityType.XPU_SYNC
    assert str(ActivityType.GPU_PM_COUNTER) == "gpu_pm_counter"


def test_unknown_name_names_word_valid_names_and_closest():
    with pytest.raises(ValueError) as exc:
        ActivityType.parse("kernal")
    msg = str(exc.value)
    assert "'kernal'" in msg and "did you mean 'kernel'" in msg and "xpu_scope_profiler" in msg


def test_parse_rejects_non_strings():
    with pytest.raises(TypeError):
        ActivityType.parse(5)


def test_defaults_are_kinetos_15_types_without_counter_collection():
    d = default_activity_types()
    assert isinstance(d, frozenset) and len(d) == 15
    assert d is default_activity_types()
    assert ActivityType.RUNTIME in d and ActivityType.CUDA_EVENT in d
    # gpu_pm_counter switches counter collection on: only a metrics request adds it
    assert ActivityType.GPU_PM_COUNTER not in d
    assert ActivityType.XPU_SCOPE_PROFILER not in d and ActivityType.COLLECTIVE_COMM not in d


def test_parse_activity_types_lists_every_bad_word():
    assert parse_activity_types("kernel, cuda_runtime,,") == {ActivityType.CONCURRENT_KERNEL, ActivityType.RUNTIME}
    with pytest.raises(ValueError, match="'bad1'.*'bad2'"):
        parse_activity_types(["bad1", "kernel", "bad2"])


def test_category_names_generic_and_vendor():
    assert category_name(ActivityType.RUNTIME, "cuda") == "runtime"
    assert category_name(ActivityType.RUNTIME, "cuda", vendor_spelling=True) == "cuda_runtime"
    assert category_name(ActivityType.DRIVER, "xpu", vendor_spelling=True) == "xpu_driver"
    assert category_name("ac2g", vendor_spelling=True) == "ac2g"


def test_category_spellings_are_one_filter():
    from xpuprof.activity import category_spellings

    runtime = {"runtime", "cuda_runtime", "xpu_runtime", "mtia_runtime", "glow_runtime", "hpu_op",
               "privateuse1_runtime"}
    assert category_spellings("runtime") == category_spellings("CUDA_Runtime") == category_spellings("xpu_runtime") \
        == frozenset(runtime)
    assert category_spellings("driver") >= {"driver", "cuda_driver", "xpu_driver"}
    # hardware_counters is CUDA's vendor name for gpu_pm_counter and a type of its own: one filter
    assert category_spellings("hardware_counters") == category_spellings("gpu_pm_counter") >= \
        {"gpu_pm_counter", "hardware_counters", "mtia_counters"}
    assert category_spellings("kernel") == {"kernel", "mtia_ccp_events"}
    assert category_spellings("ac2g") == {"ac2g"}  # outside the activity model: itself only
