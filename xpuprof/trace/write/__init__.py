"""Writing a TraceTable: the Kineto-compatible Chrome JSON writer (``chrome``; a frozen builder's batches
rendered by ``rows``/``rows_native`` with the text of value columns from ``value_text``, a read table's rows
by ``flat_events``) and its output streams (``sinks``); and the trace store (docs/store.md): one rank's
partition (``rankwriter``) filled by the one row producer (``parquet.StoreRows``: ``write_store`` for a
builder or a table, ``kineto_store.convert_trace`` for a Kineto JSON file), with the rank's slice summary
(``slice_summary``)."""
