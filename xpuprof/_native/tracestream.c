/* xpuprof._native.tracestream: a Chrome-trace JSON document read in chunks of any size, with the
 * strict grammar of tracescan (jsonscan.h), so a trace of any size converts in bounded memory.
 *
 * Python keeps a buffer of the document's next bytes and calls, in order:
 *
 * header(buf, final) -> (status, events_start, members)
 *   the top level up to the traceEvents array: status 1 found (events_start: the offset after its
 *   '['; members: int64 (key_start, key_end, value_start, value_end) per earlier top-level key),
 *   0 more bytes needed, -1 invalid JSON, -2 "traceEvents" is not an array, -3 the document ends
 *   without one. The bare-array form ("[...]") starts its events at once.
 *
 * events(buf, start, state, final) -> (n, ph, name, cat, kind, num, span, complex, strings, args_span,
 *                                      aux, exact, consumed, state, status, error_at)
 *   the complete events from `start`, as tracescan.scan's columns, plus aux and exact (int64 [n, 2]:
 *   ts and dur in ns from the numbers' text, see jsonscan.h).
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
 */
#include "jsonscan.h"

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

static PyMethodDef methods[] = {
    {"header", py_header, METH_VARARGS, "header(buffer, final) -> (status, events_start, members) (see the module source)"},
    {"events", py_events, METH_VARARGS,
     "events(buffer, start, state, final) -> columns of the complete events from start (see the module source)"},
    {"args", py_args, METH_VARARGS,
     "args(buffer, spans, int_keys, float_keys, drop_keys) -> typed members and the rest (see the module source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tracestream", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tracestream(void) { return PyModule_Create(&module); }
