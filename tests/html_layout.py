"""The layout check of the HTML pages' charts in a real browser (headless Chromium), at a given window width.

A copy of the page gets a script that runs after it loaded and writes what it found into the DOM, which
Chromium's ``--dump-dom`` prints (``--virtual-time-budget`` lets the drawing finish first). Per chart
(``svg.chart``) it checks, and names the chart and the text in each problem:

- the chart has a size, lies inside the page's width, and overlaps no other chart;
- no text box leaves its chart, and no two text boxes of a chart overlap;
- the chart draws pixels that are not text, axes, grid lines or legend swatches (its marks: the chart
  is drawn without those onto a canvas and the painted pixels are counted);
- the page does not scroll sideways (wide tables scroll in their own box).

``check_page(path, width)`` gives (problems, facts); ``assert_layout(path)`` checks both widths."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

WIDTHS = (1000, 1600)
TOLERANCE_PX = 0.5
MIN_MARK_PIXELS = 20

_CHECK = r"""
(function(){
var tol=%(tol)s, minPixels=%(min_pixels)s;
function name(el){return el.id?('#'+el.id):(el.getAttribute('aria-label')||el.tagName);}
function label(t){var s='';t.childNodes.forEach(function(n){if(n.nodeType===3)s+=n.textContent;});return s;}
function r(b){return {x:Math.round(b.left*10)/10,y:Math.round(b.top*10)/10,w:Math.round(b.width*10)/10,h:Math.round(b.height*10)/10};}
function overlap(a,b){return a.left<b.right-tol&&b.left<a.right-tol&&a.top<b.bottom-tol&&b.top<a.bottom-tol;}
function run(){
  var problems=[], charts=[], pending=0, done=false;
  var doc=document.documentElement, pageW=doc.clientWidth;
  if(doc.scrollWidth>pageW+1)problems.push('the page scrolls sideways: '+doc.scrollWidth+' px wide in a '+pageW+' px window');
  var svgs=Array.prototype.slice.call(document.querySelectorAll('svg.chart'));
  var ids={};
  svgs.forEach(function(svg){var n=name(svg);if(ids[n])problems.push('two charts are named '+n);ids[n]=1;});
  var boxes=svgs.map(function(svg){return svg.getBoundingClientRect();});
  svgs.forEach(function(svg,i){
    var n=name(svg), box=boxes[i], fact={chart:n,box:r(box),texts:0,pixels:null};
    charts.push(fact);
    if(!(box.width>0&&box.height>0)){problems.push('chart '+n+' has no size');return;}
    if(box.left<-tol||box.right>pageW+tol)problems.push('chart '+n+' leaves the page: '+Math.round(box.left)+'..'+Math.round(box.right)+' px of '+pageW);
    for(var j=0;j<i;j++){if(overlap(box,boxes[j]))problems.push('chart '+n+' overlaps chart '+name(svgs[j]));}
    var texts=Array.prototype.slice.call(svg.querySelectorAll('text')).filter(function(t){return label(t).trim().length>0;});
    var tb=texts.map(function(t){return t.getBoundingClientRect();});
    fact.texts=texts.length;
    texts.forEach(function(t,a){
      var b=tb[a];
      if(b.left<box.left-tol||b.right>box.right+tol||b.top<box.top-tol||b.bottom>box.bottom+tol)
        problems.push('chart '+n+': text "'+label(t)+'" leaves its chart (text '+JSON.stringify(r(b))+', chart '+JSON.stringify(r(box))+')');
      for(var c=0;c<a;c++){if(overlap(b,tb[c]))problems.push('chart '+n+': text "'+label(t)+'" overlaps text "'+label(texts[c])+'"');}
    });
    var clone=svg.cloneNode(true);
    clone.querySelectorAll('text,title,.axis,.grid,.legend').forEach(function(e){e.remove();});
    var vb=svg.viewBox.baseVal, w=Math.max(1,Math.round(vb&&vb.width?vb.width:box.width)), h=Math.max(1,Math.round(vb&&vb.height?vb.height:box.height));
    clone.setAttribute('width',w);clone.setAttribute('height',h);
    var img=new Image();pending++;
    img.onload=function(){
      var cv=document.createElement('canvas');cv.width=w;cv.height=h;var cx=cv.getContext('2d');cx.drawImage(img,0,0);
      var d=cx.getImageData(0,0,w,h).data,k=0;for(var q=3;q<d.length;q+=4){if(d[q]>0)k++;}
      fact.pixels=k;if(k<minPixels)problems.push('chart '+n+' draws no marks ('+k+' pixels besides text, axes and grid)');
      if(--pending===0)finish();
    };
    img.onerror=function(){problems.push('chart '+n+' could not be drawn on a canvas');if(--pending===0)finish();};
    img.src='data:image/svg+xml;charset=utf-8,'+encodeURIComponent(new XMLSerializer().serializeToString(clone));
  });
  function finish(){
    if(done)return;done=true;
    var out=document.createElement('pre');out.id='xpuprof-layout-check';
    out.textContent=JSON.stringify({width:pageW,problems:problems,charts:charts});
    document.body.appendChild(out);
  }
  if(pending===0)finish();
}
if(document.readyState==='complete')run();else window.addEventListener('load',run);
})();
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless browser: install Debian's chromium (apt-get install -y chromium) to check the HTML")


def check_page(page: Path, width: int, *, workdir: Path | None = None) -> tuple[list[str], dict]:
    """(problems, facts) of ``page`` in a window ``width`` px wide (see the module docstring)."""
    page = Path(page).resolve()
    workdir = Path(workdir or page.parent).resolve()
    text = page.read_text(encoding="utf-8")
    script = "<script>" + _CHECK % {"tol": TOLERANCE_PX, "min_pixels": MIN_MARK_PIXELS} + "</script>"
    checked = workdir / f"{page.stem}.check{width}.html"
    checked.write_text(text.replace("</body>", script + "</body>") if "</body>" in text else text + script,
                       encoding="utf-8")
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={width},900", "--virtual-time-budget=20000", "--dump-dom", checked.as_uri()],
                          capture_output=True, text=True, timeout=240)
    found = re.search(r'<pre id="xpuprof-layout-check">(.*?)</pre>', proc.stdout, re.S)
    if not found:
        return [f"the check did not run in a {width} px window (chromium exit {proc.returncode}): "
                f"{proc.stderr[-1500:]}"], {}
    import html

    facts = json.loads(html.unescape(found.group(1)))
    return facts["problems"], facts


def assert_layout(page: Path, *, widths=WIDTHS, min_charts: int = 1) -> dict[int, dict]:
    """Every check passes at every width, with at least ``min_charts`` charts; the facts per width."""
    out, problems = {}, []
    for w in widths:
        found, facts = check_page(page, w)
        problems += [f"{page.name} at {w} px: {p}" for p in found]
        charts = facts.get("charts", [])
        if facts and len(charts) < min_charts:
            problems.append(f"{page.name} at {w} px: {len(charts)} charts, expected at least {min_charts}")
        out[w] = facts
    assert not problems, "\n".join(problems)
    return out
