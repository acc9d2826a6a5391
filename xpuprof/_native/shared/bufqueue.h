/* bufqueue.h: a mutex-protected FIFO of completed activity buffers (bufqueue.c).
 *
 * Vendor tracing libraries (PTI, rocprofiler, ...) hand back filled buffers from their own
 * threads, often while holding their own locks. Touching Python there deadlocks against the
 * GIL, so a C callback pushes (buffer, capacity, used bytes) here and Python pops later.
 * Nothing here knows about any vendor or about Python; it needs only pthreads.
 *
 * Usage: one static `bq_queue q = BQ_INITIALIZER;` per producer, `bq_push` from any thread,
 * `bq_pop` from the draining thread. Buffers are owned by whoever holds them: after a pop the
 * caller frees with `bq_free_buffer` (they came from `bq_alloc_buffer`).
 */
#ifndef XPUPROF_BUFQUEUE_H
#define XPUPROF_BUFQUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *buffer;
    size_t size;      /* capacity handed to the producer */
    size_t used;      /* bytes the producer filled */
} bq_entry;

typedef struct {
    pthread_mutex_t lock;
    bq_entry *entries; /* ring of `capacity` slots */
    size_t capacity;
    size_t head;       /* next slot to pop */
    size_t count;
    uint64_t pushed;   /* lifetime statistics */
    uint64_t popped;
    uint64_t push_failures; /* buffers lost because the queue could not grow (out of memory) */
} bq_queue;

#define BQ_INITIALIZER {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0, 0, 0}

/* Aligned so every record type can be read in place (PTI records need 8; use a cache line). */
#define BQ_BUFFER_ALIGN 64

/* A buffer of `size` bytes aligned to BQ_BUFFER_ALIGN, or NULL (size 0, or no memory). */
unsigned char *bq_alloc_buffer(size_t size);

/* Frees a buffer bq_alloc_buffer returned (NULL: nothing). */
void bq_free_buffer(unsigned char *buffer);

/* Append one completed buffer. Returns 0, or -1 when out of memory (the buffer is then freed
 * and counted in push_failures, so it is never leaked nor silently lost). */
int bq_push(bq_queue *q, unsigned char *buffer, size_t size, size_t used);

/* Pop the oldest buffer into *out. Returns 1 when one was available, 0 when the queue is empty. */
int bq_pop(bq_queue *q, bq_entry *out);

/* Buffers queued now. */
size_t bq_len(bq_queue *q);

/* Free every queued buffer and the ring itself (the queue stays usable). */
void bq_clear(bq_queue *q);

#endif /* XPUPROF_BUFQUEUE_H */
