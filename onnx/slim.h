/* slim.h: an ONNX file's bytes without the weight payloads (slim.c). Internal. */
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
    *v = 0;
    for (unsigned shift = 0; *i < n && shift < 64; shift += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* A malloc'd copy of the serialized ModelProto with every tensor data field
 * cut to what the loader may read; *out_size its length. NULL when nothing
 * would be cut, when the bytes cannot be walked, or when out of memory: the
 * caller then unpacks `data` itself. */
uint8_t *est__onnx_slim(const uint8_t *data, size_t size, size_t *out_size);

#endif
