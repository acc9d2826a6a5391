/* xpuprof._native.rowfmt: compact JSON event rows from numpy columns, for the trace writer.
 *
 * The numpy fixed-width writer spends its time on padding, per-field matrices and strided
 * copies; here one loop writes each row straight into the output, variable width, no padding.
 * Python (xpuprof/trace/write/rows_native.py) describes a row as a list of segments; every segment is a
 * prefix literal followed by one value taken from a column:
 *
 *   (kind, flags, prefix: bytes, a, b, c, mask | None, base: int)
 *
 *   LIT     no value (the prefix is the whole segment)
 *   INT     a: int64 column                    -> decimal
 *   UINT    a: uint64 column                   -> decimal
 *   MICROS  a: int64 ns column                 -> max(v - base, 0) as <ns // 1000>.<ns % 1000:03d>
 *   HEX     a: uint64 column                   -> "0x%016x" (quoted)
 *   BOOL    a: uint8 (bool) column             -> true / false
 *   TOKENS  a: blob, b: int64 offsets (k + 1), c: int64 ids column -> blob[off[id]:off[id + 1]]
 *   SPANS   a: blob, b: int64 starts column, c: int64 lengths column -> blob[start:start + length]
 *   FIXED3  a: int64 column of k             -> k / 1000 with 3 decimals, trailing zeros dropped (one
 *           kept): the text orjson writes for the float64 k / 1000 (see fixed3())
 *   FLOAT   a: orjson text of the float64 column b ("[x,y,...]") -> token i; non-finite
 *           values as Python's quoted "nan" / "inf" / "-inf" (Kineto's form)
 *
 * A column of length 1 is one value for every row. ``mask`` (bool column) drops the segment
 * from rows where it is 0. Flags group segments into an optional JSON object: OPEN starts it
 * (its prefix is the object's opening text), ENTRY segments inside it lose their prefix's
 * leading comma when they are the first entry written, and CLOSE writes its prefix or, when no
 * entry was written, removes the whole object from the row. Formatting runs without the GIL.
 */
#pragma GCC optimize("O3")
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <string.h>

#include "shared/jsonstr.h"

enum { K_LIT, K_INT, K_UINT, K_MICROS, K_HEX, K_BOOL, K_TOKENS, K_FLOAT, K_SPANS, K_FIXED3, K_COUNT };
enum { F_ENTRY = 1, F_OPEN = 2, F_CLOSE = 4 };

typedef struct {
    int kind, flags;
    Py_buffer prefix, a, b, c, mask;
    int has_a, has_b, has_c, has_mask;
    int special; /* has_mask or flags: the row loop's slow path */
    int64_t base;
    Py_ssize_t na, nb, nc, nmask; /* element counts */
    Py_ssize_t cursor;            /* FLOAT: read position in the text */
    Py_ssize_t max_token;         /* TOKENS, SPANS: longest token */
    char *pre;                    /* the prefix, padded by COPY_SLACK bytes (copied whole) */
    char *padded;                 /* TOKENS: a copy of a small blob, padded by COPY_SLACK bytes, or NULL */
    uint64_t head;                /* MICROS, FIXED3, INT, UINT: the last value's leading part, and its digits */
    int head_len;
    char head_text[32];
} Seg;

/* Copies of a few dozen bytes dominate a row: a libc memcpy call per literal or name costs more
 * than the copy. Whole 16-byte blocks instead, reading within `src_end` and writing up to 15
 * bytes past the copy (the output keeps COPY_SLACK spare bytes; the next value overwrites them). */
#define COPY_BLOCK 16
#define COPY_SLACK 64
#define PADDED_BLOB_MAX (1 << 20) /* TOKENS blobs up to this size are copied padded (see parse_seg) */
static inline char *copy_short(char *p, const char *src, Py_ssize_t len, const char *src_end) {
    if (len <= 4 * COPY_BLOCK && src + ((len + COPY_BLOCK - 1) & ~(Py_ssize_t)(COPY_BLOCK - 1)) <= src_end) {
        for (Py_ssize_t k = 0; k < len; k += COPY_BLOCK) memcpy(p + k, src + k, COPY_BLOCK);
    } else {
        memcpy(p, src, (size_t)len);
    }
    return p + len;
}

