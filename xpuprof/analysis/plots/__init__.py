"""The charts of the self-contained HTML pages (``report``, ``analyze``, ``diff``): inline SVG laid out in
Python (``svg``: why SVG and how text is given room), no script or style fetched at view time.

- ``bars``: a row per thing - stacked bars, ranges (quartiles and extremes), signed bars around zero;
- ``lines``: values over time (telemetry, two runs of one metric) and per-group distributions;
- ``timeline``: one trace's steps and the device's busy time per kind of work;
- ``analyses``: the picture of each ``xpuprof analyze`` result;
- ``diff_page``: ``xpuprof diff A B --format html``.
"""
