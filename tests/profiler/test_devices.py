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
    assert "sim" in out and "available" in out


def _lines(capsys, argv, monkeypatch, columns=80):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_devices_fits_80_columns_one_line_per_row(capsys, monkeypatch):
    lines = _lines(capsys, ["devices"], monkeypatch)
    rows = json.loads((main(["devices", "--json"]), capsys.readouterr().out)[1])
    assert max(map(len, lines)) <= 80
    assert len(lines) <= len(rows) + 8  # a header per section, a blank line between, one hint
    names = {r["backend"].removeprefix("collector ") for r in rows}
    for name in names:
        assert sum(line.split(" ", 1)[0] == name for line in lines) >= 1, name
    assert any("--details" in line for line in lines)


def test_devices_details_say_every_reason_in_full(capsys, monkeypatch):
    rows = json.loads((main(["devices", "--json"]), capsys.readouterr().out)[1])
    text = " ".join(line.strip() for line in _lines(capsys, ["devices", "--details"], monkeypatch))
    assert max(map(len, _lines(capsys, ["devices", "--details"], monkeypatch))) <= 80
    for r in rows:
        assert " ".join(r["reason"].split()) in text, r["reason"]