static const char DIGITS2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
static char HEX2[512]; /* "00".."ff": the two hex digits of each byte, filled at import */

static inline int decimal_digits32(uint32_t v) {
    int n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* Digits written in place, last first: rendering them into a scratch buffer and copying that out
 * read back bytes just stored one or two at a time, a store-forwarding stall per number (the
 * writer's costliest instruction on XPU rows). 32-bit arithmetic where the value allows. */
static inline char *put_u32(char *p, uint32_t v) {
    char *end = p + decimal_digits32(v), *q = end;
    while (v >= 100) {
        unsigned r = v % 100;
        v /= 100;
        q -= 2;
        memcpy(q, DIGITS2 + 2 * r, 2);
    }
    if (v >= 10) memcpy(q - 2, DIGITS2 + 2 * v, 2);
    else q[-1] = (char)('0' + v);
    return end;
}

/* Exactly 8 digits (leading zeros kept) of v < 10^8. */
static inline void put8(char *q, uint32_t v) {
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(q, DIGITS2 + 2 * (hi / 100), 2);
    memcpy(q + 2, DIGITS2 + 2 * (hi % 100), 2);
    memcpy(q + 4, DIGITS2 + 2 * (lo / 100), 2);
    memcpy(q + 6, DIGITS2 + 2 * (lo % 100), 2);
}

static inline char *put_u64(char *p, uint64_t v) {
    if (v <= UINT32_MAX) return put_u32(p, (uint32_t)v);
    if (v < 10000000000000000ULL) { /* 10^16: the head fits 32 bits, then 8 digits */
        p = put_u32(p, (uint32_t)(v / 100000000));
        put8(p, (uint32_t)(v % 100000000));
        return p + 8;
    }
    p = put_u32(p, (uint32_t)(v / 10000000000000000ULL));
    put8(p, (uint32_t)(v / 100000000 % 100000000));
    put8(p + 8, (uint32_t)(v % 100000000));
    return p + 16;
}

/* v / 1000 for any 32-bit v as the compiler's own multiply and shift: written out, since GCC emitted a
 * `div` (~12 cycles) for the division in a path it judged cold, the one every row's short duration takes. */
static inline uint32_t div1000(uint32_t v) {
    return (uint32_t)(((uint64_t)v * 0x10624DD3u) >> 38);
}

/* A fraction r = 0..999 in one 4-byte store: FRAC3[r] is ".ddd" (MICROS); FIXED3 writes FRAC_SHORT[r] and
 * advances FRAC_LEN[r] (".d", ".dd" or ".ddd": trailing zeros dropped, one kept). Filled at import. */
static char FRAC3[1000][4], FRAC_SHORT[1000][4];
static unsigned char FRAC_LEN[1000];

/* Values of a column in a chunk share their leading digits (timestamps, ids, correlations): the digits
 * of the leading part, v / `unit`, are kept from the segment's last value and copied while it repeats,
 * so a row formats only its last 4 digits (and a fraction). Returns after the leading digits. */
static inline char *put_head(Seg *s, char *p, uint64_t head) {
    if (head != s->head) {
        s->head = head;
        s->head_len = (int)(put_u64(s->head_text, head) - s->head_text); /* at most 16 digits */
    }
    memcpy(p, s->head_text, 16);
    return p + s->head_len;
}

static inline char *put4(char *p, uint32_t v) { /* exactly 4 digits of v < 10^4 */
    memcpy(p, DIGITS2 + 2 * (v / 100), 2);
    memcpy(p + 2, DIGITS2 + 2 * (v % 100), 2);
    return p + 4;
}

/* v >= 0 in decimal (INT, UINT). */
static inline char *put_u64_seg(Seg *s, char *p, uint64_t v) {
    if (v < 10000) return put_u32(p, (uint32_t)v);
    uint64_t head = v / 10000;
    return put4(put_head(s, p, head), (uint32_t)(v - head * 10000));
}

/* µs with exactly 3 decimals of ns >= 0 (MICROS): ns / 10^7 is the leading part (it changes once per
 * 10 ms), then 4 integer digits and ".ddd". */
static inline char *put_micros(Seg *s, char *p, uint64_t ns) {
    if (ns < 10000000) {
        uint32_t v = (uint32_t)ns, us = div1000(v);
        p = put_u32(p, us);
        memcpy(p, FRAC3[v - us * 1000], 4);
        return p + 4;
    }
    uint64_t head = ns / 10000000;
    uint32_t low = (uint32_t)(ns - head * 10000000), us = div1000(low);
    p = put4(put_head(s, p, head), us);
    memcpy(p, FRAC3[low - us * 1000], 4);
    return p + 4;
}

/* m / 1000 with 3 decimals less trailing zeros, one kept (FIXED3, m >= 0). */
static inline char *put_fixed3(Seg *s, char *p, uint64_t m) {
    uint32_t r;
    if (m < 10000000) {
        uint32_t v = (uint32_t)m, whole = div1000(v);
        p = put_u32(p, whole);
        r = v - whole * 1000;
    } else {
        uint64_t head = m / 10000000;
        uint32_t low = (uint32_t)(m - head * 10000000), whole = div1000(low);
        p = put4(put_head(s, p, head), whole);
        r = low - whole * 1000;
    }
    memcpy(p, FRAC_SHORT[r], 4);
    return p + FRAC_LEN[r];
}

static void release(Seg *s) {
    PyMem_Free(s->pre);
    PyMem_Free(s->padded);
    if (s->prefix.obj) PyBuffer_Release(&s->prefix);
    if (s->has_a) PyBuffer_Release(&s->a);
    if (s->has_b) PyBuffer_Release(&s->b);
    if (s->has_c) PyBuffer_Release(&s->c);
    if (s->has_mask) PyBuffer_Release(&s->mask);
}

static int get_buf(PyObject *o, Py_buffer *view, int *flag, Py_ssize_t item, Py_ssize_t *count, const char *what) {
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    *flag = 1;
    if (view->len % item) {
        PyErr_Format(PyExc_ValueError, "rowfmt: %s buffer is not a whole number of %zd-byte items", what, item);
        return -1;
    }
    *count = view->len / item;
    return 0;
}

static int column_ok(Py_ssize_t len, Py_ssize_t n, const char *what) {
    if (len == 1 || len >= n) return 1;
    PyErr_Format(PyExc_ValueError, "rowfmt: %s column has %zd values for %zd rows", what, len, n);
    return 0;
}

#define AT(len, i) ((len) == 1 ? 0 : (i))

static int parse_seg(PyObject *t, Seg *s, Py_ssize_t n) {
    PyObject *prefix, *a, *b, *c, *mask;
    long long base;
    memset(s, 0, sizeof *s);
    if (!PyArg_ParseTuple(t, "iiOOOOOL", &s->kind, &s->flags, &prefix, &a, &b, &c, &mask, &base)) return -1;
    s->base = base;
    s->head = UINT64_MAX; /* no MICROS value formatted yet (ns / 10^7 never reaches it) */
    if (s->kind < 0 || s->kind >= K_COUNT) {
        PyErr_Format(PyExc_ValueError, "rowfmt: unknown segment kind %d", s->kind);
        return -1;
    }
    if (PyObject_GetBuffer(prefix, &s->prefix, PyBUF_SIMPLE) < 0) return -1;
    s->pre = PyMem_Calloc((size_t)s->prefix.len + COPY_SLACK, 1);
    if (!s->pre) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(s->pre, s->prefix.buf, (size_t)s->prefix.len);
    s->special = s->flags != 0 || mask != Py_None;
    if (mask != Py_None) {
        if (get_buf(mask, &s->mask, &s->has_mask, 1, &s->nmask, "mask") < 0) return -1;
        if (!column_ok(s->nmask, n, "mask")) return -1;
    }
    switch (s->kind) {
    case K_LIT:
        return 0;
    case K_INT: case K_UINT: case K_MICROS: case K_HEX: case K_FIXED3:
        if (get_buf(a, &s->a, &s->has_a, 8, &s->na, "value") < 0) return -1;
        return column_ok(s->na, n, "value") ? 0 : -1;
    case K_BOOL:
        if (get_buf(a, &s->a, &s->has_a, 1, &s->na, "bool") < 0) return -1;
        return column_ok(s->na, n, "bool") ? 0 : -1;
    case K_TOKENS: {
        if (get_buf(a, &s->a, &s->has_a, 1, &s->na, "blob") < 0) return -1;
        if (get_buf(b, &s->b, &s->has_b, 8, &s->nb, "offsets") < 0) return -1;
        if (get_buf(c, &s->c, &s->has_c, 8, &s->nc, "ids") < 0) return -1;
        if (!column_ok(s->nc, n, "ids")) return -1;
        const int64_t *off = (const int64_t *)s->b.buf;
        if (s->nb < 1 || off[0] != 0) goto bad_offsets;
        for (Py_ssize_t k = 1; k < s->nb; k++) {
            int64_t w = off[k] - off[k - 1];
            if (w < 0 || off[k] > s->na) goto bad_offsets;
            if (w > s->max_token) s->max_token = w;
        }
        const int64_t *ids = (const int64_t *)s->c.buf;
        Py_ssize_t m = n < s->nc ? n : s->nc, k = s->nb - 1;
        for (Py_ssize_t i = 0; i < m; i++) {
            if (ids[i] < 0 || ids[i] >= k) {
                PyErr_Format(PyExc_ValueError, "rowfmt: token id %lld outside the table of %zd", (long long)ids[i], k);
                return -1;
            }
        }
        /* A small blob (a batch's names) is copied once, padded, so that every token of up to COPY_SLACK
         * bytes is copied as one fixed block: a copy sized by the token's length branches on it, and names
         * of many lengths in random order mispredict it. */
        if (s->na <= PADDED_BLOB_MAX) {
            s->padded = PyMem_Calloc((size_t)s->na + COPY_SLACK, 1);
            if (!s->padded) {
                PyErr_NoMemory();
                return -1;
            }
            memcpy(s->padded, s->a.buf, (size_t)s->na);
        }
        return 0;
    bad_offsets:
        PyErr_SetString(PyExc_ValueError, "rowfmt: token offsets must start at 0, rise, and stay inside the blob");
        return -1;
    }
    case K_SPANS: {
        if (get_buf(a, &s->a, &s->has_a, 1, &s->na, "blob") < 0) return -1;
        if (get_buf(b, &s->b, &s->has_b, 8, &s->nb, "starts") < 0) return -1;
        if (get_buf(c, &s->c, &s->has_c, 8, &s->nc, "lengths") < 0) return -1;
        if (!column_ok(s->nb, n, "starts") || !column_ok(s->nc, n, "lengths")) return -1;
        const int64_t *start = (const int64_t *)s->b.buf, *len = (const int64_t *)s->c.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t at = start[AT(s->nb, i)], w = len[AT(s->nc, i)];
            if (at < 0 || w < 0 || at > s->na || w > s->na - at) {
                PyErr_Format(PyExc_ValueError, "rowfmt: span %lld+%lld outside the blob of %zd bytes", (long long)at,
                             (long long)w, s->na);
                return -1;
            }
            if (w > s->max_token) s->max_token = w;
        }
        return 0;
    }
    case K_FLOAT:
        if (get_buf(a, &s->a, &s->has_a, 1, &s->na, "float text") < 0) return -1;
        if (get_buf(b, &s->b, &s->has_b, 8, &s->nb, "float") < 0) return -1;
        if (s->nb < n) {
            PyErr_Format(PyExc_ValueError, "rowfmt: float column has %zd values for %zd rows", s->nb, n);
            return -1;
        }
        if (s->na < 2 || ((const char *)s->a.buf)[0] != '[') {
            PyErr_SetString(PyExc_ValueError, "rowfmt: float text must be a JSON list");
            return -1;
        }
        s->cursor = 1;
        return 0;
    }
    return 0;
}

/* Upper bound of the bytes a segment adds over n rows. */
static Py_ssize_t seg_bound(const Seg *s, Py_ssize_t n) {
    Py_ssize_t per = s->prefix.len;
    switch (s->kind) {
    case K_INT: case K_UINT: per += 21; break;
    case K_MICROS: per += 24; break;
    case K_FIXED3: per += 25; break;
    case K_HEX: per += 20; break;
    case K_BOOL: per += 5; break;
    case K_TOKENS: case K_SPANS: per += s->max_token; break;
    case K_FLOAT: return per * n + s->na + 8 * n;
    default: break;
    }
    return per * n;
}

/* One FLOAT token: copy it (or the quoted non-finite name) when `emit`; always advance. */
static inline int float_token(Seg *s, Py_ssize_t i, char **pp, int emit) {
    const char *text = (const char *)s->a.buf;
    Py_ssize_t at = s->cursor, end = at;
#ifdef __SSE2__
    /* the token's end 16 bytes at a time (a float's text is rarely longer) */
    const __m128i comma = _mm_set1_epi8(','), close = _mm_set1_epi8(']');
    while (end + 16 <= s->na) {
        __m128i c = _mm_loadu_si128((const __m128i *)(text + end));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(c, comma), _mm_cmpeq_epi8(c, close)));
        if (m) { end += __builtin_ctz(m); goto found; }
        end += 16;
    }
