/* xpuprof._native.pfenc: Perfetto TracePacket/TrackEvent protobuf from trace table columns.
 *
 * The Perfetto writer (xpuprof/trace/write/perfetto.py) hands over every slice and instant of a trace as
 * segments of numpy columns, a track code per row, the flows and the string table; this file writes the
 * events, one packet sequence per track, with the GIL released:
 *
 *   - rows are grouped by track (a counting sort) and ordered by (ts, longer first, file order) inside it
 *     (already ordered: one check; else a sort of that track alone);
 *   - each track is walked once to put every slice on a lane where it nests (lane 0 is the track; a slice
 *     that would overlap another without nesting goes on a lane of its own, a child track: Perfetto's
 *     BEGIN/END events would otherwise close the wrong slice) and to bind every flow end to its slice
 *     (the deepest slice enclosing the flow's time, or for a flow without "bp": "e" the next slice);
 *   - the args that name the queue (flagged by the caller) and hold one value on every slice of a
 *     (track, category) are written once, on the track ("hoisted"), not on each event;
 *   - each lane is written as its own sequence: a first packet with the clock snapshot (clock 64,
 *     incremental, on CLOCK_REALTIME), the defaults (that clock, the lane's track) and the incremental
 *     state cleared; then TYPE_SLICE_BEGIN / TYPE_SLICE_END / TYPE_INSTANT packets whose timestamps are
 *     deltas, names, categories, arg names and string values interned on first use in the sequence.
 *
 * Args become debug annotations: numbers int/uint/double, bools, interned strings, handles as
 * pointer values, rows of a 2-D column as arrays, and per-row JSON objects (the text a trace file holds)
 * transcoded member by member (objects as dict entries, arrays as array values, null as an annotation
 * without a value). Counters (``counters``) are one sequence per counter series: one TYPE_COUNTER packet
 * per event, its first metric on the sequence's default track, the others as extra double values.
 *
 * String ids (sids) index the caller's table (UTF-8 blob + offsets); strings met in JSON text get ids
 * after them. An interned id is sid + 1 in every interned table.
 */
#pragma GCC optimize("O3")
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/protowire.h"

#define HOT static inline __attribute__((always_inline))

/* ----------------------------------------------------------------------------- protobuf bytes */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int failed;
    int borrowed; /* p is a bytes object's memory (the result): never realloc'd or freed here */
} Buf;

