/* xpuprof._native.lanes: the layout pass's walks of one track (xpuprof/trace/layout/lanes.py has the rule
 * and a pure-Python copy of both functions, which the tests compare with these).
 *
 * A track's slices come in the walk's order: start ascending, the longer first on a tie. Times are int64 ns;
 * a slice is [start, end], containment closed.
 *
 * stack_lanes(start, end, lane_out) -> lanes used
 *   Puts each slice on a lane where it nests: the lane whose innermost open slice began last (then ends
 *   first), else the first lane with nothing open, else a new lane. lane_out: writable n int32.
 * keep_track(start, end, keep_out) -> slices kept
 *   Which slices stay on the track (keep_out[i] = 1): a one-stack walk where, of a slice and the open ones it
 *   crosses (starts inside them, ends after them), the side that moves fewer slices leaves (the crossed ones
 *   with what was placed inside them since, or the crossing one with the slices it holds; on a tie the
 *   crossing one); a slice inside one that left, begun after the innermost one that stays, leaves with it
 *   (children go where their parent goes). keep_out: writable n uint8.
 * spilled(start, end, out) -> count
 *   A viewer's one-stack walk: out[i] = 1 where slice i starts inside the innermost open slice and ends
 *   after it (not placed), else 0. out: writable n uint8.
 * nest_check(track, start, end, order_out, offsets_out, nests_out)
 *   Every track at once, slices in any order: track is n int32 codes in 0..t-1; order_out (n int64) gets
 *   the slices in walk order track by track, offsets_out (t + 1 int64) where each track's rows begin in it,
 *   nests_out (t uint8) 1 for a track whose slices all nest. A counting sort by track (stable), then per
 *   track a check that its rows are already in walk order (a producer's usual order) and a merge of the
 *   sorted runs they come in when not, then the one-stack walk until the first slice it cannot place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t *end, *start; /* the open slices, innermost last */
    size_t len, cap;
} stack;

static int push(stack *s, int64_t start, int64_t end) {
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        int64_t *e = realloc(s->end, cap * sizeof *e);
        if (!e) return -1;
        s->end = e;
        int64_t *b = realloc(s->start, cap * sizeof *b);
        if (!b) return -1;
        s->start = b;
        s->cap = cap;
    }
    s->end[s->len] = end;
    s->start[s->len] = start;
    s->len++;
    return 0;
}

static int check(Py_buffer *s, Py_buffer *e, Py_buffer *out, Py_ssize_t out_item, const char *what) {
    if (s->len % 8 || s->len != e->len || out->len != (s->len / 8) * out_item) {
        PyErr_Format(PyExc_ValueError, "%s needs n int64 starts, n int64 ends and n %s (%zd, %zd and %zd bytes given)",
                     what, out_item == 4 ? "int32 lanes" : "uint8 flags", s->len, e->len, out->len);
        return -1;
    }
    return 0;
}

static PyObject *py_stack_lanes(PyObject *self, PyObject *args) {
    Py_buffer sb, eb, ob;
    if (!PyArg_ParseTuple(args, "y*y*w*", &sb, &eb, &ob)) return NULL;
    PyObject *result = NULL;
    stack *lanes = NULL;
    size_t used = 0, cap = 0;
    int failed = 0;
    if (check(&sb, &eb, &ob, 4, "stack_lanes") < 0) goto done;
    const int64_t *start = sb.buf, *end = eb.buf;
    int32_t *lane = ob.buf;
    size_t n = (size_t)sb.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n && !failed; i++) {
        int64_t a = start[i], b = end[i], best_start = 0, best_end = 0;
        long best = -1, free_lane = -1;
        for (size_t k = 0; k < used; k++) {
            stack *s = &lanes[k];
            while (s->len && s->end[s->len - 1] <= a) s->len--;
            if (!s->len) {
                if (free_lane < 0) free_lane = (long)k;
            } else if (s->end[s->len - 1] >= b
                       && (best < 0 || s->start[s->len - 1] > best_start
                           || (s->start[s->len - 1] == best_start && s->end[s->len - 1] < best_end))) {
                best = (long)k;
                best_end = s->end[s->len - 1];
                best_start = s->start[s->len - 1];
            }
        }
        long k = best >= 0 ? best : free_lane;
        if (k < 0) {
            if (used == cap) {
                size_t ncap = cap ? cap * 2 : 4;
                stack *grown = realloc(lanes, ncap * sizeof *grown);
                if (!grown) { failed = 1; break; }
                for (size_t j = cap; j < ncap; j++) grown[j] = (stack){0};
                lanes = grown;
                cap = ncap;
            }
            k = (long)used++;
        }
        if (push(&lanes[k], a, b) < 0) { failed = 1; break; }
        lane[i] = (int32_t)k;
    }
    Py_END_ALLOW_THREADS
    if (failed) { PyErr_NoMemory(); goto done; }
    result = PyLong_FromSize_t(used);
