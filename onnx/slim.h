/* slim.h: a graph item's bytes without the weight payloads (slim.c). Internal. */
#ifndef MEMEST_ONNX_SLIM_H
#define MEMEST_ONNX_SLIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads the protobuf varint at p[*i] (p holds n bytes) into *v and moves *i
 * past it; false when it runs off the end or past 64 bits. The ONNX
 * loader's nesting check and the slim pass both walk the wire format with
 * it. */
static inline bool est__wire_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    if (*i < n && p[*i] < 0x80) { /* most keys and lengths: one byte */
        *v = p[(*i)++];
        return true;
    }
    *v = 0;
    for (unsigned shift = 0; *i < n && shift < 64; shift += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* The items slim.c cuts: a graph's nodes, initializers, sparse initializers. */
typedef enum est_slim_kind { EST_SLIM_NODE, EST_SLIM_TENSOR, EST_SLIM_SPARSE } est_slim_kind;

/* Where slimmed bytes go, reused from item to item; the caller frees data. */
typedef struct est_slim_buf {
    uint8_t *data;
    size_t cap;
} est_slim_buf;

/* The serialized item p[0..n) of the given kind with every tensor data field
 * cut to what the loader may read, written into buf; *out_n its length.
 * Returns p itself (and n) when nothing would be cut, when the bytes cannot
 * be walked, or when out of memory: the caller then unpacks p. */
const uint8_t *est__onnx_slim(const uint8_t *p, size_t n, est_slim_kind kind, est_slim_buf *buf, size_t *out_n);

#endif
