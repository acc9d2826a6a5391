/* xpuprof._native.tracescan: the one C reader of Chrome-trace (Kineto) JSON. A strict JSON grammar
 * (strings with their escapes and UTF-8, numbers, literals, nesting) reads a document of any size in
 * pieces, so a trace of any size reads in bounded memory; per event it keeps only what the readers take,
 * as columns, without a Python object per event. xpuprof.trace.read.kineto_stream drives it (the one
 * Kineto JSON reader; orjson over the whole document is its fallback when this part is not built).
 *
 * Python keeps a buffer of the document's next bytes and calls, in order:
 *
 * header(buf, final) -> (status, events_start, members)
 *   the top level up to the traceEvents array: status 1 found (events_start: the offset after its
 *   '['; members: int64 (key_start, key_end, value_start, value_end) per earlier top-level key, key
 *   ranges with their quotes), 0 more bytes needed, -1 invalid JSON, -2 "traceEvents" is not an array,
 *   -3 the document ends without one. The bare-array form ("[...]") starts its events at once.
 *
 * events(buf, start, state, final) -> (n, ph, name, cat, kind, num, span, complex, strings, args_span,
 *                                      aux, exact, consumed, state, status, error_at)
 *   the complete events from `start`, as columns:
 *     ph: uint8 per event: the single ASCII character of "ph", 0 when absent (0xff: another value)
 *     name, cat: int32 per event: index into strings, -1 when absent
 *     kind: uint8 [n, 5] for ts, dur, pid, tid, id: 0 absent, 1 int64, 2 double
 *     num: 8 bytes [n, 5]: int64 or double by kind
 *     span: int64 [n, 2]: the event's [start, end) byte range
 *     complex: uint8 per event: 1 when Python must read the event itself (a field the columns do not
 *              hold exactly: a non-string name, a string pid, an escaped key, an integer beyond int64)
 *     strings: int64 [k, 2]: (start, end) of each distinct raw string body (between the quotes)
 *     args_span: int64 [n, 2]: the byte range of the event's "args" object, else (-1, -1)
 *     aux: uint8 per event: the one-character value of "s" (an instant's scope) or "bp" (a flow end's
 *          binding point), 0 when absent or longer
 *     exact: int64 [n, 2]: ts and dur in ns from the numbers' text (exact_ns)
 *   state: 0 after '[', 1 after ',', 2 after an event. consumed: where the next call starts (the
 *   first incomplete event stays in the buffer). status 0: more may follow, 1: the array closed
 *   (consumed is after its ']'), -1: invalid JSON at error_at (an event whose object closes inside
 *   the buffer yet does not parse, a missing ',', or, when final, a truncated document).
 *
 * args(buf, spans, int_keys, float_keys, drop_keys) -> (ints, int_present, floats, float_present,
 *                                                       offsets, blob, complex)
 *   for each object at spans (int64 [n, 2], -1 for none): its int keys' int64 values and its float
 *   keys' numbers as doubles, each with a present flag (null is absent), and the other members
 *   (drop_keys skipped) as one JSON object per row in `blob`, row i at offsets[i]:offsets[i+1]
 *   (empty when it has none): ready as an Arrow string column, without a Python object per row.
 *   complex (uint8 [n]): a row with an escaped key, or a listed key whose value the columns cannot
 *   hold: the caller reads those rows itself.
 *
 * members(buf, spans, int_keys, drop_keys) -> (ints, present, others, complex)
 *   args() for int keys only, with the other members' text as a list (a bytes object per row, None
 *   for a row without any): for the few objects a caller keeps one by one (torch's ops).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#define JS_FN static

#define MAX_DEPTH 256
enum { F_TS, F_DUR, F_PID, F_TID, F_ID, NF };
enum { K_ABSENT = 0, K_INT = 1, K_DOUBLE = 2 };

typedef struct {
    const unsigned char *p, *end, *base;
    int fail;
} parser;

/* ------------------------------------------------------------------ growable column */
typedef struct {
    char *data;
    size_t used, cap;
} column;

JS_FN int col_reserve(column *c, size_t more) {
    if (c->used + more <= c->cap) return 0;
    size_t cap = c->cap ? c->cap : 1 << 16;
    while (cap < c->used + more) cap *= 2;
    char *d = realloc(c->data, cap);
    if (!d) return -1;
    c->data = d;
    c->cap = cap;
    return 0;
}

JS_FN int col_push(column *c, const void *v, size_t size) {
    if (col_reserve(c, size) < 0) return -1;
    memcpy(c->data + c->used, v, size);
    c->used += size;
    return 0;
}

/* ------------------------------------------------------------------ distinct raw strings */
typedef struct {
    int64_t *start, *len;
    size_t count, cap;
    int32_t *slots;
    size_t mask;
    const unsigned char *base;
} strtab;

