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
 *     exact: int64 [n, 2]: ts and dur in ns from the numbers' text (scan_number)
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
 *
 * simd(level) and fast(paths) pin the string runs' SIMD level and the event fast paths (the writers' key
 * order predicted, short numbers by words, plain strings, flat args objects): every setting reads the same
 * columns, so the tests read each document under each of them.
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
    const unsigned char *base, *end; /* the buffer every string lies in */
} strtab;

/* The 8 bytes at p as a little-endian word (the first byte lowest), in any byte order. */
static inline uint64_t load_le8(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* The n (0-7) bytes at s as the low bytes of a little-endian word: one load when 8 bytes are readable before
 * `end`, else byte by byte (the same value either way). */
static inline uint64_t tail_word(const unsigned char *s, size_t n, const unsigned char *end) {
    if (end - s >= 8) return load_le8(s) & (((uint64_t)1 << (8 * n)) - 1);
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    return w;
}

JS_FN uint64_t hash_bytes(const unsigned char *s, size_t n, const unsigned char *end) {
    /* eight bytes a step (names of kernels run to hundreds of bytes); the table is private to one call */
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    h = (h ^ tail_word(s, n, end)) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

JS_FN int strtab_init(strtab *t, const unsigned char *base, const unsigned char *end) {
    memset(t, 0, sizeof *t);
    t->base = base;
    t->end = end;
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
        size_t h = hash_bytes(t->base + t->start[i], (size_t)t->len[i], t->end) & mask;
        while (slots[h] >= 0) h = (h + 1) & mask;
        slots[h] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* Whether two byte ranges of length n, both in the buffer that ends at `end`, are equal: short ones (most
 * names and categories) by word loads, without a call. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, size_t n, const unsigned char *end) {
    if (n >= 8 && n <= 16) {
        uint64_t x0, y0, x1, y1;
        memcpy(&x0, a, 8); memcpy(&y0, b, 8);
        memcpy(&x1, a + n - 8, 8); memcpy(&y1, b + n - 8, 8);
        return x0 == y0 && x1 == y1;
    }
    if (n < 8) return tail_word(a, n, end) == tail_word(b, n, end);
    return memcmp(a, b, n) == 0;
}

/* id of the raw string body [s, s + n), added when new; -1 on no memory */
JS_FN int32_t strtab_id(strtab *t, const unsigned char *s, size_t n) {
    size_t h = hash_bytes(s, n, t->end) & t->mask;
    for (;;) {
        int32_t id = t->slots[h];
        if (id < 0) break;
        if ((size_t)t->len[id] == n && same_bytes(t->base + t->start[id], s, n, t->end)) return id;
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
static const unsigned char *ws_run(const unsigned char *p, const unsigned char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* p after any whitespace: one compare when there is none (every JSON whitespace byte is <= ' ', and no byte
 * that may follow it is), the run itself out of line. */
static inline const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end) {
    return p < end && *p <= ' ' ? ws_run(p, end) : p;
}

static inline void ws(parser *restrict P) {
    /* every JSON whitespace byte is <= ' ', and no byte that may follow it is: one compare when there is none */
    const unsigned char *p = P->p, *end = P->end;
    while (p < end && *p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    P->p = p;
}

/* ------------------------------------------------------------------ SIMD: the plain run of a string body
 * Most of a trace's bytes are string bodies (keys, names, hex handles) of plain ASCII. plain_run(p, end) is
 * the length of the run from p of bytes that need no decision: not '"', not '\\', no control character and
 * nothing beyond ASCII (UTF-8 is validated byte by byte after it). Three implementations, chosen once at
 * module load by what the processor has (AVX2 32 bytes a step, SSE2 16, scalar 1); `simd(level)` pins one,
 * so the tests run each over the same documents. Vector loads never read past `end`. */
static size_t plain_run_scalar(const unsigned char *p, const unsigned char *end) {
    const unsigned char *s = p;
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
    return (size_t)(p - s);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SCAN_X86 1

static size_t plain_run_sse2(const unsigned char *p, const unsigned char *end) {
    const unsigned char *s = p;
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: 0x00-0x1f and 0x80-0xff (negative as signed bytes) are both below 0x20 */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                    _mm_cmplt_epi8(v, space));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m) return (size_t)(p - s) + (size_t)__builtin_ctz(m);
        p += 16;
    }
    return (size_t)(p - s) + plain_run_scalar(p, end);
}

__attribute__((target("avx2"))) static size_t plain_run_avx2(const unsigned char *p, const unsigned char *end) {
    const unsigned char *s = p;
    const __m256i quote = _mm256_set1_epi8('"'), slash = _mm256_set1_epi8('\\'), space = _mm256_set1_epi8(0x20);
    while (end - p >= 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)p);
        __m256i stop = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, slash)),
                                       _mm256_cmpgt_epi8(space, v));
        unsigned m = (unsigned)_mm256_movemask_epi8(stop);
        if (m) return (size_t)(p - s) + (size_t)__builtin_ctz(m);
        p += 32;
    }
    return (size_t)(p - s) + plain_run_sse2(p, end);
}
#endif

