import orjson

from xpuprof.cli import main


def test_metrics_json_filters_device_and_group(capsys):
    assert main(["metrics", "--vendor", "xpu", "--device", "bmg", "--group", "ComputeBasic", "--format", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    names = {m["name"] for m in out["metrics"]}
    assert {"GpuTime", "XVE_ACTIVE", "XVE_STALL"} <= names
    assert {m["group"] for m in out["metrics"]} == {"ComputeBasic"}
    assert all(m["source"].startswith("https://") for m in out["metrics"])


def test_metrics_table_and_errors(capsys):
    assert main(["metrics", "--device", "pvc"]) == 0
    assert "XVE_ACTIVE" in capsys.readouterr().out
    assert main(["metrics", "--device", "pvc", "--group", "NoSuch"]) == 2
    assert "unknown metric group 'NoSuch'" in capsys.readouterr().err


def _lines(capsys, argv, monkeypatch, columns=80):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_metrics_summary_fits_80_columns(capsys, monkeypatch):
    from xpuprof import catalogs

    lines = _lines(capsys, ["metrics"], monkeypatch)
    assert max(map(len, lines)) <= 80 and len(lines) <= 40
    for cat in catalogs.load_catalogs():  # one line per catalog, with its counts
        (line,) = [l for l in lines if l.startswith(f"{cat.vendor}/{cat.family} ")]
        assert str(len(cat.all_metric_names())) in line.split()
    assert any(l.startswith("host ") for l in lines)


def test_one_device_lists_one_metric_per_line_and_details_in_full(capsys, monkeypatch):
    from xpuprof import catalogs

    cat = catalogs.find_catalog("bmg")
    lines = _lines(capsys, ["metrics", "--device", "bmg"], monkeypatch)
    assert max(map(len, lines)) <= 80
    names = cat.all_metric_names()
    rows = [l for l in lines if l.startswith("xpu/bmg ")]
    assert len(rows) == sum(len(g.metrics) for g in cat.groups.values()) + len(cat.derived)
    assert {n for n in names if any(f" {n} " in r for r in rows)} == set(names)  # names are never elided
    detail = " ".join(l.strip() for l in _lines(capsys, ["metrics", "--device", "bmg", "--details"], monkeypatch))
    for g in cat.groups.values():
        for m in g.metrics.values():
            assert " ".join(m.description.split()) in detail