static int buf_grow_slow(Buf *b, size_t more) {
    if (b->failed) return -1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more) cap *= 2;
    if (b->borrowed) { /* outgrew the result's memory: continue in our own */
        uint8_t *own = malloc(cap);
        if (!own) {
            b->failed = 1;
            return -1;
        }
        memcpy(own, b->p, b->n);
        b->p = own;
        b->cap = cap;
        b->borrowed = 0;
        return 0;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

HOT int buf_grow(Buf *b, size_t more) {
    return b->n + more <= b->cap ? 0 : buf_grow_slow(b, more);
}

HOT void put_raw(Buf *b, const void *src, size_t len) {
    if (!len || buf_grow(b, len) < 0) return; /* nothing to copy: an empty buffer's p may be NULL */
    memcpy(b->p + b->n, src, len);
    b->n += len;
}

HOT void put_varint(Buf *b, uint64_t v) {
    if (buf_grow(b, VARINT_MAX) < 0) return;
    b->n = (size_t)(varint_write(b->p + b->n, v) - b->p);
}

HOT void put_tag(Buf *b, uint32_t field, int wt) { put_varint(b, PROTO_KEY(field, wt)); }
HOT void put_uint(Buf *b, uint32_t field, uint64_t v) {
    put_tag(b, field, WT_VARINT);
    put_varint(b, v);
}
HOT void put_fixed64(Buf *b, uint32_t field, uint64_t v) {
    put_tag(b, field, WT_I64);
    if (buf_grow(b, 8) < 0) return;
    memcpy(b->p + b->n, &v, 8); /* little-endian hosts only (x86-64, aarch64) */
    b->n += 8;
}
HOT void put_double(Buf *b, uint32_t field, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    put_fixed64(b, field, v);
}
HOT void put_bytes(Buf *b, uint32_t field, const void *src, size_t len) {
    put_tag(b, field, WT_LEN);
    put_varint(b, len);
    put_raw(b, src, len);
}
/* A nested message whose body is ``inner``. */
HOT void put_msg(Buf *b, uint32_t field, const Buf *inner) { put_bytes(b, field, inner->p, inner->n); }

/* Field numbers (perfetto/trace/trace_packet.proto, track_event/track_event.proto, debug_annotation.proto,
 * interned_data.proto, clock_snapshot.proto). */
enum {
    TRACE_PACKET = 1,
    TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11, TP_INTERNED = 12, TP_SEQ_FLAGS = 13,
    TP_CLOCK_SNAPSHOT = 6, TP_DEFAULTS = 59, TP_FIRST_ON_SEQ = 87,
    TE_CATEGORY_IIDS = 3, TE_ANNOTATIONS = 4, TE_LEGACY = 6, TE_TYPE = 9, TE_NAME_IID = 10, TE_TRACK = 11,
    TE_DOUBLE_VALUE = 44, TE_EXTRA_DOUBLE_TRACKS = 45, TE_EXTRA_DOUBLE_VALUES = 46, TE_FLOW_IDS = 47,
    TE_TERMINATING_FLOW_IDS = 48,
    LEGACY_INSTANT_SCOPE = 14,
    DA_NAME_IID = 1, DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6, DA_POINTER = 7,
    DA_NAME = 10, DA_DICT = 11, DA_ARRAY = 12, DA_STRING_IID = 17,
    ID_CATEGORIES = 1, ID_NAMES = 2, ID_ANNOTATION_NAMES = 3, ID_STRING_VALUES = 29,
    CS_CLOCKS = 1, CLOCK_ID = 1, CLOCK_TS = 2, CLOCK_INCREMENTAL = 3,
    DEF_CLOCK_ID = 58, DEF_TRACK_EVENT = 11, TED_TRACK = 11, TED_EXTRA_DOUBLE_TRACKS = 45,
};
#define EMPTY_ARRAY_MARK "\x52\x00" /* {name: ""}: DA_NAME (10), length 0 */
enum { TYPE_BEGIN = 1, TYPE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { SEQ_CLEARED = 1 };
#define SEQ_CLOCK 64      /* the first sequence-scoped clock id */
#define CLOCK_REALTIME_ID 1

/* ----------------------------------------------------------------------------- columns */
typedef struct {
    const uint8_t *p;
    Py_ssize_t n; /* elements; 1 = one value for every row */
    int isz;      /* element size */
    char kind;    /* 'i' signed, 'u' unsigned, 'f' float, 'b' bool */
    int width;    /* 2-D: values per row */
    Py_buffer view;
} Arr;

static int get_arr(PyObject *o, Arr *a, const char *what) {
    memset(a, 0, sizeof *a);
    if (o == Py_None) return 0;
    if (PyObject_GetBuffer(o, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) return -1;
    const char *f = a->view.format ? a->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    a->isz = (int)a->view.itemsize;
    switch (*f) {
        case 'b': case 'h': case 'i': case 'l': case 'q': a->kind = 'i'; break;
        case 'B': case 'H': case 'I': case 'L': case 'Q': a->kind = 'u'; break;
        case 'f': case 'd': a->kind = 'f'; break;
        case '?': a->kind = 'b'; break;
        default:
            PyBuffer_Release(&a->view);
            PyErr_Format(PyExc_TypeError, "pfenc: %s has unsupported element format %s", what, a->view.format);
            return -1;
    }
    if (a->kind == 'f' && a->isz != 8) {
        PyBuffer_Release(&a->view);
        PyErr_Format(PyExc_TypeError, "pfenc: %s: float columns must be float64", what);
        return -1;
    }
    a->width = a->view.ndim == 2 ? (int)a->view.shape[1] : 1;
    a->n = a->view.ndim >= 1 ? a->view.shape[0] : 1;
    a->p = a->view.buf;
    return 1;
}

static void rel_arr(Arr *a) {
    if (a->p || a->view.obj) PyBuffer_Release(&a->view);
    a->p = NULL;
}

HOT Py_ssize_t at(const Arr *a, Py_ssize_t i) { return a->n == 1 ? 0 : i; }

HOT int64_t get_i64(const Arr *a, Py_ssize_t i) {
    if (a->isz == 8 && a->kind == 'i' && a->width == 1) return ((const int64_t *)a->p)[a->n == 1 ? 0 : i];
    if (a->isz == 1 && a->kind != 'i' && a->width == 1) return a->p[a->n == 1 ? 0 : i]; /* masks */
    const uint8_t *q = a->p + (size_t)at(a, i) * (size_t)a->isz * (size_t)a->width;
    switch (a->kind) {
        case 'i':
            switch (a->isz) {
                case 1: return *(const int8_t *)q;
                case 2: return *(const int16_t *)q;
                case 4: return *(const int32_t *)q;
                default: return *(const int64_t *)q;
            }
        case 'u': case 'b':
            switch (a->isz) {
                case 1: return *(const uint8_t *)q;
                case 2: return *(const uint16_t *)q;
                case 4: return *(const uint32_t *)q;
                default: return (int64_t)*(const uint64_t *)q;
            }
        default: return (int64_t)*(const double *)q;
    }
}
HOT double get_f64(const Arr *a, Py_ssize_t i) {
    if (a->kind == 'f') return *(const double *)(a->p + (size_t)at(a, i) * 8);
    if (a->kind == 'u' && a->isz == 8) return (double)(uint64_t)get_i64(a, i);
    return (double)get_i64(a, i);
}

/* ----------------------------------------------------------------------------- strings */
typedef struct {
    const char *blob; /* the caller's table */
    const int64_t *off;
    Py_ssize_t nbase;
    /* strings met in JSON text: sid nbase + k */
    char **extra;
    uint32_t *extra_len;
    Py_ssize_t nextra, extra_cap;
    int64_t *hash; /* open addressing over extras: index + 1, 0 = empty */
    size_t hcap;
    /* per interned table: the sequence that last emitted the sid (0: none yet) */
    uint32_t *seen[4];
    size_t seen_cap;
} Strings;

enum { T_NAMES, T_CATS, T_ANN_NAMES, T_STRINGS };
static const uint32_t INTERNED_FIELD[4] = {ID_NAMES, ID_CATEGORIES, ID_ANNOTATION_NAMES, ID_STRING_VALUES};

static inline uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return h;
}

static inline void str_of(const Strings *S, int64_t sid, const char **s, size_t *n) {
    if (sid < S->nbase) {
        *s = S->blob + S->off[sid];
        *n = (size_t)(S->off[sid + 1] - S->off[sid]);
    } else {
        *s = S->extra[sid - S->nbase];
        *n = S->extra_len[sid - S->nbase];
    }
}

static int seen_fit(Strings *S, size_t need) {
    if (need <= S->seen_cap) return 0;
    size_t cap = S->seen_cap ? S->seen_cap : 1024;
    while (cap < need) cap *= 2;
    for (int t = 0; t < 4; t++) {
        uint32_t *p = realloc(S->seen[t], cap * sizeof(uint32_t));
        if (!p) return -1;
        memset(p + S->seen_cap, 0, (cap - S->seen_cap) * sizeof(uint32_t));
        S->seen[t] = p;
    }
    S->seen_cap = cap;
    return 0;
}

/* The sid of a string met in JSON text (added when new); -1 when out of memory. */
static int64_t intern_text(Strings *S, const char *s, size_t n) {
    if (S->hcap == 0 || (size_t)(S->nextra + 1) * 2 > S->hcap) {
        size_t cap = S->hcap ? S->hcap * 2 : 1024;
        int64_t *h = calloc(cap, sizeof(int64_t));
        if (!h) return -1;
        for (Py_ssize_t k = 0; k < S->nextra; k++) {
            size_t j = fnv1a(S->extra[k], S->extra_len[k]) & (cap - 1);
            while (h[j]) j = (j + 1) & (cap - 1);
            h[j] = k + 1;
        }
        free(S->hash);
        S->hash = h;
        S->hcap = cap;
    }
    size_t j = fnv1a(s, n) & (S->hcap - 1);
    while (S->hash[j]) {
        Py_ssize_t k = S->hash[j] - 1;
        if (S->extra_len[k] == n && (n == 0 || memcmp(S->extra[k], s, n) == 0)) return S->nbase + k;
        j = (j + 1) & (S->hcap - 1);
    }
    if (S->nextra == S->extra_cap) {
        Py_ssize_t cap = S->extra_cap ? S->extra_cap * 2 : 256;
        char **e = realloc(S->extra, (size_t)cap * sizeof(char *));
        if (!e) return -1;
        S->extra = e;
        uint32_t *l = realloc(S->extra_len, (size_t)cap * sizeof(uint32_t));
        if (!l) return -1;
        S->extra_len = l;
        S->extra_cap = cap;
    }
    char *copy = malloc(n ? n : 1);
    if (!copy) return -1;
    if (n) memcpy(copy, s, n); /* an empty text's s may be NULL */
    S->extra[S->nextra] = copy;
    S->extra_len[S->nextra] = (uint32_t)n;
    S->hash[j] = S->nextra + 1;
    S->nextra++;
    if (seen_fit(S, (size_t)(S->nbase + S->nextra)) < 0) return -1;
    return S->nbase + S->nextra - 1;
}

static void strings_free(Strings *S) {
    for (Py_ssize_t k = 0; k < S->nextra; k++) free(S->extra[k]);
    free(S->extra);
    free(S->extra_len);
    free(S->hash);
    for (int t = 0; t < 4; t++) free(S->seen[t]);
}

/* ----------------------------------------------------------------------------- segments of rows */
enum { A_INT, A_UINT, A_F64, A_BOOL, A_STR, A_HEX, A_VEC, A_JSON_OBJECT, A_JSON_VALUE, A_KIND_COUNT };

typedef struct {
    /* read for every row: first */
    int kind;
    int hoist;   /* may go on the track when it holds one value over a (track, category) */
    int clen;    /* a value for every row (length 1): its whole annotation, encoded once (cbytes) */
    uint32_t key_seq; /* the sequence whose interned data has the key already */
    int64_t key; /* annotation name sid (A_JSON_OBJECT: none) */
    int64_t csid; /* the constant's interned string value (STR), -1 none */
    /* the hoisting entry of this item for the last category it met on the current track */
    int64_t cache_cat;
    uint32_t cache_gen;
    int32_t cache_idx;
    Arr values, present;
    uint8_t cbytes[40];
    Arr starts, lens;
    Py_buffer blob;
    int has_blob;
} Item;

typedef struct {
    int kind; /* 0 slices, 1 instants */
    int64_t lo, hi;
    Arr ts, dur, name, cat, scope;
    Item *items;
    Py_ssize_t nitems;
    int32_t hoist_items[16]; /* the items that may be hoisted (at most 16 per segment are considered) */
    int nhoist_items;
    int64_t cache_cat; /* the category's count entry for the last category met (hoisting) */
    uint32_t cache_gen;
    int32_t cache_idx;
} Seg;

static void seg_release(Seg *s) {
    rel_arr(&s->ts);
    rel_arr(&s->dur);
    rel_arr(&s->name);
    rel_arr(&s->cat);
    rel_arr(&s->scope);
    for (Py_ssize_t k = 0; k < s->nitems; k++) {
        Item *it = &s->items[k];
        rel_arr(&it->values);
        rel_arr(&it->present);
        rel_arr(&it->starts);
        rel_arr(&it->lens);
        if (it->has_blob) PyBuffer_Release(&it->blob);
    }
    PyMem_Free(s->items);
}

static int need_rows(const Arr *a, Py_ssize_t rows, const char *what) {
    if (a->p && a->n != 1 && a->n != rows) {
        PyErr_Format(PyExc_ValueError, "pfenc: %s has %zd rows, the segment %zd", what, a->n, rows);
        return -1;
    }
    return 0;
}

static int hoistable(const Item *it);

/* The annotation of an item holding one value for every row, encoded once (the name's iid is the key sid + 1
 * whatever the sequence: only its interned entry depends on the sequence). */
static void constant_bytes(Item *it) {
    it->clen = 0;
    it->csid = -1;
    if (it->values.n != 1 || it->values.width != 1 || it->key < 0) return;
    uint64_t v;
    uint32_t field;
    switch (it->kind) {
        case A_INT: field = DA_INT; v = (uint64_t)get_i64(&it->values, 0); break;
        case A_UINT: {
            v = (uint64_t)get_i64(&it->values, 0);
            field = v <= (uint64_t)INT64_MAX ? DA_INT : DA_UINT;
            break;
        }
        case A_BOOL: field = DA_BOOL; v = get_i64(&it->values, 0) != 0; break;
        case A_HEX: field = DA_POINTER; v = (uint64_t)get_i64(&it->values, 0); break;
        case A_STR: field = DA_STRING_IID; it->csid = get_i64(&it->values, 0); v = (uint64_t)it->csid + 1; break;
        case A_F64: {
            double d = get_f64(&it->values, 0);
            memcpy(&v, &d, 8);
            field = DA_DOUBLE;
            break;
        }
        default: return;
    }
    uint8_t *p = it->cbytes, *body;
    *p++ = PROTO_KEY(TE_ANNOTATIONS, WT_LEN);
    body = p++;
    *p++ = PROTO_KEY(DA_NAME_IID, WT_VARINT);
    p = varint_write(p, (uint64_t)it->key + 1);
    if (field == DA_DOUBLE) {
        *p++ = PROTO_KEY(DA_DOUBLE, WT_I64);
        memcpy(p, &v, 8);
        p += 8;
    } else {
        p = varint_write(p, PROTO_KEY(field, WT_VARINT));
        p = varint_write(p, v);
    }
    *body = (uint8_t)(p - body - 1);
    it->clen = (int)(p - it->cbytes);
}

/* (kind, lo, hi, ts, dur, name, cat, scope, items); items: (akind, key, hoist, values, present, starts, lens, blob) */
static int parse_seg(PyObject *o, Seg *s, int64_t nrows) {
    PyObject *ts, *dur, *name, *cat, *scope, *items;
    memset(s, 0, sizeof *s);
    if (!PyArg_ParseTuple(o, "iLLOOOOOO", &s->kind, &s->lo, &s->hi, &ts, &dur, &name, &cat, &scope, &items))
        return -1;
    Py_ssize_t rows = (Py_ssize_t)(s->hi - s->lo);
    if (s->lo < 0 || s->hi < s->lo || s->hi > nrows) {
        PyErr_SetString(PyExc_ValueError, "pfenc: segment rows outside the row count");
        return -1;
    }
    if (get_arr(ts, &s->ts, "ts") < 0 || get_arr(dur, &s->dur, "dur") < 0 || get_arr(name, &s->name, "name") < 0 ||
        get_arr(cat, &s->cat, "cat") < 0 || get_arr(scope, &s->scope, "scope") < 0)
        return -1;
    if (!s->ts.p || !s->name.p) {
        PyErr_SetString(PyExc_ValueError, "pfenc: a segment needs ts and name");
        return -1;
    }
    if (need_rows(&s->ts, rows, "ts") < 0 || need_rows(&s->dur, rows, "dur") < 0 ||
        need_rows(&s->name, rows, "name") < 0 || need_rows(&s->cat, rows, "cat") < 0 ||
        need_rows(&s->scope, rows, "scope") < 0)
        return -1;
    PyObject *fast = PySequence_Fast(items, "pfenc: items must be a sequence");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    s->items = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Item));
    if (!s->items) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Item *it = &s->items[k];
        PyObject *values, *present, *starts, *lens, *blob;
        s->nitems = k + 1;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, k), "iLpOOOOO", &it->kind, &it->key, &it->hoist, &values,
                              &present, &starts, &lens, &blob))
            goto bad;
        if (it->kind < 0 || it->kind >= A_KIND_COUNT) {
            PyErr_Format(PyExc_ValueError, "pfenc: unknown arg kind %d", it->kind);
            goto bad;
        }
        if (get_arr(values, &it->values, "arg values") < 0 || get_arr(present, &it->present, "arg mask") < 0 ||
            get_arr(starts, &it->starts, "arg starts") < 0 || get_arr(lens, &it->lens, "arg lengths") < 0)
            goto bad;
        if (blob != Py_None) {
            if (PyObject_GetBuffer(blob, &it->blob, PyBUF_SIMPLE) < 0) goto bad;
            it->has_blob = 1;
        }
        int text = it->kind == A_JSON_OBJECT || it->kind == A_JSON_VALUE;
        if (text ? (!it->has_blob || !it->starts.p || !it->lens.p) : !it->values.p) {
            PyErr_SetString(PyExc_ValueError, "pfenc: an arg item lacks its values");
            goto bad;
        }
        if (need_rows(&it->values, rows, "arg values") < 0 || need_rows(&it->present, rows, "arg mask") < 0 ||
            need_rows(&it->starts, rows, "arg starts") < 0 || need_rows(&it->lens, rows, "arg lengths") < 0)
            goto bad;
        if (text) { /* every span inside the blob, checked once here */
            for (Py_ssize_t i = 0; i < (it->starts.n == 1 ? 1 : rows); i++) {
                int64_t st = get_i64(&it->starts, i), ln = get_i64(&it->lens, i);
                if (ln < 0 || (ln > 0 && (st < 0 || st > it->blob.len || ln > it->blob.len - st))) {
                    PyErr_SetString(PyExc_ValueError, "pfenc: an args text span lies outside its blob");
                    goto bad;
                }
            }
        }
    }
    Py_DECREF(fast);
    for (Py_ssize_t k = 0; k < s->nitems; k++) {
        constant_bytes(&s->items[k]);
        s->items[k].hoist = hoistable(&s->items[k]);
    }
    for (Py_ssize_t k = 0; k < s->nitems && s->nhoist_items < 16; k++)
        if (hoistable(&s->items[k])) s->hoist_items[s->nhoist_items++] = (int32_t)k;
    return 0;
