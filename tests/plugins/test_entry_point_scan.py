"""The plain scan that spares ``importlib.metadata`` when no installed distribution declares a group:
it may only ever answer "not declared" when importlib.metadata would find nothing either."""
from __future__ import annotations

import sys
import zipfile
from importlib.metadata import entry_points

from xpuprof.plugins.entry_points import group_may_be_declared, load_group

GROUP = "xpuprof.testgroup"


def _dist(root, name, entry_points_text=None):
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points_text is not None:
        (info / "entry_points.txt").write_text(entry_points_text)


def test_undeclared_group_is_decided_without_importlib_metadata(tmp_path, monkeypatch):
    _dist(tmp_path, "plain")
    _dist(tmp_path, "other", "[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "absent")])
    assert not group_may_be_declared(GROUP)
    assert list(entry_points(group=GROUP)) == []  # what the full lookup says too
    assert load_group(GROUP, lambda cls, origin: None) == []


def test_a_declaring_distribution_is_seen_and_loaded_by_the_full_lookup(tmp_path, monkeypatch):
    (tmp_path / "groupmod.py").write_text("class Thing:\n    name = 'thing'\n")
    _dist(tmp_path, "declarer", f"[{GROUP}]\nthing = groupmod:Thing\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delitem(sys.modules, "groupmod", raising=False)
    assert group_may_be_declared(GROUP)
    got = []
    assert load_group(GROUP, lambda cls, origin: got.append((cls.name, origin))) == ["thing"]
    assert got == [("thing", "entry point thing = groupmod:Thing from declarer 1.0")]


def test_places_the_scan_cannot_read_send_it_to_the_full_lookup(tmp_path, monkeypatch):
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    assert group_may_be_declared(GROUP)
    (tmp_path / "eggs").mkdir()
    (tmp_path / "eggs" / "old-1.0-py3.11.egg").mkdir()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "eggs")])
    assert group_may_be_declared(GROUP)

    class ListsDistributions:
        @staticmethod
        def find_distributions(context=None):
            return iter(())

    monkeypatch.setattr(sys, "path", [])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, ListsDistributions])
    assert group_may_be_declared(GROUP)