#endif
    while (end < s->na && text[end] != ',' && text[end] != ']') end++;
#ifdef __SSE2__
found:
#endif
    if (end >= s->na) return -1;
    s->cursor = end + 1;
    if (!emit) return 0;
    double v = ((const double *)s->b.buf)[i];
    char *p = *pp;
    if (isfinite(v)) {
        memcpy(p, text + at, (size_t)(end - at));
        p += end - at;
    } else if (isnan(v)) {
        memcpy(p, "\"nan\"", 5), p += 5;
    } else if (v > 0) {
        memcpy(p, "\"inf\"", 5), p += 5;
    } else {
        memcpy(p, "\"-inf\"", 6), p += 6;
    }
    *pp = p;
    return 0;
}

static int render_rows(Seg *segs, Py_ssize_t nseg, Py_ssize_t n, char *out, Py_ssize_t *written) {
    char *p = out;
    for (Py_ssize_t i = 0; i < n; i++) {
        char *obj_start = NULL;
        int obj_entries = 0;
        for (Py_ssize_t j = 0; j < nseg; j++) {
            Seg *s = &segs[j];
            const char *pre = s->pre;
            Py_ssize_t plen = s->prefix.len;
            if (s->special) { /* a mask or an object flag: most segments have neither (one test for them) */
                int on = !s->has_mask || ((const uint8_t *)s->mask.buf)[AT(s->nmask, i)];
                if (!on) {
                    if (s->kind == K_FLOAT && float_token(s, i, &p, 0) < 0) return -1;
                    continue;
                }
                if (s->flags & F_OPEN) {
                    obj_start = p;
                    obj_entries = 0;
                } else if (s->flags & F_CLOSE) {
                    if (obj_start && !obj_entries) {
                        p = obj_start;
                        obj_start = NULL;
                        continue;
                    }
                    obj_start = NULL;
                } else if (s->flags & F_ENTRY) {
                    if (!obj_entries && plen && pre[0] == ',') pre++, plen--;
                    obj_entries++;
                }
            }
            if (plen <= 16) { /* most keys: one 16-byte store, where the 64-byte block is four */
                memcpy(p, pre, 16);
                p += plen;
            } else if (plen <= COPY_SLACK) {
                memcpy(p, pre, COPY_SLACK);
                p += plen;
            } else {
                p = copy_short(p, pre, plen, s->pre + s->prefix.len + COPY_BLOCK);
            }
            switch (s->kind) {
            case K_INT: {
                int64_t v = ((const int64_t *)s->a.buf)[AT(s->na, i)];
                uint64_t m = (uint64_t)v;
                if (v < 0) *p++ = '-', m = 0 - m; /* exact for INT64_MIN too */
                p = put_u64_seg(s, p, m);
                break;
            }
            case K_UINT:
                p = put_u64_seg(s, p, ((const uint64_t *)s->a.buf)[AT(s->na, i)]);
                break;
            case K_MICROS: {
                int64_t v = ((const int64_t *)s->a.buf)[AT(s->na, i)], rel;
                if (__builtin_sub_overflow(v, s->base, &rel)) rel = s->base > 0 ? 0 : INT64_MAX;
                if (rel < 0) rel = 0;
                p = put_micros(s, p, (uint64_t)rel);
                break;
            }
            case K_FIXED3: {
                int64_t k = ((const int64_t *)s->a.buf)[AT(s->na, i)];
                uint64_t m = (uint64_t)k;
                if (k < 0) *p++ = '-', m = 0 - m;
                p = put_fixed3(s, p, m);
                break;
            }
            case K_HEX: {
                uint64_t v = ((const uint64_t *)s->a.buf)[AT(s->na, i)];
                p[0] = '"', p[1] = '0', p[2] = 'x';
#if defined(__SSE2__) && defined(__x86_64__)
                /* the 16 digits in one register, one store: each byte's two nibbles side by side, most
                 * significant first, then '0' + d, plus 'a' - '0' - 10 where d > 9 */
                __m128i x = _mm_cvtsi64_si128((long long)__builtin_bswap64(v)), low = _mm_set1_epi8(0x0f);
                __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), low), _mm_and_si128(x, low));
                __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
                _mm_storeu_si128((__m128i *)(p + 3), _mm_add_epi8(_mm_add_epi8(nib, _mm_set1_epi8('0')), letter));
#else
                /* two digits per store, straight into the row (bytes built on the stack and copied
                 * out as one 16-byte load stall on store forwarding) */
                for (int k = 0; k < 8; k++) memcpy(p + 3 + 2 * k, HEX2 + 2 * ((v >> (56 - 8 * k)) & 0xff), 2);
#endif
                p[19] = '"';
                p += 20;
                break;
            }
            case K_BOOL:
                if (((const uint8_t *)s->a.buf)[AT(s->na, i)]) memcpy(p, "true", 4), p += 4;
                else memcpy(p, "false", 5), p += 5;
                break;
            case K_TOKENS: {
                int64_t id = ((const int64_t *)s->c.buf)[AT(s->nc, i)];
                const int64_t *off = (const int64_t *)s->b.buf;
                Py_ssize_t len = (Py_ssize_t)(off[id + 1] - off[id]);
                if (s->padded && len <= COPY_SLACK) {
                    memcpy(p, s->padded + off[id], COPY_SLACK);
                    p += len;
                } else {
                    p = copy_short(p, (const char *)s->a.buf + off[id], len, (const char *)s->a.buf + s->na);
                }
                break;
            }
            case K_SPANS: {
                int64_t at = ((const int64_t *)s->b.buf)[AT(s->nb, i)];
                p = copy_short(p, (const char *)s->a.buf + at, (Py_ssize_t)((const int64_t *)s->c.buf)[AT(s->nc, i)],
                               (const char *)s->a.buf + s->na);
                break;
            }
            case K_FLOAT:
                if (float_token(s, i, &p, 1) < 0) return -1;
                break;
            default:
                break;
            }
        }
    }
    *written = p - out;
    return 0;
}

