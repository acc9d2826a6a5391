"""Reading a trace file: ``load`` (whole file) and ``scan`` (columns of every event, without a dict each)."""