enum { SIMD_SCALAR = 0, SIMD_SSE2 = 1, SIMD_AVX2 = 2 };
static const char *const SIMD_NAMES[] = {"scalar", "sse2", "avx2"};
static size_t (*plain_run)(const unsigned char *, const unsigned char *) = plain_run_scalar;
static int simd_level = SIMD_SCALAR;

/* The best level this processor runs (SSE2 is part of x86-64; AVX2 asked of the processor at run time). */
static int simd_best(void) {
#ifdef SCAN_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? SIMD_AVX2 : SIMD_SSE2;
#else
    return SIMD_SCALAR;
#endif
}

/* plain_run with the first 16 bytes looked at inline (most keys and values end within them). */
static inline size_t plain_span(const unsigned char *p, const unsigned char *end) {
#ifdef SCAN_X86
    if (simd_level != SIMD_SCALAR && end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                 _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                    _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m) return (size_t)__builtin_ctz(m);
        return 16 + plain_run(p + 16, end);
    }
#endif
    return plain_run(p, end);
}

static void simd_use(int level) {
    simd_level = level;
#ifdef SCAN_X86
    plain_run = level == SIMD_AVX2 ? plain_run_avx2 : level == SIMD_SSE2 ? plain_run_sse2 : plain_run_scalar;
#else
    plain_run = plain_run_scalar;
#endif
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
JS_FN int scan_string(parser *restrict P, const unsigned char **body, size_t *len, int *escaped) {
    const unsigned char *p = P->p + 1, *end = P->end;
    *escaped = 0;
    *body = p;
    for (;;) {
        p += plain_span(p, end); /* the plain ASCII run, many bytes a step */
        if (p >= end) return -1;
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
        /* UTF-8 (c >= 0x80 here): the shortest form only, no surrogates, at most U+10FFFF */
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
}

#define IS_DIGIT(c) ((unsigned)((c) - '0') < 10u)

/* How many of the 8 bytes at p, from the first, are ASCII digits (0-8): the same test per byte, the first
 * byte that fails found by its position (a carry out of a byte reaches only the bytes after it). */
static inline int leading_digits(const unsigned char *p) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    int n = 0;
    while (n < 8 && IS_DIGIT(p[n])) n++;
    return n;
#else
    uint64_t v;
    memcpy(&v, p, 8);
    uint64_t x = ((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4))
                 ^ 0x3333333333333333ULL;
    return x ? __builtin_ctzll(x) >> 3 : 8;
#endif
}

/* The value of the first n (1-8) digits at p, the 8 bytes there readable. */
static inline uint64_t parse_digits(const unsigned char *p, int n) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    uint64_t m = 0;
    for (int i = 0; i < n; i++) m = m * 10 + (uint64_t)(p[i] - '0');
    return m;
#else
    uint64_t v;
    memcpy(&v, p, 8);
    if (n < 8) v = (v << (8 * (8 - n))) | (0x3030303030303030ULL >> (8 * n)); /* '0's before the digits */
    v -= 0x3030303030303030ULL;
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)))
         + (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    return v;
#endif
}

