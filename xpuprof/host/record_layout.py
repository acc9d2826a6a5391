"""The layout of the host recorder's records, shared by the recorder (``recorder``) and what reads its
crash-safe copies back (``spill``): one place, so neither imports the other to learn it."""

# The fields of one range record in HostRecorder.ranges (int64 each).
RANGE_FIELDS = ("t0", "t1", "tid", "correlation_id", "name", "args")
# The fields of one instant record in HostRecorder.instants (int64 each).
INSTANT_FIELDS = ("t", "tid", "name", "args", "scope")
# A range's args field: k >= 0, entry k of the recorder's args_area (JSON encoded at the call); NO_ARGS;
# or object_key(j) for args kept as given in `args` (not a dict, or one no encoder could write).
NO_ARGS = -1
