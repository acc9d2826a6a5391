"""Building a trace: TraceBuilder, its column batches, interned strings, key indexes and intervals."""
