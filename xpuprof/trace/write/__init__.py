"""Writing a trace: the Kineto-compatible Chrome JSON writer (``chrome``), the vectorized rows of bulk
batches (``rows``, ``rows_native``), the text of value columns (``value_text``) and the output
streams (``sinks``)."""
