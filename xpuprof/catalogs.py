"""Metric catalogs: the YAML files under ``metrics/<vendor>/<family>.yaml`` (see metrics/SCHEMA.md).

Loaded for ``xpuprof metrics`` and to validate requested metric names offline, before any
driver is touched. Works for every vendor directory (xpu, cuda, rocm).
"""
from __future__ import annotations

import ast
import difflib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import yaml

ENV_DIR = "XPUPROF_METRICS_DIR"
SCHEMA_VERSION = 1
METRIC_TYPES = ("duration", "event", "event_with_range", "throughput", "timestamp", "flag", "ratio", "raw", "ip")
VALUE_TYPES = ("uint32", "uint64", "float32", "float64", "bool8", "string", "uint8", "uint16")
COLLECTION_KINDS = ("event_based", "time_based", "trace", "ip_sampling")
_TOP_KEYS = {"schema_version", "vendor", "family", "display_name", "aliases", "match", "single_group", "name_style",
             "sources", "notes", "groups", "derived"}
_GROUP_KEYS = {"description", "collection", "source", "complete", "metrics"}
_METRIC_KEYS = {"unit", "description", "type", "value_type", "source"}
_DERIVED_KEYS = {"group", "formula", "unit", "description", "source"}
_SELECTOR = re.compile(r"^\s*(?P<name>[^\[\]:]+?)\s*(?:\[(?P<ub>[^\]]*)\]|::(?P<uc>.*))?\s*$")


class CatalogError(ValueError):
    """A catalog file that breaks the schema (the message names the file and key path)."""


class MetricSelectionError(ValueError):
    """Requested metrics that are unknown or cannot be collected together."""


@dataclass(frozen=True)
class Metric:
    name: str
    group: str
    unit: str
    description: str
    type: str = ""
    value_type: str = ""
    source_url: str = ""


@dataclass(frozen=True)
class DerivedMetric:
    name: str
    group: str
    formula: str
    unit: str
    description: str
    source_url: str
    inputs: tuple[str, ...]

    def evaluate(self, values: Mapping[str, "float | object"]):
        """Evaluate on scalars or numpy arrays keyed by metric name (division by zero -> nan/inf)."""
        import numpy as np

        with np.errstate(divide="ignore", invalid="ignore"):
            return _eval(ast.parse(self.formula, mode="eval").body,
                         {k: np.asarray(values[k], dtype=np.float64) for k in self.inputs})


@dataclass(frozen=True)
class Group:
    name: str
    description: str
    metrics: dict[str, Metric]
    collection: tuple[str, ...] = ()
    complete: bool = True
    source_url: str = ""


@dataclass(frozen=True)
class Catalog:
    vendor: str
    family: str
    display_name: str
    path: Path
    groups: dict[str, Group]
    derived: dict[str, DerivedMetric] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    match: tuple[str, ...] = ()
    single_group: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""

    def groups_of(self, metric: str) -> list[str]:
        return [g.name for g in self.groups.values() if metric in g.metrics]

    def all_metric_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for g in self.groups.values():
            seen.update(dict.fromkeys(g.metrics))
        return list(seen)

    def matches_device(self, device_name: str) -> bool:
        low = device_name.lower()
        return any(m.lower() in low for m in self.match)

    def names(self) -> tuple[str, ...]:
        return (self.family, *self.aliases)

    @property
    def complete(self) -> bool:
        return all(g.complete for g in self.groups.values())


# ----------------------------------------------------------------------------- locating and loading
def metrics_dir() -> Path:
    """``$XPUPROF_METRICS_DIR``, else the repository's top-level ``metrics/`` next to the package
    (source checkouts, editable installs), else the copy a built package ships as ``catalog_data/``."""
    env = os.environ.get(ENV_DIR)
    if env:
        path = Path(env)
        if not path.is_dir():
            raise CatalogError(f"{ENV_DIR}={env!r} is not a directory")
        return path
    here = Path(__file__).resolve().parent
    checkout = here.parent / "metrics"
    return checkout if checkout.is_dir() else here / "catalog_data"


def vendors(root: Path | None = None) -> list[str]:
    root = root or metrics_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.yaml")))


