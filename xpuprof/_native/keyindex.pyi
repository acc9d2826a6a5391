"""A column of 64-bit keys factorized in one linear pass (keyindex.c): a hash table instead of np.unique's sort."""
from typing_extensions import Buffer

def factorize(keys: Buffer, codes_out: Buffer, /) -> tuple[bytes, bytes]:
    """(uniq, first): the distinct uint64 keys in order of first appearance and each one's first row (int64);
    codes_out (int32 per key) gets each row's index into uniq."""

def first_rows(offsets: Buffer, first_out: Buffer, /) -> None:
    """first_out[offset] = the first row holding it, for int64 offsets into the int64 table first_out."""
