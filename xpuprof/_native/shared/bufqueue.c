/* bufqueue.c: the FIFO of completed activity buffers that bufqueue.h declares, and the buffers'
 * allocation. Compiled into every extension that queues vendor buffers (setup.py: EXTENSIONS in
 * xpuprof/_native/__init__.py).
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, posix_memalign under -std=c11 */
#include "bufqueue.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Buffers of 1 MiB and more are mapped and unmapped directly, so their memory goes back to the
 * system when freed: freed into the malloc arena of the thread that allocated them (PTI's, not
 * ours), it stayed resident while Python decoded the records into new arrays. A header of
 * BQ_BUFFER_ALIGN bytes before each buffer keeps its size and how it was allocated. */
#define BQ_MMAP_MIN ((size_t)1 << 20)

unsigned char *bq_alloc_buffer(size_t size) {
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

void bq_free_buffer(unsigned char *buffer) {
    if (!buffer) return;
    size_t *base = (size_t *)(buffer - BQ_BUFFER_ALIGN);
    if (base[1]) munmap(base, base[0]);
    else free(base);
}

/* Caller holds the lock. Doubles the ring, unrolling it so head becomes 0. */
static int grow_locked(bq_queue *q) {
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

int bq_push(bq_queue *q, unsigned char *buffer, size_t size, size_t used) {
    int rc = 0;
    pthread_mutex_lock(&q->lock);
    if (q->count == q->capacity && grow_locked(q) != 0) {
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

int bq_pop(bq_queue *q, bq_entry *out) {
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

size_t bq_len(bq_queue *q) {
    pthread_mutex_lock(&q->lock);
    size_t n = q->count;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void bq_clear(bq_queue *q) {
    bq_entry e;
    while (bq_pop(q, &e)) bq_free_buffer(e.buffer);
    pthread_mutex_lock(&q->lock);
    free(q->entries);
    q->entries = NULL;
    q->capacity = q->head = q->count = 0;
    pthread_mutex_unlock(&q->lock);
}