static PyObject *render(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *seq, *into = Py_None;
    Py_buffer dest = {0};
    if (!PyArg_ParseTuple(args, "nO|O", &n, &seq, &into)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "rowfmt: negative row count");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(seq, "rowfmt: segments must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t nseg = PySequence_Fast_GET_SIZE(fast);
    Seg *segs = PyMem_Calloc((size_t)(nseg ? nseg : 1), sizeof(Seg));
    PyObject *out = NULL;
    Py_ssize_t parsed = 0;
    if (!segs) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t cap = COPY_SLACK;
    for (; parsed < nseg; parsed++) {
        if (parse_seg(PySequence_Fast_GET_ITEM(fast, parsed), &segs[parsed], n) < 0) {
            parsed++; /* release what this one acquired */
            goto done;
        }
        cap += seg_bound(&segs[parsed], n);
    }
    Py_ssize_t written = 0;
    int rc;
    if (into != Py_None) {
        /* A reused buffer: fresh memory for every chunk costs a page fault per 4 KiB. */
        if (PyObject_GetBuffer(into, &dest, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (dest.len < cap) {
            out = PyLong_FromSsize_t(-cap); /* too small: the size it needs, nothing written */
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        rc = render_rows(segs, nseg, n, (char *)dest.buf, &written);
        Py_END_ALLOW_THREADS
        if (rc == 0) out = PyLong_FromSsize_t(written);
    } else {
        out = PyBytes_FromStringAndSize(NULL, cap);
        if (!out) goto done;
        Py_BEGIN_ALLOW_THREADS
        rc = render_rows(segs, nseg, n, PyBytes_AS_STRING(out), &written);
        Py_END_ALLOW_THREADS
        if (rc == 0 && _PyBytes_Resize(&out, written) < 0) goto done;
    }
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "rowfmt: float text has fewer tokens than rows");
        Py_CLEAR(out);
    }
done:
    if (dest.obj) PyBuffer_Release(&dest);
    for (Py_ssize_t j = 0; j < parsed; j++) release(&segs[j]);
    PyMem_Free(segs);
    Py_DECREF(fast);
    return out;
}

/* json_tokens(blob, ends, ids) -> (bytes, int64 offsets as bytes): the JSON string token of each text
 * blob[ends[i]:ends[i + 1]] for i in ids (valid UTF-8), escaped exactly as orjson escapes (jsonstr.h).
 * One pass to size, one to write; no GIL while writing. */
static PyObject *json_tokens(PyObject *mod, PyObject *args) {
    Py_buffer blob, ends, ids;
    if (!PyArg_ParseTuple(args, "y*y*y*:json_tokens", &blob, &ends, &ids)) return NULL;
    PyObject *out = NULL, *offs = NULL;
    const char *text = blob.buf;
    const int64_t *end = ends.buf, *id = ids.buf;
    Py_ssize_t nends = ends.len / 8, n = ids.len / 8, total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t i = id[k];
        if (i < 0 || i + 1 >= nends || end[i] < 0 || end[i] > end[i + 1] || end[i + 1] > blob.len) {
            PyErr_Format(PyExc_ValueError, "json_tokens: id %lld outside the text's %zd strings", (long long)i, nends - 1);
            goto done;
        }
        total += (Py_ssize_t)json_string_size(text + end[i], (size_t)(end[i + 1] - end[i]));
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    offs = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
    if (!out || !offs) { Py_CLEAR(out); goto done; }
    {
        char *w = PyBytes_AS_STRING(out);
        int64_t *o = (int64_t *)PyBytes_AS_STRING(offs);
        Py_BEGIN_ALLOW_THREADS
        char *start = w;
        o[0] = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            int64_t i = id[k];
            w = json_string_put(w, text + end[i], (size_t)(end[i + 1] - end[i]));
            o[k + 1] = w - start;
        }
        Py_END_ALLOW_THREADS
    }
done:
    PyBuffer_Release(&blob);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&ids);
    if (!out) { Py_XDECREF(offs); return NULL; }
    PyObject *r = PyTuple_Pack(2, out, offs);
    Py_DECREF(out);
    Py_DECREF(offs);
    return r;
}

