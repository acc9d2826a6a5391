"""The page every HTML output of xpuprof shares (report, analyze, diff, gate): its style and the small
script that records each chart's laid-out size (``data-rendered``) and any text outside it
(``data-clipped``) into the DOM, where a headless browser's ``--dump-dom`` shows them."""
from __future__ import annotations

import html

from .svg import FONT_PX

_CSS = f"""
body{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f}}
h1{{font-size:20px}}h2{{font-size:16px;margin-top:28px}}
table{{border-collapse:collapse;font-size:13px}}th,td{{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}}
th{{background:#f3f3f3}}td.name,th.name,td.text,th.text{{text-align:left;max-width:520px;overflow-wrap:anywhere}}
svg.chart{{display:block;max-width:100%;height:auto}}
.chart text{{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:{FONT_PX}px;fill:#333}}
.chart .axis{{fill:#666}}.meta{{color:#666;font-size:12px}}
.figures{{display:flex;flex-wrap:wrap;gap:12px 20px;align-items:flex-start}}
.scroll{{overflow-x:auto;max-width:100%}}
figure{{margin:0 0 12px 0;max-width:100%}}figcaption{{font-size:12px;color:#444;margin:0 0 4px 0}}
"""
_SCRIPT = """
window.addEventListener('load',function(){
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var widths=[];svg.querySelectorAll('rect.bar').forEach(function(r){widths.push(r.getBBox().width.toFixed(1));});
    var box=svg.getBoundingClientRect(), view=svg.viewBox.baseVal, clipped=0;
    svg.querySelectorAll('text').forEach(function(t){var b=t.getBBox();
      if(b.x<view.x-0.5||b.y<view.y-0.5||b.x+b.width>view.x+view.width+0.5||b.y+b.height>view.y+view.height+0.5)clipped++;});
    svg.setAttribute('data-rendered', Math.round(box.width)+'x'+Math.round(box.height)+':'+widths.join(','));
    svg.setAttribute('data-clipped', String(clipped));
  });
  document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart[data-rendered]').length));
});
"""


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, sections: list[str]) -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
            + "".join(sections) + f"<script>{_SCRIPT}</script></body></html>")