def load_catalogs(vendor: str | None = None, root: Path | None = None) -> list[Catalog]:
    """Every catalog of one vendor (or of all vendors), sorted by vendor then family."""
    root = Path(root) if root else metrics_dir()
    if vendor is not None:
        vdir = root / vendor
        if not vdir.is_dir():
            raise CatalogError(f"no metric catalogs for vendor {vendor!r} under {root} "
                               f"(vendors with catalogs: {', '.join(vendors(root)) or 'none'})")
        return [_load_cached(str(p), p.stat().st_mtime_ns) for p in sorted(vdir.glob("*.yaml"))]
    return [c for v in vendors(root) for c in load_catalogs(v, root)]


def find_catalog(device: str, vendor: str | None = None, root: Path | None = None) -> Catalog:
    """A catalog by family name, alias, or a runtime device name it ``match``es."""
    cats = load_catalogs(vendor, root)
    key = device.strip().lower()
    for c in cats:
        if key in (n.lower() for n in c.names()):
            return c
    for c in cats:
        if c.matches_device(device):
            return c
    known = [n for c in cats for n in c.names()]
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    where = f"vendor {vendor!r}" if vendor else "any vendor"
    raise CatalogError(f"unknown device family {device!r} for {where}{hint} "
                       f"(known: {', '.join(c.family for c in cats) or 'none'})")


@lru_cache(maxsize=64)
def _load_cached(path: str, _mtime: int) -> Catalog:
    return load_catalog(Path(path))


def load_catalog(path: Path) -> Catalog:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"{path}: catalog file not found") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    return _parse(path, data)


# ----------------------------------------------------------------------------- schema checks
def _need(cond: bool, path: Path, where: str, msg: str) -> None:
    if not cond:
        raise CatalogError(f"{path}: {where}: {msg}")


def _str(v, path: Path, where: str, *, allow_empty: bool = False) -> str:
    _need(isinstance(v, str) and (allow_empty or v.strip() != ""), path, where,
          f"must be a {'string' if allow_empty else 'non-empty string'}, got {v!r}")
    return v


