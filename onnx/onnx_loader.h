/* onnx_loader.h: internal entry points of the protobuf-c ONNX loader. */
#ifndef EST_ONNX_LOADER_H
#define EST_ONNX_LOADER_H

#include "ir.h"

/* Decodes a serialized TensorProto (as in the conformance tests' .pb files):
 * dtype, dims, and values when numeric and at most EST_FOLD_MAX_ELEMENTS.
 * *values is NULL when not decoded; the caller frees it (est__const_free). */
est_status est__onnx_read_tensor(const void *data, size_t size, est_dtype *dtype, int *rank,
                                 int64_t dims[EST_MAX_RANK], est_const **values, est_error *err);

#endif