/* fixed3(float64 values) -> int64 k per value as bytes, or None: k where every value is the float64
 * nearest k / 1000 (a µs time or interval from whole ns) and |value| < 2^43. There the float's
 * shortest round-trip text, orjson's, is k / 1000 with 3 decimals less trailing zeros: it round-trips
 * (the float is k / 1000's nearest), and no text with fewer digits does, since below 2^43 floats lie
 * closer than 0.001 apart, so any other multiple of 0.001 has a float of its own. -0.0 (orjson writes
 * the sign), NaN, infinities and anything else: None, and the caller formats with orjson. */
#define FIXED3_LIMIT 8796093022208.0 /* 2^43 */
static PyObject *fixed3(PyObject *mod, PyObject *arg) {
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (v.itemsize != 8 || !v.format || strcmp(v.format, "d") != 0) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_TypeError, "fixed3: a contiguous float64 column");
        return NULL;
    }
    Py_ssize_t n = v.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out) {
        PyBuffer_Release(&v);
        return NULL;
    }
    const double *x = (const double *)v.buf;
    int64_t *k = (int64_t *)PyBytes_AS_STRING(out);
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = x[i];
        if (!(fabs(d) < FIXED3_LIMIT)) { ok = 0; break; } /* NaN fails too */
        /* d * 1000 rounds twice (d is k / 1000 to half a float step, the product to half of its
         * own): within 0.75 of k, so k is the rounded product or a neighbour */
        int64_t q = (int64_t)nearbyint(d * 1000.0);
        if ((double)q / 1000.0 != d) {
            if ((double)(q - 1) / 1000.0 == d) q -= 1;
            else if ((double)(q + 1) / 1000.0 == d) q += 1;
            else { ok = 0; break; }
        }
        if (q == 0 && signbit(d)) { ok = 0; break; }
        k[i] = q;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    if (!ok) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"fixed3", fixed3, METH_O,
     "fixed3($module, values, /)\n--\n\n"
     "int64 k per float64 value (bytes) where each value is the float nearest k / 1000 and below 2^43 in "
     "magnitude (render those as FIXED3: orjson's text), else None."},
    {"json_tokens", json_tokens, METH_VARARGS,
     "json_tokens($module, blob, ends, ids, /)\n--\n\n"
     "(tokens, offsets): JSON string tokens (orjson's escaping) of the UTF-8 texts blob[ends[i]:ends[i + 1]] "
     "for i in ids (int64), and their n + 1 int64 offsets as bytes."},
    {"render", render, METH_VARARGS,
     "render($module, n, segments, into=None, /)\n--\n\n"
     "n compact JSON rows described by segments (see the module source) as bytes. With a writable buffer "
     "`into`: the byte count written, or minus the size needed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.rowfmt",
                                    "Compact JSON event rows from numpy columns.", -1, methods};

