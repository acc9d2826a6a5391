"""The C scanner's fast paths read exactly what its plain paths read (issue 41: the report's JSON scan at
>= 1 GB/s): the string-body runs at every SIMD level (AVX2, SSE2, scalar: chosen at load by the processor,
pinned here), the known keys read without the string scan, and the numbers converted without strtod (the
doubles bit for bit strtod's, Python's ``float`` of the same text; the times in ns by the exact rule)."""
from __future__ import annotations

import json
import random
import struct
from decimal import Decimal

import numpy as np
import pytest

from xpuprof.trace.read import kineto_stream

tracescan = kineto_stream.native()
pytestmark = pytest.mark.skipif(tracescan is None, reason="xpuprof._native.tracescan is not built: "
                                                          "python setup.py build_ext --inplace")

FIELDS = 5
TS, DUR = 0, 1


def levels() -> list[str]:
    """Every level this processor runs, the best last."""
    best = tracescan.simd("best")
    return ["scalar", "sse2", "avx2"][:["scalar", "sse2", "avx2"].index(best) + 1]


@pytest.fixture(autouse=True)
def _restore_level():
    yield
    if tracescan is not None:
        tracescan.simd("best")


def scan(doc: bytes, final: bool = True):
    (n, ph, name, cat, kind, num, span, cx, strings, args_span, aux, exact, consumed, state, status,
     error_at) = tracescan.events(doc, 1, 0, final)
    return {"n": n, "ph": ph, "name": name, "cat": cat, "kind": kind, "num": num, "span": span, "complex": cx,
            "strings": strings, "args": args_span, "aux": aux, "exact": exact, "consumed": consumed, "state": state,
            "status": status, "error_at": error_at}


def test_the_level_in_use_is_the_best_this_processor_runs_and_can_be_pinned():
    best = tracescan.simd()
    assert best in ("avx2", "sse2", "scalar")
    for level in levels():
        assert tracescan.simd(level) == level and tracescan.simd() == level
    with pytest.raises(ValueError, match="simd: neon is not a level.*valid: scalar"):
        tracescan.simd("neon")


def _string_cases() -> list[bytes]:
    """Strings of every length 0-80 with one special byte moved through every position: an escape, a
    multi-byte UTF-8 character, a quote escaped; and invalid ones (a control character, a bad UTF-8 byte,
    an unknown escape, a lone surrogate)."""
    rng = random.Random(41)
    specials = [b'\\"', b"\\\\", b"\\n", b"\\u00e9", b"\\ud83d\\ude00", "é".encode(), "€".encode(),
                "😀".encode(), b"\x01", b"\x80", b"\xc3(", b"\\x", b"\\udc00", b"\x7f", b"\xed\xa0\x80"]
    out = []
    for length in list(range(0, 40)) + [47, 48, 63, 64, 65, 79, 80]:
        plain = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz:<>{}[], 0123456789") for _ in range(length))
        out.append(plain)
        for sp in specials:
            for at in sorted({0, length // 2, length}):
                out.append(plain[:at] + sp + plain[at:])
    return out


def _doc_of(strings: list[bytes]) -> bytes:
    rows = []
    for i, s in enumerate(strings):
        rows.append(b'{"ph":"X","name":"' + s + b'","cat":"c' + str(len(s) % 7).encode() + b'","pid":1,"tid":'
                    + str(i).encode() + b',"ts":1.5,"dur":2,"args":{"' + s + b'":"' + s + b'","k":[1,"' + s + b'"]}}')
    return b"[" + b",\n".join(rows) + b"]"


def test_every_level_reads_every_string_as_the_scalar_level_does():
    cases = _string_cases()
    for one in cases:  # each document alone: invalid strings end it at the same place on every level
        doc = _doc_of([one])
        results = {}
        for level in levels():
            tracescan.simd(level)
            results[level] = scan(doc)
        assert all(r == results["scalar"] for r in results.values()), one
        try:  # the scanner refuses lone surrogates, escaped or encoded, that Python's json module takes
            json.loads(b'"' + one + b'"')
            valid = b"\\udc00" not in one and b"\xed\xa0\x80" not in one
        except ValueError:
            valid = False
        if valid:
            assert results["scalar"]["status"] == 1 and results["scalar"]["n"] == 1, one
        else:
            assert results["scalar"]["status"] == -1, one
    valid = []
    for one in cases:
        if scan(_doc_of([one]))["status"] == 1:
            valid.append(one)
    doc = _doc_of(valid)  # all valid ones in one document, also cut short (the reader's chunk end)
    for cut in (len(doc), len(doc) - 7, len(doc) // 2):
        results = {}
        for level in levels():
            tracescan.simd(level)
            results[level] = scan(doc[:cut], final=cut == len(doc))
        assert all(r == results["scalar"] for r in results.values())
    assert results["scalar"]["n"] > 0


def test_known_keys_read_without_the_string_scan_match_the_general_path():
    """The known keys spelled plainly, escaped (the general path reads such an event as complex), as the
    prefix of a longer key, and at the buffer's very end."""
    doc = (b'[{"ph":"X","name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"id":5,"args":{"a":1}},'
           b'{"p\\u0068":"X","name":"n"},'
           b'{"phase":"X","names":"n","cats":"c","pids":1,"ts2":3,"s":"g","bp":"e","arg":{"x":1}},'
           b'{"ts":1}]')
    r = scan(doc)
    assert r["n"] == 4 and r["status"] == 1
    assert bytes(r["ph"]) == b"X\x00\x00\x00"
    assert np.frombuffer(r["complex"], np.uint8).tolist() == [0, 1, 0, 0]
    assert bytes(r["aux"]) == b"\x00\x00e\x00"  # "s" then "bp": the last one read
    kind = np.frombuffer(r["kind"], np.uint8).reshape(-1, FIELDS)
    assert kind[0].tolist() == [1, 1, 1, 1, 1] and kind[2].tolist() == [0] * 5 and kind[3].tolist() == [1, 0, 0, 0, 0]
    args = np.frombuffer(r["args"], np.int64).reshape(-1, 2)
    assert args[0].tolist() != [-1, -1] and args[2].tolist() == [-1, -1]
    # a document cut inside a key: more bytes needed, nothing misread
    cut = scan(doc[:20], final=False)
    assert cut["n"] == 0 and cut["status"] == 0 and cut["consumed"] == 1


def _number_texts() -> list[str]:
    rng = random.Random(7)
    texts = ["0", "-0", "0.0", "-0.0", "0.001", "-0.001", "1e0", "1E+2", "1e-2", "-2.5e-3", "9007199254740992.0",
             "9007199254740993.0", "9007199254740991.5", "1e22", "1e23", "1.5e22", "123456789012345678",
             "1234567890123456789", "12345678901234567890", "0.1", "0.2", "0.30000000000000004",
             "5074104088534.993", "4400680850787.091", "9223372036854775.807", "9223372036854775.808",
             "-9223372036854775.808", "9223372036854774.999", "1.7976931348623157e308", "4.9e-324", "2.2250738585072014e-308",
             "1" * 40 + ".5", "0." + "0" * 30 + "1", "1.000000000000000000001", "123.4560", "123.45600"]
    for _ in range(3000):
        whole = str(rng.randrange(0, 10 ** rng.randrange(1, 19)))
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 9)))
        sign = rng.choice(["", "-"])
        text = f"{sign}{whole}.{frac}"
        if rng.random() < 0.2:
            text += f"e{rng.randrange(-30, 30)}"
        texts.append(text)
    return texts


