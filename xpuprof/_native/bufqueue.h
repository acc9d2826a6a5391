/* bufqueue.h: a header-only, mutex-protected FIFO of completed activity buffers.
 *
 * Vendor tracing libraries (PTI, rocprofiler, ...) hand back filled buffers from their own
 * threads, often while holding their own locks. Touching Python there deadlocks against the
 * GIL, so a C callback pushes (buffer, capacity, used bytes) here and Python pops later.
 * Nothing in this header knows about any vendor or about Python; it needs only pthreads.
 *
 * Usage: one static `bq_queue q = BQ_INITIALIZER;` per producer, `bq_push` from any thread,
 * `bq_pop` from the draining thread. Buffers are owned by whoever holds them: after a pop the
 * caller frees with `bq_free_buffer` (they came from `bq_alloc_buffer`).
 */
#ifndef XPUPROF_BUFQUEUE_H
#define XPUPROF_BUFQUEUE_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* Buffers of 1 MiB and more are mapped and unmapped directly, so their memory goes back to the
 * system when freed: freed into the malloc arena of the thread that allocated them (PTI's, not
 * ours), it stayed resident while Python decoded the records into new arrays. A header of
 * BQ_BUFFER_ALIGN bytes before each buffer keeps its size and how it was allocated. */
#define BQ_MMAP_MIN ((size_t)1 << 20)

static inline unsigned char *bq_alloc_buffer(size_t size) {
    if (size == 0) return NULL;
    size_t rounded = (size + BQ_BUFFER_ALIGN - 1) / BQ_BUFFER_ALIGN * BQ_BUFFER_ALIGN;
    size_t total = rounded + BQ_BUFFER_ALIGN;
    size_t *base;
    if (total >= BQ_MMAP_MIN) {
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        base = (size_t *)m;
        base[1] = 1;
    } else {
        void *p = NULL;
        if (posix_memalign(&p, BQ_BUFFER_ALIGN, total) != 0) return NULL;
        base = (size_t *)p;
        base[1] = 0;
    }
    base[0] = total;
    return (unsigned char *)base + BQ_BUFFER_ALIGN;
}

static inline void bq_free_buffer(unsigned char *buffer) {
    if (!buffer) return;
    size_t *base = (size_t *)(buffer - BQ_BUFFER_ALIGN);
    if (base[1]) munmap(base, base[0]);
    else free(base);
}

/* Caller holds the lock. Doubles the ring, unrolling it so head becomes 0. */
static inline int bq__grow_locked(bq_queue *q) {
    size_t ncap = q->capacity ? q->capacity * 2 : 16;
    bq_entry *n = (bq_entry *)malloc(ncap * sizeof(bq_entry));
    if (!n) return -1;
    for (size_t i = 0; i < q->count; i++) n[i] = q->entries[(q->head + i) % q->capacity];
    free(q->entries);
    q->entries = n;
    q->capacity = ncap;
    q->head = 0;
    return 0;
}

/* Append one completed buffer. Returns 0, or -1 when out of memory (the buffer is then freed
 * and counted in push_failures, so it is never leaked nor silently lost). */
static inline int bq_push(bq_queue *q, unsigned char *buffer, size_t size, size_t used) {
    int rc = 0;
    pthread_mutex_lock(&q->lock);
    if (q->count == q->capacity && bq__grow_locked(q) != 0) {
        q->push_failures++;
        rc = -1;
    } else {
        q->entries[(q->head + q->count) % q->capacity] = (bq_entry){buffer, size, used};
        q->count++;
        q->pushed++;
    }
    pthread_mutex_unlock(&q->lock);
    if (rc != 0) bq_free_buffer(buffer);
    return rc;
}

/* Pop the oldest buffer into *out. Returns 1 when one was available, 0 when the queue is empty. */
static inline int bq_pop(bq_queue *q, bq_entry *out) {
    int got = 0;
    pthread_mutex_lock(&q->lock);
    if (q->count) {
        *out = q->entries[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        q->popped++;
        got = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return got;
}

static inline size_t bq_len(bq_queue *q) {
    pthread_mutex_lock(&q->lock);
    size_t n = q->count;
    pthread_mutex_unlock(&q->lock);
    return n;
}

/* Free every queued buffer and the ring itself (the queue stays usable). */
static inline void bq_clear(bq_queue *q) {
    bq_entry e;
    while (bq_pop(q, &e)) bq_free_buffer(e.buffer);
    pthread_mutex_lock(&q->lock);
    free(q->entries);
    q->entries = NULL;
    q->capacity = q->head = q->count = 0;
    pthread_mutex_unlock(&q->lock);
}

#endif /* XPUPROF_BUFQUEUE_H */