done:
    for (size_t k = 0; k < cap; k++) { free(lanes[k].end); free(lanes[k].start); }
    free(lanes);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    return result;
}

#define SCAN_LIMIT ((size_t)1 << 14) /* slices looked at past a crossing slice to weigh it (as lanes.py) */

static PyObject *py_keep_track(PyObject *self, PyObject *args) {
    Py_buffer sb, eb, ob;
    if (!PyArg_ParseTuple(args, "y*y*w*", &sb, &eb, &ob)) return NULL;
    PyObject *result = NULL;
    int64_t *open = NULL, *placed = NULL, *at = NULL, *gone = NULL;
    size_t kept = 0;
    if (check(&sb, &eb, &ob, 1, "keep_track") < 0) goto done;
    const int64_t *start = sb.buf, *end = eb.buf;
    uint8_t *keep = ob.buf;
    size_t n = (size_t)sb.len / 8;
    open = malloc((n + 1) * sizeof *open);     /* the open kept slices, innermost last */
    at = malloc((n + 1) * sizeof *at);         /* each open one's place in `placed` */
    placed = malloc((n + 1) * sizeof *placed); /* kept slices in the order they were placed */
    gone = malloc((n + 1) * sizeof *gone);     /* slices that left, maybe still open */
    if (!open || !at || !placed || !gone) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    size_t depth = 0, count = 0, left = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t a = start[i], b = end[i];
        while (depth && end[open[depth - 1]] <= a) depth--;
        long follow = -1; /* the latest-starting slice that left and encloses this one */
        for (size_t j = 0; j < left;) {
            int64_t g = gone[j];
            if (end[g] <= a) { gone[j] = gone[--left]; continue; }
            if (end[g] >= b && (follow < 0 || start[g] > start[follow])) follow = (long)g;
            j++;
        }
        if (follow >= 0 && (!depth || start[follow] > start[open[depth - 1]])) {
            keep[i] = 0; /* inside a slice that left, begun after the innermost one that stays: it goes along */
            gone[left++] = (int64_t)i;
            continue;
        }
        size_t k = depth; /* the open slices it crosses: open[k..depth) (each ends before it) */
        while (k && end[open[k - 1]] < b) k--;
        if (k < depth) {
            /* The side that moves fewer slices leaves: the crossed ones with what was placed inside them
             * since, or this one with the slices it holds (looking at SCAN_LIMIT slices past it at most); on a
             * tie this one (the first comers keep the row). */
            size_t than = count - (size_t)at[k], held = 1, stop = n - i - 1 < SCAN_LIMIT ? n : i + 1 + SCAN_LIMIT;
            for (size_t j = i + 1; j < stop && start[j] < b && held <= than; j++) held += end[j] <= b;
            if (held <= than) {
                keep[i] = 0;
                gone[left++] = (int64_t)i;
                continue;
            }
            /* the crossed ones leave together, with every slice placed inside them */
            for (size_t j = (size_t)at[k]; j < count; j++) keep[placed[j]] = 0;
            count = (size_t)at[k];
            for (size_t j = k; j < depth; j++) gone[left++] = open[j];
            depth = k;
        }
        keep[i] = 1;
        at[depth] = (int64_t)count;
        open[depth++] = (int64_t)i;
        placed[count++] = (int64_t)i;
    }
    Py_END_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) kept += keep[i];
    result = PyLong_FromSize_t(kept);