JS_FN uint64_t hash_bytes(const unsigned char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
    return h ^ (h >> 29);
}

JS_FN int strtab_init(strtab *t, const unsigned char *base) {
    memset(t, 0, sizeof *t);
    t->base = base;
    t->mask = 1023;
    t->slots = malloc((t->mask + 1) * sizeof *t->slots);
    if (!t->slots) return -1;
    memset(t->slots, 0xff, (t->mask + 1) * sizeof *t->slots);
    return 0;
}

JS_FN void strtab_free(strtab *t) { free(t->start); free(t->len); free(t->slots); }

JS_FN int strtab_grow(strtab *t) {
    size_t mask = t->mask * 2 + 1;
    int32_t *slots = malloc((mask + 1) * sizeof *slots);
    if (!slots) return -1;
    memset(slots, 0xff, (mask + 1) * sizeof *slots);
    for (size_t i = 0; i < t->count; i++) {
        size_t h = hash_bytes(t->base + t->start[i], (size_t)t->len[i]) & mask;
        while (slots[h] >= 0) h = (h + 1) & mask;
        slots[h] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* id of the raw string body [s, s + n), added when new; -1 on no memory */
JS_FN int32_t strtab_id(strtab *t, const unsigned char *s, size_t n) {
    size_t h = hash_bytes(s, n) & t->mask;
    for (;;) {
        int32_t id = t->slots[h];
        if (id < 0) break;
        if ((size_t)t->len[id] == n && memcmp(t->base + t->start[id], s, n) == 0) return id;
        h = (h + 1) & t->mask;
    }
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        int64_t *a = realloc(t->start, cap * sizeof *a);
        if (!a) return -1;
        t->start = a;
        int64_t *b = realloc(t->len, cap * sizeof *b);
        if (!b) return -1;
        t->len = b;
        t->cap = cap;
    }
    if (t->count >= (size_t)INT32_MAX) return -1;
    int32_t id = (int32_t)t->count++;
    t->start[id] = s - t->base;
    t->len[id] = (int64_t)n;
    t->slots[h] = id;
    if (t->count * 2 > t->mask + 1 && strtab_grow(t) < 0) return -1;
    return id;
}

/* ------------------------------------------------------------------ JSON grammar */
static inline void ws(parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t')) P->p++;
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The 4 hex digits of a \uXXXX escape at p (p[0] is the backslash), or -1. */
JS_FN int hex4(const unsigned char *p, const unsigned char *end) {
    if (p + 6 > end) return -1;
    int v = 0;
    for (int i = 2; i < 6; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* At '"': validates the string, leaves p after the closing quote. body/len: between the quotes. */
JS_FN int scan_string(parser *P, const unsigned char **body, size_t *len, int *escaped) {
    const unsigned char *p = P->p + 1, *end = P->end;
    *escaped = 0;
    *body = p;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') { *len = (size_t)(p - *body); P->p = p + 1; return 0; }
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) return -1;
            unsigned char e = p[1];
            if (e == 'u') {
                int v = hex4(p, end);
                if (v < 0) return -1;
                p += 6;
                if (v >= 0xDC00 && v <= 0xDFFF) return -1; /* a lone low surrogate: the general path decides */
                if (v >= 0xD800 && v <= 0xDBFF) { /* a pair, or the general path decides */
                    if (p + 1 >= end || p[0] != '\\' || p[1] != 'u') return -1;
                    int lo = hex4(p, end);
                    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                    p += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) return -1;
            p += 2;
            continue;
        }
        if (c < 0x20) return -1;
        if (c < 0x80) { p++; continue; }
        /* UTF-8: the shortest form only, no surrogates, at most U+10FFFF */
        int n;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else return -1;
        if (p + n >= end) return -1;
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80) return -1;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return -1;
        p += n + 1;
    }
    return -1;
}

/* A JSON number; kind K_INT (fits int64, no fraction/exponent) or K_DOUBLE, or 3 when it is an
 * integer beyond int64 (Python then reads the event). */
JS_FN int scan_number(parser *P, int *kind, int64_t *iv, double *dv) {
    const unsigned char *s = P->p, *p = P->p, *end = P->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return -1;
    int is_int = 1;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    P->p = p;
    size_t n = (size_t)(p - s);
    if (is_int) {
        const unsigned char *q = s;
        int neg = *q == '-';
        if (neg) q++;
        uint64_t v = 0;
        for (; q < p; q++) {
            uint64_t d = (uint64_t)(*q - '0');
            if (v > (UINT64_MAX - d) / 10) { *kind = 3; return 0; }
            v = v * 10 + d;
        }
        if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1)) { *kind = 3; return 0; }
        *iv = neg ? (int64_t)(0 - v) : (int64_t)v;
        *kind = K_INT;
        return 0;
    }
    char tmp[64];
    if (n >= sizeof tmp) { *kind = 3; return 0; } /* very long literal: Python reads it */
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *dv = strtod(tmp, NULL);
    *kind = K_DOUBLE;
    return 0;
}