def _exact_ns(text: str) -> int:
    """The scanner's rule: exact from the text when it has at most 3 fractional digits and no exponent (and
    its integer part is below INT64_MAX // 1000), else the double times 1000 rounded half to even."""
    mantissa = text.lstrip("-")
    frac = mantissa.split(".")[1] if "." in mantissa else ""
    whole = mantissa.split(".")[0]
    if "e" not in text.lower() and len(frac) <= 3 and int(whole) <= (2 ** 63 - 1) // 1000 - 1:
        return int(Decimal(text) * 1000)
    x = float(text) * 1000.0
    return round(x) if -9.2e18 < x < 9.2e18 else 0


def test_numbers_convert_exactly_as_strtod_and_the_exact_ns_rule():
    texts = _number_texts()
    doc = b"[" + b",".join(b'{"ts":' + t.encode() + b',"dur":' + t.encode() + b"}" for t in texts) + b"]"
    for level in levels():
        tracescan.simd(level)
        r = scan(doc)
        assert r["n"] == len(texts) and r["status"] == 1
        kind = np.frombuffer(r["kind"], np.uint8).reshape(-1, FIELDS)
        num = np.frombuffer(r["num"], np.uint8).reshape(-1, 8 * FIELDS)
        exact = np.frombuffer(r["exact"], np.int64).reshape(-1, 2)
        cx = np.frombuffer(r["complex"], np.uint8)
        for i, text in enumerate(texts):
            is_int = not any(c in text for c in ".eE")
            if is_int and not -2 ** 63 <= int(text) < 2 ** 63:
                assert cx[i] == 1, text  # an integer beyond int64: Python reads the event
                continue
            if is_int:
                assert kind[i, TS] == 1 and struct.unpack("<q", num[i, :8].tobytes())[0] == int(text), text
                expected_ns = int(text) * 1000 if abs(int(text)) <= (2 ** 63 - 1) // 1000 else 0
                assert exact[i].tolist() == [expected_ns, expected_ns], text
                continue
            assert kind[i, TS] == 2, text
            got = struct.unpack("<d", num[i, :8].tobytes())[0]
            want = float(text)
            assert struct.pack("<d", got) == struct.pack("<d", want), (text, got, want)
            assert exact[i, 0] == _exact_ns(text), text


def test_malformed_numbers_are_refused_at_every_level():
    for bad in (b"01", b"1.", b".5", b"1e", b"1e+", b"-", b"--1", b"1.e3", b"+1", b"0x10"):
        doc = b'[{"ts":' + bad + b'}]'
        skipped = b'[{"args":{"k":' + bad + b'}}]'  # a skipped value: the same grammar
        for level in levels():
            tracescan.simd(level)
            assert scan(doc)["status"] == -1, bad
            assert scan(skipped)["status"] == -1, bad
