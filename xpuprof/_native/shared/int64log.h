/* Int64Log: rows of int64 values in one growing C array (int64log.c): the host recorder's range, instant
 * and mark logs. Exported read-only through the buffer protocol (np.frombuffer) as n*width int64. Appends
 * while a buffer is exported are refused (the memory could move), counted in `refused`. */
#ifndef XPUPROF_INT64LOG_H
#define XPUPROF_INT64LOG_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "hostmem.h"

typedef struct {
    PyObject_HEAD
    int64_t *data;
    Py_ssize_t rows, cap, width, exports, refused;
    Py_ssize_t shape; /* rows*width while exported (rows cannot change then) */
    Store store;      /* where `data` lives (hostmem.h): anonymous memory or a spill file; its budget */
} Int64LogObject;

extern PyTypeObject Int64LogType;

/* One row; returns a pointer to its `width` slots or NULL (exception set, or refused: *refused=1). */
int64_t *log_row(Int64LogObject *log, int *refused);

/* The rows written so far are complete: a spill file's reader may take them. */
void log_commit(Int64LogObject *log);

#endif
