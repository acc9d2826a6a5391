/* xpuprof._native.tracescan: one validating pass over a Chrome-trace JSON document that keeps
 * only what reports read, as columns, without a Python object per event.
 *
 * `xpuprof report` used to build a dict per event (orjson.loads of the whole file) and then walk
 * them in Python: slower than json.load and ~1.4 KB per event. This scanner walks the document
 * with a strict JSON grammar (strings with their escapes and UTF-8, numbers, literals, nesting) and
 * records per event of the traceEvents array: ph, name, cat (as ids of distinct raw strings), ts,
 * dur, pid, tid, id (int64 or double, by kind), the event's byte range and its "args" object's. Anything it does not model
 * exactly (a non-string name, a string pid, an escaped key, an integer beyond int64, ...) marks the
 * event "complex": Python re-reads that one event with orjson. Anything it cannot accept (invalid
 * JSON, a \u escape of a surrogate, no traceEvents array, an event that is not an object) makes it
 * return None, and the caller takes the general path (orjson on the whole file), which gives the
 * exact error. So results never depend on which path ran.
 *
 * scan(buf) -> None | (members, n, ph, name_id, cat_id, num_kind, num, span, complex, strings, args_span)
 *   members: list of (key_start, key_end, value_start, value_end) of the other top-level keys
 *            (key ranges include the quotes)
 *   ph: uint8 per event: the single ASCII character of "ph", 0 when absent
 *   name_id, cat_id: int32 per event: index into strings, -1 when absent
 *   num_kind: uint8 [n, 5] for ts, dur, pid, tid, id: 0 absent, 1 int64, 2 double
 *   num: 8 bytes [n, 5]: int64 or double by kind
 *   span: int64 [n, 2]: the event's [start, end) byte range
 *   complex: uint8 per event: 1 when Python must read the event itself
 *   strings: int64 [k, 2]: (start, end) of each distinct raw string body (between the quotes)
 *   args_span: int64 [n, 2]: the byte range of the event's "args" value when it is an object,
 *              else (-1, -1)
 *
 * members(buf, spans, int_keys, drop_keys) -> (ints, present, others, complex): the members of
 * the objects at the given byte ranges (an int64 [n, 2] buffer; (-1, -1) for none), already
 * validated by scan(). For each key of int_keys (a tuple of bytes), an int64 [n, k] column and a
 * uint8 [n, k] present mask (null counts as absent); keys of drop_keys are skipped; the other members' text, exactly as
 * in the document, as one JSON object per row in a list (None when a row has none). A row whose
 * object has an escaped key, or a key of int_keys with a value that is not an int64, is marked
 * complex (uint8 [n]): the caller reads those rows itself.
 */
#include "jsonscan.h"

/* The whole document. members: (key_start, key_end, value_start, value_end) per other key. */
static int scan_document(parser *P, events *E, column *members) {
    ws(P);
    if (P->p >= P->end) return -1;
    int found = 0;
    if (*P->p == '[') { /* the bare-array form */
        int r = scan_events(P, E);
        if (r < 0) return r;
        found = 1;
    } else if (*P->p == '{') {
        P->p++;
        ws(P);
        if (P->p < P->end && *P->p == '}') P->p++;
        else for (;;) {
            const unsigned char *kstart = P->p, *kb; size_t kl; int kesc;
            if (P->p >= P->end || *P->p != '"' || scan_string(P, &kb, &kl, &kesc) < 0) return -1;
            const unsigned char *kend = P->p;
            ws(P);
            if (P->p >= P->end || *P->p != ':') return -1;
            P->p++;
            ws(P);
            if (P->p >= P->end) return -1;
            if (kesc) return -1; /* an escaped top-level key: the general path */
            if (key_is(kb, kl, "traceEvents")) {
                if (found || *P->p != '[') return -1; /* twice, or not an array: the general path */
                int r = scan_events(P, E);
                if (r < 0) return r;
                found = 1;
            } else {
                const unsigned char *vstart = P->p;
                if (skip_value(P, 1) < 0) return -1;
                int64_t m[4] = {kstart - P->base, kend - P->base, vstart - P->base, P->p - P->base};
                if (col_push(members, m, sizeof m)) return -2;
            }
            ws(P);
            if (P->p >= P->end) return -1;
            if (*P->p == ',') { P->p++; ws(P); continue; }
            if (*P->p == '}') { P->p++; break; }
            return -1;
        }
    } else {
        return -1;
    }
    ws(P);
    if (P->p != P->end || !found) return -1;
    return 0;
}