done:
    free(open);
    free(at);
    free(placed);
    free(gone);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *py_spilled(PyObject *self, PyObject *args) {
    Py_buffer sb, eb, ob;
    if (!PyArg_ParseTuple(args, "y*y*w*", &sb, &eb, &ob)) return NULL;
    PyObject *result = NULL;
    stack st = {0};
    size_t count = 0;
    int failed = 0;
    if (check(&sb, &eb, &ob, 1, "spilled") < 0) goto done;
    const int64_t *start = sb.buf, *end = eb.buf;
    uint8_t *out = ob.buf;
    size_t n = (size_t)sb.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        int64_t a = start[i], b = end[i];
        while (st.len && st.end[st.len - 1] <= a) st.len--;
        if (st.len && st.end[st.len - 1] < b) {
            out[i] = 1;
            count++;
            continue;
        }
        out[i] = 0;
        if (push(&st, a, b) < 0) { failed = 1; break; }
    }
    Py_END_ALLOW_THREADS
    if (failed) { PyErr_NoMemory(); goto done; }
    result = PyLong_FromSize_t(count);
done:
    free(st.end);
    free(st.start);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    return result;
}

/* Walk order on rows: start ascending, the longer first, then the row (a strict total order: stable). */
static inline int before(const int64_t *start, const int64_t *end, int64_t p, int64_t q) {
    if (start[p] != start[q]) return start[p] < start[q];
    if (end[p] != end[q]) return end[p] > end[q];
    return p < q;
}

/* Sorts rows[0..m) into walk order by insertion while it costs at most `budget` moves (0 when it gave up,
 * the rows then a permutation of what they were). Host ranges come in the order they end (a range after
 * the ranges inside it): each moves back over its descendants only, so the moves are rows x depth. */
static int insertion_sort(int64_t *rows, size_t m, const int64_t *start, const int64_t *end, size_t budget) {
    size_t moves = 0;
    for (size_t j = 1; j < m; j++) {
        int64_t r = rows[j];
        size_t i = j;
        while (i > 0 && before(start, end, r, rows[i - 1])) {
            rows[i] = rows[i - 1];
            i--;
            if (++moves > budget) {
                rows[i] = r;
                return 0;
            }
        }
        rows[i] = r;
    }
    return 1;
}

/* Sorts rows[0..m) into walk order: a natural merge sort. The rows of one track come as a few runs already in
 * order (one per producer batch: kernels, their metric slices, the next drained buffer), which are merged, not
 * sorted again; rows in no order at all cost what any merge sort costs. bounds: m + 1 scratch entries. */
static void merge_runs(int64_t *rows, int64_t *spare, size_t *bounds, size_t m, const int64_t *start,
                       const int64_t *end) {
    size_t runs = 0;
    bounds[runs++] = 0;
    for (size_t j = 1; j < m; j++)
        if (before(start, end, rows[j], rows[j - 1])) bounds[runs++] = j;
    bounds[runs] = m;
    int64_t *src = rows, *dst = spare;
    while (runs > 1) {
        size_t merged = 0;
        for (size_t r = 0; r < runs; r += 2) {
            size_t lo = bounds[r], mid = bounds[r + 1], hi = r + 2 <= runs ? bounds[r + 2] : mid;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) dst[o++] = before(start, end, src[b], src[a]) ? src[b++] : src[a++];
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
            bounds[merged++] = lo;
        }
        bounds[merged] = m;
        runs = merged;
        int64_t *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != rows) memcpy(rows, src, m * sizeof *rows);
}

