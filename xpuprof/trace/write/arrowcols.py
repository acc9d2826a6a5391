"""Arrow columns from numpy columns (the names the store's writers and the cluster analyses use): they live
with the trace table's Arrow conversion, ``trace.table.arrow``."""
from __future__ import annotations

from ..table.arrow import (dict_column, float_column, int32_column, int_column, ints, string_column, string_lists,
                           strings, text_dict_column)

__all__ = ["dict_column", "float_column", "int32_column", "int_column", "ints", "string_column", "string_lists",
           "strings", "text_dict_column"]
