/* xpuprof._native.pfdec: a Perfetto protobuf trace (TracePacket/TrackEvent) as columns.
 *
 * The reader of .pftrace files (xpuprof/trace/read/perfetto.py) hands the file's bytes here; one pass over
 * the packets, with the GIL released, gives:
 *
 *   - slices: each TYPE_SLICE_BEGIN paired with the TYPE_SLICE_END of its track (a stack per track);
 *   - instants (TYPE_INSTANT; the legacy instant scope when given), counters (TYPE_COUNTER and any extra
 *     counter values, one row per value), flow ends (the flow ids on slices and instants);
 *   - each event's debug annotations as one JSON object text (the text a Kineto trace holds: interned names
 *     and strings resolved, pointers as "0x%016x", doubles as the shortest text that reads back, non-finite
 *     ones as "nan"/"inf"/"-inf" strings, nested dicts and arrays, a valueless annotation as null);
 *   - times in the trace clock: packet timestamps through the clock snapshots (sequence-scoped clocks,
 *     incremental ones accumulated), defaults and interned data per sequence, reset when a sequence clears
 *     its incremental state;
 *   - the track descriptors and the Chrome metadata entries (few: Python objects).
 *
 * Malformed input is an error naming the byte offset; nothing is read past a field's bounds. Strings are
 * made valid UTF-8 (invalid bytes become U+FFFD).
 */
#pragma GCC optimize("O3")
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/protowire.h"

#define HOT static inline __attribute__((always_inline))

/* ----------------------------------------------------------------------------- growing buffers */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int failed;
} Buf;

static int grow_slow(Buf *b, size_t more) {
    if (b->failed) return -1;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}
HOT int grow(Buf *b, size_t more) { return b->n + more <= b->cap ? 0 : grow_slow(b, more); }
HOT void put(Buf *b, const void *src, size_t n) {
    if (!n || grow(b, n) < 0) return; /* nothing to copy: src may be an empty buffer's NULL */
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
HOT void put_c(Buf *b, char c) {
    if (grow(b, 1) < 0) return;
    b->p[b->n++] = (uint8_t)c;
}
#define PUT_VAL(b, v) put((b), &(v), sizeof(v))

/* ----------------------------------------------------------------------------- protobuf reading */
typedef struct {
    const uint8_t *p, *end;
} Span;

typedef struct {
    uint32_t field;
    int wt;
    uint64_t v;   /* varint / fixed */
    Span bytes;   /* length-delimited */
} Field;

/* The next field of ``s`` into ``f``; 1 = got one, 0 = end, -1 = malformed. */
static int next_field(Span *s, Field *f) {
    f->bytes.p = f->bytes.end = NULL;
    f->v = 0;
    if (s->p >= s->end) return 0;
    uint64_t key;
    if (varint_read(&s->p, s->end, &key) < 0) return -1;
    f->field = PROTO_KEY_FIELD(key);
    f->wt = PROTO_KEY_WIRE_TYPE(key);
    switch (f->wt) {
        case WT_VARINT: return varint_read(&s->p, s->end, &f->v) < 0 ? -1 : 1;
        case WT_I64:
            if (s->end - s->p < 8) return -1;
            memcpy(&f->v, s->p, 8);
            s->p += 8;
            return 1;
        case WT_I32: {
            if (s->end - s->p < 4) return -1;
            uint32_t v;
            memcpy(&v, s->p, 4);
            f->v = v;
            s->p += 4;
            return 1;
        }
        case WT_LEN: {
            uint64_t n;
            if (varint_read(&s->p, s->end, &n) < 0) return -1;
            if (n > (uint64_t)(s->end - s->p)) return -1;
            f->bytes.p = s->p;
            f->bytes.end = s->p + n;
            s->p += n;
            return 1;
        }
        default: return -1; /* groups (3, 4) are not in Perfetto's protos */
    }
}

/* Repeated scalar fields arrive unpacked (one value per field) or packed (wire type 2): the values of ``f``. */
typedef struct {
    Span packed;
    int wt; /* the element's wire type: WT_VARINT or WT_I64 */
    uint64_t one;
    int single;
} Repeated;

static void repeated_of(const Field *f, int elem_wt, Repeated *r) {
    r->single = f->wt != WT_LEN;
    r->one = f->v;
    r->packed = f->bytes;
    r->wt = elem_wt;
}

/* The next value of a repeated field; 1 got, 0 end, -1 malformed. */
static int repeated_next(Repeated *r, uint64_t *v) {
    if (r->single) {
        if (r->single == 2) return 0;
        r->single = 2;
        *v = r->one;
        return 1;
    }
    if (r->packed.p >= r->packed.end) return 0;
    if (r->wt == WT_I64) {
        if (r->packed.end - r->packed.p < 8) return -1;
        memcpy(v, r->packed.p, 8);
        r->packed.p += 8;
        return 1;
    }
    return varint_read(&r->packed.p, r->packed.end, v) < 0 ? -1 : 1;
}

/* ----------------------------------------------------------------------------- hash maps */
typedef struct {
    uint64_t *keys;
    int64_t *vals;
    uint8_t *used;
    size_t cap, n;
} Map; /* uint64 -> int64 */

static inline size_t mix(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ULL) ^ (k >> 29)); }

static int map_grow(Map *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    Map nm = {calloc(cap, 8), calloc(cap, 8), calloc(cap, 1), cap, 0};
    if (!nm.keys || !nm.vals || !nm.used) {
        free(nm.keys);
        free(nm.vals);
        free(nm.used);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        size_t j = mix(m->keys[i]) & (cap - 1);
        while (nm.used[j]) j = (j + 1) & (cap - 1);
        nm.used[j] = 1;
        nm.keys[j] = m->keys[i];
        nm.vals[j] = m->vals[i];
        nm.n++;
    }
    free(m->keys);
    free(m->vals);
    free(m->used);
    *m = nm;
    return 0;
}

static int64_t *map_get(Map *m, uint64_t k, int add) {
    if (add && (m->n + 1) * 2 > m->cap && map_grow(m) < 0) return NULL;
    if (!m->cap) return NULL;
    size_t j = mix(k) & (m->cap - 1);
    while (m->used[j]) {
        if (m->keys[j] == k) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!add) return NULL;
    m->used[j] = 1;
    m->keys[j] = k;
    m->vals[j] = -1;
    m->n++;
    return &m->vals[j];
}

static void map_clear(Map *m) {
    if (m->cap) memset(m->used, 0, m->cap);
    m->n = 0;
}

