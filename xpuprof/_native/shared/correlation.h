/* Which range device work belongs to: the logical range, and what is told to device sessions.
 * (correlation.c; hostrec.c owns the recorder and its sessions, recorder.h.)
 *
 * The logical range. Each context (contextvars: asyncio tasks run in copies of their creator's,
 * plain threads in their own) gets a frame the first time it enters a range: a small mutable object
 * set once into a ContextVar, holding the innermost range entered there; each range holds its
 * enclosing one (`parent`). Per range this costs a cached ContextVar read and pointer updates - no
 * context copy per range (setting a ContextVar per range cost ~1,100 instructions). So
 * current_correlation_id() is the range of the code asking: an asyncio task's own, work run through
 * copy_context().run()'s, a thread's own; a context that has entered no range of its own yet sees
 * the innermost range of the context it was copied from. A range closed out of order, or on another
 * thread (its frame is updated wherever it closes), is skipped: the answer is the innermost open one.
 *
 * Device sessions. Vendor libraries keep one external-id stack per thread (PTI, CUPTI,
 * rocprofiler-sdk), so each thread's open ranges are mirrored here in the order they were entered
 * (any depth). A range closed out of order is removed from its place (the ranges above it popped
 * and pushed again); one closed on another thread is removed from its own thread's stack at that
 * thread's next range. Sessions that take marks get (id, thread, ns, parent id) on enter and
 * (-id, thread, ns, 0) on exit, so they pair them exactly whatever the order.
 *
 * What cannot be told right is counted and said in the trace (`lifetimes()`): ranges exited out of
 * order or on another thread, and ranges entered while a range of another context was open on top
 * of the same thread (asyncio tasks interleaving across awaits) - work launched there may be linked
 * by the vendor library to the range entered last on the thread.
 *
 * Ranges open when recording stops are closed at its end (`close_open_ranges`), never dropped.
 */
#ifndef XPUPROF_CORRELATION_H
#define XPUPROF_CORRELATION_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "recorder.h"

/* Lifetimes of this recorder's ranges that the trace must mention: hostrec.c counts the ranges exited on
 * another thread than they were entered on. */
extern int64_t n_cross_thread;

/* The frame type and the context variable, made once when the module loads. 0, or -1 with an exception. */
int correlation_init(void);

/* A range enters (after its start time: linked work lies inside it) or exits on thread `tid`: its context's
 * frame, this thread's stack, the sessions. 0, or -1 with an exception set. */
int corr_enter(RangeObject *self);
int corr_exit(RangeObject *self, long tid);

/* After fork, in the child: this thread's stack of the parent's ranges is let go. */
void correlation_after_fork(void);

void reset_lifetimes(void);

/* Module functions: the innermost open range's id in the calling context (0 when none is linked), and
 * the lifetimes counted. */
PyObject *current_correlation_id(PyObject *mod, PyObject *unused);
PyObject *lifetimes(PyObject *mod, PyObject *unused);

#endif
