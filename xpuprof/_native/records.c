/* xpuprof._native.records: the records stage of the vendor pipelines (backends/<vendor>/records.py).
 *
 * Vendor buffers hold fixed-layout records of several kinds, back to back. This module locates
 * them and copies their fields out, with no Python per record:
 *
 *   walk(buffer, next_record_address) -> (offsets, status)   records located by the vendor's own
 *       iterator (PTI's ptiViewGetNextRecord); status 1 = end of buffer, else the code that stopped it.
 *   walk_sizes(buffer, sizes) -> (offsets, stop)   records located with a kind -> size table
 *       (uint32, indexed by kind; 0 = unknown), for replays; stop = -1 or the offset it stopped at.
 *   gather_into(buffer, offsets, size, out, out_offset)   whole records, copied into one array.
 *   gather_fields(buffer, offsets, spans, out, out_offset, out_size)   byte spans of each record.
 *   plan_count(buffer, offsets, plan, window) -> (counts, unknown)
 *   plan_fill(buffer, offsets, plan, outs, pos, window)
 *       the column decode: each record's fields straight into typed columns (one column per field,
 *       integers widened to the column's width), the capture window applied on the way.
 *
 * A plan (int64 array) lists the record kinds to decode: [n_slots, then per slot: kind, record
 * size, start offset, end offset, n_fields, then per field: source offset, source width (1, 2,
 * 4, 8 or any byte count), destination column, destination width, flags]. flags: 0 unsigned,
 * 1 signed, 2 raw bytes (the column holds source-width bytes per row). start offset -1: the kind
 * is not windowed (and has no order check). A window is (lo, hi, clock offset): a record is kept
 * when lo <= start + offset <= hi; lo > hi keeps everything.
 *
 * plan_count validates every record's extent and counts per slot: kept, dropped (outside the
 * window), misordered (end < start, over all records); kinds the plan lacks are counted in the
 * `unknown` dict. plan_fill writes the kept records of each slot at pos[slot], pos[slot] + 1, ...
 * (pos is updated), so buffers can be filled one after another into columns sized once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

typedef uint32_t (*next_record_fn)(uint8_t *buffer, size_t valid_bytes, void **record);

/* ----------------------------------------------------------------------------- offsets */
typedef struct { uint64_t *v; size_t n, cap; } offsets_t;

static int offsets_add(offsets_t *o, uint64_t x) {
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 1024;
        uint64_t *nv = (uint64_t *)realloc(o->v, ncap * sizeof(uint64_t));
        if (!nv) return -1;
        o->v = nv;
        o->cap = ncap;
    }
    o->v[o->n++] = x;
    return 0;
}

static PyObject *offsets_result(offsets_t *o, Py_ssize_t stop) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)o->v, (Py_ssize_t)(o->n * sizeof(uint64_t)));
    free(o->v);
    if (!b) return NULL;
    return Py_BuildValue("(Nn)", b, stop);
}

static PyObject *py_walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long fn_addr;
    if (!PyArg_ParseTuple(args, "y*K", &view, &fn_addr)) return NULL;
    if (!fn_addr) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk needs the address of the vendor's next-record function");
        return NULL;
    }
    next_record_fn next = (next_record_fn)(uintptr_t)fn_addr;
    offsets_t o = {0};
    uint8_t *base = (uint8_t *)view.buf;
    size_t len = (size_t)view.len;
    void *rec = NULL;
    uint32_t rc = 0;
    int oom = 0, outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        rc = next(base, len, &rec);
        if (rc != 0) break;
        if (!rec || (uint8_t *)rec < base || (uint8_t *)rec >= base + len) { outside = 1; break; }
        if (offsets_add(&o, (uint64_t)((uint8_t *)rec - base)) < 0) { oom = 1; break; }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (oom) { free(o.v); return PyErr_NoMemory(); }
    if (outside) {
        free(o.v);
        PyErr_SetString(PyExc_ValueError, "ptiViewGetNextRecord returned a record outside the buffer");
        return NULL;
    }
    return offsets_result(&o, (Py_ssize_t)rc);
}

