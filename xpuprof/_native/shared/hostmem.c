/* hostmem.c: the host recorder's blocks in memory or in spill files, and the recording cap (hostmem.h). */
#define _GNU_SOURCE /* mremap */
#include "hostmem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder.h" /* mono_ns */

/* ---------------------------------------------------------------- the budget */
uint64_t budget_gen = 0;
int64_t budget_cap = INT64_MAX;
int64_t budget_used = 0;
int64_t stop_ns = 0;
char stop_reason[192];

void recording_stops(const char *why) {
    if (stop_ns) return;
    stop_ns = mono_ns();
    snprintf(stop_reason, sizeof stop_reason, "%s", why);
}

/* ---------------------------------------------------------------- spill files */
void store_commit(Store *s, int64_t used) {
    if (s->spilled) __atomic_store_n(&((SpillHeader *)s->map)->used, used, __ATOMIC_RELEASE);
}

int store_spill_to(Store *s, int fd, int64_t width, char **data, size_t bytes, int64_t used) {
    if (s->spilled) { PyErr_SetString(PyExc_ValueError, "spill_to: the container already has a spill file"); return -1; }
    struct stat st;
    if (fstat(fd, &st) < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    if (!S_ISREG(st.st_mode) || st.st_size != 0) {
        PyErr_SetString(PyExc_ValueError, "spill_to: the file must be a new, empty regular file");
        return -1;
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    size_t len = SPILL_HEADER + bytes;
    int err = posix_fallocate(own, 0, (off_t)len);
    char *map = err ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
    if (map == MAP_FAILED) {
        if (!err) err = errno;
        close(own);
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    SpillHeader *h = (SpillHeader *)map;
    memcpy(h->magic, SPILL_MAGIC, 8);
    h->width = width;
    h->detached = 0;
    h->pid = (int64_t)getpid();
    if (bytes) memcpy(map + SPILL_HEADER, *data, bytes);
    h->used = used;
    PyMem_RawFree(*data);
    *data = map + SPILL_HEADER;
    s->spilled = 1;
    s->fd = own;
    s->map = map;
    s->map_len = len;
    return 0;
}

/* The block moves to anonymous memory of `bytes` (>= old), its file keeps what was committed. */
static char *store_detach(Store *s, char *data, size_t old, size_t bytes, int err) {
    char *anon = PyMem_RawMalloc(bytes ? bytes : 1);
    if (!anon) return NULL;
    if (old) memcpy(anon, data, old);
    ((SpillHeader *)s->map)->detached = err ? err : EIO;
    munmap(s->map, s->map_len);
    close(s->fd);
    s->spilled = 0;
    s->map = NULL;
    s->map_len = 0;
    return anon;
}

/* ---------------------------------------------------------------- growth */
/* Resize the block `data` from `old` to `bytes` bytes: its file mapping, or anonymous memory. NULL (no
 * exception set) when the memory cannot be had. */
static char *store_resize(Store *s, char *data, size_t old, size_t bytes) {
    if (!s->spilled) return PyMem_RawRealloc(data, bytes); /* large blocks: mremap, no copy */
    size_t len = SPILL_HEADER + bytes;
    int err = posix_fallocate(s->fd, 0, (off_t)len);
    if (err) return store_detach(s, data, old, bytes, err);
    char *map = mremap(s->map, s->map_len, len, MREMAP_MAYMOVE);
    if (map == MAP_FAILED) return store_detach(s, data, old, bytes, errno);
#ifdef MADV_POPULATE_WRITE
    /* the pages fallocate reserved, mapped writable in one call rather than one fault per page as rows fill
     * them (a shared file page's write fault costs more than an anonymous one); best effort (Linux >= 5.14) */
    size_t page = 4096, from = (s->map_len + page - 1) & ~(page - 1);
    if (len > from) (void)madvise(map + from, len - from, MADV_POPULATE_WRITE);
#endif
    s->map = map;
    s->map_len = len;
    return map + SPILL_HEADER;
}

int store_grow(Store *s, char **data, Py_ssize_t *cap, Py_ssize_t need, size_t elem, Py_ssize_t first) {
    Py_ssize_t want = *cap ? *cap : first;
    while (want < need) want *= 2;
    size_t old = (size_t)*cap * elem;
    int budgeted = s->budget_gen && s->budget_gen == budget_gen;
    if (budgeted) {
        int64_t room = budget_cap - budget_used;
        if ((int64_t)((size_t)want * elem - old) > room) { /* what is left, not one doubling past the cap */
            want = (Py_ssize_t)(((int64_t)old + (room > 0 ? room : 0)) / (int64_t)elem);
            if (want < need) {
                recording_stops("the recording cap was reached");
                PyErr_SetString(PyExc_MemoryError, "xpuprof: the recording cap was reached");
                return -1;
            }
        }
    }
    char *d = store_resize(s, *data, old, (size_t)want * elem);
    if (!d) {
        if (budgeted) recording_stops("the system refused more memory");
        PyErr_NoMemory();
        return -1;
    }
    if (budgeted) {
        budget_used += (int64_t)((size_t)want * elem - old);
        s->charged = (size_t)want * elem;
    }
    *data = d;
    *cap = want;
    return 0;
}

void store_free(Store *s, char *data) {
    if (s->budget_gen && s->budget_gen == budget_gen) budget_used -= (int64_t)s->charged;
    s->charged = 0;
    if (s->spilled) {
        munmap(s->map, s->map_len);
        close(s->fd);
        s->spilled = 0;
        s->map = NULL;
        s->map_len = 0;
    } else {
        PyMem_RawFree(data);
    }
}

void store_charge(Store *s, size_t bytes) {
    s->budget_gen = budget_gen;
    s->charged = bytes;
    budget_used += (int64_t)bytes;
}
