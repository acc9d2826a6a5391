/* pti_double.h: internals shared by the files of the PTI-ABI test double.
 *
 * The double is built from every *.c file in this directory into one shared library
 * (tests/xpu/conftest.py). pti_double_views.c provides the view API and a scripted workload;
 * further files (e.g. a metrics-scope double) can add exports and read what the workload did
 * through the functions below, e.g. the kernels it emitted, to produce matching records.
 */
#ifndef PTI_DOUBLE_H
#define PTI_DOUBLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t pti_result;

/* PTI's internal lock stand-in: held by the foreign "collector" thread while it calls the
 * buffer callbacks, and taken by the workload on the calling thread (the real deadlock pattern). */
extern pthread_mutex_t xpd_lock;

/* The double's host clock (ns): CLOCK_MONOTONIC shifted by a constant, a domain of its own. */
uint64_t xpd_now(void);

/* Append one record to the current PTI buffer (requesting/completing buffers through the
 * registered callbacks). Caller holds xpd_lock. Returns 0, or -1 when the record was lost. */
int xpd_emit_locked(const void *record, size_t size);

/* 1 when the view kind is enabled. */
int xpd_view_enabled(uint32_t kind);

typedef struct {
    uint64_t kernel_id;
    uint64_t start_ns, end_ns;
    uint64_t sycl_queue_id;
    uint32_t device_index;
    const char *name;
} xpd_kernel_info;

/* Kernels emitted by the last workload (valid until the next one starts). */
size_t xpd_kernel_count(void);
const xpd_kernel_info *xpd_kernel_at(size_t index);

#endif