PyMODINIT_FUNC PyInit_rowfmt(void) {
    for (int r = 0; r < 1000; r++) {
        char d[4] = {'.', (char)('0' + r / 100), (char)('0' + r / 10 % 10), (char)('0' + r % 10)};
        memcpy(FRAC3[r], d, 4);
        memcpy(FRAC_SHORT[r], d, 4);
        FRAC_LEN[r] = (unsigned char)(r % 100 == 0 ? 2 : r % 10 == 0 ? 3 : 4);
    }
    for (int b = 0; b < 256; b++) {
        HEX2[2 * b] = "0123456789abcdef"[b >> 4];
        HEX2[2 * b + 1] = "0123456789abcdef"[b & 15];
    }
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const struct { const char *name; int value; } consts[] = {
        {"LIT", K_LIT}, {"INT", K_INT}, {"UINT", K_UINT}, {"MICROS", K_MICROS}, {"HEX", K_HEX},
        {"BOOL", K_BOOL}, {"TOKENS", K_TOKENS}, {"FLOAT", K_FLOAT}, {"SPANS", K_SPANS}, {"FIXED3", K_FIXED3},
        {"ENTRY", F_ENTRY}, {"OPEN", F_OPEN}, {"CLOSE", F_CLOSE},
    };
    for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
        if (PyModule_AddIntConstant(m, consts[k].name, consts[k].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
