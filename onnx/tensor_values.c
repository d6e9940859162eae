/*
 * tensor_values.c: what a TensorProto says of itself: its dims (checked
 * against est_limits) and, when small, numeric and embedded, its values
 * (the shape constants that inference folds). Weights are never decoded.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_loader.h"
#include "tensor_values.h"

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* protobuf-c allocates through this rather than its own default, so that
 * every allocation of a load goes through this library's malloc (the
 * allocation-failure test wraps it). Immutable, so shared by all threads and by onnx_loader.c. */
static void *pb_alloc(void *data, size_t size) {
    (void)data;
    return malloc(size);
}
static void pb_free(void *data, void *p) {
    (void)data;
    free(p);
}
ProtobufCAllocator est__onnx_pb_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

/* ---- tensor values -------------------------------------------------------- */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) { mant <<= 1; exp--; }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
    else bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Reads element k of little-endian raw bytes. */
static void raw_element(const uint8_t *p, est_dtype dt, int64_t k, int64_t *iv, double *fv) {
    uint64_t u = 0;
    size_t w = est_dtype_bytes(dt, 1);
    for (size_t b = 0; b < w; b++) u |= (uint64_t)p[(size_t)k * w + b] << (8 * b);
    switch (dt) {
    case EST_DT_FLOAT: { uint32_t x = (uint32_t)u; float f; memcpy(&f, &x, 4); *fv = f; break; }
    case EST_DT_DOUBLE: { double d; memcpy(&d, &u, 8); *fv = d; break; }
    case EST_DT_FLOAT16: *fv = half_to_float((uint16_t)u); break;
    case EST_DT_BFLOAT16: *fv = bf16_to_float((uint16_t)u); break;
    case EST_DT_INT8: *iv = (int8_t)u; break;
    case EST_DT_INT16: *iv = (int16_t)u; break;
    case EST_DT_INT32: *iv = (int32_t)u; break;
    case EST_DT_INT64: *iv = (int64_t)u; break;
    case EST_DT_BOOL: *iv = u != 0; break;
    default: *iv = (int64_t)u; break; /* unsigned types */
    }
}

/* Decodes a TensorProto's values when small, numeric and embedded. Returns
 * EST_OK with *out NULL when the values are not kept. */
est_status est__onnx_decode_values(const Onnx__TensorProto *t, int64_t count, est_const **out,
                                est_error *err, const char *src) {
    *out = NULL;
    est_dtype dt = (est_dtype)t->data_type;
    if (count > EST_FOLD_MAX_ELEMENTS) return EST_OK;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return EST_OK;
    if (!est__dtype_is_float(dt) && !est__dtype_is_int(dt)) return EST_OK;
    /* Weights are never needed: keep floating values only for scalars and
     * short vectors (Resize scales, Range bounds, fill values). */
    if (est__dtype_is_float(dt) && count > EST_FOLD_MAX_FLOAT_VALUES) return EST_OK;
    size_t width = est_dtype_bytes(dt, 1);
    if (dt == EST_DT_UINT4 || dt == EST_DT_INT4 || dt == EST_DT_FLOAT4E2M1 || dt == EST_DT_UINT2 ||
        dt == EST_DT_INT2 || width == 0 ||
        (est__dtype_is_float(dt) && dt != EST_DT_FLOAT && dt != EST_DT_DOUBLE &&
         dt != EST_DT_FLOAT16 && dt != EST_DT_BFLOAT16))
        return EST_OK; /* never needed for shapes */
    est_const *c = est__const_new(dt, count);
    if (!c) return est__fail(err, EST_ENOMEM, "%s: out of memory decoding '%s'", src, str_or_empty(t->name));
    bool is_f = c->f64 != NULL;
    for (int64_t k = 0; k < count; k++) {
        int64_t iv = 0;
        double fv = 0;
        if (t->has_raw_data) {
            if ((uint64_t)t->raw_data.len < (uint64_t)count * width) goto short_data;
            raw_element(t->raw_data.data, dt, k, &iv, &fv);
        } else if (dt == EST_DT_FLOAT) {
            if ((size_t)k >= t->n_float_data) goto short_data;
            fv = t->float_data[k];
        } else if (dt == EST_DT_DOUBLE) {
            if ((size_t)k >= t->n_double_data) goto short_data;
            fv = t->double_data[k];
        } else if (dt == EST_DT_INT64) {
            if ((size_t)k >= t->n_int64_data) goto short_data;
            iv = t->int64_data[k];
        } else if (dt == EST_DT_UINT32 || dt == EST_DT_UINT64) {
            if ((size_t)k >= t->n_uint64_data) goto short_data;
            iv = (int64_t)t->uint64_data[k];
        } else {
            if ((size_t)k >= t->n_int32_data) goto short_data;
            int32_t v = t->int32_data[k];
            if (dt == EST_DT_FLOAT16) fv = half_to_float((uint16_t)v);
            else if (dt == EST_DT_BFLOAT16) fv = bf16_to_float((uint16_t)v);
            else iv = v;
        }
        if (is_f) c->f64[k] = fv;
        else c->i64[k] = iv;
    }
    *out = c;
    return EST_OK;
short_data:
    est__const_free(c);
    return est__fail(err, EST_EPARSE, "%s: tensor '%s' holds fewer values than its dims say", src,
                     str_or_empty(t->name));
}