JS_FN int skip_value(parser *P, int depth);

JS_FN int skip_container(parser *P, int depth, unsigned char close) {
    if (depth > MAX_DEPTH) return -1;
    P->p++;
    ws(P);
    if (P->p < P->end && *P->p == close) { P->p++; return 0; }
    for (;;) {
        if (close == '}') {
            const unsigned char *b; size_t l; int esc;
            if (P->p >= P->end || *P->p != '"' || scan_string(P, &b, &l, &esc) < 0) return -1;
            ws(P);
            if (P->p >= P->end || *P->p != ':') return -1;
            P->p++;
            ws(P);
        }
        if (skip_value(P, depth + 1) < 0) return -1;
        ws(P);
        if (P->p >= P->end) return -1;
        if (*P->p == ',') { P->p++; ws(P); continue; }
        if (*P->p == close) { P->p++; return 0; }
        return -1;
    }
}

JS_FN int literal(parser *P, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0) return -1;
    P->p += n;
    return 0;
}

JS_FN int skip_value(parser *P, int depth) {
    if (P->p >= P->end) return -1;
    unsigned char c = *P->p;
    if (c == '{') return skip_container(P, depth, '}');
    if (c == '[') return skip_container(P, depth, ']');
    if (c == '"') { const unsigned char *b; size_t l; int e; return scan_string(P, &b, &l, &e); }
    if (c == 't') return literal(P, "true");
    if (c == 'f') return literal(P, "false");
    if (c == 'n') return literal(P, "null");
    int kind; int64_t iv; double dv;
    return scan_number(P, &kind, &iv, &dv);
}


/* A µs value as int64 ns: exact from the decimal text when it has at most 3 fractional digits and no
 * exponent (a double holds 4400680850787.091 only approximately: its product by 1000 rounds to the
 * neighbouring ns about one time in four); otherwise the double times 1000, rounded half to even.
 * 0 when out of int64's range (the caller checks the range on the number itself). */
static inline int64_t exact_ns(const unsigned char *s, const unsigned char *e, int kind, int64_t iv, double dv) {
    if (kind == K_INT) {
        if (iv > INT64_MAX / 1000 || iv < INT64_MIN / 1000) return 0;
        return iv * 1000;
    }
    int neg = s < e && *s == '-';
    const unsigned char *p = s + neg;
    uint64_t whole = 0;
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10) goto approx;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    uint64_t frac = 0;
    int digits = 0;
    if (p < e && *p == '.') {
        for (p++; p < e && *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits >= 3) goto approx;
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
    }
    if (p != e) goto approx; /* an exponent */
    for (int d = digits; d < 3; d++) frac *= 10;
    if (whole > (uint64_t)(INT64_MAX / 1000) - 1) goto approx;
    {
        int64_t ns = (int64_t)(whole * 1000 + frac);
        return neg ? -ns : ns;
    }
approx: {
        double x = dv * 1000.0;
        if (!(x > -9.2e18 && x < 9.2e18)) return 0;
        return (int64_t)llrint(x);
    }
}

/* ------------------------------------------------------------------ events */
typedef struct {
    column ph, name, cat, kind, num, span, complex, args, aux, exact;
    strtab strings;
    size_t n;
} events;

JS_FN int key_is(const unsigned char *b, size_t l, const char *word) {
    return strlen(word) == l && memcmp(b, word, l) == 0;
}