static const uint64_t POW10_U64[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* Powers of ten a double holds exactly. */
static const double POW10_EXACT[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                                       1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number; kind K_INT (fits int64, no fraction/exponent) or K_DOUBLE, or 3 when it is an
 * integer beyond int64 (Python then reads the event). A double is the one strtod gives: when its digits
 * fit 2^53 and its decimal exponent lies within +-22, both the digits and the power of ten are exact
 * doubles and one IEEE multiplication or division rounds their exact product or quotient correctly
 * (Clinger's fast path: every time and interval of a trace); anything else goes to strtod.
 * ns (when not NULL): the number as µs in int64 ns, exact from the decimal text when it has at most 3
 * fractional digits and no exponent (a double holds 4400680850787.091 only approximately: its product by
 * 1000 rounds to the neighbouring ns about one time in four); otherwise the double times 1000, rounded half
 * to even; 0 when out of int64's range (the caller checks the range on the number itself). */
JS_FN int scan_number(parser *restrict P, int *kind, int64_t *iv, double *dv, int64_t *ns) {
    const unsigned char *s = P->p, *p = P->p, *end = P->end;
    int neg = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end) return -1;
    uint64_t m = 0;       /* the significant digits read so far */
    int sig = 0, lost = 0; /* how many are in m (leading zeros not counted); digits beyond 19 */
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') {
        while (end - p >= 8 && sig <= 11) { /* up to 8 digits a step */
            int k = leading_digits(p);
            if (k) { m = m * POW10_U64[k] + parse_digits(p, k); sig += k; p += k; }
            if (k < 8) break;
        }
        for (; p < end && IS_DIGIT(*p); p++) {
            if (sig < 19) { m = m * 10 + (uint64_t)(*p - '0'); sig++; }
            else lost = 1;
        }
    } else return -1;
    int is_int = 1, frac = 0;
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || !IS_DIGIT(*p)) return -1;
        /* a fraction of at most 7 digits (a trace's times have 3) in one step when m keeps all of them (it stays
         * below 10^19); sig then counts a fraction's leading zeros too, which only the loops below read */
        int k = end - p >= 8 ? leading_digits(p) : 8;
        if (k < 8 && sig + k <= 19) {
            m = m * POW10_U64[k] + parse_digits(p, k);
            frac = k;
            p += k;
        } else {
            while (m && end - p >= 8 && sig <= 11) { /* leading zeros of a fraction counted below, one by one */
                k = leading_digits(p);
                if (k) { m = m * POW10_U64[k] + parse_digits(p, k); sig += k; frac += k; p += k; }
                if (k < 8) break;
            }
            for (; p < end && IS_DIGIT(*p); p++) {
                if (sig < 19) { m = m * 10 + (uint64_t)(*p - '0'); sig += m != 0; frac++; }
                else lost = 1;
            }
        }
    }
    int64_t ex = 0;
    int has_exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        has_exp = 1;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        if (p >= end || !IS_DIGIT(*p)) return -1;
        for (; p < end && IS_DIGIT(*p); p++)
            if (ex < 100000) ex = ex * 10 + (*p - '0');
        if (eneg) ex = -ex;
    }
    P->p = p;
    size_t n = (size_t)(p - s);
    if (is_int && !lost && sig <= 18) { /* below 10^18: no overflow, m is the value */
        *iv = neg ? -(int64_t)m : (int64_t)m;
        *kind = K_INT;
        if (ns) *ns = *iv > INT64_MAX / 1000 || *iv < INT64_MIN / 1000 ? 0 : *iv * 1000;
        return 0;
    }
    if (is_int) {
        const unsigned char *q = s + neg;
        uint64_t v = 0;
        for (; q < p; q++) {
            uint64_t d = (uint64_t)(*q - '0');
            if (v > (UINT64_MAX - d) / 10) { *kind = 3; return 0; }
            v = v * 10 + d;
        }
        if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1)) { *kind = 3; return 0; }
        *iv = neg ? (int64_t)(0 - v) : (int64_t)v;
        *kind = K_INT;
        if (ns) *ns = *iv > INT64_MAX / 1000 || *iv < INT64_MIN / 1000 ? 0 : *iv * 1000;
        return 0;
    }
    int64_t e10 = ex - frac;
    if (!lost && m <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        double d = (double)m;
        d = e10 < 0 ? d / POW10_EXACT[-e10] : d * POW10_EXACT[e10];
        *dv = neg ? -d : d;
    } else {
        char tmp[64];
        if (n >= sizeof tmp) { *kind = 3; return 0; } /* very long literal: Python reads it */
        memcpy(tmp, s, n);
        tmp[n] = 0;
        *dv = strtod(tmp, NULL);
    }
    *kind = K_DOUBLE;
    if (ns) {
        /* m holds every digit when none was lost: the integer part below INT64_MAX / 1000 keeps it exact */
        static const uint64_t SCALE[4] = {1000, 100, 10, 1};
        /* the integer part m / 10^frac at most INT64_MAX / 1000 - 1, without a division */
        static const uint64_t TOP[4] = {(uint64_t)(INT64_MAX / 1000) - 1, ((uint64_t)(INT64_MAX / 1000)) * 10 - 1,
                                        ((uint64_t)(INT64_MAX / 1000)) * 100 - 1, ((uint64_t)(INT64_MAX / 1000)) * 1000 - 1};
        if (!lost && !has_exp && frac <= 3 && m <= TOP[frac]) {
            int64_t v = (int64_t)(m * SCALE[frac]);
            *ns = neg ? -v : v;
        } else {
            double x = *dv * 1000.0;
            *ns = x > -9.2e18 && x < 9.2e18 ? (int64_t)llrint(x) : 0;
        }
    }
    return 0;
}

/* A JSON number's grammar alone, for a value that is skipped (no conversion). */
static inline const unsigned char *skip_digits(const unsigned char *p, const unsigned char *end) {
    while (end - p >= 8) {
        int k = leading_digits(p);
        p += k;
        if (k < 8) return p;
    }
    while (p < end && IS_DIGIT(*p)) p++;
    return p;
}

JS_FN int skip_number(parser *restrict P) {
    const unsigned char *p = P->p, *end = P->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = skip_digits(p + 1, end);
    else return -1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !IS_DIGIT(*p)) return -1;
        p = skip_digits(p, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !IS_DIGIT(*p)) return -1;
        while (p < end && IS_DIGIT(*p)) p++;
    }
    P->p = p;
    return 0;
}

JS_FN int literal(parser *P, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0) return -1;
    P->p += n;
    return 0;
}

/* Skips one JSON value (validated: strings with their escapes and UTF-8, numbers, literals, nesting), without
 * recursion: the open containers' closing brackets on a stack. A container opened at nesting level k of this
 * value has depth `depth` + k; deeper than MAX_DEPTH is refused. */