def _parse(path: Path, data) -> Catalog:
    _need(isinstance(data, dict), path, "top level", "must be a mapping")
    unknown = set(data) - _TOP_KEYS
    _need(not unknown, path, "top level", f"unknown key(s) {sorted(unknown)}; valid: {sorted(_TOP_KEYS)}")
    for key in ("schema_version", "vendor", "family", "display_name", "sources", "groups"):
        _need(key in data, path, "top level", f"missing required key {key!r}")
    _need(data["schema_version"] == SCHEMA_VERSION, path, "schema_version",
          f"must be {SCHEMA_VERSION}, got {data['schema_version']!r}")
    vendor = _str(data["vendor"], path, "vendor")
    family = _str(data["family"], path, "family")
    _need(vendor == path.parent.name, path, "vendor", f"{vendor!r} differs from the directory name {path.parent.name!r}")
    _need(family == path.stem, path, "family", f"{family!r} differs from the file stem {path.stem!r}")
    _need(re.fullmatch(r"[a-z0-9_-]+", family) is not None, path, "family", "use lowercase [a-z0-9_-] only")

    sources_raw = data["sources"]
    _need(isinstance(sources_raw, list) and sources_raw, path, "sources", "must be a non-empty list")
    sources: dict[str, str] = {}
    for i, s in enumerate(sources_raw):
        _need(isinstance(s, dict) and "id" in s and "url" in s, path, f"sources[{i}]", "needs 'id' and 'url'")
        sid = _str(s["id"], path, f"sources[{i}].id")
        url = _str(s["url"], path, f"sources[{i}].url")
        _need(url.startswith(("http://", "https://")), path, f"sources[{i}].url", "must be an http(s) URL")
        _need(sid not in sources, path, f"sources[{i}].id", f"duplicate id {sid!r}")
        sources[sid] = url
    default_src = next(iter(sources))

    def src(v, where: str, fallback: str) -> str:
        if v is None:
            return sources[fallback]
        _need(v in sources, path, where, f"unknown source {v!r}; valid: {sorted(sources)}")
        return sources[v]

    groups_raw = data["groups"]
    _need(isinstance(groups_raw, dict) and groups_raw, path, "groups", "must be a non-empty mapping")
    groups: dict[str, Group] = {}
    for gname, g in groups_raw.items():
        gw = f"groups.{gname}"
        _need(isinstance(g, dict), path, gw, "must be a mapping")
        unknown = set(g) - _GROUP_KEYS
        _need(not unknown, path, gw, f"unknown key(s) {sorted(unknown)}; valid: {sorted(_GROUP_KEYS)}")
        desc = _str(g.get("description"), path, f"{gw}.description")
        complete = g.get("complete", True)
        _need(isinstance(complete, bool), path, f"{gw}.complete", "must be true or false")
        collection = tuple(g.get("collection") or ())
        for k in collection:
            _need(k in COLLECTION_KINDS, path, f"{gw}.collection", f"{k!r} is not one of {COLLECTION_KINDS}")
        gsrc_id = g.get("source", default_src)
        gsrc = src(gsrc_id, f"{gw}.source", default_src)
        mraw = g.get("metrics")
        _need(isinstance(mraw, dict), path, f"{gw}.metrics", "must be a mapping")
        _need(bool(mraw) or not complete, path, f"{gw}.metrics", "is empty; mark the group 'complete: false' "
                                                                 "if its metrics are not transcribed")
        metrics: dict[str, Metric] = {}
        for mname, m in mraw.items():
            mw = f"{gw}.metrics.{mname}"
            _need(isinstance(m, dict), path, mw, "must be a mapping")
            unknown = set(m) - _METRIC_KEYS
            _need(not unknown, path, mw, f"unknown key(s) {sorted(unknown)}; valid: {sorted(_METRIC_KEYS)}")
            _need("unit" in m, path, mw, "missing 'unit' (use \"\" when unitless)")
            mtype = m.get("type", "")
            _need(mtype == "" or mtype in METRIC_TYPES, path, f"{mw}.type", f"{mtype!r} is not one of {METRIC_TYPES}")
            vtype = m.get("value_type", "")
            _need(vtype == "" or vtype in VALUE_TYPES, path, f"{mw}.value_type",
                  f"{vtype!r} is not one of {VALUE_TYPES}")
            metrics[str(mname)] = Metric(
                name=str(mname), group=str(gname), unit=_str(m["unit"], path, f"{mw}.unit", allow_empty=True),
                description=_str(m.get("description"), path, f"{mw}.description"), type=mtype, value_type=vtype,
                source_url=src(m.get("source"), f"{mw}.source", gsrc_id))
        groups[str(gname)] = Group(str(gname), desc, metrics, collection, complete, gsrc)

    derived: dict[str, DerivedMetric] = {}
    for dname, d in (data.get("derived") or {}).items():
        dw = f"derived.{dname}"
        _need(isinstance(d, dict), path, dw, "must be a mapping")
        unknown = set(d) - _DERIVED_KEYS
        _need(not unknown, path, dw, f"unknown key(s) {sorted(unknown)}; valid: {sorted(_DERIVED_KEYS)}")
        for key in _DERIVED_KEYS:
            _need(key in d, path, dw, f"missing required key {key!r}")
        group = d["group"]
        _need(group in groups, path, f"{dw}.group", f"unknown group {group!r}; valid: {sorted(groups)}")
        formula = _str(d["formula"], path, f"{dw}.formula")
        try:
            inputs = _formula_names(formula)
        except (SyntaxError, ValueError) as exc:
            raise CatalogError(f"{path}: {dw}.formula: {exc}") from None
        missing = [n for n in inputs if n not in groups[group].metrics]
        _need(not missing, path, f"{dw}.formula", f"uses {missing}, not metrics of group {group!r}")
        derived[str(dname)] = DerivedMetric(str(dname), group, formula, _str(d["unit"], path, f"{dw}.unit", allow_empty=True),
                                            _str(d["description"], path, f"{dw}.description"),
                                            src(d["source"], f"{dw}.source", default_src), tuple(inputs))

    return Catalog(vendor=vendor, family=family, display_name=_str(data["display_name"], path, "display_name"),
                   path=path, groups=groups, derived=derived, aliases=tuple(data.get("aliases") or ()),
                   match=tuple(data.get("match") or ()), single_group=bool(data.get("single_group", False)),
                   sources=sources, notes=str(data.get("notes") or "").strip())


# ----------------------------------------------------------------------------- derived formulas
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b}


