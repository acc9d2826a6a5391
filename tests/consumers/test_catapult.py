"""Chrome's trace viewer importer (Catapult ``tr.importer.Import``), run for real on our traces: the
trace-viewer bundle PyPI's ``xprof`` wheel ships, loaded in headless chromium from a loopback server
this test starts and stops. Every trace imports with ZERO warnings, every event becomes a slice,
every ``ac2g`` flow is bound at both ends, and counter tracks arrive.

The bundle is not in git (2.8 MB, not ours): .ci/run downloads the wheel and sets
``XPUPROF_CATAPULT_JS``; locally, put it at the cache path below (the skip message says how).
"""
from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import defaultdict
from functools import partial
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

XPROF_WHEEL = "xprof==2.24.2"
BUNDLE_IN_WHEEL = "xprof/static/trace_viewer_index.js"
CACHE_PATH = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xpuprof" / "xprof-2.24.2" / \
    "trace_viewer_index.js"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=60000",
                  "--dump-dom"]

# The page runs the importer on each listed trace and writes what it found into <pre id="result">.
PAGE = """<!doctype html><html><head><meta charset="utf-8"></head><body><pre id="result">pending</pre>
<script src="trace_viewer_index.js"></script>
<script>
async function run() {
  const out = {};
  try {
    const names = await (await fetch("manifest.json")).json();
    for (const name of names) {
      const data = name.endsWith(".gz") ? await (await fetch(name)).arrayBuffer() : await (await fetch(name)).text();
      const m = new tr.Model();
      new tr.importer.Import(m, new tr.importer.ImportOptions()).importTraces([data]);
      let slices = 0;
      const counters = [];
      for (const p of Object.values(m.processes)) {
        for (const t of Object.values(p.threads)) slices += t.sliceGroup.slices.length;
        for (const c of Object.values(p.counters)) {
          counters.push({pid: String(p.pid), name: c.name, samples: c.series.reduce((n, s) => n + s.samples.length, 0)});
        }
      }
      out[name] = {warnings: m.importWarnings.map(w => w.type + ": " + w.message), slices, counters,
                   flows: m.flowEvents.length,
                   unbound: m.flowEvents.filter(f => !f.startSlice || !f.endSlice).map(f => f.id).slice(0, 5)};
    }
  } catch (e) { out.__error__ = String(e && e.stack || e); }
  document.getElementById("result").textContent = JSON.stringify(out);
}
window.addEventListener("load", run);
</script></body></html>
"""


def _bundle() -> Path:
    env = os.environ.get("XPUPROF_CATAPULT_JS")
    for path in ([Path(env)] if env else []) + [CACHE_PATH]:
        if path.is_file() and path.stat().st_size > 0:
            return path
    pytest.skip(f"Catapult's trace-viewer bundle is absent: neither XPUPROF_CATAPULT_JS ({env or 'unset'}) nor "
                f"{CACHE_PATH} is a file. Fetch it with: pip download --no-deps {XPROF_WHEEL} -d /tmp/xprof && "
                f"python -c \"import zipfile,glob; zipfile.ZipFile(glob.glob('/tmp/xprof/xprof-*.whl')[0])"
                f".extract('{BUNDLE_IN_WHEEL}', '/tmp/xprof')\" && mkdir -p {CACHE_PATH.parent} && "
                f"cp /tmp/xprof/{BUNDLE_IN_WHEEL} {CACHE_PATH}  (.ci/run does this)")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to run Catapult's importer")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


def run_importer(traces: dict[str, Path], workdir: Path) -> dict:
    """Serve the page, the bundle and ``traces`` from 127.0.0.1 and run the page in headless chromium."""
    browser, bundle = _chromium(), _bundle()
    site = workdir / "site"
    site.mkdir()
    (site / "index.html").write_text(PAGE)
    shutil.copyfile(bundle, site / "trace_viewer_index.js")
    for name, path in traces.items():
        shutil.copyfile(path, site / name)
    (site / "manifest.json").write_text(json.dumps(list(traces)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()  # the socket is already listening: the browser can connect at once
    try:
        done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}",
                               f"http://127.0.0.1:{server.server_address[1]}/index.html"],
                              capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    found = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium printed no result (exit {done.returncode}): {done.stderr[-2000:]}"
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    assert text != "pending", f"the importer page never finished: {done.stderr[-2000:]}"
    result = json.loads(text)
    assert "__error__" not in result, result["__error__"]
    return result


@pytest.fixture(scope="module")
def imported(sim_cuda, sim_hip, sim_xpu_metrics, sim_yaml_cuda, cuda_decoded, sim_two_ranks, tmp_path_factory):
    """Every trace of the tier, plus the merged view of the two ranks, through one browser run."""
    work = tmp_path_factory.mktemp("catapult")
    merged = work / "job.merged.json"
    r0, r1 = sim_two_ranks
    done = subprocess.run([sys.executable, "-m", "xpuprof", "merge", str(r0.path), str(r1.path), "-o", str(merged)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from consumer_traces import read_trace
    facts = {"sim_cuda.json": sim_cuda, "sim_hip.json": sim_hip, "sim_xpu_metrics.json": sim_xpu_metrics,
             "sim_yaml_cuda.json.gz": sim_yaml_cuda, "cuda_decoded.json": cuda_decoded,
             "rank0.json": r0, "rank1.json": r1, "job.merged.json": read_trace(merged)}
    return facts, run_importer({name: f.path for name, f in facts.items()}, work)


TRACES = ["sim_cuda.json", "sim_hip.json", "sim_xpu_metrics.json", "sim_yaml_cuda.json.gz", "cuda_decoded.json", "rank0.json", "rank1.json", "job.merged.json"]


@pytest.mark.parametrize("name", TRACES)
def test_imports_with_zero_warnings(imported, name):
    facts, result = imported
    assert result[name]["warnings"] == []


@pytest.mark.parametrize("name", TRACES)
def test_every_slice_and_flow_arrives_bound(imported, name):
    facts, result = imported
    f, r = facts[name], result[name]
    assert r["slices"] == len([e for e in f.events if e.get("ph") == "X"])
    starts = [e for e in f.flows if e["ph"] == "s"]
    assert r["flows"] == len(starts) > 0
    assert r["unbound"] == []


@pytest.mark.parametrize("name", ["sim_xpu_metrics.json", "sim_yaml_cuda.json.gz"])
def test_counter_tracks_arrive(imported, name):
    facts, result = imported
    f, r = facts[name], result[name]
    want = defaultdict(int)
    for e in f.counters:
        want[(str(e["pid"]), e["name"])] += len(e.get("args", {}))
    assert want, "the metrics trace holds no counter events"
    got = {(c["pid"], c["name"]): c["samples"] for c in r["counters"]}
    assert got == dict(want)