JS_FN int skip_value(parser *restrict P, int depth) {
    unsigned char stack[MAX_DEPTH + 1];
    int top = 0;
    const unsigned char *b; size_t l; int esc;
    for (;;) {
        /* a value at P->p */
        if (P->p >= P->end) return -1;
        unsigned char c = *P->p;
        if (c == '{' || c == '[') {
            if (depth + top > MAX_DEPTH) return -1;
            stack[top++] = c == '{' ? '}' : ']';
            P->p++;
            ws(P);
            if (P->p < P->end && *P->p == stack[top - 1]) { P->p++; top--; goto after_value; }
            if (c == '[') continue;
            goto key;
        }
        if (c == '"') { if (scan_string(P, &b, &l, &esc) < 0) return -1; }
        else if (c == 't') { if (literal(P, "true") < 0) return -1; }
        else if (c == 'f') { if (literal(P, "false") < 0) return -1; }
        else if (c == 'n') { if (literal(P, "null") < 0) return -1; }
        else if (skip_number(P) < 0) return -1;
    after_value:
        for (;;) {
            if (top == 0) return 0;
            ws(P);
            if (P->p >= P->end) return -1;
            if (*P->p == stack[top - 1]) { P->p++; top--; continue; }
            if (*P->p != ',') return -1;
            P->p++;
            ws(P);
            if (stack[top - 1] == ']') break; /* the next value */
            goto key;
        }
        continue;
    key: /* inside an object: a key, ':', then its value */
        if (P->p >= P->end || *P->p != '"' || scan_string(P, &b, &l, &esc) < 0) return -1;
        ws(P);
        if (P->p >= P->end || *P->p != ':') return -1;
        P->p++;
        ws(P);
    }
}

/* ------------------------------------------------------------------ events */
/* The keys the columns take (KEY_START: an event's start, for the prediction of its first key). */
enum { KEY_OTHER, KEY_PH, KEY_NAME, KEY_CAT, KEY_AUX, KEY_ARGS, KEY_TS, KEY_DUR, KEY_PID, KEY_TID, KEY_ID, KEY_START };

/* The columns of the events read, one array each, all grown together (an event is written in place). */
typedef struct {
    uint8_t *ph, *kind, *complex, *aux;
    int32_t *name, *cat;
    int64_t *num, *span, *args, *exact;
    size_t n, cap;
    strtab strings;
    struct { const unsigned char *b; size_t l; int32_t id; } last[2]; /* the previous event's name and cat */
    /* per key (and an event's start): the key that followed it last, as the word of its text up to its ':' */
    struct { uint64_t want, mask; int len, key; } next_key[KEY_START + 1];
} events;

/* The id of a name's or a category's raw text; the previous event's is checked first (a run of events
 * shares its category, often its name). */
static inline int32_t string_id(events *E, int which, const unsigned char *b, size_t l) {
    if (E->last[which].b && E->last[which].l == l && same_bytes(E->last[which].b, b, l, E->strings.end))
        return E->last[which].id;
    int32_t id = strtab_id(&E->strings, b, l);
    E->last[which].b = b;
    E->last[which].l = l;
    E->last[which].id = id;
    return id;
}

#define EVENTS_FIRST_CAP ((size_t)1 << 20) /* events; an estimate from the buffer's size below it */

JS_FN int grow(void **a, size_t cap, size_t size) {
    void *d = realloc(*a, cap * size);
    if (!d) return -1;
    *a = d;
    return 0;
}

/* The columns grown (twice the rows); 0, or -1 on no memory. */
JS_FN int events_grow(events *E) {
    size_t cap = E->cap ? E->cap * 2 : E->n > 1024 ? E->n : 1024;
    if (grow((void **)&E->ph, cap, 1) || grow((void **)&E->kind, cap, NF) || grow((void **)&E->complex, cap, 1)
        || grow((void **)&E->aux, cap, 1) || grow((void **)&E->name, cap, 4) || grow((void **)&E->cat, cap, 4)
        || grow((void **)&E->num, cap, 8 * NF) || grow((void **)&E->span, cap, 16) || grow((void **)&E->args, cap, 16)
        || grow((void **)&E->exact, cap, 16))
        return -1;
    E->cap = cap;
    return 0;
}

/* Room for one more event (the check inline, the growth out of line); 0, or -1 on no memory. */
static inline int events_room(events *E) { return E->n < E->cap ? 0 : events_grow(E); }

/* Which field a key names (its text between the quotes, unescaped): one switch on the length. */
static inline int key_of(const unsigned char *b, size_t l) {
    switch (l) {
    case 1: return b[0] == 's' ? KEY_AUX : KEY_OTHER;
    case 2:
        if (b[0] == 'p' && b[1] == 'h') return KEY_PH;
        if (b[0] == 't' && b[1] == 's') return KEY_TS;
        if (b[0] == 'i' && b[1] == 'd') return KEY_ID;
        if (b[0] == 'b' && b[1] == 'p') return KEY_AUX;
        return KEY_OTHER;
    case 3:
        if (memcmp(b, "cat", 3) == 0) return KEY_CAT;
        if (memcmp(b, "dur", 3) == 0) return KEY_DUR;
        if (memcmp(b, "pid", 3) == 0) return KEY_PID;
        if (memcmp(b, "tid", 3) == 0) return KEY_TID;
        return KEY_OTHER;
    case 4:
        if (memcmp(b, "name", 4) == 0) return KEY_NAME;
        if (memcmp(b, "args", 4) == 0) return KEY_ARGS;
        return KEY_OTHER;
    default: return KEY_OTHER;
    }
}

/* At '"': a key the events' columns take, spelled plainly, read without the string scan (its letters leave
 * no escape or other decision: the first quote after them closes it); P->p then after the closing quote.
 * KEY_OTHER (P->p unchanged) for any other key: scan_string reads it. */
