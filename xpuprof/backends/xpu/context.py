"""What resolving PTI records needs beyond the records themselves (``RecordContext``): the PTI
version, the clock offset, device UUIDs and names, the C strings behind record pointers
(``StringCache``) and API names (``ApiNameCache``). Live sessions read them through PTI; replayed
captures carry the tables they saved, so both share the emit stage.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from ...vendors import pti


class StringCache:
    """C strings behind record pointers, read once per distinct pointer; remembered for captures."""

    def __init__(self, known: dict[int, str] | None = None, reader: Callable[[int], str] | None = None) -> None:
        self.seen: dict[int, str] = dict(known or {})
        self._reader = reader

    @classmethod
    def live(cls) -> "StringCache":
        return cls(reader=lambda p: ctypes.string_at(p).decode("utf-8", "replace"))

    def __call__(self, ptr: int) -> str:
        ptr = int(ptr)
        if ptr == 0:
            return ""
        got = self.seen.get(ptr)
        if got is None:
            got = self._reader(ptr) if self._reader is not None else f"<unresolved 0x{ptr:x}>"
            self.seen[ptr] = got
        return got


class ApiNameCache:
    """(api group, api id) -> name, from ``ptiViewGetApiIdName`` live or a capture's table."""

    def __init__(self, known: dict[tuple[int, int], str] | None = None,
                 lookup: Callable[[int, int], str] | None = None) -> None:
        self.seen: dict[tuple[int, int], str] = dict(known or {})
        self._lookup = lookup

    def __call__(self, group: int, api_id: int) -> str:
        key = (int(group), int(api_id))
        got = self.seen.get(key)
        if got is None:
            got = self._lookup(*key) if self._lookup is not None else f"api_{key[0]}_{key[1]}"
            self.seen[key] = got
        return got


@dataclass
class RecordContext:
    pti_version: str
    clock_offset_ns: int  # epoch ns = PTI ns + offset
    device_uuids: list[bytes] = field(default_factory=list)  # index = device index (pid)
    device_names: dict[int, str] = field(default_factory=dict)
    strings: StringCache = field(default_factory=StringCache)
    api_names: ApiNameCache = field(default_factory=ApiNameCache)
    # Enum strings from the loaded PTI (its wording changes across releases); tables for replay.
    memory_type_name: Callable[[int], str] = partial(pti.table_name, pti.MEMORY_TYPES)
    memcpy_type_name: Callable[[int], str] = partial(pti.table_name, pti.MEMCPY_TYPES)
