import numpy as np
import pytest

from xpuprof import catalogs as c


def test_xpu_catalogs_load_with_sources():
    cats = {cat.family: cat for cat in c.load_catalogs("xpu")}
    assert {"pvc", "bmg", "lnl"} <= set(cats)
    for cat in cats.values():
        assert cat.single_group
        assert all(u.startswith("https://") for u in cat.sources.values())
        assert cat.path.read_text().splitlines()[0].startswith("#")
    assert cats["bmg"].groups["ComputeBasic"].metrics["GpuTime"].unit == "ns"
    assert cats["bmg"].groups["ComputeBasic"].metrics["XVE_STALL"].unit == "percent"
    assert "XVE_ACTIVE" in cats["pvc"].groups["ComputeBasic"].metrics


def test_find_catalog_by_family_alias_and_device_name():
    assert c.find_catalog("bmg").family == "bmg"
    assert c.find_catalog("ponte-vecchio").family == "pvc"
    assert c.find_catalog("Intel(R) Data Center GPU Max 1550").family == "pvc"
    assert c.find_catalog("Intel(R) Arc(TM) B580 Graphics", vendor="xpu").family == "bmg"
    with pytest.raises(c.CatalogError, match="unknown device family 'bmgg'.*did you mean bmg"):
        c.find_catalog("bmgg", vendor="xpu")


def test_valid_selection_returns_group_and_accepts_unit_spellings():
    cat = c.find_catalog("bmg")
    group, names = c.validate_against_catalog(["GpuTime", "XVE_ACTIVE::percent", "XVE_STALL[percent]"], cat)
    assert group == "ComputeBasic"
    assert names == ["GpuTime", "XVE_ACTIVE", "XVE_STALL"]


def test_unknown_names_one_error_with_close_matches_and_groups():
    cat = c.find_catalog("bmg")
    with pytest.raises(c.MetricSelectionError) as err:
        c.validate_against_catalog(["GpuTim", "xve_active", "Zzzqq"], cat)
    msg = str(err.value)
    assert "'GpuTim': did you mean GpuTime (group ComputeBasic)" in msg
    assert "'xve_active': did you mean XVE_ACTIVE (group ComputeBasic)" in msg
    assert "'Zzzqq': no similar metric" in msg


def test_mixed_groups_error_names_each_group():
    cat = c.find_catalog("pvc")
    with pytest.raises(c.MetricSelectionError) as err:
        c.validate_against_catalog(["XVE_ACTIVE", "Counter5"], cat)
    msg = str(err.value)
    assert "different metric groups" in msg and "XVE_ACTIVE: ComputeBasic" in msg and "Counter5: TestOa" in msg


def test_derived_metric_formula_evaluates():
    d = c.find_catalog("bmg").derived["L3HitRatePercent"]
    out = d.evaluate({"L3_HIT": np.array([3.0, 1.0]), "L3_MISS": np.array([1.0, 1.0])})
    assert out.tolist() == [75.0, 50.0]


def _write(tmp_path, vendor, family, text):
    d = tmp_path / vendor
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{family}.yaml").write_text(text)


GOOD = """schema_version: 1
vendor: rocm
family: mi300
display_name: Test
single_group: false
sources: [{id: s, url: "https://example.org/doc"}]
groups:
  A: {description: a, metrics: {X: {unit: "", description: x}, Y: {unit: ns, description: y}}}
  B: {description: b, metrics: {Z: {unit: "", description: z}}}
derived:
  XY: {group: A, formula: "X / Y", unit: "", description: r, source: s}
"""


def test_any_vendor_dir_from_env(tmp_path, monkeypatch):
    _write(tmp_path, "rocm", "mi300", GOOD)
    monkeypatch.setenv(c.ENV_DIR, str(tmp_path))
    (cat,) = c.load_catalogs("rocm")
    assert cat.vendor == "rocm" and list(cat.groups) == ["A", "B"]
    # not single_group: names from several groups are allowed
    assert c.validate_against_catalog(["X", "Z"], cat) == (None, ["X", "Z"])
    with pytest.raises(c.CatalogError, match="no metric catalogs for vendor 'cuda'"):
        c.load_catalogs("cuda")


@pytest.mark.parametrize("bad,match", [
    (GOOD.replace("family: mi300", "family: other"), "differs from the file stem"),
    (GOOD.replace("display_name: Test", "display_nam: Test"), "unknown key"),
    (GOOD.replace('formula: "X / Y"', 'formula: "__import__(1)"'), "not allowed"),
    (GOOD.replace('formula: "X / Y"', 'formula: "X / Z"'), "not metrics of group 'A'"),
    (GOOD.replace("{unit: ns, description: y}", "{description: y}"), "missing 'unit'"),
    (GOOD.replace('url: "https://example.org/doc"', "url: nowhere"), "http"),
    ("groups: [1", "not valid YAML"),
])
def test_bad_catalogs_name_file_and_key(tmp_path, bad, match):
    _write(tmp_path, "rocm", "mi300", bad)
    with pytest.raises(c.CatalogError, match=match) as err:
        c.load_catalog(tmp_path / "rocm" / "mi300.yaml")
    assert "mi300.yaml" in str(err.value)
