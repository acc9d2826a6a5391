/* ArgsArea: the JSON text of host ranges' args, encoded at the call into one growing byte area
 * (argsarea.c).
 *
 * A range's dict args of plain values (str keys; str, int, float, bool and None values) are written in C
 * as one JSON object, right after the previous one: no Python object per range, no copy at stop (the trace
 * reads the area through the buffer protocol, each range's args as [ends[k-1], ends[k]) ), no per-range
 * Python at stop or export. Anything else (nested values, other key types, a dict subclass, a lone
 * surrogate) is left to the caller (ARGS_UNSUPPORTED), which encodes it another way and may add the result
 * with args_area_add. Text is what orjson writes for the same dict (strings through jsonstr.h), up to float
 * spelling (Python's shortest repr: 1e+16 where orjson writes 1e16; the same value), non-finite floats as
 * null. All state is touched with the GIL held; appends while the area is exported are refused.
 */
#ifndef XPUPROF_ARGSAREA_H
#define XPUPROF_ARGSAREA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "hostmem.h"
#include "int64log.h"

enum { ARGS_ERROR = -1, ARGS_UNSUPPORTED = -2, ARGS_REFUSED = -3 };

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len, cap, exports, refused;
    Int64LogObject *ends; /* end offset of each entry, one int64 row each */
    Store store;          /* where `data` lives (hostmem.h) */
} ArgsAreaObject;

extern PyTypeObject ArgsAreaType;

/* A dict of plain values as one entry: its index, ARGS_UNSUPPORTED (the area unchanged), ARGS_REFUSED, or
 * ARGS_ERROR with an exception set. */
int64_t args_area_encode(ArgsAreaObject *a, PyObject *dict);

/* JSON text encoded elsewhere (bytes-like), as one entry: its index or an ARGS_ code. */
int64_t args_area_add(ArgsAreaObject *a, PyObject *text);

#endif
