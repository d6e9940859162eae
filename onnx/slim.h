/* slim.h: a graph item's bytes without the weight payloads (slim.c). Internal. */
#ifndef MEMEST_ONNX_SLIM_H
#define MEMEST_ONNX_SLIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads the protobuf varint at p[*i] (p holds n bytes) into *v and moves *i
 * past it; false when it runs off the end or past 64 bits. The ONNX
 * loader's nesting check, the node metadata's key test and the slim pass
 * walk the wire format with it and est__wire_field. */
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

/* The field at p[*i..n): its key in *key and *i moved past it. A varint's
 * value, or a length-delimited field's length, goes in *v, and such a
 * field's bytes start at *body. False where the bytes make no field (a key
 * or value running off the end, a length past it, a group or an unknown
 * wire type), which the callers each leave to protobuf-c. */
static inline bool est__wire_field(const uint8_t *p, size_t n, size_t *i, uint64_t *key, uint64_t *v, size_t *body) {
    if (!est__wire_varint(p, n, i, key)) return false;
    switch (*key & 7) {
    case 0: return est__wire_varint(p, n, i, v);
    case 1: if (n - *i < 8) return false; *i += 8; return true;
    case 5: if (n - *i < 4) return false; *i += 4; return true;
    case 2:
        if (!est__wire_varint(p, n, i, v) || *v > n - *i) return false;
        *body = *i;
        *i += (size_t)*v;
        return true;
    default: return false;
    }
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
