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


# ---------------------------------------------------------------- the fast paths of an event
FAST_PATHS = {"keys": 1, "ph": 2, "strings": 4, "numbers": 8, "objects": 16}


@pytest.fixture()
def _restore_fast():
    yield
    tracescan.fast(31)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcop0123456789_ :()/") for _ in range(rng.randrange(0, 24)))


def _number(rng: random.Random) -> str:
    """Around every edge of the fast number path: 15/16 integer digits, 3/4 fraction digits, 2^53, zeros."""
    pick = rng.random()
    if pick < 0.3:
        return f"{rng.choice(['', '-'])}{rng.randrange(10 ** rng.randrange(1, 17))}.{rng.randrange(1000):03d}"
    if pick < 0.45:
        return str(rng.randrange(-10 ** rng.randrange(1, 20), 10 ** rng.randrange(1, 20)))
    if pick < 0.6:
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 6)))
        return f"{rng.choice(['', '-'])}{rng.randrange(10 ** rng.randrange(1, 18))}.{frac}"
    if pick < 0.7:
        return f"{rng.randrange(1, 999)}{rng.choice(['e', 'E', '.5e', '.125E-'])}{rng.randrange(0, 30)}"
    return rng.choice(["0", "-0", "0.0", "-0.000", "0.050", "1.081", "999999999999999", "1000000000000000",
                       "999999999999999.999", "9007199254740.992", "9007199254740.993", "9007199254740993",
                       "123456789012345.6789", "00", "01.5", "1.", ".5", "-", "-.5", "1e", "1.e3", "0x1", "1.2.3",
                       "12345678901234567890", "9223372036854775807", "-9223372036854775809", "1.0001"])


def _value(rng: random.Random, depth: int = 0) -> str:
    pick = rng.random()
    if pick < 0.35:
        return _number(rng)
    if pick < 0.65:
        return '"' + _word(rng) + '"'
    if pick < 0.72:
        return '"' + rng.choice(["X", "\\u0058", "", "XY", "\\\\", '\\"', "é", "\x7f", "a\\nb", "\\ud83d\\ude00"]) + '"'
    if pick < 0.78:
        return rng.choice(["true", "false", "null", "tru", "nul"])
    if depth < 2 and pick < 0.92:
        return _object(rng, depth + 1)
    if depth < 2:
        return "[" + ",".join(_value(rng, depth + 1) for _ in range(rng.randrange(0, 3))) + "]"
    return "1"


def _space(rng: random.Random) -> str:
    return rng.choice(["", "", "", " ", "\n ", "\t"])


def _object(rng: random.Random, depth: int = 0) -> str:
    members = [f'"{_word(rng)}"{_space(rng)}:{_space(rng)}{_value(rng, depth)}' for _ in range(rng.randrange(0, 4))]
    return "{" + _space(rng) + ("," + _space(rng)).join(members) + _space(rng) + "}"


KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "s", "bp", "phase", "pids", "tsx", "na", "t", "p"]


def _event(rng: random.Random) -> str:
    if rng.random() < 0.4:  # the writers' shape and order, now and then spaced as torch writes it
        text = (f'{{"ph":"{rng.choice("XBEiCM")}","cat":"user_annotation","name":"op{rng.randrange(100)}",'
                f'"pid":{rng.randrange(1 << 31)},"tid":{rng.randrange(1 << 31)},"ts":{_number(rng)},'
                f'"dur":{_number(rng)},"args":{{"External id":{rng.randrange(10 ** 6)}}}}}')
        return text.replace('":', '": ').replace(',"', ', "') if rng.random() < 0.2 else text
    members = []
    for key in rng.sample(KEYS, rng.randrange(0, 9)) + ([rng.choice(KEYS)] if rng.random() < 0.1 else []):
        spelled = key if rng.random() < 0.95 else key.replace("h", "\\u0068").replace("t", "\\u0074")
        if key in ("ts", "dur", "pid", "tid", "id"):
            value = _number(rng) if rng.random() < 0.85 else _value(rng)
        elif key == "args":
            value = _object(rng) if rng.random() < 0.85 else _value(rng)
        else:
            value = '"' + rng.choice(["X", "i", _word(rng)]) + '"' if rng.random() < 0.85 else _value(rng)
        members.append(f'"{spelled}"{_space(rng)}:{_space(rng)}{value}')
    return "{" + _space(rng) + ("," + _space(rng)).join(members) + _space(rng) + "}"


def _mutated(rng: random.Random, doc: bytes) -> bytes:
    out = bytearray(doc)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(out))
        pick = rng.random()
        if pick < 0.4:
            out[at] = rng.choice(b'{}[]":,0123456789.-eE \\\x00\x80\xffatn')
        elif pick < 0.7:
            del out[at]
        else:
            out.insert(at, rng.choice(b'{}[]":,0.-e \\'))
    return bytes(out)