static void map_free(Map *m) {
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

/* ----------------------------------------------------------------------------- strings */
typedef struct {
    Buf blob;       /* every distinct string, valid UTF-8 */
    Buf offsets;    /* int64, n + 1 */
    uint64_t *hash_keys; /* open addressing: (hash, sid) */
    int64_t *hash_sids;
    size_t cap, n;
} Strings;

static uint64_t fnv(const uint8_t *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h | 1;
}

/* Valid UTF-8 of ``s`` (invalid bytes -> U+FFFD) appended to ``out``. */
static void utf8_valid(Buf *out, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            size_t j = i;
            while (j < n && s[j] < 0x80) j++;
            put(out, s + i, j - i);
            i = j;
            continue;
        }
        size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        int ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (s[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) {
            uint32_t cp = ((uint32_t)(c & 15) << 12) | ((uint32_t)(s[i + 1] & 63) << 6) | (s[i + 2] & 63);
            ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        } else if (ok && len == 4) {
            uint32_t cp = ((uint32_t)(c & 7) << 18) | ((uint32_t)(s[i + 1] & 63) << 12) | ((uint32_t)(s[i + 2] & 63) << 6) |
                          (s[i + 3] & 63);
            ok = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (ok) {
            put(out, s + i, len);
            i += len;
        } else {
            put(out, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
}

static int64_t intern(Strings *S, const uint8_t *s, size_t n) {
    if ((S->n + 1) * 2 > S->cap) {
        size_t cap = S->cap ? S->cap * 2 : 256;
        uint64_t *k = calloc(cap, 8);
        int64_t *v = calloc(cap, 8);
        if (!k || !v) {
            free(k);
            free(v);
            return -1;
        }
        for (size_t i = 0; i < S->cap; i++) {
            if (!S->hash_keys[i]) continue;
            size_t j = S->hash_keys[i] & (cap - 1);
            while (k[j]) j = (j + 1) & (cap - 1);
            k[j] = S->hash_keys[i];
            v[j] = S->hash_sids[i];
        }
        free(S->hash_keys);
        free(S->hash_sids);
        S->hash_keys = k;
        S->hash_sids = v;
        S->cap = cap;
    }
    if (!S->offsets.n) {
        int64_t zero = 0;
        PUT_VAL(&S->offsets, zero);
    }
    /* the string as stored (valid UTF-8) is the key */
    size_t mark = S->blob.n;
    utf8_valid(&S->blob, s, n);
    if (S->blob.failed || S->offsets.failed) return -1;
    const uint8_t *t = S->blob.p + mark;
    size_t tn = S->blob.n - mark;
    uint64_t h = fnv(t, tn);
    size_t j = h & (S->cap - 1);
    const int64_t *off = (const int64_t *)S->offsets.p;
    while (S->hash_keys[j]) {
        if (S->hash_keys[j] == h) {
            int64_t sid = S->hash_sids[j];
            if ((size_t)(off[sid + 1] - off[sid]) == tn && memcmp(S->blob.p + off[sid], t, tn) == 0) {
                S->blob.n = mark; /* known: drop the copy */
                return sid;
            }
        }
        j = (j + 1) & (S->cap - 1);
    }
    int64_t sid = (int64_t)S->n++;
    S->hash_keys[j] = h;
    S->hash_sids[j] = sid;
    int64_t end = (int64_t)S->blob.n;
    PUT_VAL(&S->offsets, end);
    return S->offsets.failed ? -1 : sid;
}

/* ----------------------------------------------------------------------------- sequences */
typedef struct {
    int defined, incremental;
    int64_t last, base_clock, base_trace;
} SeqClock;

typedef struct {
    Map iids[4]; /* names, categories, annotation names, annotation string values: iid -> sid */
    int64_t clock_default; /* -1: none */
    uint64_t track_default;
    int has_track_default;
    Buf extra_double_defaults, extra_int_defaults; /* uint64 uuids */
    SeqClock clocks[64];
} Seq;

enum { I_NAMES, I_CATS, I_ANN_NAMES, I_STRINGS };

/* ----------------------------------------------------------------------------- the reader */
#define MAX_DEPTH 64

typedef struct {
    const uint8_t *base;
    Strings S;
    Map seq_index; /* sequence id -> index in seqs */
    Seq **seqs;
    size_t nseqs, seqs_cap;
    int trace_clock;
    int64_t builtin_offset[64]; /* trace time - clock time, per builtin clock */
    uint8_t builtin_known[64];
    /* slices */
    Buf s_ts, s_dur, s_uuid, s_name, s_cat, s_order, s_args_off, s_args;
    /* instants */
    Buf i_ts, i_uuid, i_name, i_cat, i_scope, i_order, i_args_off, i_args;
    /* counters */
    Buf c_ts, c_uuid, c_value, c_order;
    /* flow ends */
    Buf f_ts, f_uuid, f_id, f_terminating, f_order;
    /* open slices per track: uuid -> index of a stack */
    Map open_index;
    Buf *stacks;
    size_t nstacks, stacks_cap;
    /* descriptors and metadata as Python objects are made after the pass: spans kept here */
    Buf descriptors; /* Span pairs */
    Buf metadata;    /* Span pairs */
    /* hoisted args: (uuid, category sid or -2 unresolved, -1 none, JSON members) */
    Map hoist_index; /* uuid -> first entry */
    struct HoistEntry {
        uint64_t uuid;
        const char *cat;
        size_t cat_len;
        int has_cat;
        int64_t cat_sid; /* -3 not resolved yet */
        const char *members;
        size_t members_len;
        int64_t next;
    } *hoist;
    size_t nhoist;
    Buf scratch[MAX_DEPTH + 2];
    /* counts */
    int64_t unmatched_ends, unknown_clock, unsupported_events, packets, order;
    const char *err;
    size_t err_at;
} R;

static void rfail(R *r, const char *why, const uint8_t *at) {
    if (!r->err) {
        r->err = why;
        r->err_at = at ? (size_t)(at - r->base) : 0;
    }
}

static Seq *seq_of(R *r, uint64_t id) {
    int64_t *slot = map_get(&r->seq_index, id, 1);
    if (!slot) return NULL;
    if (*slot >= 0) return r->seqs[*slot];
    if (r->nseqs == r->seqs_cap) {
        size_t cap = r->seqs_cap ? r->seqs_cap * 2 : 16;
        Seq **s = realloc(r->seqs, cap * sizeof(Seq *));
        if (!s) return NULL;
        r->seqs = s;
        r->seqs_cap = cap;
    }
    Seq *s = calloc(1, sizeof(Seq));
    if (!s) return NULL;
    s->clock_default = -1;
    r->seqs[r->nseqs] = s;
    *slot = (int64_t)r->nseqs++;
    return s;
}

static void seq_clear(Seq *s) {
    for (int t = 0; t < 4; t++) map_clear(&s->iids[t]);
    s->clock_default = -1;
    s->has_track_default = 0;
    s->extra_double_defaults.n = 0;
    s->extra_int_defaults.n = 0;
}

static void seq_free(Seq *s) {
    for (int t = 0; t < 4; t++) map_free(&s->iids[t]);
    free(s->extra_double_defaults.p);
    free(s->extra_int_defaults.p);
    free(s);
}

/* ----------------------------------------------------------------------------- JSON text of annotations */
static const char HEXD[] = "0123456789abcdef";

static void json_str(Buf *out, const uint8_t *s, size_t n) {
    Buf *o = out;
    put_c(o, '"');
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            size_t j = i;
            while (j < n && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' && s[j] < 0x80) j++;
            put(o, s + i, j - i);
            i = j;
            continue;
        }
        if (c >= 0x80) { /* a run of non-ASCII bytes: validated */
            size_t j = i;
            while (j < n && s[j] >= 0x80) j++;
            utf8_valid(o, s + i, j - i);
            i = j;
            continue;
        }
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\t': esc[1] = 't'; break;
            case '\n': esc[1] = 'n'; break;
            case '\f': esc[1] = 'f'; break;
            case '\r': esc[1] = 'r'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = HEXD[c >> 4];
                esc[5] = HEXD[c & 15];
                len = 6;
        }
        put(o, esc, len);
        i++;
    }
    put_c(o, '"');
}

static void json_sid(R *r, Buf *out, int64_t sid) {
    const int64_t *off = (const int64_t *)r->S.offsets.p;
    json_str(out, r->S.blob.p + off[sid], (size_t)(off[sid + 1] - off[sid]));
}

/* The shortest text that reads back as d (Kineto's form for non-finite values: quoted). */
static void json_double(Buf *out, double d) {
    if (isnan(d)) {
        put(out, "\"nan\"", 5);
        return;
    }
    if (isinf(d)) {
        if (d > 0) put(out, "\"inf\"", 5);
        else put(out, "\"-inf\"", 6);
        return;
    }
    char text[40];
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(text, sizeof text, "%.*g", prec, d);
        if (strtod(text, NULL) == d) break;
    }
    int floaty = 0;
    for (int k = 0; k < n; k++) floaty |= text[k] == '.' || text[k] == 'e' || text[k] == 'n' || text[k] == 'i';
    put(out, text, (size_t)n);
    if (!floaty) put(out, ".0", 2);
}

static void json_int(Buf *out, int64_t v) {
    char text[24];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    put(out, text, (size_t)n);
}

static void json_uint(Buf *out, uint64_t v) {
    char text[24];
    int n = snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    put(out, text, (size_t)n);
}

static int64_t iid_sid(R *r, Seq *s, int table, uint64_t iid) {
    int64_t *got = map_get(&s->iids[table], iid, 0);
    return got ? *got : -1;
}

/* A DebugAnnotation's name (its sid) and its value as JSON into ``out``. */
static int annotation_json(R *r, Seq *s, Span a, Buf *out, int64_t *name_sid, Span *inline_name, int *has_name,
                           int depth) {
    Field f;
    Span it = a;
    int rc;
    int kind = 0; /* 0 none, 'b', 'u', 'i', 'd', 's', 'S' (interned), 'p', 'D' dict, 'A' array, 'j' legacy json */
    uint64_t v = 0;
    Span text = {0}, first_nested = {0};
    int nested_count = 0;
    *has_name = 0;
    *name_sid = -1;
    while ((rc = next_field(&it, &f)) > 0) {
        switch (f.field) {
            case 1: if (f.wt == WT_VARINT) { *name_sid = iid_sid(r, s, I_ANN_NAMES, f.v); *has_name = 1; } break;
            case 10: if (f.wt == WT_LEN) { *inline_name = f.bytes; *has_name = 2; } break;
            case 2: if (f.wt == WT_VARINT) { kind = 'b'; v = f.v; } break;
            case 3: if (f.wt == WT_VARINT) { kind = 'u'; v = f.v; } break;
            case 4: if (f.wt == WT_VARINT) { kind = 'i'; v = f.v; } break;
            case 5: if (f.wt == WT_I64) { kind = 'd'; v = f.v; } break;
            case 6: if (f.wt == WT_LEN) { kind = 's'; text = f.bytes; } break;
            case 7: if (f.wt == WT_VARINT) { kind = 'p'; v = f.v; } break;
            case 9: if (f.wt == WT_LEN) { kind = 'j'; text = f.bytes; } break;
            case 17: if (f.wt == WT_VARINT) { kind = 'S'; v = f.v; } break;
            case 11: case 12:
                if (f.wt == WT_LEN) {
                    if (!nested_count) first_nested = f.bytes;
                    kind = f.field == 11 ? 'D' : 'A';
                    nested_count++;
                }
                break;
            default: break;
        }
    }
    if (rc < 0) return -1;
    switch (kind) {
        case 0: put(out, "null", 4); break;
        case 'b': put(out, v ? "true" : "false", v ? 4 : 5); break;
        case 'u': json_uint(out, v); break;
        case 'i': json_int(out, (int64_t)v); break;
        case 'd': {
            double d;
            memcpy(&d, &v, 8);
            json_double(out, d);
            break;
        }
        case 's': case 'j': json_str(out, text.p, (size_t)(text.end - text.p)); break;
        case 'S': {
            int64_t sid = iid_sid(r, s, I_STRINGS, v);
            if (sid < 0) put(out, "null", 4);
            else json_sid(r, out, sid);
            break;
        }
        case 'p': {
            char hx[19];
            snprintf(hx, sizeof hx, "0x%016llx", (unsigned long long)v);
            json_str(out, (const uint8_t *)hx, 18);
            break;
        }
        case 'D': case 'A': {
            if (depth >= MAX_DEPTH) return -1;
            int object = kind == 'D';
            /* the empty markers: one dict entry without a name, one element named "" */
            if (nested_count == 1) {
                Span e = first_nested;
                Field g;
                int named = 0, valued = 0, name_empty = 0, rc2;
                while ((rc2 = next_field(&e, &g)) > 0) {
                    if (g.field == 10 || g.field == 1) {
                        named = 1;
                        name_empty = g.field == 10 && g.wt == WT_LEN && g.bytes.p == g.bytes.end;
                    } else valued = 1;
                }
                if (rc2 < 0) return -1;
                if (!valued && ((object && !named) || (!object && named && name_empty))) {
                    put(out, object ? "{}" : "[]", 2);
                    break;
                }
            }
            put_c(out, object ? '{' : '[');
            Span again = a;
            int first = 1;
            while ((rc = next_field(&again, &f)) > 0) {
                if (f.wt != WT_LEN || f.field != (uint32_t)(object ? 11 : 12)) continue;
                if (!first) put_c(out, ',');
                first = 0;
                int64_t nsid;
                Span nname = {0};
                int has;
                Buf *val = &r->scratch[depth + 1];
                val->n = 0;
                if (annotation_json(r, s, f.bytes, val, &nsid, &nname, &has, depth + 1) < 0) return -1;
                if (object) {
                    if (has == 2) json_str(out, nname.p, (size_t)(nname.end - nname.p));
                    else if (has == 1 && nsid >= 0) json_sid(r, out, nsid);
                    else put(out, "\"\"", 2);
                    put_c(out, ':');
                }
                put(out, val->p, val->n);
            }
            if (rc < 0) return -1;
            put_c(out, object ? '}' : ']');
            break;
        }
    }
    return out->failed ? -1 : 0;
}

/* ----------------------------------------------------------------------------- one track event */
typedef struct {
    int type, has_type;
    uint64_t track;
    int has_track;
    int64_t name; /* sid, -1 */
    int64_t cat;  /* sid, -1 */
    int scope;
    int has_counter;
    double counter;
} TE;

#define MAX_EXTRA 4096

static int64_t cat_join(R *r, Seq *s, Span te) {
    /* categories: category_iids (3) and categories (22), joined with "," when several */
    Buf *b = &r->scratch[MAX_DEPTH + 1];
    b->n = 0;
    int count = 0;
    Field f;
    Span it = te;
    int rc;
    while ((rc = next_field(&it, &f)) > 0) {
        if (f.field == 3) {
            Repeated rep;
            repeated_of(&f, WT_VARINT, &rep);
            uint64_t iid;
            int got;
            while ((got = repeated_next(&rep, &iid)) > 0) {
                int64_t sid = iid_sid(r, s, I_CATS, iid);
                if (sid < 0) continue;
                const int64_t *off = (const int64_t *)r->S.offsets.p;
                if (count++) put_c(b, ',');
                put(b, r->S.blob.p + off[sid], (size_t)(off[sid + 1] - off[sid]));
            }
            if (got < 0) return -2;
        } else if (f.field == 22 && f.wt == WT_LEN) {
            if (count++) put_c(b, ',');
            put(b, f.bytes.p, (size_t)(f.bytes.end - f.bytes.p));
        }
    }
    if (rc < 0) return -2;
    if (!count) return -1;
    return intern(&r->S, b->p, b->n);
}

static Buf *stack_of(R *r, uint64_t uuid) {
    int64_t *slot = map_get(&r->open_index, uuid, 1);
    if (!slot) return NULL;
    if (*slot < 0) {
        if (r->nstacks == r->stacks_cap) {
            size_t cap = r->stacks_cap ? r->stacks_cap * 2 : 64;
            Buf *st = realloc(r->stacks, cap * sizeof(Buf));
            if (!st) return NULL;
            r->stacks = st;
            r->stacks_cap = cap;
        }
        memset(&r->stacks[r->nstacks], 0, sizeof(Buf));
        *slot = (int64_t)r->nstacks++;
    }
    return &r->stacks[*slot];
}

/* The args object of an event (its annotations, then the track's hoisted args for its category). */
static int event_args(R *r, Seq *s, Span te, Buf *args, Buf *offsets, uint64_t track, int64_t cat, int hoisted) {
    size_t start = args->n;
    int count = 0;
    Field f;
    Span it = te;
    int rc;
    while ((rc = next_field(&it, &f)) > 0) {
        if (f.field != 4 || f.wt != WT_LEN) continue;
        Buf *val = &r->scratch[0];
        val->n = 0;
        int64_t nsid;
        Span nname = {0};
        int has;
        if (annotation_json(r, s, f.bytes, val, &nsid, &nname, &has, 0) < 0) return -1;
        put_c(args, count++ ? ',' : '{');
        if (has == 2) json_str(args, nname.p, (size_t)(nname.end - nname.p));
        else if (has == 1 && nsid >= 0) json_sid(r, args, nsid);
        else put(args, "\"\"", 2);
        put_c(args, ':');
        put(args, val->p, val->n);
    }
    if (rc < 0) return -1;
    if (hoisted && r->nhoist) {
        int64_t *first = map_get(&r->hoist_index, track, 0);
        for (int64_t h = first ? *first : -1; h >= 0; h = r->hoist[h].next) {
            struct HoistEntry *e = &r->hoist[h];
            if (e->has_cat) {
                if (e->cat_sid == -3) e->cat_sid = intern(&r->S, (const uint8_t *)e->cat, e->cat_len);
                if (e->cat_sid != cat) continue;
            } else if (cat >= 0) continue;
            put_c(args, count++ ? ',' : '{');
            put(args, e->members, e->members_len);
        }
    }
    if (count) put_c(args, '}');
    int64_t end = (int64_t)args->n;
    (void)start;
    PUT_VAL(offsets, end);
    return args->failed || offsets->failed ? -1 : 0;
}

static int64_t trace_time(R *r, Seq *s, uint64_t ts, int64_t clock) {
    if (clock < 0) clock = s && s->clock_default >= 0 ? s->clock_default : 6; /* BOOTTIME by default */
    if (clock >= 64 && clock < 128) {
        SeqClock *c = s ? &s->clocks[clock - 64] : NULL;
        if (!c || !c->defined) {
            r->unknown_clock++;
            return (int64_t)ts;
        }
        int64_t value = (int64_t)ts;
        if (c->incremental) value = c->last = c->last + (int64_t)ts;
        return c->base_trace + (value - c->base_clock);
    }
    if (clock == r->trace_clock || clock < 0 || clock >= 64) return (int64_t)ts;
    if (r->builtin_known[clock]) return (int64_t)ts + r->builtin_offset[clock];
    r->unknown_clock++;
    return (int64_t)ts;
}

static int clock_snapshot(R *r, Seq *s, Span cs) {
    struct {
        uint64_t id, ts;
        int incremental;
    } clocks[32];
    int n = 0;
    Field f;
    Span it = cs;
    int rc;
    while ((rc = next_field(&it, &f)) > 0) {
        if (f.field == 2 && f.wt == WT_VARINT && f.v < 64) r->trace_clock = (int)f.v;
        if (f.field != 1 || f.wt != WT_LEN || n == 32) continue;
        Span c = f.bytes;
        Field g;
        int rc2;
        clocks[n].id = 0;
        clocks[n].ts = 0;
        clocks[n].incremental = 0;
        while ((rc2 = next_field(&c, &g)) > 0) {
            if (g.field == 1) clocks[n].id = g.v;
            else if (g.field == 2) clocks[n].ts = g.v;
            else if (g.field == 3) clocks[n].incremental = g.v != 0;
        }
        if (rc2 < 0) return -1;
        n++;
    }
    if (rc < 0) return -1;
    /* builtin clocks against the trace clock */
    int64_t trace_value = 0;
    int have_trace = 0;
    for (int k = 0; k < n; k++)
        if (clocks[k].id == (uint64_t)r->trace_clock) {
            trace_value = (int64_t)clocks[k].ts;
            have_trace = 1;
        }
    if (!have_trace) { /* through a builtin clock whose offset is known */
        for (int k = 0; k < n && !have_trace; k++)
            if (clocks[k].id < 64 && r->builtin_known[clocks[k].id]) {
                trace_value = (int64_t)clocks[k].ts + r->builtin_offset[clocks[k].id];
                have_trace = 1;
                /* trace_value is the trace time at this snapshot */
            }
    }
    for (int k = 0; k < n; k++) {
        uint64_t id = clocks[k].id;
        if (id < 64 && have_trace) {
            r->builtin_offset[id] = trace_value - (int64_t)clocks[k].ts;
            r->builtin_known[id] = 1;
        }
    }
    for (int k = 0; k < n; k++) {
        uint64_t id = clocks[k].id;
        if (id < 64 || id >= 128 || !s) continue;
        SeqClock *c = &s->clocks[id - 64];
        c->defined = 1;
        c->incremental = clocks[k].incremental;
        c->last = c->base_clock = (int64_t)clocks[k].ts;
        if (have_trace) c->base_trace = trace_value;
        else {
            c->base_trace = (int64_t)clocks[k].ts; /* no builtin clock to place it: taken as trace time */
            r->unknown_clock++;
        }
    }
    return 0;
}

static int interned_data(R *r, Seq *s, Span id) {
    Field f;
    Span it = id;
    int rc;
    while ((rc = next_field(&it, &f)) > 0) {
        int table = f.field == 2 ? I_NAMES : f.field == 1 ? I_CATS : f.field == 3 ? I_ANN_NAMES : f.field == 29 ? I_STRINGS : -1;
        if (table < 0 || f.wt != WT_LEN) continue;
        Span e = f.bytes;
        Field g;
        uint64_t iid = 0;
        Span text = {0};
        int rc2;
        while ((rc2 = next_field(&e, &g)) > 0) {
            if (g.field == 1 && g.wt == WT_VARINT) iid = g.v;
            else if (g.field == 2 && g.wt == WT_LEN) text = g.bytes;
        }
        if (rc2 < 0) return -1;
        int64_t sid = intern(&r->S, text.p ? text.p : (const uint8_t *)"", text.p ? (size_t)(text.end - text.p) : 0);
        int64_t *slot = map_get(&s->iids[table], iid, 1);
        if (sid < 0 || !slot) return -2;
        *slot = sid;
    }
    return rc < 0 ? -1 : 0;
}

static int defaults(R *r, Seq *s, Span d) {
    Field f;
    Span it = d;
    int rc;
    while ((rc = next_field(&it, &f)) > 0) {
        if (f.field == 58 && f.wt == WT_VARINT) s->clock_default = (int64_t)f.v;
        if (f.field != 11 || f.wt != WT_LEN) continue;
        Span t = f.bytes;
        Field g;
        int rc2;
        s->extra_double_defaults.n = s->extra_int_defaults.n = 0;
        while ((rc2 = next_field(&t, &g)) > 0) {
            if (g.field == 11 && g.wt == WT_VARINT) {
                s->track_default = g.v;
                s->has_track_default = 1;
            } else if (g.field == 31 || g.field == 45) {
                Repeated rep;
                repeated_of(&g, WT_VARINT, &rep);
                uint64_t u;
                int got;
                while ((got = repeated_next(&rep, &u)) > 0)
                    PUT_VAL(g.field == 45 ? &s->extra_double_defaults : &s->extra_int_defaults, u);
                if (got < 0) return -1;
            }
        }
        if (rc2 < 0) return -1;
    }
    (void)r;
    return rc < 0 ? -1 : 0;
}

static int track_event(R *r, Seq *s, Span te, int64_t ts) {
    TE e = {0};
    e.name = -1;
    e.cat = -1;
    Field f;
    Span it = te;
    int rc;
    Span inline_name = {0};
    int has_flows = 0, has_extra = 0, legacy_phase = 0;
    while ((rc = next_field(&it, &f)) > 0) {
        switch (f.field) {
            case 9: e.type = (int)f.v; e.has_type = 1; break;
            case 11: e.track = f.v; e.has_track = 1; break;
            case 10: e.name = iid_sid(r, s, I_NAMES, f.v); break;
            case 23: if (f.wt == WT_LEN) inline_name = f.bytes; break;
            case 30: e.has_counter = 1; e.counter = (double)(int64_t)f.v; break;
            case 44: if (f.wt == WT_I64) { e.has_counter = 1; memcpy(&e.counter, &f.v, 8); } break;
            case 31: case 12: case 45: case 46: has_extra = 1; break;
            case 47: case 48: case 36: case 42: has_flows = 1; break;
            case 6: {
                if (f.wt != WT_LEN) break;
                Span l = f.bytes;
                Field g;
                int rc2;
                while ((rc2 = next_field(&l, &g)) > 0) {
                    if (g.field == 14 && g.wt == WT_VARINT)
                        e.scope = g.v == 1 ? 'g' : g.v == 2 ? 'p' : g.v == 3 ? 't' : 0;
                    if (g.field == 2 && g.wt == WT_VARINT) legacy_phase = (int)g.v;
                }
                if (rc2 < 0) return -1;
                break;
            }
            default: break;
        }
    }
    if (rc < 0) return -1;
    if (inline_name.p) e.name = intern(&r->S, inline_name.p, (size_t)(inline_name.end - inline_name.p));
    if (!e.has_track && s->has_track_default) {
        e.track = s->track_default;
        e.has_track = 1;
    }
    int64_t order = r->order++;
    int type = e.has_type ? e.type : 0;
    if (!e.has_type && legacy_phase) {
        /* legacy Chrome phases carried in a TrackEvent: B, E, I/i (the others are not read) */
        type = legacy_phase == 'B' ? 1 : legacy_phase == 'E' ? 2 : (legacy_phase == 'I' || legacy_phase == 'i') ? 3 : 0;
    }
    if (type == 1 || type == 3) e.cat = cat_join(r, s, te);
    if (e.cat == -2) return -1;
    int64_t row = -1;
    if (type == 1) { /* BEGIN */
        Buf *st = stack_of(r, e.track);
        if (!st) return -2;
        row = (int64_t)(r->s_ts.n / 8);
        PUT_VAL(st, row);
        int64_t dur = -1;
        PUT_VAL(&r->s_ts, ts);
        PUT_VAL(&r->s_dur, dur);
        PUT_VAL(&r->s_uuid, e.track);
        PUT_VAL(&r->s_name, e.name);
        PUT_VAL(&r->s_cat, e.cat);
        PUT_VAL(&r->s_order, order);
        if (event_args(r, s, te, &r->s_args, &r->s_args_off, e.track, e.cat, 1) < 0) return -1;
    } else if (type == 2) { /* END: the track's innermost open slice */
        Buf *st = stack_of(r, e.track);
        if (!st) return -2;
        if (st->n < 8) r->unmatched_ends++;
        else {
            st->n -= 8;
            int64_t at;
            memcpy(&at, st->p + st->n, 8);
            int64_t start = ((int64_t *)r->s_ts.p)[at];
            ((int64_t *)r->s_dur.p)[at] = ts >= start ? ts - start : 0;
        }
    } else if (type == 3) { /* INSTANT */
        row = (int64_t)(r->i_ts.n / 8);
        PUT_VAL(&r->i_ts, ts);
        PUT_VAL(&r->i_uuid, e.track);
        PUT_VAL(&r->i_name, e.name);
        PUT_VAL(&r->i_cat, e.cat);
        uint8_t scope = (uint8_t)e.scope;
        PUT_VAL(&r->i_scope, scope);
        PUT_VAL(&r->i_order, order);
        if (event_args(r, s, te, &r->i_args, &r->i_args_off, e.track, e.cat, 0) < 0) return -1;
    } else if (type == 4) {
        if (e.has_counter) {
            PUT_VAL(&r->c_ts, ts);
            PUT_VAL(&r->c_uuid, e.track);
            PUT_VAL(&r->c_value, e.counter);
            PUT_VAL(&r->c_order, order);
        }
    } else {
        r->unsupported_events++;
    }
    if (has_extra) { /* extra counter values: on their tracks (the event's own, else the sequence's defaults) */
        for (int dbl = 0; dbl < 2; dbl++) {
            uint64_t uuids[256], nu = 0, nv = 0;
            int own = 0;
            it = te;
            while ((rc = next_field(&it, &f)) > 0) {
                if (f.field == (uint32_t)(dbl ? 45 : 31)) {
                    Repeated rep;
                    repeated_of(&f, WT_VARINT, &rep);
                    uint64_t u;
                    int got;
                    own = 1;
                    while ((got = repeated_next(&rep, &u)) > 0)
                        if (nu < 256) uuids[nu++] = u;
                    if (got < 0) return -1;
                }
            }
            if (!own) {
                const Buf *d = dbl ? &s->extra_double_defaults : &s->extra_int_defaults;
                for (size_t k = 0; k < d->n / 8 && nu < 256; k++) memcpy(&uuids[nu++], d->p + 8 * k, 8);
            }
            it = te;
            while ((rc = next_field(&it, &f)) > 0) {
                if (f.field != (uint32_t)(dbl ? 46 : 12)) continue;
                Repeated rep;
                repeated_of(&f, dbl ? WT_I64 : WT_VARINT, &rep);
                uint64_t raw;
                int got;
                while ((got = repeated_next(&rep, &raw)) > 0) {
                    double value;
                    if (dbl) memcpy(&value, &raw, 8);
                    else value = (double)(int64_t)raw;
                    if (nv < nu) {
                        PUT_VAL(&r->c_ts, ts);
                        PUT_VAL(&r->c_uuid, uuids[nv]);
                        PUT_VAL(&r->c_value, value);
                        PUT_VAL(&r->c_order, order);
                    }
                    nv++;
                }
                if (got < 0) return -1;
            }
        }
    }
    if (has_flows && (type == 1 || type == 3)) {
        it = te;
        while ((rc = next_field(&it, &f)) > 0) {
            if (f.field != 47 && f.field != 48 && f.field != 36 && f.field != 42) continue;
            Repeated rep;
            repeated_of(&f, f.field >= 47 ? WT_I64 : WT_VARINT, &rep);
            uint64_t id;
            int got;
            uint8_t terminating = f.field == 48 || f.field == 42;
            while ((got = repeated_next(&rep, &id)) > 0) {
                PUT_VAL(&r->f_ts, ts);
                PUT_VAL(&r->f_uuid, e.track);
                PUT_VAL(&r->f_id, id);
                PUT_VAL(&r->f_terminating, terminating);
                PUT_VAL(&r->f_order, order);
            }
            if (got < 0) return -1;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------------------- packets */
static int packet(R *r, Span pk, const uint8_t *at) {
    Field f;
    Span it = pk;
    int rc;
    uint64_t seq_id = 0, ts = 0, flags = 0;
    int64_t clock = -1;
    int has_ts = 0, cleared = 0;
    Span te = {0}, interned = {0}, cs = {0}, defs = {0};
    int has_te = 0, has_interned = 0, has_cs = 0, has_defs = 0;
    while ((rc = next_field(&it, &f)) > 0) {
        switch (f.field) {
            case 8: if (f.wt == WT_VARINT) { ts = f.v; has_ts = 1; } break;
            case 58: if (f.wt == WT_VARINT) clock = (int64_t)f.v; break;
            case 10: if (f.wt == WT_VARINT) seq_id = f.v; break;
            case 13: if (f.wt == WT_VARINT) flags = f.v; break;
            case 41: if (f.wt == WT_VARINT) cleared = f.v != 0; break;
            case 11: if (f.wt == WT_LEN) { te = f.bytes; has_te = 1; } break;
            case 12: if (f.wt == WT_LEN) { interned = f.bytes; has_interned = 1; } break;
            case 6: if (f.wt == WT_LEN) { cs = f.bytes; has_cs = 1; } break;
            case 59: if (f.wt == WT_LEN) { defs = f.bytes; has_defs = 1; } break;
            case 60: if (f.wt == WT_LEN) PUT_VAL(&r->descriptors, f.bytes); break;
            case 5:
                if (f.wt == WT_LEN) {
                    Span b = f.bytes;
                    Field g;
                    int rc2;
                    while ((rc2 = next_field(&b, &g)) > 0) {
                        if (g.field == 2 && g.wt == WT_LEN) PUT_VAL(&r->metadata, g.bytes);
                        else if (g.field == 1 || g.field == 5) r->unsupported_events++;
                    }
                    if (rc2 < 0) return -1;
                }
                break;
            default: break;
        }
    }
    if (rc < 0) return -1;
    Seq *s = seq_of(r, seq_id);
    if (!s) return -2;
    if (cleared || (flags & 1)) seq_clear(s);
    if (has_cs && clock_snapshot(r, s, cs) < 0) return -1;
    if (has_defs && defaults(r, s, defs) < 0) return -1;
    if (has_interned) {
        int got = interned_data(r, s, interned);
        if (got < 0) return got;
    }
    if (has_te) {
        int64_t t = has_ts ? trace_time(r, s, ts, clock) : 0;
        int got = track_event(r, s, te, t);
        if (got < 0) return got;
    }
    (void)at;
    r->packets++;
    return 0;
}

static int read_trace(R *r, const uint8_t *buf, size_t len) {
    Span all = {buf, buf + len};
    Field f;
    int rc;
    while ((rc = next_field(&all, &f)) > 0) {
        if (f.field != 1 || f.wt != WT_LEN) continue; /* Trace.packet */
        int got = packet(r, f.bytes, f.bytes.p);
        if (got == -2) {
            rfail(r, "out of memory", NULL);
            return -1;
        }
        if (got < 0) {
            rfail(r, "a packet is not valid protobuf", f.bytes.p);
            return -1;
        }
    }
    if (rc < 0) {
        rfail(r, "the trace is not a sequence of TracePackets", all.p);
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------------------- Python side */
static PyObject *bytes_of(Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? (const char *)b->p : "", (Py_ssize_t)b->n);
}

static PyObject *str_of(Span s) {
    Buf tmp = {0};
    utf8_valid(&tmp, s.p, (size_t)(s.end - s.p));
    PyObject *o = PyUnicode_DecodeUTF8(tmp.p ? (const char *)tmp.p : "", (Py_ssize_t)tmp.n, "replace");
    free(tmp.p);
    return o;
}

/* (uuid, parent|None, name|None, kind, pid|None, tid|None, process/thread name|None, labels, description|None) */
static PyObject *descriptor(Span d) {
    Field f;
    Span it = d;
    int rc;
    uint64_t uuid = 0, parent = 0;
    int has_parent = 0;
    Span name = {0}, pname = {0}, desc = {0};
    const char *kind = "track";
    int64_t pid = 0, tid = 0;
    int has_pid = 0, has_tid = 0;
    PyObject *labels = PyList_New(0);
    if (!labels) return NULL;
    while ((rc = next_field(&it, &f)) > 0) {
        switch (f.field) {
            case 1: uuid = f.v; break;
            case 5: parent = f.v; has_parent = 1; break;
            case 2: case 10: if (f.wt == WT_LEN) name = f.bytes; break;
            case 14: if (f.wt == WT_LEN) desc = f.bytes; break;
            case 8: kind = "counter"; break;
            case 3: case 4: {
                if (f.wt != WT_LEN) break;
                int thread = f.field == 4;
                kind = thread ? "thread" : "process";
                Span p = f.bytes;
                Field g;
                int rc2;
                while ((rc2 = next_field(&p, &g)) > 0) {
                    if (g.field == 1 && g.wt == WT_VARINT) { pid = (int32_t)(uint32_t)g.v; has_pid = 1; }
                    else if (thread && g.field == 2 && g.wt == WT_VARINT) { tid = (int64_t)g.v; has_tid = 1; }
                    else if ((thread ? g.field == 5 : g.field == 6) && g.wt == WT_LEN) pname = g.bytes;
                    else if (!thread && g.field == 8 && g.wt == WT_LEN) {
                        PyObject *l = str_of(g.bytes);
                        if (!l || PyList_Append(labels, l) < 0) {
                            Py_XDECREF(l);
                            Py_DECREF(labels);
                            return NULL;
                        }
                        Py_DECREF(l);
                    }
                }
                if (rc2 < 0) {
                    Py_DECREF(labels);
                    return PyErr_Format(PyExc_ValueError, "a track descriptor is not valid protobuf");
                }
                break;
            }
            default: break;
        }
    }
    if (rc < 0) {
        Py_DECREF(labels);
        return PyErr_Format(PyExc_ValueError, "a track descriptor is not valid protobuf");
    }
    PyObject *o_parent = has_parent ? PyLong_FromUnsignedLongLong(parent) : (Py_INCREF(Py_None), Py_None);
    PyObject *o_name = name.p ? str_of(name) : (Py_INCREF(Py_None), Py_None);
    PyObject *o_pname = pname.p ? str_of(pname) : (Py_INCREF(Py_None), Py_None);
    PyObject *o_desc = desc.p ? str_of(desc) : (Py_INCREF(Py_None), Py_None);
    PyObject *o_pid = has_pid ? PyLong_FromLongLong(pid) : (Py_INCREF(Py_None), Py_None);
    PyObject *o_tid = has_tid ? PyLong_FromLongLong(tid) : (Py_INCREF(Py_None), Py_None);
    PyObject *out = NULL;
    if (o_parent && o_name && o_pname && o_desc && o_pid && o_tid)
        out = Py_BuildValue("(KOOsOOOOO)", (unsigned long long)uuid, o_parent, o_name, kind, o_pid, o_tid, o_pname, labels,
                            o_desc);
    Py_XDECREF(o_parent);
    Py_XDECREF(o_name);
    Py_XDECREF(o_pname);
    Py_XDECREF(o_desc);
    Py_XDECREF(o_pid);
    Py_XDECREF(o_tid);
    Py_DECREF(labels);
    return out;
}

/* (name, value): a Chrome metadata entry's value as JSON text (json_value as it is) */
static PyObject *metadata_entry(Span m) {
    Field f;
    Span it = m;
    int rc;
    Span name = {0}, sval = {0}, jval = {0};
    int has_b = 0, has_i = 0;
    uint64_t bv = 0, iv = 0;
    while ((rc = next_field(&it, &f)) > 0) {
        if (f.field == 1 && f.wt == WT_LEN) name = f.bytes;
        else if (f.field == 2 && f.wt == WT_LEN) sval = f.bytes;
        else if (f.field == 3 && f.wt == WT_VARINT) { has_b = 1; bv = f.v; }
        else if (f.field == 4 && f.wt == WT_VARINT) { has_i = 1; iv = f.v; }
        else if (f.field == 5 && f.wt == WT_LEN) jval = f.bytes;
    }
    if (rc < 0) return PyErr_Format(PyExc_ValueError, "a metadata entry is not valid protobuf");
    PyObject *o_name = name.p ? str_of(name) : PyUnicode_FromString("");
    if (!o_name) return NULL;
    PyObject *kind_value;
    if (jval.p) kind_value = Py_BuildValue("(sN)", "json", str_of(jval));
    else if (sval.p) kind_value = Py_BuildValue("(sN)", "str", str_of(sval));
    else if (has_b) kind_value = Py_BuildValue("(sO)", "bool", bv ? Py_True : Py_False);
    else if (has_i) kind_value = Py_BuildValue("(sL)", "int", (long long)(int64_t)iv);
    else kind_value = Py_BuildValue("(sO)", "none", Py_None);
    if (!kind_value) {
        Py_DECREF(o_name);
        return NULL;
    }
    return Py_BuildValue("(NN)", o_name, kind_value);
}

static void r_free(R *r) {
    Buf *bufs[] = {&r->S.blob, &r->S.offsets, &r->s_ts, &r->s_dur, &r->s_uuid, &r->s_name, &r->s_cat, &r->s_order,
                   &r->s_args_off, &r->s_args, &r->i_ts, &r->i_uuid, &r->i_name, &r->i_cat, &r->i_scope, &r->i_order,
                   &r->i_args_off, &r->i_args, &r->c_ts, &r->c_uuid, &r->c_value, &r->c_order, &r->f_ts, &r->f_uuid,
                   &r->f_id, &r->f_terminating, &r->f_order, &r->descriptors, &r->metadata};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) free(bufs[k]->p);
    for (int k = 0; k < MAX_DEPTH + 2; k++) free(r->scratch[k].p);
    free(r->S.hash_keys);
    free(r->S.hash_sids);
    for (size_t k = 0; k < r->nseqs; k++) seq_free(r->seqs[k]);
    free(r->seqs);
    for (size_t k = 0; k < r->nstacks; k++) free(r->stacks[k].p);
    free(r->stacks);
    map_free(&r->seq_index);
    map_free(&r->open_index);
    map_free(&r->hoist_index);
    free(r->hoist);
}

static int any_failed(R *r) {
    Buf *bufs[] = {&r->S.blob, &r->S.offsets, &r->s_ts, &r->s_dur, &r->s_uuid, &r->s_name, &r->s_cat, &r->s_order,
                   &r->s_args_off, &r->s_args, &r->i_ts, &r->i_uuid, &r->i_name, &r->i_cat, &r->i_scope, &r->i_order,
                   &r->i_args_off, &r->i_args, &r->c_ts, &r->c_uuid, &r->c_value, &r->c_order, &r->f_ts, &r->f_uuid,
                   &r->f_id, &r->f_terminating, &r->f_order, &r->descriptors, &r->metadata};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (bufs[k]->failed) return 1;
    return 0;
}

/* Appends a new reference o to list and drops it; -1 (an exception set) where o is NULL or the append fails. */
static int append_new(PyObject *list, PyObject *o) {
    int rc = o ? PyList_Append(list, o) : -1;
    Py_XDECREF(o);
    return rc;
}

/* convert(span) of each Span stored in spans appended to list; -1 at the first failure (an exception set). */
static int append_each(PyObject *list, const Buf *spans, PyObject *(*convert)(Span)) {
    for (size_t k = 0; k < spans->n / sizeof(Span); k++) {
        Span one;
        memcpy(&one, spans->p + k * sizeof(Span), sizeof(Span));
        if (append_new(list, convert(one)) < 0) return -1;
    }
    return 0;
}

/* decode(buffer, hoisted) -> dict: hoisted is a sequence of (uuid, category str | None, members bytes) */
static PyObject *decode(PyObject *mod, PyObject *args) {
    Py_buffer in;
    PyObject *hoisted_o;
    if (!PyArg_ParseTuple(args, "y*O:decode", &in, &hoisted_o)) return NULL;
    R *r = calloc(1, sizeof(R));
    PyObject *out = NULL, *fast = NULL;
    if (!r) {
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    r->base = in.buf;
    r->trace_clock = 6;
    fast = PySequence_Fast(hoisted_o, "pfdec: hoisted must be a sequence");
    if (!fast) goto done;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(fast);
    if (nh) {
        r->hoist = calloc((size_t)nh, sizeof(struct HoistEntry));
        if (!r->hoist) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < nh; k++) {
            unsigned long long uuid;
            PyObject *cat;
            const char *members;
            Py_ssize_t mlen;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, k), "KOy#", &uuid, &cat, &members, &mlen)) goto done;
            struct HoistEntry *e = &r->hoist[k];
            e->uuid = uuid;
            e->members = members; /* kept alive by ``fast`` */
            e->members_len = (size_t)mlen;
            e->cat_sid = -3;
            if (cat != Py_None) {
                Py_ssize_t cl;
                e->cat = PyUnicode_AsUTF8AndSize(cat, &cl);
                if (!e->cat) goto done;
                e->cat_len = (size_t)cl;
                e->has_cat = 1;
            }
            int64_t *slot = map_get(&r->hoist_index, uuid, 1);
            if (!slot) {
                PyErr_NoMemory();
                goto done;
            }
            e->next = *slot;
            *slot = k;
        }
        r->nhoist = (size_t)nh;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = read_trace(r, in.buf, (size_t)in.len);
    Py_END_ALLOW_THREADS
    if (rc < 0 || any_failed(r)) {
        if (!r->err || strcmp(r->err, "out of memory") == 0 || any_failed(r)) PyErr_NoMemory();
        else PyErr_Format(PyExc_ValueError, "not a Perfetto protobuf trace: %s (at byte %zu)", r->err, r->err_at);
        goto done;
    }
    {
        int64_t zero = 0;
        /* offsets start at 0 (one per row after it) */
        Buf so = {0}, io = {0};
        PUT_VAL(&so, zero);
        put(&so, r->s_args_off.p, r->s_args_off.n);
        PUT_VAL(&io, zero);
        put(&io, r->i_args_off.p, r->i_args_off.n);
        if (!r->S.offsets.n) PUT_VAL(&r->S.offsets, zero);
        if (so.failed || io.failed) {
            free(so.p);
            free(io.p);
            PyErr_NoMemory();
            goto done;
        }
        PyObject *descs = PyList_New(0), *meta = PyList_New(0);
        if (!descs || !meta || append_each(descs, &r->descriptors, descriptor) < 0 ||
            append_each(meta, &r->metadata, metadata_entry) < 0) {
            Py_XDECREF(descs);
            Py_XDECREF(meta);
            free(so.p);
            free(io.p);
            goto done;
        }
        out = Py_BuildValue(
            "{s:(NN),s:(NNNNNNNN),s:(NNNNNNNN),s:(NNNN),s:(NNNNN),s:N,s:N,s:{s:L,s:L,s:L,s:L}}",
            "strings", bytes_of(&r->S.blob), bytes_of(&r->S.offsets),
            "slices", bytes_of(&r->s_ts), bytes_of(&r->s_dur), bytes_of(&r->s_uuid), bytes_of(&r->s_name),
            bytes_of(&r->s_cat), bytes_of(&r->s_order), bytes_of(&so), bytes_of(&r->s_args),
            "instants", bytes_of(&r->i_ts), bytes_of(&r->i_uuid), bytes_of(&r->i_name), bytes_of(&r->i_cat),
            bytes_of(&r->i_scope), bytes_of(&r->i_order), bytes_of(&io), bytes_of(&r->i_args),
            "counters", bytes_of(&r->c_ts), bytes_of(&r->c_uuid), bytes_of(&r->c_value), bytes_of(&r->c_order),
            "flows", bytes_of(&r->f_ts), bytes_of(&r->f_uuid), bytes_of(&r->f_id), bytes_of(&r->f_terminating),
            bytes_of(&r->f_order),
            "descriptors", descs, "metadata", meta,
            "counts", "packets", r->packets, "unmatched_ends", r->unmatched_ends, "unknown_clock", r->unknown_clock,
            "unsupported_events", r->unsupported_events);
        free(so.p);
        free(io.p);
    }
done:
    Py_XDECREF(fast);
    PyBuffer_Release(&in);
    r_free(r);
    free(r);
    return out;
}

/* metadata(buffer) -> [(name, (kind, value))]: the Chrome metadata entries alone (the reader's map is among
 * them), every other packet skipped by its length. */
static PyObject *metadata(PyObject *mod, PyObject *arg) {
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *out = PyList_New(0);
    Span all = {in.buf, (const uint8_t *)in.buf + in.len};
    Field f;
    int rc;
    while (out && (rc = next_field(&all, &f)) > 0) {
        if (f.field != 1 || f.wt != WT_LEN) continue;
        Span pk = f.bytes;
        Field g;
        int rc2;
        while ((rc2 = next_field(&pk, &g)) > 0) {
            if (g.field != 5 || g.wt != WT_LEN) continue;
            Span b = g.bytes;
            Field h;
            int rc3;
            while ((rc3 = next_field(&b, &h)) > 0) {
                if (h.field != 2 || h.wt != WT_LEN) continue;
                if (append_new(out, metadata_entry(h.bytes)) < 0) {
                    Py_CLEAR(out);
                    break;
                }
            }
            if (!out) break;
            if (rc3 < 0) {
                rc2 = -1;
                break;
            }
        }
        if (out && rc2 < 0) {
            Py_CLEAR(out);
            PyErr_Format(PyExc_ValueError, "not a Perfetto protobuf trace: a packet is not valid protobuf (at byte %zu)",
                         (size_t)(f.bytes.p - (const uint8_t *)in.buf));
        }
    }
    if (out && rc < 0) {
        Py_CLEAR(out);
        PyErr_Format(PyExc_ValueError, "not a Perfetto protobuf trace: the trace is not a sequence of TracePackets "
                     "(at byte %zu)", (size_t)(all.p - (const uint8_t *)in.buf));
    }
    PyBuffer_Release(&in);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode($module, buffer, hoisted, /)\n--\n\n-> dict of columns (slices, instants, counters, flows as bytes; strings; descriptors; "
     "metadata; counts): a Perfetto protobuf trace read in one pass (see the module source)."},
    {"metadata", metadata, METH_O,
     "metadata($module, buffer, /)\n--\n\n-> [(name, (kind, value))]: the trace's Chrome metadata entries."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.pfdec",
                                    "Perfetto protobuf traces as columns.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_pfdec(void) { return PyModule_Create(&module); }
