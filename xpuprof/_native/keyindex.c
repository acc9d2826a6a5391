/* xpuprof._native.keyindex: factorize a column of 64-bit keys in one linear pass.
 *
 * The process paths turn columns of pointers, correlation ids and (device, queue) keys into
 * "distinct values + the code of each row + each value's first row". np.unique sorts the whole
 * column (n log n, and the sort dominated device processing at 5 M records); a hash table of
 * the few thousand distinct values does it in O(n).
 *
 * factorize(keys, codes_out) -> (uniq, first)
 *   keys:      C-contiguous buffer of n uint64 (read only)
 *   codes_out: writable C-contiguous buffer of n int32: row -> index into uniq
 *   uniq:      bytes, the distinct keys as uint64 in order of first appearance
 *   first:     bytes, int64 row index of each distinct key's first appearance
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t *keys;  /* slot -> key */
    int32_t *index;  /* slot -> index into the distinct arrays, -1 when empty */
    size_t mask;
} table;

static inline uint64_t mix(uint64_t x) { /* splitmix64 finalizer: pointers and counters spread well */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int table_init(table *t, size_t slots) {
    t->keys = malloc(slots * sizeof *t->keys);
    t->index = malloc(slots * sizeof *t->index);
    if (!t->keys || !t->index) { free(t->keys); free(t->index); return -1; }
    memset(t->index, 0xff, slots * sizeof *t->index);
    t->mask = slots - 1;
    return 0;
}

static void table_free(table *t) { free(t->keys); free(t->index); }

static int table_grow(table *t) {
    table bigger;
    if (table_init(&bigger, (t->mask + 1) * 2) < 0) return -1;
    for (size_t s = 0; s <= t->mask; s++) {
        if (t->index[s] < 0) continue;
        size_t h = mix(t->keys[s]) & bigger.mask;
        while (bigger.index[h] >= 0) h = (h + 1) & bigger.mask;
        bigger.keys[h] = t->keys[s];
        bigger.index[h] = t->index[s];
    }
    table_free(t);
    *t = bigger;
    return 0;
}

static PyObject *py_factorize(PyObject *self, PyObject *args) {
    Py_buffer kb, cb;
    if (!PyArg_ParseTuple(args, "y*w*", &kb, &cb)) return NULL;
    PyObject *result = NULL;
    uint64_t *uniq = NULL;
    int64_t *first = NULL;
    table t = {0};
    size_t n = (size_t)kb.len / 8, count = 0, cap = 64;
    if (kb.len % 8 || (size_t)cb.len != n * 4) {
        PyErr_Format(PyExc_ValueError, "factorize needs n uint64 keys (%zd bytes given) and n int32 codes "
                     "(%zd bytes given)", kb.len, cb.len);
        goto done;
    }
    const uint64_t *keys = kb.buf;
    int32_t *codes = cb.buf;
    uniq = malloc(cap * sizeof *uniq);
    first = malloc(cap * sizeof *first);
    if (!uniq || !first || table_init(&t, 256) < 0) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    uint64_t last_key = 0;
    int32_t last_code = -1;  /* runs of one key (a hot kernel, one queue) skip the lookup */
    for (size_t i = 0; i < n; i++) {
        uint64_t k = keys[i];
        if (last_code >= 0 && k == last_key) { codes[i] = last_code; continue; }
        size_t h = mix(k) & t.mask;
        int32_t c;
        for (;;) {
            c = t.index[h];
            if (c < 0 || t.keys[h] == k) break;
            h = (h + 1) & t.mask;
        }
        if (c < 0) {
            if (count == (size_t)INT32_MAX) { count = (size_t)-1; break; }
            if (count == cap) {
                cap *= 2;
                uint64_t *u2 = realloc(uniq, cap * sizeof *uniq);
                if (u2) uniq = u2;
                int64_t *f2 = realloc(first, cap * sizeof *first);
                if (f2) first = f2;
                if (!u2 || !f2) { count = (size_t)-2; break; }
            }
            c = (int32_t)count;
            uniq[count] = k;
            first[count] = (int64_t)i;
            count++;
            t.keys[h] = k;
            t.index[h] = c;
            if (count * 2 > t.mask + 1 && table_grow(&t) < 0) { count = (size_t)-2; break; }
        }
        codes[i] = c;
        last_key = k;
        last_code = c;
    }
    Py_END_ALLOW_THREADS
    if (count == (size_t)-1) { PyErr_SetString(PyExc_OverflowError, "more than 2**31-1 distinct keys"); goto done; }
    if (count == (size_t)-2) { PyErr_NoMemory(); goto done; }
    PyObject *u = PyBytes_FromStringAndSize((const char *)uniq, (Py_ssize_t)(count * sizeof *uniq));
    PyObject *f = PyBytes_FromStringAndSize((const char *)first, (Py_ssize_t)(count * sizeof *first));
    if (u && f) result = PyTuple_Pack(2, u, f);
    Py_XDECREF(u);
    Py_XDECREF(f);
done:
    table_free(&t);
    free(uniq);
    free(first);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&cb);
    return result;
}

/* first_rows(offsets, first_out): for keys already turned into offsets 0..span-1 (a dense table,
 * e.g. correlation ids minus their minimum), first_out[offset] = the first row holding it; rows not
 * holding an offset leave first_out as the caller filled it. One pass from the back, so the earliest
 * row is the last write (numpy's fancy assignment leaves the order of repeated writes unspecified,
 * and ufunc.at is ~20x slower). */
static PyObject *py_first_rows(PyObject *self, PyObject *args) {
    Py_buffer ob, fb;
    if (!PyArg_ParseTuple(args, "y*w*", &ob, &fb)) return NULL;
    PyObject *result = NULL;
    size_t n = (size_t)ob.len / 8, span = (size_t)fb.len / 8;
    if (ob.len % 8 || fb.len % 8) {
        PyErr_SetString(PyExc_ValueError, "first_rows needs int64 offsets and an int64 output table");
        goto done;
    }
    const int64_t *off = ob.buf;
    int64_t *first = fb.buf;
    for (size_t i = 0; i < n; i++) {
        if (off[i] < 0 || (size_t)off[i] >= span) {
            PyErr_Format(PyExc_ValueError, "first_rows: offset %lld at row %zu is outside the %zu-entry table",
                         (long long)off[i], i, span);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = n; i-- > 0;) first[off[i]] = (int64_t)i;
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&ob);
    PyBuffer_Release(&fb);
    return result;
}

static PyMethodDef methods[] = {
    {"factorize", py_factorize, METH_VARARGS,
     "factorize($module, keys, codes_out, /)\n--\n\n"
     "(uniq, first) of the uint64 keys: distinct keys as uint64 bytes in order of first appearance, each one's "
     "first row as int64 bytes; codes_out (int32, one per key) gets each row's index into uniq."},
    {"first_rows", py_first_rows, METH_VARARGS,
     "first_rows($module, offsets, first_out, /)\n--\n\n"
     "first_out[offset] = the first row holding it, for the int64 offsets (into the int64 table first_out)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "xpuprof._native.keyindex", NULL, -1, methods};

PyMODINIT_FUNC PyInit_keyindex(void) { return PyModule_Create(&module); }