def _documents(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        doc = ("[" + ",\n".join(_event(rng) for _ in range(rng.randrange(1, 10))) + "]").encode()
        docs.append(_mutated(rng, doc) if rng.random() < 0.4 else doc)
    return docs


@pytest.mark.usefixtures("_restore_fast")
def test_every_fast_path_reads_what_the_general_path_reads():
    """Seeded documents of the writers' events and of odd ones (every key in every order, escaped keys, numbers
    around each edge of the fast number path, nested and flat args, whitespace, corruptions), whole and cut
    anywhere (so keys and numbers meet the buffer's end): each fast path alone and all of them give the general
    path's columns, consumed bytes, status and error offset, at every SIMD level."""
    docs = _documents(41, 400)
    assert tracescan.fast() == 31  # all of them, from the start
    settings = [0, 31, *FAST_PATHS.values()]
    statuses = set()
    for i, doc in enumerate(docs):
        cuts = [(len(doc), True), (len(doc), False), (1 + i * 7 % len(doc), False), (1 + i * 13 % len(doc), True)]
        for level in levels() if i % 8 == 0 else [tracescan.simd("best")]:
            tracescan.simd(level)
            for cut, final in cuts:
                results = {}
                for paths in settings:
                    tracescan.fast(paths)
                    results[paths] = scan(doc[:cut], final)
                assert all(r == results[0] for r in results.values()), (level, cut, final, doc[:cut])
                statuses.add(results[0]["status"])
    assert statuses == {-1, 0, 1}  # documents read whole, cut and refused all met


@pytest.mark.usefixtures("_restore_fast")
def test_fast_numbers_and_keys_at_their_edges():
    """The fast number path takes at most 15 integer digits and 3 fraction digits with 32 bytes readable; the
    key prediction a key's exact text up to its ':'. Next to each edge the general path decides, the same way."""
    texts = ["999999999999999", "1000000000000000", "999999999999999.999", "9007199254740.992", "9007199254740.993",
             "9007199254740.9921", "0.050", "-0.000", "5107073439997.030", "1.5", "-1", "0", "-0"]
    doc = b"[" + b",".join(b'{"ph":"X","ts":' + t.encode() + b',"dur":' + t.encode() + b',"pid":' + t.encode()
                           + b',"tid":1}' for t in texts)
    doc += b',{"ph" :"X","pids":1,"ts" : 2,"dur":3},{"ph":"X","pid":1,"ts":2,"tsx":3,"dur":4}]'
    for paths in (31, 0):
        tracescan.fast(paths)
        r = scan(doc)
        assert r["status"] == 1 and r["n"] == len(texts) + 2
        kind = np.frombuffer(r["kind"], np.uint8).reshape(-1, FIELDS)
        num = np.frombuffer(r["num"], np.uint8).reshape(-1, 8 * FIELDS)
        exact = np.frombuffer(r["exact"], np.int64).reshape(-1, 2)
        for i, text in enumerate(texts):
            if "." in text:
                assert kind[i, TS] == 2 and struct.unpack("<d", num[i, :8].tobytes())[0] == float(text), text
            else:
                assert kind[i, TS] == 1 and struct.unpack("<q", num[i, :8].tobytes())[0] == int(text), text
            assert exact[i, 0] == _exact_ns(text) == exact[i, 1], text
        assert kind[-2].tolist() == [1, 1, 0, 0, 0]  # "pids" is no pid; "ph" spaced before its ':' still ph
        assert kind[-1].tolist() == [1, 1, 1, 0, 0] and exact[-1].tolist() == [2000, 4000]  # "tsx" is no ts
        assert bytes(r["ph"])[-2:] == b"XX"
    for bad in (32, -1, 1.0, "all", 2 ** 70):
        with pytest.raises(ValueError, match="fast: .* is not a set of fast paths.*0 \\(none\\) to 31"):
            tracescan.fast(bad)
    assert tracescan.fast(None) == tracescan.fast() == 0  # the last one pinned


@pytest.mark.usefixtures("_restore_fast")
@pytest.mark.parametrize("event", [
    b'{"ph":"\\"","ts":1}', b'{"ph":"\\\\","ts":1}', b'{"ph":""","ts":1}', b'{"ph":"\x01","ts":1}',
    b'{"ph":"\xc3\xa9","ts":1}', b'{"ph":"X\\u0041","ts":1}', b'{"name":"a\\"b","ts":1}', b'{"cat":"\xff","ts":1}',
    b'{"args":{"a":1],"ts":1}', b'{"args":{"a":1,},"ts":1}', b'{"args":{"a" 1},"ts":1}', b'{"args":{"a";1},"ts":1}', b'{"args":{"a":tru},"ts":1}',
    b'{"args":{"a":"x\x00"},"ts":1}', b'{"args":{"a":01},"ts":1}', b'{"args":{"a\\"b":1},"ts":1}',
    b'{"args":{"a":{"b":[1,2}},"ts":1}', b'{"args":{"a":1}}}', b'{"args":{"a":-},"ts":1}', b'{"args":{1:2},"ts":1}',
])
def test_near_misses_of_the_fast_paths_read_as_the_general_path_reads(event):
    """Text a fast path must not take (escapes, control bytes, UTF-8, a wrong closing bracket, a trailing comma,
    a bad literal or number in flat args): the general path's reading or refusal, with each path on."""
    doc = b"[" + b'{"ph":"X","name":"n","cat":"c","pid":1,"tid":2,"ts":3.5,"dur":4,"args":{"k":"v","n":1}},' * 3
    doc += event + b"]"
    results = {}
    for paths in (0, 31, *FAST_PATHS.values()):
        tracescan.fast(paths)
        results[paths] = scan(doc)
    assert all(r == results[0] for r in results.values())
    assert results[0]["n"] >= 3
