/* NameTable: the distinct range/instant names of one recording cycle, as UTF-8 text in one growing
 * buffer - no Python object per name. (nametable.c)
 *
 * A distinct name costs its UTF-8 bytes, one offset (8 B), its hash (4 B) and a slot of an open
 * addressing table (4 B, at most half full): ~30 B for "step 123456", where a dict of str objects
 * cost ~130 B. Repeated names are found through a small cache of the last name objects seen (held
 * strongly, so a pointer match is always the same object), then by hash and bytes.
 *
 * Names that are not plain valid text - bytes, lone surrogates, longer than the string bound - are
 * handed to the cleaner registered from Python (json_safe) once each and stored as its result.
 * The text is exported without a copy: the table itself is a read-only uint8 buffer (the blob) and
 * ``offsets`` an Int64Log(1) of n+1 ends. The first export seals the table (its cycle has ended): the
 * lookup tables are freed and no name is added again.
 */
#ifndef XPUPROF_NAMETABLE_H
#define XPUPROF_NAMETABLE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "hostmem.h"
#include "int64log.h"

#define NT_CACHE 64 /* a power of two */

typedef struct {
    PyObject_HEAD
    char *blob;
    Py_ssize_t blob_len, blob_cap;
    Store blob_store;        /* where `blob` lives (hostmem.h) */
    Int64LogObject *offsets; /* n + 1 rows: the end of each name's text (row 0 is 0) */
    uint32_t *hashes;        /* per name: the low 32 bits of its str hash (for lookups and regrowth) */
    uint32_t *slots;         /* name id + 1, 0 = empty; nslots is a power of two */
    Py_ssize_t n, cap, nslots, exports;
    int sealed;              /* exported once: the lookup tables are freed, no name is added again */
    PyObject *slow;          /* dict: raw name (bytes, odd str) -> id, for names the cleaner fixed */
    Py_ssize_t invalid_utf8; /* distinct raw names whose invalid UTF-8 was replaced */
    PyObject *cache_obj[NT_CACHE];
    int64_t cache_id[NT_CACHE];
} NameTableObject;

extern PyTypeObject NameTableType;

/* A range or instant name (an exact str or bytes, checked where it was passed) -> its id; -1 with an
 * exception set; -2 when refused (the table is exported: its cycle has ended). */
int64_t nt_intern(NameTableObject *t, PyObject *name);

/* set_name_cleaner(cleaner, max_chars): the module function that registers the cleaner of names that are
 * not plain valid text, and the longest name (in characters) stored as given. */
PyObject *set_name_cleaner(PyObject *mod, PyObject *a);

#endif
