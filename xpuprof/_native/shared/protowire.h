/* protowire.h: the protobuf wire format (protobuf.dev/programming-guides/encoding), the one C copy of it: the
 * Perfetto encoder (pfenc.c) writes it and the decoder (pfdec.c) reads it. A field is a key (field number << 3 |
 * wire type) and a value; keys, VARINT values and lengths are base-128 varints, least significant group first. */
#ifndef XPUPROF_PROTOWIRE_H
#define XPUPROF_PROTOWIRE_H

#include <stdint.h>

/* Wire types; groups (3, 4) are in none of the protos we read or write. */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A field's key (a constant expression where field and wire type are). */
#define PROTO_KEY(field, wt) (((uint64_t)(field) << 3) | (uint64_t)(wt))
#define PROTO_KEY_FIELD(key) ((uint32_t)((key) >> 3))
#define PROTO_KEY_WIRE_TYPE(key) ((int)((key) & 7))

/* The most bytes a varint takes (a uint64 in 7-bit groups). */
#define VARINT_MAX 10

/* How many bytes the varint of v takes (1 to VARINT_MAX). */
int varint_len(uint64_t v);

/* Writes the varint of v at p (room for VARINT_MAX bytes); returns its end. */
uint8_t *varint_write(uint8_t *p, uint64_t v);

/* Reads the varint at *p, never at or past end, into *v and moves *p past it: 0; -1 where it is cut short by end
 * or longer than a uint64, *p then moved to where reading stopped (the decoder names that offset) and *v unset. */
int varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v);

#endif
