/* hostmem.h: where the host recorder's growing arrays live, and how much they may take (hostmem.c).
 *
 * Each growing block of int64log.c, argsarea.c and nametable.c (a log's rows, a name table's text, an args
 * area's bytes) grows through store_grow and is freed through store_free.
 *
 * The recording cap. Blocks of the active recorder are "budgeted": their capacity is charged to one
 * budget (budget_cap bytes, set with the recorder). A growth the budget cannot take, or that the system
 * refuses (an address-space or cgroup limit), is not an error raised into the user's loop: the recorder
 * stops recording (stop_ns, stop_reason) and every later range is only counted. Python reads that state
 * (`recording_state()`) and writes it into the trace. A block near the cap grows to what is left rather
 * than doubling past it, so the cap is reached by the rows, not by one doubling.
 *
 * Crash-safe blocks. A block given a spill file (`spill_to(fd)` on an empty container) lives in a
 * MAP_SHARED mapping of that file after a 64-byte header: a row is in the file the moment it is written
 * (the page cache is the memory), so a process killed by SIGKILL, SIGSEGV or SIGABRT leaves every row it
 * committed, with no flush and nothing to do in a signal handler. The header's `used` is stored (release)
 * after the row's fields: a reader never sees a half-written row. Space is reserved with fallocate before
 * the mapping grows (a full tmpfs is an error here, never a SIGBUS later); when the file cannot grow the
 * block moves to anonymous memory and the header says why (`detached`): recording goes on, the crash-safe
 * copy ends there.
 */
#ifndef XPUPROF_HOSTMEM_H
#define XPUPROF_HOSTMEM_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#define SPILL_MAGIC "XPUSPL1"
#define SPILL_HEADER 64

typedef struct {
    char magic[8];           /* SPILL_MAGIC */
    int64_t width;           /* int64 values per row (a log), or 0 (bytes) */
    int64_t used;            /* committed rows (a log) or bytes */
    int64_t detached;        /* errno that ended the crash-safe copy here, or 0 */
    int64_t pid;             /* the writing process */
    int64_t reserved[3];
} SpillHeader;

typedef struct {          /* zero-initialized: anonymous memory, charged to no budget */
    int spilled;             /* the block lives in `fd`'s mapping */
    int fd;                  /* the spill file while spilled */
    char *map;               /* the file mapping (header, then the block) */
    size_t map_len;
    uint64_t budget_gen;     /* the budget this block is charged to (0: none) */
    size_t charged;          /* bytes charged to it */
} Store;

/* The budget of the active recorder's blocks, and whether recording stopped. */
extern uint64_t budget_gen;   /* bumps with every recorder: older blocks are no longer charged */
extern int64_t budget_cap;    /* bytes the active recorder's blocks may take */
extern int64_t budget_used;
extern int64_t stop_ns;       /* when recording stopped (0: it records) */
extern char stop_reason[192];

/* Recording stops now, for this reason (the first stop's reason is kept). */
void recording_stops(const char *why);

/* The rows or bytes written so far are complete: a spill file's reader may take them. */
void store_commit(Store *s, int64_t used);

/* Move the block `*data` (`bytes` of capacity, `used` committed) into `fd`, a new, empty regular file
 * (duplicated here): from now on the block lives in the file's mapping. 0, or -1 with an exception set
 * (the block is then unchanged). */
int store_spill_to(Store *s, int fd, int64_t width, char **data, size_t bytes, int64_t used);

/* Grow the block `*data` of `*cap` elements of `elem` bytes to hold at least `need` elements (doubling from
 * `first`). 0, or -1 with MemoryError set: for a budgeted block the recorder has then stopped recording. */
int store_grow(Store *s, char **data, Py_ssize_t *cap, Py_ssize_t need, size_t elem, Py_ssize_t first);

/* Free the block (its mapping and file, or its memory) and give its bytes back to the budget. */
void store_free(Store *s, char *data);

/* Charge a block to the active recorder's budget (its current size counts from now). */
void store_charge(Store *s, size_t bytes);

#endif