static PyObject *py_walk_sizes(PyObject *self, PyObject *args) {
    Py_buffer view, sizes;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &sizes)) return NULL;
    const uint32_t *table = (const uint32_t *)sizes.buf;
    size_t nkinds = (size_t)sizes.len / sizeof(uint32_t);
    const uint8_t *base = (const uint8_t *)view.buf;
    size_t len = (size_t)view.len, off = 0;
    offsets_t o = {0};
    Py_ssize_t stop = -1;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    while (off < len) {
        uint32_t kind;
        if (len - off < sizeof(uint32_t)) { stop = (Py_ssize_t)off; break; }
        memcpy(&kind, base + off, sizeof kind);
        uint32_t sz = kind < nkinds ? table[kind] : 0;
        if (sz == 0 || sz > len - off) { stop = (Py_ssize_t)off; break; }
        if (offsets_add(&o, off) < 0) { oom = 1; break; }
        off += sz;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&sizes);
    if (oom) { free(o.v); return PyErr_NoMemory(); }
    return offsets_result(&o, stop);
}

/* ----------------------------------------------------------------------------- whole records, spans */
static PyObject *py_gather_into(PyObject *self, PyObject *args) {
    Py_buffer view, offs, out;
    Py_ssize_t size, out_off;
    if (!PyArg_ParseTuple(args, "y*y*nw*n", &view, &offs, &size, &out, &out_off)) return NULL;
    size_t n = (size_t)offs.len / sizeof(uint64_t);
    const uint64_t *o = (const uint64_t *)offs.buf;
    PyObject *result = NULL;
    if (size <= 0 || offs.len % 8 || out_off < 0 || (size_t)out.len < (size_t)out_off
        || (size_t)out.len - (size_t)out_off < n * (size_t)size) {
        PyErr_SetString(PyExc_ValueError, "gather_into: bad record size, offsets or output too small");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (o[i] > (uint64_t)view.len || (uint64_t)view.len - o[i] < (uint64_t)size) {
            PyErr_Format(PyExc_ValueError, "a %zd-byte record at offset %llu runs past the buffer's end (%zd bytes)",
                         size, (unsigned long long)o[i], view.len);
            goto done;
        }
    }
    char *dst = (char *)out.buf + out_off;
    const char *src = (const char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) memcpy(dst + i * (size_t)size, src + o[i], (size_t)size);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *py_gather_fields(PyObject *self, PyObject *args) {
    Py_buffer view, offs, spans, out;
    Py_ssize_t out_off, out_size;
    if (!PyArg_ParseTuple(args, "y*y*y*w*nn", &view, &offs, &spans, &out, &out_off, &out_size)) return NULL;
    size_t n = (size_t)offs.len / sizeof(uint64_t);
    size_t k = (size_t)spans.len / (3 * sizeof(int64_t));
    const uint64_t *o = (const uint64_t *)offs.buf;
    const int64_t *sp = (const int64_t *)spans.buf;
    PyObject *result = NULL;
    uint64_t reach = 0; /* bytes of a record the spans read */
    if (out_size <= 0 || offs.len % 8 || spans.len % 24 || out_off < 0 || (size_t)out.len < (size_t)out_off
        || (size_t)out.len - (size_t)out_off < n * (size_t)out_size) {
        PyErr_SetString(PyExc_ValueError, "gather_fields: bad row size, offsets, spans or output too small");
        goto done;
    }
    for (size_t j = 0; j < k; j++) {
        int64_t so = sp[3 * j], len = sp[3 * j + 1], dof = sp[3 * j + 2];
        if (so < 0 || len <= 0 || dof < 0 || dof + len > out_size) {
            PyErr_SetString(PyExc_ValueError, "gather_fields: a span lies outside the record or the output row");
            goto done;
        }
        if ((uint64_t)(so + len) > reach) reach = (uint64_t)(so + len);
    }
    for (size_t i = 0; i < n; i++) {
        if (o[i] > (uint64_t)view.len || (uint64_t)view.len - o[i] < reach) {
            PyErr_Format(PyExc_ValueError, "a record read to byte %llu at offset %llu runs past the buffer's end "
                         "(%zd bytes)", (unsigned long long)reach, (unsigned long long)o[i], view.len);
            goto done;
        }
    }
    char *dst = (char *)out.buf + out_off;
    const char *src = (const char *)view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        char *row = dst + i * (size_t)out_size;
        const char *rec = src + o[i];
        for (size_t j = 0; j < k; j++) {
            char *d = row + sp[3 * j + 2];
            const char *r = rec + sp[3 * j];
            switch (sp[3 * j + 1]) { /* fixed sizes become single moves */
            case 4: memcpy(d, r, 4); break;
            case 8: memcpy(d, r, 8); break;
            case 16: memcpy(d, r, 16); break;
            default: memcpy(d, r, (size_t)sp[3 * j + 1]);
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&out);
    return result;
}

/* ----------------------------------------------------------------------------- plans */
#define MAX_KIND 256
#define FLAG_SIGNED 1
#define FLAG_BYTES 2

typedef struct {
    int64_t src, width, col, dst_width, flags;
} field_t;

typedef struct {
    int64_t kind, size, start_off, end_off, nfields;
    const field_t *fields;
} slot_t;

typedef struct {
    int64_t nslots;
    slot_t *slots;
    int16_t lut[MAX_KIND]; /* kind -> slot, -1: not in the plan */
} plan_t;

static void plan_free(plan_t *p) { free(p->slots); p->slots = NULL; }

static int plan_parse(const Py_buffer *b, plan_t *p) {
    const int64_t *v = (const int64_t *)b->buf;
    size_t n = (size_t)b->len / 8, at = 1;
    memset(p->lut, 0xff, sizeof p->lut);
    p->slots = NULL;
    if (b->len % 8 || n < 1 || v[0] < 0 || v[0] > MAX_KIND) goto bad;
    p->nslots = v[0];
    p->slots = (slot_t *)calloc((size_t)(p->nslots ? p->nslots : 1), sizeof(slot_t));
    if (!p->slots) { PyErr_NoMemory(); return -1; }
    for (int64_t s = 0; s < p->nslots; s++) {
        if (at + 5 > n) goto bad;
        slot_t *sl = &p->slots[s];
        sl->kind = v[at]; sl->size = v[at + 1]; sl->start_off = v[at + 2]; sl->end_off = v[at + 3];
        sl->nfields = v[at + 4];
        at += 5;
        if (sl->kind < 0 || sl->kind >= MAX_KIND || p->lut[sl->kind] >= 0 || sl->size <= 0 || sl->nfields < 0
            || at + 5 * (size_t)sl->nfields > n)
            goto bad;
        if (sl->start_off >= 0 && (sl->start_off + 8 > sl->size || sl->end_off < 0 || sl->end_off + 8 > sl->size))
            goto bad;
        sl->fields = (const field_t *)(v + at);
        for (int64_t f = 0; f < sl->nfields; f++) {
            const field_t *fd = &sl->fields[f];
            if (fd->src < 0 || fd->width <= 0 || fd->src + fd->width > sl->size || fd->col < 0) goto bad;
            if (fd->flags & FLAG_BYTES) {
                if (fd->dst_width != fd->width) goto bad;
            } else if (!(fd->width == 1 || fd->width == 2 || fd->width == 4 || fd->width == 8)
                       || !(fd->dst_width == 4 || fd->dst_width == 8)) {
                goto bad;
            }
        }
        at += 5 * (size_t)sl->nfields;
        p->lut[sl->kind] = (int16_t)s;
    }
    return 0;
bad:
    plan_free(p);
    PyErr_SetString(PyExc_ValueError, "records: malformed decode plan");
    return -1;
}

static inline uint64_t read_u64(const uint8_t *p) { uint64_t x; memcpy(&x, p, 8); return x; }

/* A field ready to copy: its column's address and one opcode, (width * 2 + signed) * 2 + (8-byte
 * column), so the common moves (a u32 or a 64-bit field into an 8-byte column) are single cases. */
typedef struct {
    uint8_t *dst;
    int64_t src;
    int32_t width, dst_width, op;
} dfield_t;

#define OP_BYTES (-1)
#define OP_U32_TO_64 ((4 * 2 + 0) * 2 + 1)
#define OP_64_TO_64_U ((8 * 2 + 0) * 2 + 1)
#define OP_64_TO_64_S ((8 * 2 + 1) * 2 + 1)

static inline int64_t load_int(const uint8_t *src, int width, int is_signed) {
    switch (width) {
    case 1: return is_signed ? (int64_t)(int8_t)src[0] : (int64_t)src[0];
    case 2: { uint16_t t; memcpy(&t, src, 2); return is_signed ? (int64_t)(int16_t)t : (int64_t)t; }
    case 4: { uint32_t t; memcpy(&t, src, 4); return is_signed ? (int64_t)(int32_t)t : (int64_t)t; }
    default: { uint64_t t; memcpy(&t, src, 8); return (int64_t)t; }
    }
}

static inline void store_int(uint8_t *dst, int dst_width, int64_t x) {
    if (dst_width == 8) memcpy(dst, &x, 8);
    else { int32_t y = (int32_t)x; memcpy(dst, &y, 4); }
}

static inline int slot_of(const plan_t *p, const uint8_t *rec) {
    uint32_t kind;
    memcpy(&kind, rec, 4);
    return kind < MAX_KIND ? p->lut[kind] : -1;
}

static inline int in_window(const slot_t *sl, const uint8_t *rec, const int64_t *w) {
    if (sl->start_off < 0 || w[0] > w[1]) return 1;
    int64_t t = (int64_t)read_u64(rec + sl->start_off) + w[2];
    return w[0] <= t && t <= w[1];
}

static int parse_window(PyObject *obj, int64_t w[3]) {
    long long lo, hi, off;
    if (obj == Py_None) { w[0] = 1; w[1] = 0; w[2] = 0; return 0; }
    if (!PyArg_ParseTuple(obj, "LLL", &lo, &hi, &off)) return -1;
    w[0] = lo; w[1] = hi; w[2] = off;
    return 0;
}

/* plan_count(buffer, offsets, plan, window) -> (counts: bytes of int64 [kept, dropped, misordered] x slots,
 * unknown: {kind: records}) */
static PyObject *py_plan_count(PyObject *self, PyObject *args) {
    Py_buffer view, offs, pb;
    PyObject *wobj, *result = NULL, *unknown = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O", &view, &offs, &pb, &wobj)) return NULL;
    plan_t plan = {0};
    int64_t w[3], *counts = NULL;
    uint64_t unknown_at[MAX_KIND] = {0}, unknown_high = 0;
    if (parse_window(wobj, w) < 0 || plan_parse(&pb, &plan) < 0) goto done;
    size_t n = (size_t)offs.len / 8, len = (size_t)view.len;
    const uint64_t *o = (const uint64_t *)offs.buf;
    const uint8_t *base = (const uint8_t *)view.buf;
    counts = (int64_t *)calloc(3 * (size_t)(plan.nslots ? plan.nslots : 1), sizeof(int64_t));
    if (!counts) { PyErr_NoMemory(); goto done; }
    for (size_t i = 0; i < n; i++) { /* extent checks first: an error names the record */
        if (o[i] > len || len - o[i] < 4) {
            PyErr_Format(PyExc_ValueError, "truncated buffer: no complete record kind at offset %llu of %zu bytes",
                         (unsigned long long)o[i], len);
            goto done;
        }
        int s = slot_of(&plan, base + o[i]);
        if (s >= 0 && len - o[i] < (uint64_t)plan.slots[s].size) {
            PyErr_Format(PyExc_ValueError, "truncated PTI buffer: a %lld-byte record at offset %llu runs past the "
                         "buffer's end (%zu bytes)", (long long)plan.slots[s].size, (unsigned long long)o[i], len);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = base + o[i];
        int s = slot_of(&plan, rec);
        if (s < 0) {
            uint32_t kind;
            memcpy(&kind, rec, 4);
            if (kind < MAX_KIND) unknown_at[kind]++; else unknown_high++;
            continue;
        }
        const slot_t *sl = &plan.slots[s];
        if (in_window(sl, rec, w)) counts[3 * s]++; else counts[3 * s + 1]++;
        if (sl->start_off >= 0 && read_u64(rec + sl->end_off) < read_u64(rec + sl->start_off)) counts[3 * s + 2]++;
    }
    Py_END_ALLOW_THREADS
    unknown = PyDict_New();
    if (!unknown) goto done;
    for (int k = 0; k < MAX_KIND; k++) {
        if (!unknown_at[k]) continue;
        PyObject *key = PyLong_FromLong(k), *val = PyLong_FromUnsignedLongLong(unknown_at[k]);
        int rc = (key && val) ? PyDict_SetItem(unknown, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (rc < 0) goto done;
    }
    if (unknown_high) { /* kinds past the table: counted together under -1 */
        PyObject *key = PyLong_FromLong(-1), *val = PyLong_FromUnsignedLongLong(unknown_high);
        int rc = (key && val) ? PyDict_SetItem(unknown, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (rc < 0) goto done;
    }
    result = Py_BuildValue("(y#O)", (const char *)counts, (Py_ssize_t)(3 * plan.nslots * sizeof(int64_t)), unknown);
done:
    Py_XDECREF(unknown);
    free(counts);
    plan_free(&plan);
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&pb);
    return result;
}

/* plan_fill(buffer, offsets, plan, outs: sequence of writable buffers, pos: writable int64 per slot, window) */
static PyObject *py_plan_fill(PyObject *self, PyObject *args) {
    Py_buffer view, offs, pb, posb;
    PyObject *outs_obj, *wobj, *result = NULL, *outs = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*Ow*O", &view, &offs, &pb, &outs_obj, &posb, &wobj)) return NULL;
    plan_t plan = {0};
    int64_t w[3];
    Py_buffer *cols = NULL;
    Py_ssize_t ncols = 0, held = 0;
    int64_t *cap = NULL; /* per slot: rows every one of its columns can take */
    dfield_t *dfields = NULL; /* the plan's fields with their columns resolved to addresses */
    dfield_t **slot_fields = NULL;
    if (parse_window(wobj, w) < 0 || plan_parse(&pb, &plan) < 0) goto done;
    int64_t *pos = (int64_t *)posb.buf;
    if (posb.len != plan.nslots * 8) {
        PyErr_SetString(PyExc_ValueError, "plan_fill: pos needs one int64 per plan slot");
        goto done;
    }
    outs = PySequence_Fast(outs_obj, "plan_fill: outs must be a sequence of writable buffers");
    if (!outs) goto done;
    ncols = PySequence_Fast_GET_SIZE(outs);
    cols = (Py_buffer *)calloc((size_t)(ncols ? ncols : 1), sizeof(Py_buffer));
    cap = (int64_t *)calloc((size_t)(plan.nslots ? plan.nslots : 1), sizeof(int64_t));
    size_t nfields_total = 0;
    for (int64_t s = 0; s < plan.nslots; s++) nfields_total += (size_t)plan.slots[s].nfields;
    dfields = (dfield_t *)calloc(nfields_total ? nfields_total : 1, sizeof(dfield_t));
    slot_fields = (dfield_t **)calloc((size_t)(plan.nslots ? plan.nslots : 1), sizeof(dfield_t *));
    if (!cols || !cap || !dfields || !slot_fields) { PyErr_NoMemory(); goto done; }
    for (; held < ncols; held++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(outs, held), &cols[held], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
    }
    size_t at = 0;
    for (int64_t s = 0; s < plan.nslots; s++) {
        int64_t rows = INT64_MAX;
        slot_fields[s] = dfields + at;
        for (int64_t f = 0; f < plan.slots[s].nfields; f++, at++) {
            const field_t *fd = &plan.slots[s].fields[f];
            if (fd->col >= ncols) {
                PyErr_Format(PyExc_ValueError, "plan_fill: column %lld of the plan is not in outs (%zd given)",
                             (long long)fd->col, ncols);
                goto done;
            }
            int64_t r = (int64_t)(cols[fd->col].len / fd->dst_width);
            if (r < rows) rows = r;
            dfield_t *d = &dfields[at];
            d->dst = (uint8_t *)cols[fd->col].buf;
            d->src = fd->src;
            d->dst_width = fd->dst_width;
            d->op = (fd->flags & FLAG_BYTES) ? OP_BYTES
                    : (int32_t)(fd->width * 2 + ((fd->flags & FLAG_SIGNED) ? 1 : 0)) * 2 + (fd->dst_width == 8);
            d->width = fd->width;
        }
        cap[s] = rows;
    }
    size_t n = (size_t)offs.len / 8, len = (size_t)view.len;
    const uint64_t *o = (const uint64_t *)offs.buf;
    const uint8_t *base = (const uint8_t *)view.buf;
    int overflow = -1, outside = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        if (o[i] > len || len - o[i] < 4) { outside = 1; break; }
        const uint8_t *rec = base + o[i];
        int s = slot_of(&plan, rec);
        if (s < 0) continue;
        const slot_t *sl = &plan.slots[s];
        if (len - o[i] < (uint64_t)sl->size) { outside = 1; break; }
        if (!in_window(sl, rec, w)) continue;
        int64_t row = pos[s];
        if (row < 0 || row >= cap[s]) { overflow = s; break; }
        pos[s] = row + 1;
        const dfield_t *fd = slot_fields[s], *end = fd + sl->nfields;
        for (; fd < end; fd++) {
            uint8_t *dst = fd->dst + row * fd->dst_width;
            const uint8_t *src = rec + fd->src;
            switch (fd->op) {
            case OP_U32_TO_64: { uint32_t t; memcpy(&t, src, 4); int64_t x = t; memcpy(dst, &x, 8); break; }
            case OP_64_TO_64_U: case OP_64_TO_64_S: memcpy(dst, src, 8); break;
            case OP_BYTES: memcpy(dst, src, (size_t)fd->width); break;
            default: store_int(dst, fd->dst_width, load_int(src, fd->width, fd->op & 2)); break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (outside) {
        PyErr_SetString(PyExc_ValueError, "plan_fill: a record runs past the buffer's end (run plan_count first)");
        goto done;
    }
    if (overflow >= 0) {
        PyErr_Format(PyExc_ValueError, "plan_fill: the columns of record kind %lld are full (sized by plan_count "
                     "over the same buffers with the same window?)", (long long)plan.slots[overflow].kind);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&cols[i]);
    free(cols);
    free(cap);
    free(dfields);
    free(slot_fields);
    Py_XDECREF(outs);
    plan_free(&plan);
    PyBuffer_Release(&view);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&posb);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", py_walk, METH_VARARGS,
     "walk($module, buffer, next_record_address, /)\n--\n\n"
     "Records located by the vendor's iterator at next_record_address: (uint64 offsets as bytes, status; 1 = end "
     "of buffer)."},
    {"walk_sizes", py_walk_sizes, METH_VARARGS,
     "walk_sizes($module, buffer, sizes, /)\n--\n\n"
     "Records located with a uint32 kind -> size table: (uint64 offsets as bytes, -1 or the offset it stopped at)."},
    {"gather_into", py_gather_into, METH_VARARGS,
     "gather_into($module, buffer, offsets, size, out, out_offset, /)\n--\n\n"
     "The size-byte records at the uint64 offsets, copied into out from byte out_offset."},
    {"gather_fields", py_gather_fields, METH_VARARGS,
     "gather_fields($module, buffer, offsets, spans, out, out_offset, out_size, /)\n--\n\n"
     "Byte spans (int64 source offset, length, destination offset) of each record into out_size-byte rows of out."},
    {"plan_count", py_plan_count, METH_VARARGS,
     "plan_count($module, buffer, offsets, plan, window, /)\n--\n\n"
     "(int64 [kept, dropped, misordered] per plan slot as bytes, {kind the plan lacks: records})."},
    {"plan_fill", py_plan_fill, METH_VARARGS,
     "plan_fill($module, buffer, offsets, plan, outs, pos, window, /)\n--\n\n"
     "The kept records' fields into the columns outs, slot s from row pos[s] on (pos is advanced)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.records",
                                    "The records stage of the vendor pipelines in C: locate, gather, decode to columns.",
                                    -1, methods};

PyMODINIT_FUNC PyInit_records(void) { return PyModule_Create(&module); }
