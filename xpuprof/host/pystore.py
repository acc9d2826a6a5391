"""The pure-Python stand-ins of ``xpuprof._native.hostrec``'s storage (Int64Log, NameTable, ArgsArea), used by
``host/recorder.py`` when the C extension is not built: the same records, read the same way."""
from __future__ import annotations


class Int64Log:
    """The pure-Python stand-in of hostrec.Int64Log: rows of ``width`` ints, read as numpy."""

    __slots__ = ("width", "_values", "refused")

    def __init__(self, width: int) -> None:
        import array

        self.width, self._values, self.refused = width, array.array("q"), 0

    def append(self, *values) -> bool:
        if len(values) != self.width:
            raise TypeError(f"Int64Log.append takes {self.width} ints, got {len(values)}")
        self._values.extend(values)
        return True

    def clear(self) -> None:
        del self._values[:]

    def __len__(self) -> int:
        return len(self._values) // self.width

    def __buffer__(self, flags):  # Python >= 3.12; older ones read .values
        return memoryview(self._values)

    @property
    def values(self):
        return self._values

class NameTable:
    """The pure-Python stand-in of hostrec.NameTable: name -> id through a dict (names kept as given;
    they are cleaned when the trace's string table interns them)."""

    __slots__ = ("_ids", "names", "invalid_utf8")

    def __init__(self) -> None:
        self._ids: dict = {}
        self.names: list = []
        self.invalid_utf8 = 0

    def intern(self, name) -> int:
        got = self._ids.get(name)
        if got is None:
            got = self._ids[name] = len(self.names)
            self.names.append(name)
        return got

    def __len__(self) -> int:
        return len(self.names)

class ArgsArea:
    """The pure-Python stand-in of hostrec.ArgsArea: JSON objects one after another in a bytearray
    (``encode`` leaves every dict to the Python encoder)."""

    __slots__ = ("data", "ends", "refused")

    def __init__(self) -> None:
        self.data, self.ends, self.refused = bytearray(), Int64Log(1), 0

    def encode(self, args) -> None:
        return None

    def add(self, text) -> int:
        self.data += text
        self.ends.append(len(self.data))
        return len(self.ends) - 1

    def __len__(self) -> int:
        return len(self.ends)