def _formula_names(formula: str) -> list[str]:
    tree = ast.parse(formula, mode="eval")
    names: list[str] = []
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name):
            if node.id not in names:
                names.append(node.id)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _OPS:
                raise ValueError(f"operator {type(node.op).__name__} not allowed (only + - * /)")
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise ValueError(f"operator {type(node.op).__name__} not allowed")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise ValueError(f"constant {node.value!r} is not a number")
        elif not isinstance(node, (ast.operator, ast.unaryop, ast.Load)):
            raise ValueError(f"{type(node).__name__} not allowed (only + - * /, numbers and metric names)")
    return names


def _eval(node, env):
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    return _OPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))


# ----------------------------------------------------------------------------- selection / validation
def parse_selector(text: str) -> tuple[str, str | None]:
    """``GpuTime``, ``GpuTime::ns`` (Kineto) or ``GpuTime[ns]`` (unitrace) -> (name, unit or None)."""
    m = _SELECTOR.match(text or "")
    if not m or not m.group("name").strip():
        raise MetricSelectionError(f"malformed metric selector {text!r}; use NAME, NAME::UNIT or NAME[UNIT]")
    unit = m.group("ub") if m.group("ub") is not None else m.group("uc")
    return m.group("name").strip(), (unit.strip() if unit is not None else None)


def validate_selection(requested: Sequence[str], groups: Mapping[str, Iterable[str]], *, single_group: bool = True,
                       where: str = "", units: Mapping[tuple[str, str], str] | None = None,
                       complete: bool = True) -> tuple[str | None, list[str]]:
    """Check metric names against ``groups`` (group name -> metric names; a catalog or a device).

    Returns (the one group holding every name, or None when ``single_group`` is False and they
    span groups; the bare names in request order). Raises one ``MetricSelectionError`` listing
    every unknown name with close matches and their groups, or naming the groups of a mixed set.
    """
    if not requested:
        raise MetricSelectionError("no metrics requested")
    names: list[str] = []
    for sel in requested:
        name, _unit = parse_selector(sel)
        if name not in names:
            names.append(name)
    holders: dict[str, list[str]] = {n: [] for n in names}
    index: dict[str, list[str]] = {}
    for g, ms in groups.items():
        for m in ms:
            index.setdefault(m, []).append(g)
    for n in names:
        holders[n] = index.get(n, [])
    ctx = f" on {where}" if where else ""
    unknown = [n for n in names if not holders[n]]
    if unknown:
        lines = []
        for n in unknown:
            close = close_matches(n, index)
            if close:
                hint = "; ".join(f"{c} (group {', '.join(index[c])})" for c in close)
                lines.append(f"  {n!r}: did you mean {hint}?")
            else:
                lines.append(f"  {n!r}: no similar metric")
        tail = ("" if complete else "\n(the catalog is a partial transcription: the device may still have "
                "these; on hardware the device's own metric groups decide)")
        raise MetricSelectionError(f"unknown metric name(s){ctx} (names are case-sensitive):\n" + "\n".join(lines) + tail)
    common = set(holders[names[0]])
    for n in names[1:]:
        common &= set(holders[n])
    if common:
        order = [g for g in groups if g in common]
        return order[0], names
    if not single_group:
        return None, names
    detail = "\n".join(f"  {n}: {', '.join(holders[n])}" for n in names)
    raise MetricSelectionError(
        f"the requested metrics{ctx} come from different metric groups, but PTI collects one group at a time "
        f"(PTI_ERROR_METRICS_SCOPE_NOT_A_SINGLE_GROUP); no single group holds all of them:\n{detail}\n"
        f"pick metrics from one group (see `xpuprof metrics --group <G>`)")


def close_matches(name: str, index: Iterable[str]) -> list[str]:
    """Up to 4 names of ``index`` close to ``name``: the same name in another case first, then by spelling."""
    by_lower = {k.lower(): k for k in index}
    out: list[str] = []
    if name.lower() in by_lower:
        out.append(by_lower[name.lower()])
    for c in difflib.get_close_matches(name.lower(), list(by_lower), n=4, cutoff=0.6):
        if by_lower[c] not in out:
            out.append(by_lower[c])
    return out[:4]


def validate_against_catalog(requested: Sequence[str], catalog: Catalog) -> tuple[str | None, list[str]]:
    """Offline validation with a catalog (``single_group`` from the catalog)."""
    return validate_selection(requested, {g.name: g.metrics.keys() for g in catalog.groups.values()},
                              single_group=catalog.single_group,
                              where=f"{catalog.display_name} ({catalog.vendor}/{catalog.family} catalog)",
                              complete=catalog.complete)