static inline int fast_key(parser *restrict P) {
    const unsigned char *p = P->p;
    if (P->end - p < 6 || *p != '"') return KEY_OTHER;
    size_t l = p[2] == '"' ? 1 : p[3] == '"' ? 2 : p[4] == '"' ? 3 : p[5] == '"' ? 4 : 0;
    if (!l) return KEY_OTHER;
    int key = key_of(p + 1, l);
    if (key != KEY_OTHER) P->p = p + l + 2;
    return key;
}

JS_FN int key_is(const unsigned char *b, size_t l, const char *word) {
    return strlen(word) == l && memcmp(b, word, l) == 0;
}

/* ------------------------------------------------------------------ the fast paths of an event
 * The spellings writers use (ours, Kineto's, torch's) read with fewer decisions and fewer unpredictable
 * branches; each takes only text whose meaning it settles exactly as the general path would, and hands
 * anything else to the general path untouched. `fast(paths)` pins them (a bit each), so the tests read the
 * same documents with each one off and on. */
enum { FAST_KEYS = 1, FAST_PH = 2, FAST_STRINGS = 4, FAST_NUMBERS = 8, FAST_OBJECTS = 16, FAST_ALL = 31 };
static int fast_paths = FAST_ALL;

/* Whether the word w (load_le8) starts with the n (1-7) bytes of `text`: a constant compare once inlined. */
static inline int word_starts(uint64_t w, const char *text, size_t n) {
    uint64_t want = 0;
    for (size_t i = 0; i < n; i++) want |= (uint64_t)(unsigned char)text[i] << (8 * i);
    return (w & ((1ULL << (8 * n)) - 1)) == want;
}

/* At '"' with 8 bytes readable: a key the columns take, spelled plainly with its ':' right after the closing
 * quote, by one word compare; *len: the bytes up to and with the ':'. KEY_OTHER when it is anything else. */
static inline int word_key(const unsigned char *p, int *len) {
    uint64_t w = load_le8(p);
#define WORD_KEY(text, key) if (word_starts(w, text, sizeof text - 1)) { *len = (int)sizeof text - 1; return key; }
    switch (p[1]) {
    case 'p': WORD_KEY("\"ph\":", KEY_PH) WORD_KEY("\"pid\":", KEY_PID) break;
    case 't': WORD_KEY("\"ts\":", KEY_TS) WORD_KEY("\"tid\":", KEY_TID) break;
    case 'c': WORD_KEY("\"cat\":", KEY_CAT) break;
    case 'n': WORD_KEY("\"name\":", KEY_NAME) break;
    case 'd': WORD_KEY("\"dur\":", KEY_DUR) break;
    case 'a': WORD_KEY("\"args\":", KEY_ARGS) break;
    case 'i': WORD_KEY("\"id\":", KEY_ID) break;
    case 's': WORD_KEY("\"s\":", KEY_AUX) break;
    case 'b': WORD_KEY("\"bp\":", KEY_AUX) break;
    }
#undef WORD_KEY
    return KEY_OTHER;
}

/* At the first byte of a number, with 32 bytes readable: at most 15 integer digits and a fraction of at most 3,
 * no exponent (a trace's times and ids), by whole words. The same kind, value and ns as scan_number: every
 * digit fits m, and a fraction's m <= 2^53 over 10^f is its Clinger fast path, ns m * 10^(3-f) its exact rule.
 * 0 for any other text (nothing read: scan_number decides it, its errors included). */
static inline int fast_number(const unsigned char **at, int *kind, int64_t *iv, double *dv, int64_t *ns) {
    static const uint64_t SCALE[4] = {1000, 100, 10, 1};
    const unsigned char *p = *at;
    int neg = *p == '-';
    p += neg;
    int k = leading_digits(p);
    if (k == 0 || (k > 1 && p[0] == '0')) return 0;
    uint64_t m;
    if (k < 8) {
        m = parse_digits(p, k);
    } else {
        int k2 = leading_digits(p + 8);
        if (k2 == 8) return 0;
        m = parse_digits(p, 8);
        if (k2) m = m * POW10_U64[k2] + parse_digits(p + 8, k2);
        k += k2;
    }
    p += k;
    if (*p == '.') {
        int f = leading_digits(p + 1);
        if (f == 0 || f > 3) return 0;
        m = m * POW10_U64[f] + parse_digits(p + 1, f);
        p += 1 + f;
        if (*p == 'e' || *p == 'E' || m > (1ULL << 53)) return 0;
        double d = (double)m / POW10_EXACT[f];
        int64_t v = (int64_t)(m * SCALE[f]);
        *dv = neg ? -d : d;
        *ns = neg ? -v : v;
        *kind = K_DOUBLE;
    } else {
        if (*p == 'e' || *p == 'E') return 0;
        *iv = neg ? -(int64_t)m : (int64_t)m; /* below 10^15: its ns fits */
        *ns = *iv * 1000;
        *kind = K_INT;
    }
    *at = p;
    return 1;
}

/* At '{': an object of members whose values are plain ASCII strings or numbers (an event's args, most
 * often), skipped with the checks skip_value makes; -1 (P->p unchanged) for anything else - nesting,
 * literals, escapes, UTF-8, an error - which skip_value then reads. */