JS_FN int scan_event(parser *P, events *E) {
    if (P->p >= P->end || *P->p != '{') return -1; /* not an object: the general path names it */
    const unsigned char *start = P->p;
    unsigned char ph = 0, cx = 0, aux = 0;
    int32_t name = -1, cat = -1;
    uint8_t kind[NF] = {0};
    int64_t num[NF] = {0};
    int64_t exact[2] = {0, 0}; /* ts and dur in ns, from the number's text (see exact_ns) */
    int64_t args[2] = {-1, -1};
    P->p++;
    ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
    } else {
        for (;;) {
            const unsigned char *kb; size_t kl; int kesc;
            if (P->p >= P->end || *P->p != '"' || scan_string(P, &kb, &kl, &kesc) < 0) return -1;
            ws(P);
            if (P->p >= P->end || *P->p != ':') return -1;
            P->p++;
            ws(P);
            if (P->p >= P->end) return -1;
            int field = -1, strfield = 0;
            if (kesc) cx = 1; /* an escaped key may spell a field name: Python reads the event */
            else if (key_is(kb, kl, "ph")) strfield = 1;
            else if (key_is(kb, kl, "name")) strfield = 2;
            else if (key_is(kb, kl, "cat")) strfield = 3;
            else if (key_is(kb, kl, "ts")) field = F_TS;
            else if (key_is(kb, kl, "dur")) field = F_DUR;
            else if (key_is(kb, kl, "pid")) field = F_PID;
            else if (key_is(kb, kl, "tid")) field = F_TID;
            else if (key_is(kb, kl, "id")) field = F_ID;
            else if (key_is(kb, kl, "s") || key_is(kb, kl, "bp")) strfield = 4;
            unsigned char c = *P->p;
            if (strfield == 4) {
                /* an instant's scope or a flow end's binding point: one ASCII character, else none */
                const unsigned char *vstart = P->p, *b; size_t l; int esc;
                if (c == '"') {
                    if (scan_string(P, &b, &l, &esc) < 0) return -1;
                    if (l == 1 && b[0] >= 0x20 && b[0] < 0x7f && b[0] != '\\') aux = b[0];
                } else if (skip_value(P, 1) < 0) {
                    return -1;
                }
                (void)vstart;
            } else if (strfield && c == '"') {
                const unsigned char *b; size_t l; int esc;
                if (scan_string(P, &b, &l, &esc) < 0) return -1;
                if (strfield == 1) {
                    if (l == 1 && b[0] >= 0x20 && b[0] < 0x7f && b[0] != '\\') ph = b[0];
                    else { ph = 0xff; cx = 1; }
                } else {
                    int32_t id = strtab_id(&E->strings, b, l);
                    if (id < 0) return -2;
                    if (strfield == 2) name = id; else cat = id;
                }
            } else if (field >= 0 && (c == '-' || (c >= '0' && c <= '9'))) {
                int k; int64_t iv = 0; double dv = 0;
                const unsigned char *nstart = P->p;
                if (scan_number(P, &k, &iv, &dv) < 0) return -1;
                if (k == K_INT) { kind[field] = K_INT; num[field] = iv; }
                else if (k == K_DOUBLE) { kind[field] = K_DOUBLE; memcpy(&num[field], &dv, 8); }
                else cx = 1; /* an integer beyond int64: Python reads the event */
                if ((field == F_TS || field == F_DUR) && (k == K_INT || k == K_DOUBLE))
                    exact[field == F_TS ? 0 : 1] = exact_ns(nstart, P->p, k, iv, dv);
            } else {
                if (strfield || field >= 0) cx = 1; /* a field of another type: Python reads the event */
                int is_args = !kesc && c == '{' && key_is(kb, kl, "args");
                const unsigned char *vstart = P->p;
                if (skip_value(P, 1) < 0) return -1;
                if (is_args) { args[0] = vstart - P->base; args[1] = P->p - P->base; }
            }
            ws(P);
            if (P->p >= P->end) return -1;
            if (*P->p == ',') { P->p++; ws(P); continue; }
            if (*P->p == '}') { P->p++; break; }
            return -1;
        }
    }
    int64_t span[2] = {start - P->base, P->p - P->base};
    if (col_push(&E->ph, &ph, 1) || col_push(&E->name, &name, 4) || col_push(&E->cat, &cat, 4)
        || col_push(&E->kind, kind, NF) || col_push(&E->num, num, 8 * NF) || col_push(&E->span, span, 16)
        || col_push(&E->complex, &cx, 1) || col_push(&E->args, args, 16) || col_push(&E->aux, &aux, 1)
        || col_push(&E->exact, exact, 16))
        return -2;
    E->n++;
    return 0;
}

JS_FN void events_free(events *E) {
    column *cols[] = {&E->ph, &E->name, &E->cat, &E->kind, &E->num, &E->span, &E->complex, &E->args, &E->aux, &E->exact};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) free(cols[i]->data);
    strtab_free(&E->strings);
}

/* The column as bytes; its C buffer is freed at once, so only one column is ever held twice. */
JS_FN PyObject *column_bytes(column *c) {
    PyObject *b = PyBytes_FromStringAndSize(c->data ? c->data : "", (Py_ssize_t)c->used);
    free(c->data);
    c->data = NULL;
    c->used = c->cap = 0;
    return b;
}

/* ------------------------------------------------------------------ members of objects */
typedef struct {
    const unsigned char *b;
    size_t l;
} keyref;

JS_FN int key_index(const keyref *keys, Py_ssize_t n, const unsigned char *b, size_t l) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (keys[i].l == l && memcmp(keys[i].b, b, l) == 0) return (int)i;
    return -1;
}

