/* tensor_values.h: a TensorProto's dims and small values (tensor_values.c).
 * Internal to the ONNX loader. */
#ifndef MEMEST_ONNX_TENSOR_VALUES_H
#define MEMEST_ONNX_TENSOR_VALUES_H

#include "ir.h"
#include "onnx.pb-c.h"

/* malloc and free through this library (the allocation-failure test wraps
 * them), for protobuf-c's unpacks of single messages. */
extern ProtobufCAllocator est__onnx_pb_allocator;

/* Checks t's rank, dims and data type against lim; *count its elements. */
est_status est__onnx_check_tensor_dims(const Onnx__TensorProto *t, int64_t *count, const est_limits *lim,
                                       est_error *err, const char *src);
/* t's values when small, numeric and embedded (EST_OK with *out NULL when
 * they are not kept); src names the file in errors. */
est_status est__onnx_decode_values(const Onnx__TensorProto *t, int64_t count, est_const **out, est_error *err,
                                   const char *src);

#endif
