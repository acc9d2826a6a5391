"""Reading a trace file: ``load`` (whole file), ``scan`` (columns of every event, without a dict each),
``kineto_stream`` (a trace of any size in chunks, for ``convert``); and a trace store: ``store``
(opening and checking one), ``arrow`` (Arrow columns as numpy)."""