JS_FN int keyrefs(PyObject *tuple, keyref **out, Py_ssize_t *n, const char *what) {
    if (!PyTuple_Check(tuple)) {
        PyErr_Format(PyExc_TypeError, "members: %s must be a tuple of bytes", what);
        return -1;
    }
    *n = PyTuple_GET_SIZE(tuple);
    *out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof(keyref));
    if (!*out) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *k = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(k)) {
            PyErr_Format(PyExc_TypeError, "members: %s must be a tuple of bytes", what);
            return -1;
        }
        (*out)[i].b = (const unsigned char *)PyBytes_AS_STRING(k);
        (*out)[i].l = (size_t)PyBytes_GET_SIZE(k);
    }
    return 0;
}

/* One object at [s, e): the rows of its int keys (ints: int64 values) and float keys (floats: any JSON
 * number, as a double) filled with a present flag each (null counts as absent), the other members'
 * text appended to `text` (comma separated), keys in `drops` skipped. 1 when the row is complex (an
 * escaped key, or a value of a listed key the columns cannot hold), 0 when done, -1 on malformed
 * input, -2 no memory. */
JS_FN int object_members(const unsigned char *base, int64_t s, int64_t e, const keyref *ints, Py_ssize_t ni,
                         const keyref *floats, Py_ssize_t nf, const keyref *drops, Py_ssize_t nd, int64_t *vals,
                         uint8_t *present, double *fvals, uint8_t *fpresent, column *text) {
    parser P = {base + s, base + e, base, 0};
    if (P.p >= P.end || *P.p != '{') return -1;
    P.p++;
    ws(&P);
    if (P.p < P.end && *P.p == '}') return 0;
    int complex_row = 0;
    for (;;) {
        const unsigned char *kstart = P.p, *kb; size_t kl; int kesc;
        if (P.p >= P.end || *P.p != '"' || scan_string(&P, &kb, &kl, &kesc) < 0) return -1;
        ws(&P);
        if (P.p >= P.end || *P.p != ':') return -1;
        P.p++;
        ws(&P);
        if (kesc) complex_row = 1;
        int ki = kesc ? -1 : key_index(ints, ni, kb, kl);
        int fi = kesc || ki >= 0 ? -1 : key_index(floats, nf, kb, kl);
        int drop = !kesc && ki < 0 && fi < 0 && key_index(drops, nd, kb, kl) >= 0;
        const unsigned char *vstart = P.p;
        if (ki >= 0) {
            int kind; int64_t iv = 0; double dv;
            unsigned char c = P.p < P.end ? *P.p : 0;
            if (c == 'n') { /* null: absent, as the general path reads it */
                if (literal(&P, "null") < 0) return -1;
            } else if ((c == '-' || (c >= '0' && c <= '9')) && scan_number(&P, &kind, &iv, &dv) == 0
                       && kind == K_INT) {
                vals[ki] = iv;
                present[ki] = 1;
            } else {
                complex_row = 1;
                P.p = vstart;
                if (skip_value(&P, 1) < 0) return -1;
            }
        } else if (fi >= 0) {
            int kind; int64_t iv = 0; double dv = 0;
            unsigned char c = P.p < P.end ? *P.p : 0;
            if (c == 'n') {
                if (literal(&P, "null") < 0) return -1;
            } else if ((c == '-' || (c >= '0' && c <= '9')) && scan_number(&P, &kind, &iv, &dv) == 0
                       && (kind == K_INT || kind == K_DOUBLE)) {
                fvals[fi] = kind == K_INT ? (double)iv : dv;
                fpresent[fi] = 1;
            } else {
                complex_row = 1;
                P.p = vstart;
                if (skip_value(&P, 1) < 0) return -1;
            }
        } else {
            if (skip_value(&P, 1) < 0) return -1;
            if (!drop) {
                if (text->used && col_push(text, ",", 1)) return -2;
                if (col_push(text, kstart, (size_t)(P.p - kstart))) return -2;
            }
            (void)vstart;
        }
        ws(&P);
        if (P.p >= P.end) return -1;
        if (*P.p == ',') { P.p++; ws(&P); continue; }
        if (*P.p == '}') break;
        return -1;
    }
    return complex_row;
}


/* ------------------------------------------------------------------ the module */
/* Where the object starting at s ends (after its '}'), by brackets outside strings only; -1 when the
 * buffer ends first. Tells an incomplete last event (wait for more bytes) from an invalid one. */
static int64_t balanced_end(const unsigned char *p, const unsigned char *end, const unsigned char *base) {
    int64_t depth = 0;
    int in_string = 0;
    for (; p < end; p++) {
        unsigned char c = *p;
        if (in_string) {
            if (c == '\\') p++;
            else if (c == '"') in_string = 0;
            continue;
        }
        if (c == '"') in_string = 1;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return (p + 1) - base;
        }
    }
    return -1;
}

