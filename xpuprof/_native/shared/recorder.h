/* recorder.h: the host recorder's state that hostrec.c defines and correlation.c reads (the active recorder,
 * its correlation sessions, the range object). All of it is touched with the GIL held. */
#ifndef XPUPROF_RECORDER_H
#define XPUPROF_RECORDER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "int64log.h"

/* Thread-locals in the initial-exec model: read at a fixed offset from the thread pointer, where the
 * default (global-dynamic, for a dlopen'ed module) calls __tls_get_addr at each use - 13 calls, ~140
 * instructions, per correlated range. They take 64 bytes of glibc's surplus static TLS, reserved for
 * modules loaded later (at least 512 bytes); were it ever exhausted, this module would not load and
 * record_function would fall back to its pure-Python path (recorder.py), never fail. */
#define THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))

#define MAX_SESSIONS 16

typedef struct RangeObject {
    PyObject_HEAD
    PyObject *name;
    PyObject *args;
    PyObject *rec;    /* recorder at enter (strong ref) while open and recording */
    PyObject *parent; /* the enclosing range in the entering context (strong ref), when correlating */
    PyObject *frame;  /* the entering context's frame (correlation.c), while open and correlating */
    int64_t t0;
    int64_t cid;
    long tid;         /* the entering thread: the range is drawn on its row */
    int closed, linked;
    struct RangeObject *open_prev, *open_next; /* the recorder's open ranges (hostrec.c) */
    Py_ssize_t slot1; /* its row + 1 in open_log while open (crash-safe copies only), else 0 */
} RangeObject;

extern PyTypeObject RangeType;

extern PyObject *recorder;   /* the active HostRecorder (strong ref) or NULL */
extern int track_correlation; /* the active recorder has sessions to tell its ranges */
extern uint64_t generation;   /* bumps on every set_recorder */

/* correlation targets: a session's Int64Log of marks, or its bound push/pop methods */
extern Int64LogObject *mark_logs[MAX_SESSIONS];
extern PyObject *push_fns[MAX_SESSIONS], *pop_fns[MAX_SESSIONS];
extern int n_mark_logs, n_push_fns;

/* Sessions whose vendor library takes the ids through C entry points, called here with no Python
 * call per range. Two shapes, both returning 0 on success:
 * - by kind: PTI's ptiViewPush/PopExternalCorrelationId(kind, id) and CUPTI's
 *   cuptiActivityPush/PopExternalCorrelationId(kind, id);
 * - by context and thread: rocprofiler-sdk's rocprofiler_push/pop_external_correlation_id(context,
 *   thread, id) with the thread from rocprofiler_get_thread_id(&thread) (the context and the
 *   user-data union are 8-byte values, passed as uint64 by the platform ABI).
 * A failing call is counted into the session's own buffer (int64 failures, int64 last result):
 * never silent. */
typedef int (*push_hook_fn)(uint32_t kind, uint64_t id);
typedef int (*pop_hook_fn)(uint32_t kind, uint64_t *id);
typedef int (*ctx_push_hook_fn)(uint64_t context, uint64_t thread, uint64_t id);
typedef int (*ctx_pop_hook_fn)(uint64_t context, uint64_t thread, uint64_t *id);
typedef int (*thread_id_fn)(uint64_t *thread);
extern void *push_hooks[MAX_SESSIONS], *pop_hooks[MAX_SESSIONS];
extern uint64_t hook_kinds[MAX_SESSIONS];          /* the kind, or the context for the second shape */
extern thread_id_fn hook_thread_ids[MAX_SESSIONS]; /* NULL for the first shape */
extern Py_buffer hook_failures[MAX_SESSIONS];
extern int n_hooks;

/* The monotonic clock time.monotonic_ns() reads on Linux, in ns. */
int64_t mono_ns(void);

#endif