static inline int skip_flat_object(parser *restrict P) {
    const unsigned char *p = skip_ws(P->p + 1, P->end), *end = P->end, *start = P->p;
    if (p < end && *p == '}') { P->p = p + 1; return 0; }
    for (;;) {
        if (p >= end || *p != '"') return -1;
        p += 1 + plain_span(p + 1, end);
        if (p >= end || *p != '"') return -1;
        p = skip_ws(p + 1, end);
        if (p >= end || *p != ':') return -1;
        p = skip_ws(p + 1, end);
        if (p >= end) return -1;
        if (*p == '"') {
            p += 1 + plain_span(p + 1, end);
            if (p >= end || *p != '"') return -1;
            p++;
        } else if (*p == '-' || IS_DIGIT(*p)) {
            P->p = p;
            int r = skip_number(P);
            p = P->p;
            P->p = start;
            if (r < 0) return -1;
        } else {
            return -1;
        }
        p = skip_ws(p, end);
        if (p >= end) return -1;
        if (*p == ',') { p = skip_ws(p + 1, end); continue; }
        if (*p == '}') { P->p = p + 1; return 0; }
        return -1;
    }
}

JS_FN int scan_event(parser *restrict P, events *restrict E) {
    if (P->p >= P->end || *P->p != '{') return -1; /* not an object: the general path names it */
    if (events_room(E) < 0) return -2;
    const unsigned char *start = P->p, *end = P->end, *p;
    unsigned char ph = 0, cx = 0, aux = 0;
    int32_t name = -1, cat = -1;
    uint8_t *kind = E->kind + E->n * NF;
    int64_t *num = E->num + E->n * NF;
    int64_t exact[2] = {0, 0}; /* ts and dur in ns, from the number's text (see scan_number) */
    int64_t args[2] = {-1, -1};
    const int fast = fast_paths;
    memset(kind, 0, NF);
    memset(num, 0, 8 * NF);
    p = skip_ws(start + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        int prev = KEY_START; /* the key before this one: writers keep one order, so it predicts the next */
        for (;;) {
            int key = KEY_OTHER, len;
            uint64_t w = 0;
            if ((fast & FAST_KEYS) && end - p >= 8 /* the predicted word starts with its '"' */
                && ((w = load_le8(p)) & E->next_key[prev].mask) == E->next_key[prev].want) {
                key = E->next_key[prev].key; /* the key that followed the same key last time (one compare: a
                                              * switch on the key's letters mispredicted its jump every few keys) */
                p += E->next_key[prev].len;
            } else if ((fast & FAST_KEYS) && end - p >= 8 && *p == '"' && (key = word_key(p, &len)) != KEY_OTHER) {
                E->next_key[prev].want = w & (((uint64_t)1 << (8 * len)) - 1);
                E->next_key[prev].mask = ((uint64_t)1 << (8 * len)) - 1;
                E->next_key[prev].len = len;
                E->next_key[prev].key = key;
                p += len; /* the key and its ':' */
            } else {
                P->p = p;
                key = fast_key(P);
                if (key == KEY_OTHER) {
                    const unsigned char *kb; size_t kl; int kesc;
                    if (P->p >= end || *P->p != '"' || scan_string(P, &kb, &kl, &kesc) < 0) return -1;
                    if (kesc) cx = 1; /* an escaped key may spell a field name: Python reads the event */
                    else key = key_of(kb, kl);
                }
                p = skip_ws(P->p, end);
                if (p >= end || *p != ':') return -1;
                p++;
            }
            p = skip_ws(p, end);
            if (p >= end) return -1;
            int field = key >= KEY_TS ? key - KEY_TS : -1; /* F_TS .. F_ID in the order of KEY_TS .. KEY_ID */
            unsigned char c = *p;
            prev = key;
            if (key == KEY_AUX) {
                /* an instant's scope or a flow end's binding point: one ASCII character, else none */
                const unsigned char *b; size_t l; int esc;
                P->p = p;
                if (c == '"') {
                    if (scan_string(P, &b, &l, &esc) < 0) return -1;
                    if (l == 1 && b[0] >= 0x20 && b[0] < 0x7f && b[0] != '\\') aux = b[0];
                } else if (skip_value(P, 1) < 0) {
                    return -1;
                }
                p = P->p;
            } else if (key >= KEY_PH && key <= KEY_CAT && c == '"') {
                const unsigned char *b = p + 1; size_t l; int esc;
                if ((fast & FAST_PH) && key == KEY_PH && end - p >= 3 && p[2] == '"' && p[1] >= 0x20 && p[1] < 0x7f
                    && p[1] != '\\' && p[1] != '"') {
                    ph = p[1]; /* "X": the one character */
                    p += 3;
                } else {
                    l = (fast & FAST_STRINGS) ? plain_span(b, end) : 0;
                    if ((fast & FAST_STRINGS) && b + l < end && b[l] == '"') {
                        p = b + l + 1; /* a plain body: the first stop is its closing quote */
                    } else {
                        P->p = p;
                        if (scan_string(P, &b, &l, &esc) < 0) return -1;
                        p = P->p;
                    }
                    if (key == KEY_PH) {
                        if (l == 1 && b[0] >= 0x20 && b[0] < 0x7f && b[0] != '\\') ph = b[0];
                        else { ph = 0xff; cx = 1; }
                    } else {
                        int32_t id = string_id(E, key == KEY_NAME, b, l);
                        if (id < 0) return -2;
                        if (key == KEY_NAME) name = id; else cat = id;
                    }
                }
            } else if (field >= 0 && (c == '-' || (c >= '0' && c <= '9'))) {
                int k; int64_t iv = 0, ns = 0; double dv = 0;
                int timed = field == F_TS || field == F_DUR;
                if (!((fast & FAST_NUMBERS) && end - p >= 32 && fast_number(&p, &k, &iv, &dv, &ns))) {
                    P->p = p;
                    if (scan_number(P, &k, &iv, &dv, timed ? &ns : NULL) < 0) return -1;
                    p = P->p;
                }
                if (k == K_INT) { kind[field] = K_INT; num[field] = iv; }
                else if (k == K_DOUBLE) { kind[field] = K_DOUBLE; memcpy(&num[field], &dv, 8); }
                else cx = 1; /* an integer beyond int64: Python reads the event */
                if (timed && (k == K_INT || k == K_DOUBLE)) exact[field == F_TS ? 0 : 1] = ns;
            } else {
                if ((key >= KEY_PH && key <= KEY_CAT) || field >= 0) cx = 1; /* a field of another type: Python reads it */
                P->p = p;
                if (!((fast & FAST_OBJECTS) && c == '{' && skip_flat_object(P) == 0) && skip_value(P, 1) < 0) return -1;
                if (key == KEY_ARGS && c == '{') { args[0] = p - P->base; args[1] = P->p - P->base; }
                p = P->p;
            }
            p = skip_ws(p, end);
            if (p >= end) return -1;
            if (*p == ',') { p = skip_ws(p + 1, end); continue; }
            if (*p == '}') { p++; break; }
            return -1;
        }
    }
    P->p = p;
    size_t i = E->n;
    E->ph[i] = ph;
    E->name[i] = name;
    E->cat[i] = cat;
    E->span[2 * i] = start - P->base;
    E->span[2 * i + 1] = p - P->base;
    E->complex[i] = cx;
    E->args[2 * i] = args[0];
    E->args[2 * i + 1] = args[1];
    E->aux[i] = aux;
    E->exact[2 * i] = exact[0];
    E->exact[2 * i + 1] = exact[1];
    E->n++;
    return 0;
}