bad:
    Py_DECREF(fast);
    return -1;
}

/* ----------------------------------------------------------------------------- the encoder's state */
typedef struct {
    int64_t ts, end;
    int32_t seg, local;
    int32_t flow; /* first bound flow (index), -1 none */
    uint16_t lane;
    uint8_t kind; /* 0 slice, 1 instant */
} Ev;

typedef struct {
    int64_t ts;
    uint64_t fid;
    int32_t code;
    int32_t next; /* next flow bound to the same slice */
    uint8_t dir;  /* 0 out ('s'), 1 step ('t'), 2 in ('f') */
    uint8_t next_slice; /* binds to the next slice ('f' without "bp": "e") */
} Flow;

#define HOIST_SLOTS 1024 /* (category, key) pairs of one track: a handful */

typedef struct {
    int64_t cat, key;
    int kind;
    uint64_t value;
    int64_t count; /* rows of the group holding it with that value */
    int varies, hoisted;
} Hoist;

typedef struct {
    Strings S;
    Seg *segs;
    Py_ssize_t nsegs;
    Buf out, ev, ann, tmp[40], interned, lane_out;
    int64_t base_ts;
    int64_t clamp_ts;
    /* per sequence */
    uint32_t seq;
    int64_t last_ts;
    int interned_any;
    int32_t interned_count[4];
    Buf interned_parts[4];
    /* results */
    PyObject *err_type;
    const char *err;
    int64_t unbound_flows, lanes_moved, deep_args;
    /* lanes made: (code, lane, uuid, seq) */
    int64_t *lanes;
    size_t nlanes, lanes_cap;
    uint64_t next_uuid;
    uint32_t next_seq;
    /* hoisted: per track, small table */
    Hoist *hoist;
    size_t nhoist, hoist_cap;
    int32_t hoist_slots[HOIST_SLOTS];
    uint32_t hoist_gen;
    Hoist *hoisted_all;
    int64_t *hoisted_code;
    size_t nhoisted, hoisted_cap;
} Enc;

static void fail(Enc *E, const char *why) {
    if (!E->err) E->err = why;
}

/* ----------------------------------------------------------------------------- interning */
static void intern_new(Enc *E, int t, int64_t sid);

/* Interned data for ``sid`` in table ``t`` unless this sequence already has it. */
HOT void intern_use(Enc *E, int t, int64_t sid) {
    Strings *S = &E->S;
    if ((size_t)sid < S->seen_cap && S->seen[t][sid] == E->seq) return;
    intern_new(E, t, sid);
}

static void intern_new(Enc *E, int t, int64_t sid) {
    Strings *S = &E->S;
    if ((size_t)sid >= S->seen_cap && seen_fit(S, (size_t)sid + 1) < 0) {
        fail(E, "out of memory");
        return;
    }
    S->seen[t][sid] = E->seq;
    const char *s;
    size_t n;
    str_of(S, sid, &s, &n);
    Buf *part = &E->interned_parts[t];
    size_t body = (size_t)(1 + varint_len((uint64_t)sid + 1) + 1 + varint_len(n) + n);
    put_tag(part, INTERNED_FIELD[t], WT_LEN);
    put_varint(part, body);
    put_uint(part, 1, (uint64_t)sid + 1); /* iid */
    put_bytes(part, 2, s, n);            /* name / str */
    E->interned_count[t]++;
    E->interned_any = 1;
}

/* A packet around an event body: its time (a delta of the sequence's clock), the sequence, the interned
 * parts collected while the event was made, the event; written straight into ``dest`` (one copy). */
static void packet(Enc *E, Buf *dest, int64_t ts, int has_ts, const Buf *event, uint32_t event_field) {
    uint64_t d = 0;
    size_t body = 1 + (size_t)varint_len(E->seq);
    if (has_ts) {
        int64_t delta = ts - E->last_ts;
        d = delta < 0 ? 0 : (uint64_t)delta; /* never negative: a lane's events are in time order */
        body += 1 + (size_t)varint_len(d);
        E->last_ts = ts;
    }
    size_t interned = 0;
    int any = E->interned_any;
    if (any)
        for (int t = 0; t < 4; t++) interned += E->interned_parts[t].n;
    if (any) body += 1 + (size_t)varint_len(interned) + interned;
    body += (size_t)varint_len(PROTO_KEY(event_field, WT_LEN)) + (size_t)varint_len(event->n) + event->n;
    if (buf_grow(dest, body + 12) < 0) return;
    put_tag(dest, TRACE_PACKET, WT_LEN);
    put_varint(dest, body);
    if (has_ts) put_uint(dest, TP_TIMESTAMP, d);
    put_uint(dest, TP_SEQ_ID, E->seq);
    if (any) {
        put_tag(dest, TP_INTERNED, WT_LEN);
        put_varint(dest, interned);
        for (int t = 0; t < 4; t++) {
            if (E->interned_count[t]) put_raw(dest, E->interned_parts[t].p, E->interned_parts[t].n);
            E->interned_parts[t].n = 0;
            E->interned_count[t] = 0;
        }
        E->interned_any = 0;
    }
    put_msg(dest, event_field, event);
}

/* The first packet of a sequence: clock snapshot, defaults, incremental state cleared. */
static void sequence_start(Enc *E, Buf *dest, uint32_t seq, uint64_t track_uuid, int64_t t0, const uint64_t *extra,
                           size_t nextra) {
    E->seq = seq;
    E->last_ts = t0;
    Buf *b = &E->tmp[1], *c = &E->tmp[2], *clk = &E->tmp[3], *d = &E->tmp[4];
    b->n = c->n = d->n = 0;
    clk->n = 0;
    put_uint(clk, CLOCK_ID, SEQ_CLOCK);
    put_uint(clk, CLOCK_TS, (uint64_t)t0);
    put_uint(clk, CLOCK_INCREMENTAL, 1);
    put_msg(c, CS_CLOCKS, clk);
    clk->n = 0;
    put_uint(clk, CLOCK_ID, CLOCK_REALTIME_ID);
    put_uint(clk, CLOCK_TS, (uint64_t)t0);
    put_msg(c, CS_CLOCKS, clk);
    put_uint(b, TP_SEQ_ID, seq);
    put_uint(b, TP_SEQ_FLAGS, SEQ_CLEARED);
    put_uint(b, TP_FIRST_ON_SEQ, 1);
    put_msg(b, TP_CLOCK_SNAPSHOT, c);
    clk->n = 0; /* TrackEventDefaults */
    put_uint(clk, TED_TRACK, track_uuid);
    for (size_t k = 0; k < nextra; k++) put_uint(clk, TED_EXTRA_DOUBLE_TRACKS, extra[k]);
    put_uint(d, DEF_CLOCK_ID, SEQ_CLOCK);
    put_msg(d, DEF_TRACK_EVENT, clk);
    put_msg(b, TP_DEFAULTS, d);
    put_msg(dest, TRACE_PACKET, b);
}

/* ----------------------------------------------------------------------------- JSON text -> annotations */
static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_utf8(Buf *b, uint32_t cp) {
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (uint8_t)(0xC0 | (cp >> 6)); u[1] = (uint8_t)(0x80 | (cp & 63)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | (cp >> 12)); u[1] = (uint8_t)(0x80 | ((cp >> 6) & 63)); u[2] = (uint8_t)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | (cp >> 18)); u[1] = (uint8_t)(0x80 | ((cp >> 12) & 63));
        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 63)); u[3] = (uint8_t)(0x80 | (cp & 63)); n = 4;
    }
    put_raw(b, u, n);
}

/* A JSON string at *pp ('"' first) unescaped into ``out`` (cleared first); *pp moves past it. */
static int json_string(const char **pp, const char *end, Buf *out) {
    const char *p = *pp + 1;
    out->n = 0;
    while (p < end) {
        const char *run = p;
        while (p < end && *p != '"' && *p != '\\') p++;
        put_raw(out, run, (size_t)(p - run));
        if (p >= end) return -1;
        if (*p == '"') {
            *pp = p + 1;
            return out->failed ? -1 : 0;
        }
        if (++p >= end) return -1;
        char c = *p++;
        switch (c) {
            case '"': case '\\': case '/': put_raw(out, &c, 1); break;
            case 'b': put_raw(out, "\b", 1); break;
            case 'f': put_raw(out, "\f", 1); break;
            case 'n': put_raw(out, "\n", 1); break;
            case 'r': put_raw(out, "\r", 1); break;
            case 't': put_raw(out, "\t", 1); break;
            case 'u': {
                if (end - p < 4) return -1;
                uint32_t cp = 0;
                for (int k = 0; k < 4; k++) {
                    int h = hexval(p[k]);
                    if (h < 0) return -1;
                    cp = cp * 16 + (uint32_t)h;
                }
                p += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                    uint32_t lo = 0;
                    int ok = 1;
                    for (int k = 0; k < 4; k++) {
                        int h = hexval(p[2 + k]);
                        if (h < 0) ok = 0;
                        lo = lo * 16 + (uint32_t)(h < 0 ? 0 : h);
                    }
                    if (ok && lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        p += 6;
                    }
                }
                if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate: no UTF-8 for it */
                put_utf8(out, cp);
                break;
            }
            default: return -1;
        }
    }
    return -1;
}

static const char *skip_value(const char *p, const char *end, int depth);

