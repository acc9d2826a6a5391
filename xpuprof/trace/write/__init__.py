"""Writing a trace: the Kineto-compatible Chrome JSON writer (``chrome``), the vectorized rows of bulk
batches (``rows``, ``rows_native``), the text of value columns (``value_text``) and the output
streams (``sinks``); and the trace store (docs/store.md): one rank's partition (``rankwriter``), from a
TraceBuilder (``parquet``) or from a Kineto JSON trace (``kineto_store``), the Arrow columns both build
(``arrowcols``) and the rank's slice summary (``slice_summary``)."""