JS_FN void events_free(events *E) {
    void *cols[] = {E->ph, E->kind, E->complex, E->aux, E->name, E->cat, E->num, E->span, E->args, E->exact};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) free(cols[i]);
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

/* [b, e) (one member of an object: key, colon, value) appended without the whitespace outside strings, which
 * is orjson's compact form of torch's `"key": [1, 2]` spacing. Returns 2 when the text is not byte for byte
 * what orjson writes for the same value (an escape, a control or non-ASCII byte, a number with a fraction or
 * an exponent, a -0: the caller re-encodes that row), else 0; -2 no memory. */
static int push_compact(column *text, const unsigned char *b, const unsigned char *e) {
    if (col_reserve(text, (size_t)(e - b)) < 0) return -2;
    unsigned char *d = (unsigned char *)text->data + text->used;
    const unsigned char *start = b;
    int odd = 0, in_string = 0;
    for (; b < e; b++) {
        unsigned char c = *b;
        if (in_string) {
            *d++ = c;
            if (c == '"') in_string = 0;
            else if (c == '\\') {  /* the escaped byte is copied with it: an escaped quote ends nothing */
                odd = 2;
                if (b + 1 < e) *d++ = *++b;
            } else if (c < 0x20 || c >= 0x80) odd = 2;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        if (c == '"') in_string = 1;
        else if (c == '.' || c == 'E' || c == '+' || c < 0x20 || c >= 0x80) odd = 2;
        else if (c == 'e' && b > start && b[-1] >= '0' && b[-1] <= '9') odd = 2;
        else if (c == '-' && b + 1 < e && b[1] == '0') odd = 2;
        *d++ = c;
    }
    text->used = (size_t)(d - (unsigned char *)text->data);
    return odd;
}

/* One object at [s, e): the rows of its int keys (ints: int64 values) and float keys (floats: any JSON
 * number, as a double) filled with a present flag each (null counts as absent), the other members'
 * text appended to `text` (comma separated; with `compact`, in orjson's spacing: push_compact), keys in
 * `drops` skipped. Bit 1 set when the row is complex (an escaped key, or a value of a listed key the columns
 * cannot hold), bit 2 when the compacted text is not orjson's form; 0 when done, -1 on malformed input, -2
 * no memory. */
JS_FN int object_members(const unsigned char *base, int64_t s, int64_t e, const keyref *ints, Py_ssize_t ni,
                         const keyref *floats, Py_ssize_t nf, const keyref *drops, Py_ssize_t nd, int64_t *vals,
                         uint8_t *present, double *fvals, uint8_t *fpresent, column *text, int compact) {
    parser P = {base + s, base + e, base, 0};
    if (P.p >= P.end || *P.p != '{') return -1;
    P.p++;
    ws(&P);
    if (P.p < P.end && *P.p == '}') return 0;
    int complex_row = 0, not_orjson = 0;
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
            } else if ((c == '-' || (c >= '0' && c <= '9')) && scan_number(&P, &kind, &iv, &dv, NULL) == 0
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
            } else if ((c == '-' || (c >= '0' && c <= '9')) && scan_number(&P, &kind, &iv, &dv, NULL) == 0
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
                if (!compact) {
                    if (col_push(text, kstart, (size_t)(P.p - kstart))) return -2;
                } else {
                    int odd = push_compact(text, kstart, P.p);
                    if (odd < 0) return -2;
                    not_orjson |= odd;
                }
            }
            (void)vstart;
        }
        ws(&P);
        if (P.p >= P.end) return -1;
        if (*P.p == ',') { P.p++; ws(&P); continue; }
        if (*P.p == '}') break;
        return -1;
    }
    return complex_row | not_orjson;
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
    for (int k = 0; k <= KEY_START; k++) E.next_key[k].want = 1; /* no word matches under the mask 0 */
    PyObject *result = NULL;
    int status = 0, r = 0;
    int64_t consumed = start, error_at = -1;
    if (strtab_init(&E.strings, P.base, P.end) < 0) { PyErr_NoMemory(); goto done; }
    {
        /* room for the events the buffer likely holds (a Kineto event is rarely under 64 bytes), so the
         * columns seldom move while they fill; pages not written are never touched */
        size_t guess = (size_t)(P.end - P.p) / 64 + 64;
        E.cap = 0;
        E.n = guess < EVENTS_FIRST_CAP ? guess : EVENTS_FIRST_CAP;
        int r0 = events_room(&E);
        E.n = 0;
        if (r0 < 0) { PyErr_NoMemory(); goto done; }
    }
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
    size_t n = E.n;
    struct { const void *data; size_t size; } cols[11] = {
        {E.ph, n}, {E.name, 4 * n}, {E.cat, 4 * n}, {E.kind, NF * n}, {E.num, 8 * NF * n}, {E.span, 16 * n},
        {E.complex, n}, {strings.data, strings.used}, {E.args, 16 * n}, {E.aux, n}, {E.exact, 16 * n}};
    PyObject *parts[11];
    int ok = 1;
    for (int i = 0; i < 11; i++) {
        parts[i] = ok ? PyBytes_FromStringAndSize(cols[i].size ? cols[i].data : "", (Py_ssize_t)cols[i].size) : NULL;
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
    int compact = 0;
    if (!PyArg_ParseTuple(args, "OOO!O!O!|p", &buf, &spans_obj, &PyTuple_Type, &int_keys, &PyTuple_Type,
                          &float_keys, &PyTuple_Type, &drop_keys, &compact))
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
                                   fp + i * nf, &text, compact);
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
                                   NULL, &text, 0);
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