/* The value at *p as annotation value fields into ``b``; nested values use E->tmp[depth + 5]. */
static int json_ann_value(Enc *E, const char **pp, const char *end, Buf *b, int depth) {
    const char *p = skip_ws(*pp, end);
    if (p >= end) return -1;
    Buf *scratch = &E->tmp[5 + (depth < 30 ? depth : 30)];
    if (*p == '"') {
        Buf *str = &E->tmp[36];
        if (json_string(&p, end, str) < 0) return -1;
        int64_t sid = intern_text(&E->S, (const char *)str->p, str->n);
        if (sid < 0) return -1;
        intern_use(E, T_STRINGS, sid);
        put_uint(b, DA_STRING_IID, (uint64_t)sid + 1);
    } else if (*p == '{' || *p == '[') {
        if (depth >= 30) { /* deeper than any trace needs: kept as its JSON text */
            const char *stop = skip_value(p, end, 0);
            if (!stop) return -1;
            put_bytes(b, DA_STRING, p, (size_t)(stop - p));
            E->deep_args++;
            p = stop;
        } else {
            char close = *p == '{' ? '}' : ']';
            int object = *p == '{';
            p = skip_ws(p + 1, end);
            if (p < end && *p == close) {
                p++;
                /* an empty object or array: a marker entry the reader turns back into {} / [] (Perfetto's
                 * trace processor shows nothing for it): a dict entry without a name, an array element
                 * with an empty name (elements have none) */
                if (object) put_bytes(b, DA_DICT, "", 0);
                else put_bytes(b, DA_ARRAY, EMPTY_ARRAY_MARK, 2);
            } else {
                for (;;) {
                    scratch->n = 0;
                    if (object) {
                        p = skip_ws(p, end);
                        if (p >= end || *p != '"') return -1;
                        Buf *key = &E->tmp[37];
                        if (json_string(&p, end, key) < 0) return -1;
                        put_bytes(scratch, DA_NAME, key->p, key->n);
                        p = skip_ws(p, end);
                        if (p >= end || *p != ':') return -1;
                        p++;
                    }
                    /* the nested value goes after its name; the recursion uses the next scratch */
                    if (json_ann_value(E, &p, end, scratch, depth + 1) < 0) return -1;
                    put_msg(b, object ? DA_DICT : DA_ARRAY, scratch);
                    p = skip_ws(p, end);
                    if (p < end && *p == ',') {
                        p++;
                        continue;
                    }
                    if (p < end && *p == close) {
                        p++;
                        break;
                    }
                    return -1;
                }
            }
        }
    } else if (*p == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0) {
        put_uint(b, DA_BOOL, 1);
        p += 4;
    } else if (*p == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0) {
        put_uint(b, DA_BOOL, 0);
        p += 5;
    } else if (*p == 'n' && end - p >= 4 && memcmp(p, "null", 4) == 0) {
        p += 4; /* null: the annotation has no value */
    } else {
        const char *q = p;
        int frac = 0;
        if (q < end && *q == '-') q++;
        while (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-')) {
            if (*q == '.' || *q == 'e' || *q == 'E') frac = 1;
            q++;
        }
        if (q == p) return -1;
        char num[64];
        size_t len = (size_t)(q - p);
        if (len >= sizeof num) frac = 1;
        memcpy(num, p, len < sizeof num ? len : sizeof num - 1);
        num[len < sizeof num ? len : sizeof num - 1] = 0;
        if (!frac) {
            char *stop;
            errno = 0;
            if (num[0] == '-') {
                long long v = strtoll(num, &stop, 10);
                if (errno == 0 && *stop == 0) put_uint(b, DA_INT, (uint64_t)(int64_t)v);
                else frac = 1;
            } else {
                unsigned long long v = strtoull(num, &stop, 10);
                if (errno == 0 && *stop == 0) {
                    if (v <= (unsigned long long)INT64_MAX) put_uint(b, DA_INT, (uint64_t)v);
                    else put_uint(b, DA_UINT, (uint64_t)v);
                } else frac = 1;
            }
        }
        if (frac) {
            char *buf = len < sizeof num ? num : NULL;
            char *heap = NULL;
            if (!buf) {
                heap = malloc(len + 1);
                if (!heap) return -1;
                memcpy(heap, p, len);
                heap[len] = 0;
                buf = heap;
            }
            char *stop;
            double d = strtod(buf, &stop);
            int ok = *stop == 0;
            free(heap);
            if (!ok) return -1;
            put_double(b, DA_DOUBLE, d);
        }
        p = q;
    }
    *pp = p;
    return b->failed ? -1 : 0;
}

static const char *skip_value(const char *p, const char *end, int depth) {
    p = skip_ws(p, end);
    if (p >= end || depth > 10000) return NULL;
    if (*p == '"') {
        p++;
        while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
        return p < end ? p + 1 : NULL;
    }
    if (*p == '{' || *p == '[') {
        int level = 0;
        while (p < end) {
            if (*p == '"') {
                p++;
                while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
            } else if (*p == '{' || *p == '[') level++;
            else if (*p == '}' || *p == ']') {
                if (--level == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']') p++;
    return p;
}

/* One annotation (name sid + value fields) into the event. */
static void annotation(Enc *E, Buf *ev, int64_t key, const Buf *value) {
    intern_use(E, T_ANN_NAMES, key); /* (JSON members' keys; the items' keys are interned in event_args) */
    uint64_t iid = (uint64_t)key + 1;
    size_t body = 1 + (size_t)varint_len(iid) + value->n;
    put_tag(ev, TE_ANNOTATIONS, WT_LEN);
    put_varint(ev, body);
    put_uint(ev, DA_NAME_IID, iid);
    put_raw(ev, value->p, value->n);
}

/* An annotation with one varint value field (ints, bools, pointers, interned strings), written directly:
 * {name_iid: key + 1, <field>: v} (a body below 128 bytes: one length byte). The caller interns the key. */
HOT void annotation_varint(Enc *E, Buf *ev, int64_t key, uint32_t field, uint64_t v) {
    if (buf_grow(ev, 32) < 0) return;
    uint8_t *p = ev->p + ev->n, *body;
    *p++ = PROTO_KEY(TE_ANNOTATIONS, WT_LEN);
    body = p++;
    *p++ = PROTO_KEY(DA_NAME_IID, WT_VARINT);
    p = varint_write(p, (uint64_t)key + 1);
    p = varint_write(p, PROTO_KEY(field, WT_VARINT));
    p = varint_write(p, v);
    *body = (uint8_t)(p - body - 1);
    ev->n = (size_t)(p - ev->p);
}

HOT void annotation_double(Enc *E, Buf *ev, int64_t key, double d) {
    if (buf_grow(ev, 32) < 0) return;
    uint8_t *p = ev->p + ev->n, *body;
    *p++ = PROTO_KEY(TE_ANNOTATIONS, WT_LEN);
    body = p++;
    *p++ = PROTO_KEY(DA_NAME_IID, WT_VARINT);
    p = varint_write(p, (uint64_t)key + 1);
    *p++ = PROTO_KEY(DA_DOUBLE, WT_I64);
    memcpy(p, &d, 8);
    p += 8;
    *body = (uint8_t)(p - body - 1);
    ev->n = (size_t)(p - ev->p);
}

/* Each member of a JSON object text as an annotation. */
static int json_members(Enc *E, Buf *ev, const char *p, const char *end) {
    p = skip_ws(p, end);
    if (p >= end || *p != '{') return -1;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return 0;
    Buf *val = &E->tmp[38], *key = &E->tmp[39];
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end || *p != '"') return -1;
        if (json_string(&p, end, key) < 0) return -1;
        int64_t sid = intern_text(&E->S, (const char *)key->p, key->n);
        if (sid < 0) return -1;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return -1;
        p++;
        val->n = 0;
        if (json_ann_value(E, &p, end, val, 0) < 0) return -1;
        annotation(E, ev, sid, val);
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') return 0;
        return -1;
    }
}

/* ----------------------------------------------------------------------------- hoisting */
static inline size_t hoist_slot(int64_t cat, int64_t key) {
    return (size_t)(((uint64_t)cat * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)key * 0xC2B2AE3D27D4EB4FULL)) >> 54;
}

static Hoist *hoist_find(Enc *E, int64_t cat, int64_t key, int add) {
    size_t j = hoist_slot(cat, key);
    for (size_t probe = 0; probe < HOIST_SLOTS; probe++, j = (j + 1) & (HOIST_SLOTS - 1)) {
        int32_t k = E->hoist_slots[j];
        if (k < 0) break;
        if (E->hoist[k].cat == cat && E->hoist[k].key == key) return &E->hoist[k];
    }
    if (!add || E->nhoist >= HOIST_SLOTS / 2) return NULL;
    if (E->nhoist == E->hoist_cap) {
        size_t cap = E->hoist_cap ? E->hoist_cap * 2 : 16;
        Hoist *h = realloc(E->hoist, cap * sizeof(Hoist));
        if (!h) return NULL;
        E->hoist = h;
        E->hoist_cap = cap;
    }
    E->hoist_slots[j] = (int32_t)E->nhoist;
    Hoist *h = &E->hoist[E->nhoist++];
    memset(h, 0, sizeof *h);
    h->cat = cat;
    h->key = key;
    return h;
}

HOT int item_present(const Item *it, Py_ssize_t i) { return !it->present.p || get_i64(&it->present, i) != 0; }

static uint64_t item_bits(const Item *it, Py_ssize_t i) {
    if (it->kind == A_F64) {
        double d = get_f64(&it->values, i);
        uint64_t v;
        memcpy(&v, &d, 8);
        return v;
    }
    return (uint64_t)get_i64(&it->values, i);
}

static int hoistable(const Item *it) {
    return it->hoist && it->values.p && it->values.width == 1 &&
           (it->kind == A_INT || it->kind == A_UINT || it->kind == A_F64 || it->kind == A_BOOL || it->kind == A_STR ||
            it->kind == A_HEX);
}

static inline int64_t cat_of(const Seg *s, Py_ssize_t i) { return s->cat.p ? get_i64(&s->cat, i) : -1; }

/* Which queue args hold one value on every slice of each category of the track (E->hoist). */
/* The hoisting entry of an item for a category (cached on the item: a segment's rows share a category). */
static Hoist *item_hoist(Enc *E, Item *it, int64_t cat, int add) {
    if (it->cache_gen == E->hoist_gen && it->cache_cat == cat) return it->cache_idx < 0 ? NULL : &E->hoist[it->cache_idx];
    Hoist *h = hoist_find(E, cat, it->key, add);
    it->cache_gen = E->hoist_gen;
    it->cache_cat = cat;
    it->cache_idx = h ? (int32_t)(h - E->hoist) : -1;
    return h;
}

static void hoist_track(Enc *E, const Ev *evs, size_t n) {
    E->nhoist = 0;
    E->hoist_gen++;
    memset(E->hoist_slots, 0xff, sizeof E->hoist_slots);
    /* slices per category: entries with key -1 */
    for (size_t k = 0; k < n; k++) {
        if (evs[k].kind) continue;
        Seg *s = &E->segs[evs[k].seg];
        int64_t cat = cat_of(s, evs[k].local);
        Hoist *g;
        if (s->cache_gen == E->hoist_gen && s->cache_cat == cat) g = s->cache_idx < 0 ? NULL : &E->hoist[s->cache_idx];
        else {
            g = hoist_find(E, cat, -1, 1);
            s->cache_gen = E->hoist_gen;
            s->cache_cat = cat;
            s->cache_idx = g ? (int32_t)(g - E->hoist) : -1;
        }
        if (!g) continue; /* more categories than the table holds: nothing of them is hoisted */
        g->count++;
        for (int q = 0; q < s->nhoist_items; q++) {
            Item *it = &s->items[s->hoist_items[q]];
            if (!item_present(it, evs[k].local)) continue;
            Hoist *h = item_hoist(E, it, cat, 1);
            if (!h) continue;
            uint64_t v = item_bits(it, evs[k].local);
            if (h->count == 0) {
                h->kind = it->kind;
                h->value = v;
            } else if (h->kind != it->kind || h->value != v) h->varies = 1;
            h->count++;
        }
    }
    for (size_t k = 0; k < E->nhoist; k++) {
        Hoist *h = &E->hoist[k];
        if (h->key < 0 || h->varies) continue;
        Hoist *g = hoist_find(E, h->cat, -1, 0);
        h->hoisted = g && g->count == h->count && h->count >= 2;
    }
}