/* The scan's columns as the tuple scan() returns; frees E's columns and members. */
static PyObject *scan_result(events *E, column *members) {
    PyObject *result = NULL;
    column strings = {0};
    for (size_t i = 0; i < E->strings.count; i++) {
        int64_t se[2] = {E->strings.start[i], E->strings.start[i] + E->strings.len[i]};
        if (col_push(&strings, se, 16)) { free(strings.data); return PyErr_NoMemory(); }
    }
    PyObject *parts[10];
    column *cols[10] = {members, &E->ph, &E->name, &E->cat, &E->kind, &E->num, &E->span, &E->complex, &strings,
                        &E->args};
    int ok = 1;
    for (int i = 0; i < 10; i++) {
        parts[i] = ok ? column_bytes(cols[i]) : NULL;
        if (!parts[i]) ok = 0;
    }
    free(strings.data);
    if (ok)
        result = Py_BuildValue("(NnNNNNNNNNN)", parts[0], (Py_ssize_t)E->n, parts[1], parts[2], parts[3], parts[4],
                               parts[5], parts[6], parts[7], parts[8], parts[9]);
    else
        for (int i = 0; i < 10; i++) Py_XDECREF(parts[i]);
    return result;
}

static PyObject *py_scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    parser P = {view.buf, (const unsigned char *)view.buf + view.len, view.buf, 0};
    events E;
    memset(&E, 0, sizeof E);
    column members = {0};
    PyObject *result = NULL;
    if (strtab_init(&E.strings, P.base) < 0) { PyErr_NoMemory(); goto done; }
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = scan_document(&P, &E, &members);
    Py_END_ALLOW_THREADS
    if (r == -2) { PyErr_NoMemory(); goto done; }
    if (r < 0) { result = Py_None; Py_INCREF(result); goto done; }
    result = scan_result(&E, &members);
done:
    events_free(&E);
    free(members.data);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ a document in pieces */
/* 1 when buf ends inside the object that starts at p (its brackets and strings not closed), else 0. */
static int truncated_object(const unsigned char *p, const unsigned char *end) {
    int depth = 0;
    while (p < end) {
        unsigned char c = *p++;
        if (c == '"') {
            for (;;) {
                const unsigned char *q = memchr(p, '"', (size_t)(end - p));
                if (!q) return 1;
                const unsigned char *r = q;
                while (r > p && r[-1] == '\\') r--;
                p = q + 1;
                if (((q - r) & 1) == 0) break; /* an even run of backslashes: the closing quote */
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return 0;
        }
    }
    return 1;
}

/* The traceEvents array's elements from P->p on (just after '[' when first, else just after an
 * element), as far as the buffer holds them whole. 0, with *resume where the next piece starts
 * (after the last whole event; after ']' when *closed); -1 invalid (or not what scan() takes). */
static int scan_run(parser *P, events *E, int first, const unsigned char **resume, int *closed) {
    *resume = P->p;
    *closed = 0;
    for (;;) {
        ws(P);
        if (P->p >= P->end) return 0;
        if (*P->p == ']') { *closed = 1; *resume = P->p + 1; return 0; }
        if (!first) {
            if (*P->p != ',') return -1;
            P->p++;
            ws(P);
            if (P->p >= P->end) return 0;
        }
        const unsigned char *start = P->p;
        int r = scan_event(P, E);
        if (r == -1 && *start == '{' && truncated_object(start, P->end)) return 0;
        if (r < 0) return r;
        *resume = P->p;
        first = 0;
    }
}

/* scan_run(buf, pos, first) -> None | scan()'s tuple (no members) + (resume, closed): the events
 * of the traceEvents array in buf from pos on that buf holds whole; offsets are into buf. pos is just
 * after the array's '[' (first true) or just after an element. None: invalid, or not what scan()
 * takes (the whole-document scan then decides). */
static PyObject *py_scan_run(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int first;
    if (!PyArg_ParseTuple(args, "y*np", &view, &pos, &first)) return NULL;
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan_run: position outside the buffer");
        return NULL;
    }
    parser P = {(const unsigned char *)view.buf + pos, (const unsigned char *)view.buf + view.len, view.buf, 0};
    events E;
    memset(&E, 0, sizeof E);
    column members = {0};
    PyObject *result = NULL, *cols = NULL;
    const unsigned char *resume;
    int closed, r;
    if (strtab_init(&E.strings, P.base) < 0) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    r = scan_run(&P, &E, first, &resume, &closed);
    Py_END_ALLOW_THREADS
    if (r == -2) { PyErr_NoMemory(); goto done; }
    if (r < 0) { result = Py_None; Py_INCREF(result); goto done; }
    cols = scan_result(&E, &members);
    if (cols) result = Py_BuildValue("(NnO)", cols, (Py_ssize_t)(resume - P.base), closed ? Py_True : Py_False);
done:
    events_free(&E);
    free(members.data);
    PyBuffer_Release(&view);
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
    {"scan", py_scan, METH_O, "scan(buffer) -> None | columns of the trace's events (see the module source)"},
    {"scan_run", py_scan_run, METH_VARARGS,
     "scan_run(buffer, pos, first) -> None | (scan()'s columns, resume, closed) (see the source)"},
    {"members", py_members, METH_VARARGS,
     "members(buffer, spans, int_keys, drop_keys) -> (ints, present, others, complex) (see the module source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracescan", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tracescan(void) { return PyModule_Create(&module); }
