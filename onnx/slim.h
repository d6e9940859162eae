/* slim.h: an ONNX file's bytes without the weight payloads (slim.c). Internal. */
#ifndef MEMEST_ONNX_SLIM_H
#define MEMEST_ONNX_SLIM_H

#include <stddef.h>
#include <stdint.h>

/* A malloc'd copy of the serialized ModelProto with every tensor data field
 * cut to what the loader may read; *out_size its length. NULL when nothing
 * would be cut, when the bytes cannot be walked, or when out of memory: the
 * caller then unpacks `data` itself. */
uint8_t *est__onnx_slim(const uint8_t *data, size_t size, size_t *out_size);

#endif
