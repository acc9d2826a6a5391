/* protowire.c: protobuf varints (protowire.h). Compiled into both pfenc and pfdec, whose per-field loops call
 * these: setup.py builds them with link-time optimization, which inlines them into every caller as when they
 * were written in each file (always_inline: GCC's own limits left 11 calls in pfenc's largest functions). */
#pragma GCC optimize("O3") /* as pfenc.c and pfdec.c: GCC inlines across units only where the options agree */
#include "protowire.h"

#define INLINED inline __attribute__((always_inline))

INLINED int varint_len(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

INLINED uint8_t *varint_write(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

INLINED int varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    const uint8_t *q = *p;
    uint64_t x = 0;
#pragma GCC unroll 10 /* all 10 steps: unrolled, decoding runs ~5 % fewer instructions (callgrind) */
    for (int shift = 0; shift <= 63; shift += 7) {
        if (q >= end) break;
        uint8_t b = *q++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            *p = q;
            return 0;
        }
    }
    *p = q; /* cut short by end, or longer than a uint64 */
    return -1;
}