static PyObject *py_header(PyObject *self, PyObject *args) {
    Py_buffer view;
    int final;
    if (!PyArg_ParseTuple(args, "y*p", &view, &final)) return NULL;
    parser P = {view.buf, (const unsigned char *)view.buf + view.len, view.buf, 0};
    column members = {0};
    int status = 0;
    int64_t events_start = -1;
    ws(&P);
    if (P.p >= P.end) {
        status = final ? -1 : 0;
    } else if (*P.p == '[') {
        status = 1;
        events_start = (P.p + 1) - P.base;
    } else if (*P.p != '{') {
        status = -1;
    } else {
        P.p++;
        ws(&P);
        if (P.p < P.end && *P.p == '}') status = -3;
        else for (;;) {
            const unsigned char *kstart = P.p, *kb; size_t kl; int kesc;
            if (P.p >= P.end) { status = final ? -1 : 0; break; }
            if (*P.p != '"') { status = -1; break; }
            if (scan_string(&P, &kb, &kl, &kesc) < 0) { status = final ? -1 : 0; break; } /* Python caps the wait */
            const unsigned char *kend = P.p;
            ws(&P);
            if (P.p >= P.end) { status = final ? -1 : 0; break; }
            if (*P.p != ':') { status = -1; break; }
            P.p++;
            ws(&P);
            if (P.p >= P.end) { status = final ? -1 : 0; break; }
            if (!kesc && key_is(kb, kl, "traceEvents")) {
                if (*P.p != '[') { status = -2; break; }
                status = 1;
                events_start = (P.p + 1) - P.base;
                break;
            }
            const unsigned char *vstart = P.p;
            if (skip_value(&P, 1) < 0) {
                /* a container that closes inside the buffer yet does not parse is invalid; anything else may
                 * be cut by the buffer's end and waits for more bytes (Python caps the wait) */
                status = final || balanced_end(vstart, P.end, P.base) >= 0 ? -1 : 0;
                break;
            }
            int64_t m[4] = {kstart - P.base, kend - P.base, vstart - P.base, P.p - P.base};
            if (col_push(&members, m, sizeof m)) { free(members.data); PyBuffer_Release(&view); return PyErr_NoMemory(); }
            ws(&P);
            if (P.p >= P.end) { status = final ? -1 : 0; break; }
            if (*P.p == ',') { P.p++; ws(&P); continue; }
            status = *P.p == '}' ? -3 : -1;
            break;
        }
    }
    PyBuffer_Release(&view);
    PyObject *m = column_bytes(&members);
    if (!m) return NULL;
    return Py_BuildValue("(iLN)", status, (long long)events_start, m);
}

static PyObject *py_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    int state, final;
    if (!PyArg_ParseTuple(args, "y*nip", &view, &start, &state, &final)) return NULL;
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "events: start lies outside the buffer");
        return NULL;
    }
    parser P = {(const unsigned char *)view.buf + start, (const unsigned char *)view.buf + view.len, view.buf, 0};
    events E;
    memset(&E, 0, sizeof E);
    PyObject *result = NULL;
    int status = 0, r = 0;
    int64_t consumed = start, error_at = -1;
    if (strtab_init(&E.strings, P.base) < 0) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        ws(&P);
        consumed = P.p - P.base;
        if (P.p >= P.end) {
            if (final) { status = -1; error_at = consumed; }
            break;
        }
        if (state == 2) { /* after an event: ',' or ']' */
            if (*P.p == ',') { P.p++; state = 1; consumed = P.p - P.base; continue; }
            if (*P.p == ']') { P.p++; consumed = P.p - P.base; status = 1; break; }
            status = -1; error_at = consumed;
            break;
        }
        if (*P.p == ']' && state == 0) { P.p++; consumed = P.p - P.base; status = 1; break; }
        const unsigned char *ev = P.p;
        r = scan_event(&P, &E);
        if (r == -2) break;
        if (r < 0) {
            P.p = ev;
            if (!final && balanced_end(ev, P.end, P.base) < 0 && *ev == '{') break; /* cut: wait for more */
            status = -1; error_at = ev - P.base;
            break;
        }
        state = 2;
        consumed = P.p - P.base;
    }
    Py_END_ALLOW_THREADS
    if (r == -2) { PyErr_NoMemory(); goto done; }
    column strings = {0};
    for (size_t i = 0; i < E.strings.count; i++) {
        int64_t se[2] = {E.strings.start[i], E.strings.start[i] + E.strings.len[i]};
        if (col_push(&strings, se, 16)) { free(strings.data); PyErr_NoMemory(); goto done; }
    }
    PyObject *parts[11];
    column *cols[11] = {&E.ph, &E.name, &E.cat, &E.kind, &E.num, &E.span, &E.complex, &strings, &E.args, &E.aux,
                        &E.exact};
    int ok = 1;
    for (int i = 0; i < 11; i++) {
        parts[i] = ok ? column_bytes(cols[i]) : NULL;
        if (!parts[i]) ok = 0;
    }
    free(strings.data);
    if (ok)
        result = Py_BuildValue("(nNNNNNNNNNNNLiiL)", (Py_ssize_t)E.n, parts[0], parts[1], parts[2], parts[3], parts[4],
                               parts[5], parts[6], parts[7], parts[8], parts[9], parts[10], (long long)consumed, state,
                               status, (long long)error_at);
    else
        for (int i = 0; i < 11; i++) Py_XDECREF(parts[i]);