est_status est__onnx_check_tensor_dims(const Onnx__TensorProto *t, int64_t *count, const est_limits *lim,
                                    est_error *err, const char *src) {
    if (t->n_dims > lim->max_rank)
        return est__fail(err, EST_ELIMIT, "%s: tensor '%s' has rank %zu, above the limit of %u (est_limits.max_rank)",
                         src, str_or_empty(t->name), t->n_dims, lim->max_rank);
    int64_t c = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0)
            return est__fail(err, EST_ESHAPE, "%s: tensor '%s' has negative dim %lld", src,
                             str_or_empty(t->name), (long long)t->dims[d]);
        if (t->dims[d] > lim->max_dim_value)
            return est__fail(err, EST_ELIMIT, "%s: tensor '%s' dim %zu is %lld, above the limit of %lld "
                             "(est_limits.max_dim_value)", src, str_or_empty(t->name), d,
                             (long long)t->dims[d], (long long)lim->max_dim_value);
        if (est__mul_overflow(c, t->dims[d], &c))
            return est__fail(err, EST_EOVERFLOW, "%s: tensor '%s': element count overflows 64 bits",
                             src, str_or_empty(t->name));
    }
    if (t->data_type < 0 || t->data_type >= EST_DT_COUNT || t->data_type == EST_DT_UNDEFINED)
        return est__fail(err, EST_EPARSE, "%s: tensor '%s' has invalid data type %d", src,
                         str_or_empty(t->name), (int)t->data_type);
    *count = c;
    return EST_OK;
}

est_status est__onnx_read_tensor(const void *data, size_t size, est_dtype *dtype, int *rank,
                                 int64_t dims[EST_MAX_RANK], est_const **values, est_error *err) {
    *values = NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&est__onnx_pb_allocator, size, data);
    if (!t) return est__fail(err, EST_EPARSE, "not a valid TensorProto");
    int64_t count = 0;
    est_limits lim;
    est__limits_resolve(NULL, &lim);
    est_status st = est__onnx_check_tensor_dims(t, &count, &lim, err, "<tensor>");
    if (st == EST_OK) {
        *dtype = (est_dtype)t->data_type;
        *rank = (int)t->n_dims;
        for (size_t d = 0; d < t->n_dims; d++) dims[d] = t->dims[d];
        st = est__onnx_decode_values(t, count, values, err, "<tensor>");
    }
    onnx__tensor_proto__free_unpacked(t, &est__onnx_pb_allocator);
    return st;
}

