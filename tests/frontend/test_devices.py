import json

from xpuprof.cli import main


def test_devices_lists_every_backend(capsys):
    assert main(["devices", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"xpu", "cuda", "rocm", "sim"} <= set(rows)
    assert rows["sim"]["available"] is True and "only when named" in rows["sim"]["notes"][0]
    assert all(r["reason"] for r in rows.values())


def test_devices_table(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "sim" in out and "Available" in out