done:
    events_free(&E);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *py_args(PyObject *self, PyObject *args) {
    PyObject *buf, *spans_obj, *int_keys, *float_keys, *drop_keys;
    if (!PyArg_ParseTuple(args, "OOO!O!O!", &buf, &spans_obj, &PyTuple_Type, &int_keys, &PyTuple_Type, &float_keys,
                          &PyTuple_Type, &drop_keys))
        return NULL;
    Py_buffer view = {0}, spans = {0};
    keyref *ints = NULL, *floats = NULL, *drops = NULL;
    Py_ssize_t ni = 0, nf = 0, nd = 0;
    PyObject *iv_b = NULL, *ip_b = NULL, *fv_b = NULL, *fp_b = NULL, *off_b = NULL, *blob_b = NULL, *cx_b = NULL;
    PyObject *result = NULL;
    column text = {0}, blob = {0};
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(spans_obj, &spans, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (spans.len % 16) {
        PyErr_SetString(PyExc_ValueError, "args: spans must be int64 (start, end) pairs");
        goto done;
    }
    if (keyrefs(int_keys, &ints, &ni, "int_keys") < 0 || keyrefs(float_keys, &floats, &nf, "float_keys") < 0
        || keyrefs(drop_keys, &drops, &nd, "drop_keys") < 0)
        goto done;
    Py_ssize_t n = spans.len / 16;
    const int64_t *sp = (const int64_t *)spans.buf;
    iv_b = PyBytes_FromStringAndSize(NULL, n * ni * 8);
    ip_b = PyBytes_FromStringAndSize(NULL, n * ni);
    fv_b = PyBytes_FromStringAndSize(NULL, n * nf * 8);
    fp_b = PyBytes_FromStringAndSize(NULL, n * nf);
    off_b = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
    cx_b = PyBytes_FromStringAndSize(NULL, n);
    if (!iv_b || !ip_b || !fv_b || !fp_b || !off_b || !cx_b) goto done;
    int64_t *iv = (int64_t *)PyBytes_AS_STRING(iv_b), *off = (int64_t *)PyBytes_AS_STRING(off_b);
    double *fv = (double *)PyBytes_AS_STRING(fv_b);
    uint8_t *ip = (uint8_t *)PyBytes_AS_STRING(ip_b), *fp = (uint8_t *)PyBytes_AS_STRING(fp_b);
    uint8_t *cx = (uint8_t *)PyBytes_AS_STRING(cx_b);
    memset(iv, 0, (size_t)(n * ni * 8));
    memset(ip, 0, (size_t)(n * ni));
    memset(fv, 0, (size_t)(n * nf * 8));
    memset(fp, 0, (size_t)(n * nf));
    const unsigned char *base = view.buf;
    off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = sp[2 * i], e = sp[2 * i + 1];
        cx[i] = 0;
        text.used = 0;
        if (s >= 0) {
            if (e > view.len || s > e) {
                PyErr_SetString(PyExc_ValueError, "args: a span lies outside the buffer");
                goto done;
            }
            int r = object_members(base, s, e, ints, ni, floats, nf, drops, nd, iv + i * ni, ip + i * ni, fv + i * nf,
                                   fp + i * nf, &text);
            if (r == -2) { PyErr_NoMemory(); goto done; }
            if (r < 0) {
                PyErr_Format(PyExc_ValueError, "args: the span of row %zd is not a JSON object", i);
                goto done;
            }
            cx[i] = (uint8_t)r;
        }
        if (text.used) {
            if (col_push(&blob, "{", 1) || col_push(&blob, text.data, text.used) || col_push(&blob, "}", 1)) {
                PyErr_NoMemory();
                goto done;
            }
        }
        off[i + 1] = (int64_t)blob.used;
    }
    blob_b = column_bytes(&blob);
    if (!blob_b) goto done;
    result = Py_BuildValue("(OOOOOOO)", iv_b, ip_b, fv_b, fp_b, off_b, blob_b, cx_b);
done:
    Py_XDECREF(iv_b);
    Py_XDECREF(ip_b);
    Py_XDECREF(fv_b);
    Py_XDECREF(fp_b);
    Py_XDECREF(off_b);
    Py_XDECREF(blob_b);
    Py_XDECREF(cx_b);
    free(text.data);
    free(blob.data);
    PyMem_Free(ints);
    PyMem_Free(floats);
    PyMem_Free(drops);
    if (spans.obj) PyBuffer_Release(&spans);
    if (view.obj) PyBuffer_Release(&view);
    return result;
}

