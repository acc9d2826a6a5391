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