static int is_hoisted(Enc *E, Item *it, int64_t cat) {
    Hoist *h = item_hoist(E, it, cat, 0);
    return h && h->hoisted;
}

static void keep_hoisted(Enc *E, int64_t code) {
    for (size_t k = 0; k < E->nhoist; k++) {
        if (!E->hoist[k].hoisted) continue;
        if (E->nhoisted == E->hoisted_cap) {
            size_t cap = E->hoisted_cap ? E->hoisted_cap * 2 : 16;
            Hoist *h = realloc(E->hoisted_all, cap * sizeof(Hoist));
            int64_t *c = realloc(E->hoisted_code, cap * sizeof(int64_t));
            if (h) E->hoisted_all = h;
            if (c) E->hoisted_code = c;
            if (!h || !c) return fail(E, "out of memory");
            E->hoisted_cap = cap;
        }
        E->hoisted_all[E->nhoisted] = E->hoist[k];
        E->hoisted_code[E->nhoisted++] = code;
    }
}

/* ----------------------------------------------------------------------------- one event */
static void item_value(Enc *E, const Item *it, Py_ssize_t i, Buf *v) {
    v->n = 0;
    switch (it->kind) {
        case A_INT: put_uint(v, DA_INT, (uint64_t)get_i64(&it->values, i)); break;
        case A_UINT: {
            uint64_t u = (uint64_t)get_i64(&it->values, i);
            if (u <= (uint64_t)INT64_MAX) put_uint(v, DA_INT, u);
            else put_uint(v, DA_UINT, u);
            break;
        }
        case A_F64: put_double(v, DA_DOUBLE, get_f64(&it->values, i)); break;
        case A_BOOL: put_uint(v, DA_BOOL, get_i64(&it->values, i) != 0); break;
        case A_HEX: put_uint(v, DA_POINTER, (uint64_t)get_i64(&it->values, i)); break;
        case A_STR: {
            int64_t sid = get_i64(&it->values, i);
            if (sid < 0 || sid >= E->S.nbase) return fail(E, "a string arg id outside the string table");
            intern_use(E, T_STRINGS, sid);
            put_uint(v, DA_STRING_IID, (uint64_t)sid + 1);
            break;
        }
        case A_VEC: {
            const Arr *a = &it->values;
            const uint8_t *row = a->p + (size_t)at(a, i) * (size_t)a->isz * (size_t)a->width;
            Buf *x = &E->tmp[38];
            for (int k = 0; k < a->width; k++) {
                x->n = 0;
                const uint8_t *q = row + (size_t)k * (size_t)a->isz;
                if (a->kind == 'f') {
                    double d;
                    memcpy(&d, q, 8);
                    put_double(x, DA_DOUBLE, d);
                } else {
                    Arr one = *a;
                    one.p = q;
                    one.n = 1;
                    one.width = 1;
                    int64_t w = get_i64(&one, 0);
                    if (a->kind == 'b') put_uint(x, DA_BOOL, w != 0);
                    else if (a->kind == 'u' && a->isz == 8 && (uint64_t)w > (uint64_t)INT64_MAX) put_uint(x, DA_UINT, (uint64_t)w);
                    else put_uint(x, DA_INT, (uint64_t)w);
                }
                put_msg(v, DA_ARRAY, x);
            }
            if (a->width == 0) put_bytes(v, DA_ARRAY, EMPTY_ARRAY_MARK, 2);
            break;
        }
        case A_JSON_VALUE: {
            int64_t st = get_i64(&it->starts, i), ln = get_i64(&it->lens, i);
            const char *p = (const char *)it->blob.buf + st;
            if (json_ann_value(E, &p, p + ln, v, 0) < 0) return fail(E, "an arg's JSON text does not parse");
            break;
        }
        default: break;
    }
}

static void event_args(Enc *E, Buf *ev, Seg *s, Py_ssize_t i, int64_t cat, int slice) {
    for (Py_ssize_t j = 0; j < s->nitems; j++) {
        Item *it = &s->items[j];
        if (!item_present(it, i)) continue;
        if (it->kind == A_JSON_OBJECT) {
            int64_t st = get_i64(&it->starts, i), ln = get_i64(&it->lens, i);
            if (ln <= 0) continue;
            const char *p = (const char *)it->blob.buf + st;
            if (json_members(E, ev, p, p + ln) < 0) return fail(E, "an args object's JSON text does not parse");
            continue;
        }
        if (it->kind == A_JSON_VALUE && get_i64(&it->lens, i) <= 0) continue;
        if (slice && it->hoist && E->nhoist && is_hoisted(E, it, cat)) continue; /* on the track */
        if (it->key_seq != E->seq) { /* the key's interned entry: once per item and sequence */
            intern_use(E, T_ANN_NAMES, it->key);
            it->key_seq = E->seq;
        }
        if (it->clen) {
            if (it->csid >= 0) {
                if (it->csid >= E->S.nbase) return fail(E, "a string arg id outside the string table");
                intern_use(E, T_STRINGS, it->csid);
            }
            put_raw(ev, it->cbytes, (size_t)it->clen);
            continue;
        }
        switch (it->kind) { /* the scalar kinds straight into the event */
            case A_INT: annotation_varint(E, ev, it->key, DA_INT, (uint64_t)get_i64(&it->values, i)); continue;
            case A_F64: annotation_double(E, ev, it->key, get_f64(&it->values, i)); continue;
            case A_HEX: annotation_varint(E, ev, it->key, DA_POINTER, (uint64_t)get_i64(&it->values, i)); continue;
            case A_BOOL: annotation_varint(E, ev, it->key, DA_BOOL, get_i64(&it->values, i) != 0); continue;
            default: break;
        }
        Buf *v = &E->tmp[35];
        item_value(E, it, i, v);
        annotation(E, ev, it->key, v);
    }
}

static void emit_begin(Enc *E, Buf *dest, const Ev *e, const Flow *flows) {
    Seg *s = &E->segs[e->seg];
    Py_ssize_t i = e->local;
    Buf *ev = &E->ev;
    ev->n = 0;
    put_uint(ev, TE_TYPE, e->kind ? TYPE_INSTANT : TYPE_BEGIN);
    int64_t name = get_i64(&s->name, i);
    if (name >= 0 && name < E->S.nbase) {
        intern_use(E, T_NAMES, name);
        put_uint(ev, TE_NAME_IID, (uint64_t)name + 1);
    }
    int64_t cat = cat_of(s, i);
    if (cat >= 0 && cat < E->S.nbase) {
        intern_use(E, T_CATS, cat);
        put_uint(ev, TE_CATEGORY_IIDS, (uint64_t)cat + 1);
    }
    event_args(E, ev, s, i, cat, !e->kind);
    for (int32_t f = e->flow; f >= 0; f = flows[f].next)
        put_fixed64(ev, flows[f].dir == 2 ? TE_TERMINATING_FLOW_IDS : TE_FLOW_IDS, flows[f].fid);
    if (e->kind && s->scope.p) {
        int64_t sc = get_i64(&s->scope, i);
        int scope = sc == 'g' ? 1 : sc == 'p' ? 2 : sc == 't' ? 3 : 0;
        if (scope) {
            Buf *l = &E->ann;
            l->n = 0;
            put_uint(l, LEGACY_INSTANT_SCOPE, (uint64_t)scope);
            put_msg(ev, TE_LEGACY, l);
        }
    }
    packet(E, dest, e->ts, 1, ev, TP_TRACK_EVENT);
}

/* A TYPE_SLICE_END packet: time, sequence, {type: END} (the track is the sequence's default). */
static void emit_end(Enc *E, Buf *dest, int64_t ts) {
    int64_t delta = ts - E->last_ts;
    uint64_t d = delta < 0 ? 0 : (uint64_t)delta;
    E->last_ts = ts;
    size_t body = 1 + (size_t)varint_len(d) + 1 + (size_t)varint_len(E->seq) + 4;
    if (buf_grow(dest, body + 2) < 0) return;
    put_tag(dest, TRACE_PACKET, WT_LEN);
    put_varint(dest, body);
    put_uint(dest, TP_TIMESTAMP, d);
    put_uint(dest, TP_SEQ_ID, E->seq);
    static const uint8_t end_event[4] = {PROTO_KEY(TP_TRACK_EVENT, WT_LEN), 2, PROTO_KEY(TE_TYPE, WT_VARINT), TYPE_END};
    put_raw(dest, end_event, 4);
}

/* ----------------------------------------------------------------------------- one track */
static inline int ev_order(const Ev *a, const Ev *b) {
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1; /* slices before instants */
    if (a->end != b->end) return a->end > b->end ? -1 : 1;     /* the longer (the parent) first */
    if (a->seg != b->seg) return a->seg < b->seg ? -1 : 1;
    return a->local < b->local ? -1 : a->local > b->local;
}

/* A stable natural merge sort of n items of ``size`` bytes, ``before(x, y)`` when x goes strictly before y. A
 * track's events and flows come as a few ordered runs (one per batch: a thread's runtime calls, then its driver
 * calls), so merging the runs costs O(n log runs); an ordered array costs one pass. Inlined into each typed sort
 * below, where size and before are constants: its moves and comparisons compile as that type's own. */
HOT int natural_merge_sort(void *items, size_t n, size_t size, int (*before)(const void *, const void *)) {
    uint8_t *v = items;
    size_t runs = 1;
    for (size_t k = 1; k < n; k++) runs += before(v + k * size, v + (k - 1) * size);
    if (runs == 1) return 0;
    size_t *starts = malloc((runs + 1) * sizeof(size_t));
    uint8_t *tmp = malloc(n * size);
    if (!starts || !tmp) {
        free(starts);
        free(tmp);
        return -1;
    }
    size_t r = 0;
    starts[r++] = 0;
    for (size_t k = 1; k < n; k++)
        if (before(v + k * size, v + (k - 1) * size)) starts[r++] = k;
    starts[r] = n;
    uint8_t *src = v, *dst = tmp;
    while (runs > 1) {
        size_t out_runs = 0;
        for (size_t q = 0; q < runs; q += 2) {
            size_t lo = starts[q];
            if (q + 1 >= runs) {
                memcpy(dst + lo * size, src + lo * size, (n - lo) * size);
            } else {
                size_t mid = starts[q + 1], hi = starts[q + 2], a = lo, b = mid, w = lo;
                while (a < mid && b < hi)
                    memcpy(dst + w++ * size, before(src + b * size, src + a * size) ? src + b++ * size : src + a++ * size,
                           size);
                memcpy(dst + w * size, src + a * size, (mid - a) * size); /* what is left of one run */
                w += mid - a;
                memcpy(dst + w * size, src + b * size, (hi - b) * size);
            }
            starts[out_runs++] = lo;
        }
        starts[out_runs] = n;
        runs = out_runs;
        uint8_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * size);
    free(starts);
    free(tmp);
    return 0;
}