static PyObject *py_members(PyObject *self, PyObject *args) {
    PyObject *buf, *spans_obj, *int_keys, *drop_keys;
    if (!PyArg_ParseTuple(args, "OOO!O!", &buf, &spans_obj, &PyTuple_Type, &int_keys, &PyTuple_Type, &drop_keys))
        return NULL;
    Py_buffer view = {0}, spans = {0};
    keyref *ints = NULL, *drops = NULL;
    Py_ssize_t ni = 0, nd = 0;
    PyObject *vals_b = NULL, *present_b = NULL, *others = NULL, *cx_b = NULL, *result = NULL;
    column text = {0};
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(spans_obj, &spans, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (spans.len % 16) {
        PyErr_SetString(PyExc_ValueError, "members: spans must be int64 (start, end) pairs");
        goto done;
    }
    if (keyrefs(int_keys, &ints, &ni, "int_keys") < 0 || keyrefs(drop_keys, &drops, &nd, "drop_keys") < 0) goto done;
    Py_ssize_t n = spans.len / 16;
    const int64_t *sp = (const int64_t *)spans.buf;
    vals_b = PyBytes_FromStringAndSize(NULL, n * ni * 8);
    present_b = PyBytes_FromStringAndSize(NULL, n * ni);
    cx_b = PyBytes_FromStringAndSize(NULL, n);
    others = PyList_New(n);
    if (!vals_b || !present_b || !cx_b || !others) goto done;
    int64_t *vals = (int64_t *)PyBytes_AS_STRING(vals_b);
    uint8_t *present = (uint8_t *)PyBytes_AS_STRING(present_b), *cx = (uint8_t *)PyBytes_AS_STRING(cx_b);
    memset(vals, 0, (size_t)(n * ni * 8));
    memset(present, 0, (size_t)(n * ni));
    const unsigned char *base = view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = sp[2 * i], e = sp[2 * i + 1];
        cx[i] = 0;
        text.used = 0;
        if (s >= 0) {
            if (e > view.len || s > e) {
                PyErr_SetString(PyExc_ValueError, "members: a span lies outside the buffer");
                goto done;
            }
            int r = object_members(base, s, e, ints, ni, NULL, 0, drops, nd, vals + i * ni, present + i * ni, NULL,
                                   NULL, &text);
            if (r == -2) { PyErr_NoMemory(); goto done; }
            if (r < 0) {
                PyErr_Format(PyExc_ValueError, "members: the span of row %zd is not a JSON object", i);
                goto done;
            }
            cx[i] = (uint8_t)r;
        }
        PyObject *row;
        if (text.used) {
            row = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)text.used + 2);
            if (!row) goto done;
            char *d = PyBytes_AS_STRING(row);
            d[0] = '{';
            memcpy(d + 1, text.data, text.used);
            d[text.used + 1] = '}';
        } else {
            row = Py_None;
            Py_INCREF(row);
        }
        PyList_SET_ITEM(others, i, row);
    }
    result = Py_BuildValue("(OOOO)", vals_b, present_b, others, cx_b);
done:
    Py_XDECREF(vals_b);
    Py_XDECREF(present_b);
    Py_XDECREF(others);
    Py_XDECREF(cx_b);
    free(text.data);
    PyMem_Free(ints);
    PyMem_Free(drops);
    if (spans.obj) PyBuffer_Release(&spans);
    if (view.obj) PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"header", py_header, METH_VARARGS, "header(buffer, final) -> (status, events_start, members) (see the module source)"},
    {"events", py_events, METH_VARARGS,
     "events(buffer, start, state, final) -> columns of the complete events from start (see the module source)"},
    {"args", py_args, METH_VARARGS,
     "args(buffer, spans, int_keys, float_keys, drop_keys) -> typed members and the rest (see the module source)"},
    {"members", py_members, METH_VARARGS,
     "members(buffer, spans, int_keys, drop_keys) -> (ints, present, others, complex) (see the module source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracescan", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tracescan(void) { return PyModule_Create(&module); }