static PyObject *py_simd(PyObject *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|z", &name)) return NULL;
    if (name) {
        int best = simd_best(), level = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(name, SIMD_NAMES[i]) == 0) level = i;
        if (strcmp(name, "best") == 0) level = best;
        if (level < 0 || level > best) {
            PyErr_Format(PyExc_ValueError, "simd: %s is not a level this processor runs; valid: %s%s%s, best",
                         name, "scalar", best >= SIMD_SSE2 ? ", sse2" : "", best >= SIMD_AVX2 ? ", avx2" : "");
            return NULL;
        }
        simd_use(level);
    }
    return PyUnicode_FromString(SIMD_NAMES[simd_level]);
}

static PyObject *py_fast(PyObject *self, PyObject *args) {
    PyObject *arg = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &arg)) return NULL;
    if (arg != Py_None) {
        long paths = PyLong_Check(arg) ? PyLong_AsLong(arg) : -1;
        if (paths == -1 && PyErr_Occurred()) PyErr_Clear();
        if (!PyLong_Check(arg) || paths < 0 || paths > FAST_ALL) {
            PyErr_Format(PyExc_ValueError, "fast: %R is not a set of fast paths; valid: an int from 0 (none) to %d "
                         "(all), a bit each: 1 keys, 2 ph, 4 strings, 8 numbers, 16 flat objects", arg, FAST_ALL);
            return NULL;
        }
        fast_paths = (int)paths;
    }
    return PyLong_FromLong(fast_paths);
}

static PyMethodDef methods[] = {
    {"fast", py_fast, METH_VARARGS,
     "fast($module, paths=None, /)\n--\n\n-> the fast paths in use, a bit each (1 keys, 2 ph, 4 strings, 8 numbers, "
     "16 flat objects; all at load); paths pins them (0: the general path alone)"},
    {"simd", py_simd, METH_VARARGS,
     "simd($module, level=None, /)\n--\n\n-> the level in use: 'avx2', 'sse2' or 'scalar' (chosen at load: the best the processor runs); "
     "a level ('best' too) pins it"},
    {"header", py_header, METH_VARARGS, "header($module, buffer, final, /)\n--\n\n-> (status, events_start, members) (see the module source)"},
    {"events", py_events, METH_VARARGS,
     "events($module, buffer, start, state, final, /)\n--\n\n-> columns of the complete events from start (see the module source)"},
    {"args", py_args, METH_VARARGS,
     "args($module, buffer, spans, int_keys, float_keys, drop_keys, /)\n--\n\n-> typed members and the rest (see the module source)"},
    {"members", py_members, METH_VARARGS,
     "members($module, buffer, spans, int_keys, drop_keys, /)\n--\n\n-> (ints, present, others, complex) (see the module source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracescan", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tracescan(void) {
    simd_use(simd_best());
    return PyModule_Create(&module);
}