static PyObject *py_nest_check(PyObject *self, PyObject *args) {
    Py_buffer tb, sb, eb, ob, fb, nb;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*", &tb, &sb, &eb, &ob, &fb, &nb)) return NULL;
    PyObject *result = NULL;
    int64_t *fill = NULL, *spare = NULL;
    size_t *bounds = NULL;
    stack st = {0};
    int failed = 0;
    size_t n = (size_t)tb.len / 4, t = (size_t)nb.len;
    if (tb.len % 4 || sb.len != (Py_ssize_t)(n * 8) || eb.len != sb.len || ob.len != sb.len
        || fb.len != (Py_ssize_t)((t + 1) * 8)) {
        PyErr_Format(PyExc_ValueError, "nest_check needs n int32 tracks, n int64 starts, ends and order, t + 1 int64 "
                     "offsets and t uint8 flags (%zd, %zd, %zd, %zd, %zd and %zd bytes given)",
                     tb.len, sb.len, eb.len, ob.len, fb.len, nb.len);
        goto done;
    }
    const int32_t *track = tb.buf;
    const int64_t *start = sb.buf, *end = eb.buf;
    int64_t *order = ob.buf, *offsets = fb.buf;
    uint8_t *nests = nb.buf;
    for (size_t i = 0; i < n; i++) {
        if (track[i] < 0 || (size_t)track[i] >= t) {
            PyErr_Format(PyExc_ValueError, "nest_check: row %zu has track %d, not in 0..%zu", i, track[i], t - 1);
            goto done;
        }
    }
    fill = calloc(t + 1, sizeof *fill);
    if (!fill) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) fill[track[i] + 1]++;
    for (size_t k = 0; k < t; k++) fill[k + 1] += fill[k];
    for (size_t k = 0; k <= t; k++) offsets[k] = fill[k];
    for (size_t i = 0; i < n; i++) order[fill[track[i]]++] = (int64_t)i;
    size_t scratch_cap = 0;
    for (size_t k = 0; k < t && !failed; k++) {
        int64_t lo = offsets[k], hi = offsets[k + 1];
        size_t m = (size_t)(hi - lo);
        int sorted = 1;
        for (int64_t j = lo + 1; j < hi; j++)
            if (before(start, end, order[j], order[j - 1])) { sorted = 0; break; }
        if (!sorted) {
            if (m > scratch_cap) {
                int64_t *grown = realloc(spare, m * sizeof *grown);
                size_t *more = realloc(bounds, (m + 1) * sizeof *more);
                if (grown) spare = grown;
                if (more) bounds = more;
                if (!grown || !more) { failed = 1; break; }
                scratch_cap = m;
            }
            if (!insertion_sort(order + lo, m, start, end, 8 * m + 1024))
                merge_runs(order + lo, spare, bounds, m, start, end);
        }
        nests[k] = 1;
        st.len = 0;
        for (int64_t j = lo; j < hi; j++) {
            int64_t a = start[order[j]], b = end[order[j]];
            while (st.len && st.end[st.len - 1] <= a) st.len--;
            if (st.len && st.end[st.len - 1] < b) { nests[k] = 0; break; }
            if (push(&st, a, b) < 0) { failed = 1; break; }
        }
    }
    Py_END_ALLOW_THREADS
    if (failed) { PyErr_NoMemory(); goto done; }
    result = Py_NewRef(Py_None);
done:
    free(fill);
    free(spare);
    free(bounds);
    free(st.end);
    free(st.start);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&nb);
    return result;
}

static PyMethodDef methods[] = {
    {"stack_lanes", py_stack_lanes, METH_VARARGS,
     "stack_lanes($module, start, end, lane_out, /)\n--\n\n"
     "Lanes used: each slice (in walk order) onto a lane where it nests."},
    {"keep_track", py_keep_track, METH_VARARGS,
     "keep_track($module, start, end, keep_out, /)\n--\n\n"
     "Slices kept: which stay on the track (of two sides that cross, the one that moves fewer slices leaves)."},
    {"spilled", py_spilled, METH_VARARGS,
     "spilled($module, start, end, out, /)\n--\n\n"
     "Count: the slices a one-stack walk cannot place (out[i] = 1)."},
    {"nest_check", py_nest_check, METH_VARARGS,
     "nest_check($module, track, start, end, order_out, offsets_out, nests_out, /)\n--\n\n"
     "Walk order per track, and which tracks nest."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "lanes", NULL, -1, methods};

PyMODINIT_FUNC PyInit_lanes(void) { return PyModule_Create(&module); }
