"""Reading traces into a TraceTable: ``kineto`` (the one Kineto JSON reader: ``read_trace``, ``TraceReader``,
``read_header``) over ``kineto_stream`` (its two implementations: the C scanner, orjson) and ``kineto_rows``
(events -> flat columns); ``source`` (how every trace file is opened and bounded); ``inputs`` (the one
directory rule, ``read_inputs``); the trace store: ``store`` (opening and checking one), ``store_table``
(a store -> TraceTable). Still here for the callers that walk events as objects: ``load`` (a file as one
dict), ``scan`` (a document in memory as columns: torch's own trace)."""