static int ev_before(const void *a, const void *b) { return ev_order(a, b) < 0; }
static int flow_before(const void *a, const void *b) { return ((const Flow *)a)->ts < ((const Flow *)b)->ts; }

/* Events in (ts, slices first, longer first, file order). */
static int sort_events(Ev *v, size_t n) { return natural_merge_sort(v, n, sizeof(Ev), ev_before); }

/* Flows by time. */
static int sort_flows(Flow *v, size_t n) { return natural_merge_sort(v, n, sizeof(Flow), flow_before); }

typedef struct {
    int32_t *v;
    size_t n, cap;
} Stack;

static int push(Stack *s, int32_t x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        int32_t *v = realloc(s->v, cap * sizeof(int32_t));
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

/* Lanes and flows of one track (evs sorted; flows of the track sorted by time). */
static uint16_t place(Enc *E, Ev *evs, size_t n, Flow *flows, size_t nf, Stack **lanes_io, size_t *nl_io) {
    Stack *lanes = *lanes_io;
    size_t nl = *nl_io;
    for (size_t l = 0; l < nl; l++) lanes[l].n = 0;
    size_t fi = 0;
    int32_t pending = -1, pending_tail = -1; /* flows waiting for the next slice */
    uint16_t used = 1;
    for (size_t k = 0; k <= n; k++) {
        int64_t t = k < n ? evs[k].ts : INT64_MAX;
        /* flows before this event bind to what encloses them now */
        while (fi < nf && (k == n || flows[fi].ts < t || (flows[fi].ts == t && evs[k].kind))) {
            Flow *f = &flows[fi];
            int32_t best = -1;
            for (size_t l = 0; l < nl; l++) {
                Stack *st = &lanes[l];
                while (st->n) {
                    const Ev *top = &evs[st->v[st->n - 1]];
                    if (top->end < f->ts || (top->end == f->ts && top->ts < f->ts)) st->n--;
                    else break;
                }
                if (st->n && (best < 0 || evs[st->v[st->n - 1]].ts > evs[best].ts)) best = st->v[st->n - 1];
            }
            if (f->next_slice || best < 0) {
                if (f->next_slice) {
                    f->next = -1;
                    if (pending_tail >= 0) flows[pending_tail].next = (int32_t)fi;
                    else pending = (int32_t)fi;
                    pending_tail = (int32_t)fi;
                } else {
                    E->unbound_flows++;
                }
            } else {
                f->next = evs[best].flow;
                evs[best].flow = (int32_t)fi;
            }
            fi++;
        }
        if (k == n) break;
        Ev *e = &evs[k];
        if (e->kind) {
            e->lane = 0;
            continue;
        }
        while (pending >= 0) { /* flows bound to the next slice: this one */
            int32_t nx = flows[pending].next;
            flows[pending].next = e->flow;
            e->flow = pending;
            pending = nx;
        }
        pending_tail = -1;
        size_t l = 0;
        for (;; l++) {
            if (l == nl) {
                if (nl >= 65535) {
                    fail(E, "more than 65535 lanes on one track");
                    return used;
                }
                Stack *more = realloc(lanes, (nl + 1) * sizeof(Stack));
                if (!more) {
                    fail(E, "out of memory");
                    return used;
                }
                lanes = more;
                memset(&lanes[nl], 0, sizeof(Stack));
                nl++;
            }
            Stack *st = &lanes[l];
            while (st->n && evs[st->v[st->n - 1]].end <= e->ts) st->n--;
            if (!st->n || e->end <= evs[st->v[st->n - 1]].end) break;
        }
        if (push(&lanes[l], (int32_t)k) < 0) {
            fail(E, "out of memory");
            return used;
        }
        e->lane = (uint16_t)l;
        if (l) E->lanes_moved++;
        if (l + 1 > used) used = (uint16_t)(l + 1);
    }
    for (int32_t f = pending; f >= 0; f = flows[f].next) E->unbound_flows++;
    *lanes_io = lanes;
    *nl_io = nl;
    return used;
}

static void emit_lane(Enc *E, Buf *dest, const Ev *evs, size_t n, uint16_t lane, const Flow *flows, Stack *st) {
    st->n = 0;
    for (size_t k = 0; k < n; k++) {
        const Ev *e = &evs[k];
        if (e->lane != lane) continue;
        while (st->n && evs[st->v[st->n - 1]].end <= e->ts) emit_end(E, dest, evs[st->v[--st->n]].end);
        emit_begin(E, dest, e, flows);
        if (!e->kind && push(st, (int32_t)k) < 0) return fail(E, "out of memory");
        if (E->err || E->out.failed || dest->failed) return;
    }
    while (st->n) emit_end(E, dest, evs[st->v[--st->n]].end);
}

static int add_lane(Enc *E, int64_t code, uint16_t lane, uint64_t uuid, uint32_t seq) {
    if (E->nlanes == E->lanes_cap) {
        size_t cap = E->lanes_cap ? E->lanes_cap * 2 : 16;
        int64_t *l = realloc(E->lanes, cap * 4 * sizeof(int64_t));
        if (!l) return -1;
        E->lanes = l;
        E->lanes_cap = cap;
    }
    int64_t *r = E->lanes + 4 * E->nlanes++;
    r[0] = code;
    r[1] = lane;
    r[2] = (int64_t)uuid;
    r[3] = seq;
    return 0;
}

/* ----------------------------------------------------------------------------- encode() */
typedef struct {
    Py_buffer codes, tracks, fts, fcode, fid, fdir, fnext;
    int has_flows;
} Inputs;

/* The flow columns as given (no copy): each flow is read once, into its track's group. */
typedef struct {
    Arr ts, code, id, dir, next;
    size_t n;
} FlowIn;

HOT Flow flow_at(const FlowIn *in, size_t k, int64_t clamp_ts) {
    Flow f;
    f.ts = get_i64(&in->ts, (Py_ssize_t)k);
    if (f.ts < clamp_ts) f.ts = clamp_ts;
    f.code = (int32_t)get_i64(&in->code, (Py_ssize_t)k);
    f.fid = (uint64_t)get_i64(&in->id, (Py_ssize_t)k);
    f.dir = (uint8_t)get_i64(&in->dir, (Py_ssize_t)k);
    f.next_slice = get_i64(&in->next, (Py_ssize_t)k) != 0;
    f.next = -1;
    return f;
}

static int run(Enc *E, const int32_t *codes, int64_t nrows, const int64_t *tracks, int64_t ntracks, const FlowIn *fin) {
    size_t nflows = fin->n;
    /* rows by track */
    int64_t *start = calloc((size_t)ntracks + 1, sizeof(int64_t));
    int64_t *fstart = calloc((size_t)ntracks + 1, sizeof(int64_t));
    Ev *evs = malloc((size_t)(nrows ? nrows : 1) * sizeof(Ev));
    Flow *fl = malloc((nflows ? nflows : 1) * sizeof(Flow));
    Stack *lanes = NULL, st = {0};
    size_t nl = 0;
    int rc = -1;
    if (!start || !fstart || !evs || !fl) {
        fail(E, "out of memory");
        goto done;
    }
    for (Py_ssize_t g = 0; g < E->nsegs; g++) { /* the rows the segments hold (a row outside them is not an event) */
        for (int64_t r = E->segs[g].lo; r < E->segs[g].hi; r++) {
            int32_t c = codes[r];
            if (c >= 0 && c < ntracks) start[c + 1]++;
        }
    }
    for (int64_t c = 0; c < ntracks; c++) start[c + 1] += start[c];
    {
        int64_t *fill = calloc((size_t)ntracks + 1, sizeof(int64_t));
        if (!fill) {
            fail(E, "out of memory");
            goto done;
        }
        memcpy(fill, start, (size_t)ntracks * sizeof(int64_t));
        for (Py_ssize_t g = 0; g < E->nsegs; g++) {
            const Seg *s = &E->segs[g];
            for (int64_t r = s->lo; r < s->hi; r++) {
                int32_t c = codes[r];
                if (c < 0 || c >= ntracks) continue;
                Py_ssize_t i = (Py_ssize_t)(r - s->lo);
                Ev *e = &evs[fill[c]++];
                int64_t ts = get_i64(&s->ts, i);
                if (ts < E->clamp_ts) ts = E->clamp_ts;
                int64_t dur = s->kind == 0 && s->dur.p ? get_i64(&s->dur, i) : 0;
                if (dur < 0) dur = 0;
                e->ts = ts;
                e->end = dur > INT64_MAX - ts ? INT64_MAX : ts + dur;
                e->seg = (int32_t)g;
                e->local = (int32_t)i;
                e->flow = -1;
                e->lane = 0;
                e->kind = (uint8_t)(s->kind != 0);
            }
        }
        free(fill);
    }
    /* flows by track, in time order */
    for (size_t k = 0; k < nflows; k++) {
        int64_t c = get_i64(&fin->code, (Py_ssize_t)k);
        if (c >= 0 && c < ntracks) fstart[c + 1]++;
        else E->unbound_flows++;
    }
    for (int64_t c = 0; c < ntracks; c++) fstart[c + 1] += fstart[c];
    {
        int64_t *fill = calloc((size_t)ntracks + 1, sizeof(int64_t));
        if (!fill) {
            fail(E, "out of memory");
            goto done;
        }
        memcpy(fill, fstart, (size_t)ntracks * sizeof(int64_t));
        for (size_t k = 0; k < nflows; k++) {
            int64_t c = get_i64(&fin->code, (Py_ssize_t)k);
            if (c >= 0 && c < ntracks) fl[fill[c]++] = flow_at(fin, k, E->clamp_ts);
        }
        free(fill);
    }
    for (int64_t c = 0; c < ntracks; c++) {
        Ev *te = evs + start[c];
        size_t n = (size_t)(start[c + 1] - start[c]);
        Flow *tf = fl + fstart[c];
        size_t nf = (size_t)(fstart[c + 1] - fstart[c]);
        if (!n) {
            E->unbound_flows += (int64_t)nf;
            continue;
        }
        if (sort_events(te, n) < 0) {
            fail(E, "out of memory");
            goto done;
        }
        if (sort_flows(tf, nf) < 0) {
            fail(E, "out of memory");
            goto done;
        }
        /* flows index the whole array from here: shift their links */
        uint16_t used = place(E, te, n, tf, nf, &lanes, &nl);
        if (E->err) goto done;
        for (size_t k = 0; k < n; k++)
            if (te[k].flow >= 0) te[k].flow += (int32_t)fstart[c];
        for (size_t k = 0; k < nf; k++)
            if (tf[k].next >= 0) tf[k].next += (int32_t)fstart[c];
        hoist_track(E, te, n);
        keep_hoisted(E, c);
        if (E->err) goto done;
        uint64_t uuid = (uint64_t)tracks[3 * c];
        uint32_t seq = (uint32_t)tracks[3 * c + 1];
        sequence_start(E, &E->out, seq, uuid, E->base_ts, NULL, 0);
        emit_lane(E, &E->out, te, n, 0, fl, &st);
        for (uint16_t l = 1; l < used; l++) {
            uint64_t lane_uuid = E->next_uuid++;
            uint32_t lane_seq = E->next_seq++;
            if (add_lane(E, c, l, lane_uuid, lane_seq) < 0) {
                fail(E, "out of memory");
                goto done;
            }
            sequence_start(E, &E->out, lane_seq, lane_uuid, E->base_ts, NULL, 0);
            emit_lane(E, &E->out, te, n, l, fl, &st);
        }
        if (E->err || E->out.failed) goto done;
    }
    rc = 0;
done:
    if (E->out.failed) fail(E, "out of memory");
    for (size_t l = 0; l < nl; l++) free(lanes[l].v);
    free(lanes);
    free(st.v);
    free(start);
    free(fstart);
    free(evs);
    free(fl);
    return E->err ? -1 : rc;
}

static int strings_in(PyObject *blob, PyObject *offsets, Py_buffer *b, Py_buffer *o, Strings *S) {
    if (PyObject_GetBuffer(blob, b, PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(offsets, o, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(b);
        return -1;
    }
    Py_ssize_t n = o->len / 8 - 1;
    const int64_t *off = o->buf;
    if (o->len % 8 || n < 0 || off[0] != 0 || off[n] > b->len) goto bad;
    for (Py_ssize_t k = 0; k < n; k++)
        if (off[k] > off[k + 1]) goto bad;
    memset(S, 0, sizeof *S);
    S->blob = b->buf;
    S->off = off;
    S->nbase = n;
    if (seen_fit(S, (size_t)n + 1) < 0) {
        PyBuffer_Release(b);
        PyBuffer_Release(o);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
bad:
    PyBuffer_Release(b);
    PyBuffer_Release(o);
    PyErr_SetString(PyExc_ValueError, "pfenc: string offsets must be n + 1 ascending int64 within the blob");
    return -1;
}

static void enc_free(Enc *E) {
    if (!E->out.borrowed) free(E->out.p);
    free(E->ev.p);
    free(E->ann.p);
    free(E->interned.p);
    free(E->lane_out.p);
    for (int k = 0; k < 40; k++) free(E->tmp[k].p);
    for (int t = 0; t < 4; t++) free(E->interned_parts[t].p);
    free(E->lanes);
    free(E->hoist);
    free(E->hoisted_all);
    free(E->hoisted_code);
    strings_free(&E->S);
}

/* encode(blob, offsets, nrows, segments, codes, tracks, flows, base_ts, clamp_ts, next_uuid, next_seq) */
static PyObject *encode(PyObject *mod, PyObject *args) {
    PyObject *blob, *offsets, *segs_o, *codes_o, *tracks_o, *flows_o;
    int64_t nrows, base_ts, clamp_ts;
    unsigned long long next_uuid;
    unsigned int next_seq;
    if (!PyArg_ParseTuple(args, "OOLOOOOLLKI:encode", &blob, &offsets, &nrows, &segs_o, &codes_o, &tracks_o, &flows_o,
                          &base_ts, &clamp_ts, &next_uuid, &next_seq))
        return NULL;
    Enc *E = calloc(1, sizeof(Enc));
    if (!E) return PyErr_NoMemory();
    Py_buffer sb = {0}, so = {0}, cb = {0}, tb = {0};
    FlowIn fin;
    memset(&fin, 0, sizeof fin);
    PyObject *fast = NULL, *out = NULL, *result = NULL;
    Py_ssize_t parsed = 0;
    size_t nflows = 0;
    if (strings_in(blob, offsets, &sb, &so, &E->S) < 0) {
        free(E);
        return NULL;
    }
    E->base_ts = base_ts;
    E->clamp_ts = clamp_ts;
    E->next_uuid = next_uuid;
    E->next_seq = next_seq;
    if (PyObject_GetBuffer(codes_o, &cb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    if (cb.itemsize != 4 || cb.len / 4 != nrows) {
        PyErr_SetString(PyExc_ValueError, "pfenc: codes must be int32, one per row");
        goto done;
    }
    if (PyObject_GetBuffer(tracks_o, &tb, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (tb.len % 24) {
        PyErr_SetString(PyExc_ValueError, "pfenc: tracks must be int64 (uuid, seq, 0) triples");
        goto done;
    }
    int64_t ntracks = tb.len / 24;
    {
        const int32_t *c = cb.buf;
        for (int64_t r = 0; r < nrows; r++)
            if (c[r] >= ntracks) {
                PyErr_SetString(PyExc_ValueError, "pfenc: a track code outside the tracks");
                goto done;
            }
    }
    fast = PySequence_Fast(segs_o, "pfenc: segments must be a sequence");
    if (!fast) goto done;
    E->nsegs = PySequence_Fast_GET_SIZE(fast);
    E->segs = PyMem_Calloc((size_t)(E->nsegs ? E->nsegs : 1), sizeof(Seg));
    if (!E->segs) {
        PyErr_NoMemory();
        goto done;
    }
    for (; parsed < E->nsegs; parsed++) {
        if (parse_seg(PySequence_Fast_GET_ITEM(fast, parsed), &E->segs[parsed], nrows) < 0) {
            parsed++;
            goto done;
        }
    }
    if (flows_o != Py_None) {
        PyObject *a, *b, *c, *d, *e;
        if (!PyArg_ParseTuple(flows_o, "OOOOO", &a, &b, &c, &d, &e)) goto done;
        if (get_arr(a, &fin.ts, "flow ts") < 0 || get_arr(b, &fin.code, "flow codes") < 0 ||
            get_arr(c, &fin.id, "flow ids") < 0 || get_arr(d, &fin.dir, "flow directions") < 0 ||
            get_arr(e, &fin.next, "flow bindings") < 0)
            goto done;
        nflows = (size_t)fin.ts.n;
        if (!fin.ts.p || fin.code.n != fin.ts.n || fin.id.n != fin.ts.n || fin.dir.n != fin.ts.n || fin.next.n != fin.ts.n) {
            PyErr_SetString(PyExc_ValueError, "pfenc: flow columns differ in length");
            goto done;
        }
        if (nflows >= INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "pfenc: too many flows");
            goto done;
        }
        fin.n = nflows;
    }
    { /* the result's bytes object, sized by an estimate, written in place (no copy of the trace at the end) */
        size_t guess = 1 << 16;
        for (Py_ssize_t g = 0; g < E->nsegs; g++) {
            const Seg *s = &E->segs[g];
            size_t rows = (size_t)(s->hi - s->lo);
            guess += rows * (size_t)(40 + 12 * s->nitems);
            for (Py_ssize_t j = 0; j < s->nitems; j++)
                if (s->items[j].has_blob) guess += (size_t)s->items[j].blob.len;
        }
        guess += nflows * 12;
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)guess);
        if (!result) goto done;
        E->out.p = (uint8_t *)PyBytes_AS_STRING(result);
        E->out.cap = guess;
        E->out.borrowed = 1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run(E, cb.buf, nrows, tb.buf, ntracks, &fin);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        if (E->err && strcmp(E->err, "out of memory") == 0) PyErr_NoMemory();
        else PyErr_Format(PyExc_ValueError, "pfenc: %s", E->err ? E->err : "encoding failed");
        goto done;
    }
    {
        PyObject *data;
        if (E->out.borrowed) {
            data = result;
            result = NULL;
            if (_PyBytes_Resize(&data, (Py_ssize_t)E->out.n) < 0) goto done;
        } else {
            data = PyBytes_FromStringAndSize((const char *)E->out.p, (Py_ssize_t)E->out.n);
        }
        PyObject *lanes = PyList_New((Py_ssize_t)E->nlanes);
        PyObject *hoisted = PyList_New((Py_ssize_t)E->nhoisted);
        if (!data || !lanes || !hoisted) {
            Py_XDECREF(data);
            Py_XDECREF(lanes);
            Py_XDECREF(hoisted);
            goto done;
        }
        for (size_t k = 0; k < E->nlanes; k++) {
            int64_t *r = E->lanes + 4 * k;
            PyList_SET_ITEM(lanes, (Py_ssize_t)k, Py_BuildValue("(LLKL)", r[0], r[1], (unsigned long long)r[2], r[3]));
        }
        for (size_t k = 0; k < E->nhoisted; k++) {
            Hoist *h = &E->hoisted_all[k];
            PyObject *value;
            switch (h->kind) {
                case A_F64: {
                    double d;
                    memcpy(&d, &h->value, 8);
                    value = PyFloat_FromDouble(d);
                    break;
                }
                case A_UINT: case A_HEX: value = PyLong_FromUnsignedLongLong(h->value); break;
                case A_BOOL: value = PyBool_FromLong(h->value != 0); break;
                default: value = PyLong_FromLongLong((long long)h->value); break;
            }
            PyList_SET_ITEM(hoisted, (Py_ssize_t)k,
                            Py_BuildValue("(LLLiN)", E->hoisted_code[k], h->cat, h->key, h->kind, value));
        }
        out = Py_BuildValue("(NNN{s:L,s:L,s:L})", data, lanes, hoisted, "unbound_flows", E->unbound_flows,
                            "lane_slices", E->lanes_moved, "deep_args", E->deep_args);
    }
done:
    Py_XDECREF(result);
    for (Py_ssize_t j = 0; j < parsed; j++) seg_release(&E->segs[j]);
    PyMem_Free(E->segs);
    Py_XDECREF(fast);
    rel_arr(&fin.ts);
    rel_arr(&fin.code);
    rel_arr(&fin.id);
    rel_arr(&fin.dir);
    rel_arr(&fin.next);
    if (cb.obj) PyBuffer_Release(&cb);
    if (tb.obj) PyBuffer_Release(&tb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&so);
    enc_free(E);
    free(E);
    return out;
}

/* ----------------------------------------------------------------------------- counters */
typedef struct {
    int64_t ts;
    int64_t event;
} CEv;

static int cev_cmp(const void *x, const void *y) {
    const CEv *a = x, *b = y;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->event < b->event ? -1 : a->event > b->event;
}

/* counters(ts, group, event_offsets, uuids, values, group_seq, group_offsets, group_uuids, base_ts, clamp_ts) */
static PyObject *counters(PyObject *mod, PyObject *args) {
    PyObject *o[8];
    int64_t base_ts, clamp_ts;
    if (!PyArg_ParseTuple(args, "OOOOOOOOLL:counters", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &base_ts,
                          &clamp_ts))
        return NULL;
    Py_buffer b[8];
    int got = 0;
    PyObject *out = NULL;
    for (; got < 8; got++)
        if (PyObject_GetBuffer(o[got], &b[got], PyBUF_C_CONTIGUOUS) < 0) goto release;
    const int64_t *ts = b[0].buf, *off = b[2].buf, *gseq = b[5].buf, *goff = b[6].buf;
    const int32_t *grp = b[1].buf;
    const uint64_t *uuids = b[3].buf, *guuids = b[7].buf;
    const double *vals = b[4].buf;
    Py_ssize_t n = b[0].len / 8, ng = b[5].len / 8, nv = b[3].len / 8, ngu = b[7].len / 8;
    if (b[1].len != n * 4 || b[2].len != (n + 1) * 8 || b[4].len != nv * 8 || b[6].len != (ng + 1) * 8 ||
        (n && (off[0] != 0 || off[n] != nv)) || (ng && (goff[0] != 0 || goff[ng] != ngu))) {
        PyErr_SetString(PyExc_ValueError, "pfenc.counters: column lengths do not agree");
        goto release;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (grp[i] < 0 || grp[i] >= ng || off[i] > off[i + 1] || off[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "pfenc.counters: a group or offset out of range");
            goto release;
        }
    for (Py_ssize_t g = 0; g < ng; g++)
        if (goff[g] > goff[g + 1] || goff[g] < 0) {
            PyErr_SetString(PyExc_ValueError, "pfenc.counters: group offsets must ascend");
            goto release;
        }
    {
        Enc *E = calloc(1, sizeof(Enc));
        int64_t *start = calloc((size_t)ng + 1, sizeof(int64_t));
        CEv *evs = malloc((size_t)(n ? n : 1) * sizeof(CEv));
        int ok = E && start && evs;
        if (ok) {
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t i = 0; i < n; i++) start[grp[i] + 1]++;
            for (Py_ssize_t g = 0; g < ng; g++) start[g + 1] += start[g];
            int64_t *fill = malloc(((size_t)ng + 1) * sizeof(int64_t));
            if (!fill) ok = 0;
            else {
                memcpy(fill, start, ((size_t)ng + 1) * sizeof(int64_t));
                for (Py_ssize_t i = 0; i < n; i++) {
                    CEv *e = &evs[fill[grp[i]]++];
                    e->ts = ts[i] < clamp_ts ? clamp_ts : ts[i];
                    e->event = i;
                }
                free(fill);
            }
            for (Py_ssize_t g = 0; ok && g < ng; g++) {
                CEv *ge = evs + start[g];
                size_t m = (size_t)(start[g + 1] - start[g]);
                if (!m) continue;
                for (size_t k = 1; k < m; k++)
                    if (cev_cmp(&ge[k - 1], &ge[k]) > 0) {
                        qsort(ge, m, sizeof(CEv), cev_cmp);
                        break;
                    }
                const uint64_t *def = guuids + goff[g];
                size_t ndef = (size_t)(goff[g + 1] - goff[g]);
                sequence_start(E, &E->out, (uint32_t)gseq[g], ndef ? def[0] : 0, base_ts, ndef > 1 ? def + 1 : NULL,
                               ndef > 1 ? ndef - 1 : 0);
                for (size_t k = 0; k < m; k++) {
                    int64_t i = ge[k].event;
                    const uint64_t *u = uuids + off[i];
                    const double *v = vals + off[i];
                    size_t nu = (size_t)(off[i + 1] - off[i]);
                    if (!nu) continue;
                    Buf *ev = &E->ev;
                    ev->n = 0;
                    put_uint(ev, TE_TYPE, TYPE_COUNTER);
                    int same = nu == ndef && memcmp(u, def, nu * 8) == 0;
                    if (!same) {
                        put_uint(ev, TE_TRACK, u[0]);
                        for (size_t j = 1; j < nu; j++) put_uint(ev, TE_EXTRA_DOUBLE_TRACKS, u[j]);
                    }
                    put_double(ev, TE_DOUBLE_VALUE, v[0]);
                    for (size_t j = 1; j < nu; j++) put_double(ev, TE_EXTRA_DOUBLE_VALUES, v[j]);
                    packet(E, &E->out, ge[k].ts, 1, ev, TP_TRACK_EVENT);
                }
                if (E->out.failed) ok = 0;
            }
            Py_END_ALLOW_THREADS
        }
        if (ok) out = PyBytes_FromStringAndSize((const char *)E->out.p, (Py_ssize_t)E->out.n);
        else PyErr_NoMemory();
        if (E) enc_free(E);
        free(E);
        free(start);
        free(evs);
    }
release:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return out;
}

/* ----------------------------------------------------------------------------- pair codes */
/* pair_codes(a, b, known) -> (codes int32 bytes, pairs int64 bytes): a dense code per row for the pair
 * (a[i], b[i]) (int64 columns; length 1: one value for every row), numbering first the pairs of ``known``
 * (int64 pairs, as a previous call returned them) and then new pairs in row order. A hash, not a sort. */
static PyObject *pair_codes(PyObject *mod, PyObject *args) {
    PyObject *ao, *bo, *ko;
    if (!PyArg_ParseTuple(args, "OOO:pair_codes", &ao, &bo, &ko)) return NULL;
    Arr a, b;
    Py_buffer k;
    if (get_arr(ao, &a, "a") < 0) return NULL;
    if (get_arr(bo, &b, "b") < 0) {
        rel_arr(&a);
        return NULL;
    }
    if (PyObject_GetBuffer(ko, &k, PyBUF_C_CONTIGUOUS) < 0) {
        rel_arr(&a);
        rel_arr(&b);
        return NULL;
    }
    PyObject *out = NULL, *codes = NULL;
    int64_t *pairs = NULL;
    int64_t *slots = NULL;
    if (!a.p || !b.p || (a.n != 1 && b.n != 1 && a.n != b.n) || k.len % 16) {
        PyErr_SetString(PyExc_ValueError, "pair_codes: two int64 columns of one length and int64 pairs");
        goto done;
    }
    Py_ssize_t n = a.n > b.n ? a.n : b.n, nk = k.len / 16;
    size_t cap = 1024;
    while (cap < 2 * (size_t)(nk + 16)) cap *= 2;
    size_t npairs = (size_t)nk, pcap = (size_t)nk + 64;
    pairs = malloc(pcap * 16);
    slots = calloc(cap, sizeof(int64_t));
    codes = PyBytes_FromStringAndSize(NULL, n * 4);
    if (!pairs || !slots || !codes) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(pairs, k.buf, (size_t)k.len);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t q = 0; q < npairs; q++) {
        size_t j = hoist_slot(pairs[2 * q], pairs[2 * q + 1]) & (cap - 1);
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = (int64_t)q + 1;
    }
    int32_t *c = (int32_t *)PyBytes_AS_STRING(codes);
    int64_t last_a = 0, last_b = 0;
    int32_t last = -1;
    for (Py_ssize_t i = 0; i < n && !err; i++) {
        int64_t x = get_i64(&a, i), y = get_i64(&b, i);
        if (last >= 0 && x == last_a && y == last_b) {
            c[i] = last;
            continue;
        }
        size_t j = hoist_slot(x, y) & (cap - 1);
        int64_t got = 0;
        while (slots[j]) {
            int64_t q = slots[j] - 1;
            if (pairs[2 * q] == x && pairs[2 * q + 1] == y) {
                got = q + 1;
                break;
            }
            j = (j + 1) & (cap - 1);
        }
        if (!got) {
            if (npairs >= INT32_MAX - 1) { err = 1; break; }
            if (npairs == pcap) {
                pcap *= 2;
                int64_t *more = realloc(pairs, pcap * 16);
                if (!more) { err = 2; break; }
                pairs = more;
            }
            pairs[2 * npairs] = x;
            pairs[2 * npairs + 1] = y;
            slots[j] = (int64_t)npairs + 1;
            got = (int64_t)++npairs;
            if (2 * npairs > cap) { /* grow and rehash */
                size_t ncap = cap * 2;
                int64_t *ns = calloc(ncap, sizeof(int64_t));
                if (!ns) { err = 2; break; }
                for (size_t q = 0; q < npairs; q++) {
                    size_t h = hoist_slot(pairs[2 * q], pairs[2 * q + 1]) & (ncap - 1);
                    while (ns[h]) h = (h + 1) & (ncap - 1);
                    ns[h] = (int64_t)q + 1;
                }
                free(slots);
                slots = ns;
                cap = ncap;
            }
        }
        c[i] = last = (int32_t)(got - 1);
        last_a = x;
        last_b = y;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        if (err == 2) PyErr_NoMemory();
        else PyErr_SetString(PyExc_ValueError, "pair_codes: more than 2**31 pairs");
        goto done;
    }
    {
        PyObject *pb = PyBytes_FromStringAndSize((const char *)pairs, (Py_ssize_t)(npairs * 16));
        if (pb) out = Py_BuildValue("(ON)", codes, pb);
    }
done:
    Py_XDECREF(codes);
    free(pairs);
    free(slots);
    PyBuffer_Release(&k);
    rel_arr(&a);
    rel_arr(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode($module, blob, offsets, nrows, segments, codes, tracks, flows, base_ts, clamp_ts, next_uuid, next_seq, "
     "/)\n--\n\n-> (bytes, lanes, hoisted, counts): the slices and instants of a trace as Perfetto TracePackets, one sequence per "
     "track and lane (see the module source)."},
    {"pair_codes", pair_codes, METH_VARARGS,
     "pair_codes($module, a, b, known, /)\n--\n\n-> (codes, pairs): int32 codes of the (a[i], b[i]) int64 pairs (known pairs first, "
     "then new ones in row order) and every pair as int64 bytes."},
    {"counters", counters, METH_VARARGS,
     "counters($module, ts, group, event_offsets, uuids, values, group_seq, group_offsets, group_uuids, base_ts, "
     "clamp_ts, /)\n--\n\n-> bytes: counter events as TYPE_COUNTER packets, one sequence per group."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.pfenc",
                                    "Perfetto TracePacket protobuf from trace table columns.", -1, methods};

PyMODINIT_FUNC PyInit_pfenc(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const struct {
        const char *name;
        int value;
    } consts[] = {
        {"INT", A_INT}, {"UINT", A_UINT}, {"F64", A_F64}, {"BOOL", A_BOOL}, {"STR", A_STR}, {"HEX", A_HEX},
        {"VEC", A_VEC}, {"JSON_OBJECT", A_JSON_OBJECT}, {"JSON_VALUE", A_JSON_VALUE},
    };
    for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
        if (PyModule_AddIntConstant(m, consts[k].name, consts[k].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
