/*
 * math_family.h: what the math family's files share. Its table is in
 * math.c; the broadcasting ops' rule is math_broadcast.c's. The element
 * values the folds compute with, and how a computed value is stored in a
 * folded output (integers wrap to their width, floats round to their
 * precision), are inline: the folds call them once an element. Internal.
 */
#ifndef EST_MATH_FAMILY_H
#define EST_MATH_FAMILY_H

#include <float.h>
#include <math.h>

#include "registry.h"

/* One element of a constant: integer and bool types use i, float types f. */
typedef struct num {
    bool is_f;
    double f;
    int64_t i;
} num;

static inline num num_of_int(int64_t i) { return (num){.is_f = false, .i = i}; }
static inline num num_of_float(double f) { return (num){.is_f = true, .f = f}; }
static inline double num_as_f(num v) { return v.is_f ? v.f : (double)v.i; }
static inline bool num_truth(num v) { return v.is_f ? v.f != 0 : v.i != 0; }

static inline num num_get(const est_const *c, int64_t k) {
    return c->f64 ? num_of_float(c->f64[k]) : num_of_int(c->i64[k]);
}

/* Width in bits of an integer dtype (0 for other types), and its signedness. */
static inline int int_width(est_dtype dt, bool *is_signed) {
    *is_signed = true;
    switch (dt) {
    case EST_DT_INT2: return 2;
    case EST_DT_INT4: return 4;
    case EST_DT_INT8: return 8;
    case EST_DT_INT16: return 16;
    case EST_DT_INT32: return 32;
    case EST_DT_INT64: return 64;
    default: break;
    }
    *is_signed = false;
    switch (dt) {
    case EST_DT_UINT2: return 2;
    case EST_DT_UINT4: return 4;
    case EST_DT_UINT8: return 8;
    case EST_DT_UINT16: return 16;
    case EST_DT_UINT32: return 32;
    case EST_DT_UINT64: return 64;
    default: return 0;
    }
}

/* Reduces v to dt's range the way a C conversion to that integer type wraps.
 * uint64 keeps its bits in the int64. */
__attribute__((always_inline)) static inline int64_t wrap_int(est_dtype dt, int64_t v) {
    if (dt == EST_DT_INT64 || dt == EST_DT_UINT64) return v; /* the common case, first */
    if (dt == EST_DT_BOOL) return v != 0;
    bool is_signed;
    int bits = int_width(dt, &is_signed);
    if (bits == 0 || bits == 64) return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1, u = (uint64_t)v & mask;
    if (is_signed && (u >> (bits - 1)) != 0) u |= ~mask; /* sign-extend */
    return (int64_t)u;
}

/* Rounds f to nearest-even in a float format with `mant` fraction bits, the
 * smallest normal exponent `min_exp` and the largest finite value `max`. */
static inline double round_to_format(double f, int mant, int min_exp, double max) {
    if (!isfinite(f) || f == 0) return f;
    int e = ilogb(f);
    if (e < min_exp) e = min_exp; /* subnormals share the smallest quantum */
    double quantum = ldexp(1.0, e - mant);
    double r = nearbyint(f / quantum) * quantum;
    return fabs(r) > max ? copysign(INFINITY, f) : r;
}

/* round_to_format for float32: in range, the hardware's conversion rounds
 * the same way (to nearest even, subnormals included) in a few instructions;
 * NaN, infinities and values past FLT_MAX take the general path. */
static inline double round_to_float32(double f) {
    return fabs(f) <= FLT_MAX ? (double)(float)f : round_to_format(f, 23, -126, FLT_MAX);
}

/* Rounds a value computed in double to the precision of the dtype holding it. */
__attribute__((always_inline)) static inline double round_to_dtype(est_dtype dt, double f) {
    switch (dt) {
    case EST_DT_FLOAT: return round_to_float32(f);
    case EST_DT_FLOAT16: return round_to_format(f, 10, -14, 65504.0);
    case EST_DT_BFLOAT16: return round_to_format(f, 7, -126, 0x1.fep127);
    default: return f;
    }
}

/* Stores v as element k of c, converted to c's dtype: floats truncate toward
 * zero into integers, integers wrap, bool is v != 0. */
static inline void num_put(est_const *c, int64_t k, num v) {
    if (c->f64) {
        c->f64[k] = round_to_dtype(c->dtype, num_as_f(v));
        return;
    }
    if (v.is_f) est_const_set(c, k, v.f, v.i, true);
    c->i64[k] = wrap_int(c->dtype, v.is_f ? c->i64[k] : v.i); /* wrapping makes bool v != 0 */
}

/* Folds only to dtypes whose values a double or int64 can hold exactly once
 * rounded: integers and the four common float types (not float8 / float4). */
static inline est_const *fold_out(est_infer_ctx *ctx, est_dtype dt) {
    bool foldable = est__dtype_is_int(dt) || dt == EST_DT_FLOAT || dt == EST_DT_DOUBLE ||
                    dt == EST_DT_FLOAT16 || dt == EST_DT_BFLOAT16;
    return foldable ? est_fold_out_unset(ctx, 0, dt) : NULL; /* each fold writes every element, or drops the value */
}

/* True when t's contents are known in full. */
static inline bool known(const est_tval *t) {
    return t && t->value && t->value->count == t->elements;
}

/* ---- broadcasting ops (math_broadcast.c) ------------------------------------ */

/* In this order: math_broadcast.c takes the kinds up to EW_MOD as
 * arithmetic and those up to EW_BIT_XOR as integer operations. */
typedef enum ew_kind {
    EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_POW, EW_MOD,
    EW_BITSHIFT, EW_BIT_AND, EW_BIT_OR, EW_BIT_XOR,
    EW_AND, EW_OR, EW_XOR,                                        /* bool -> bool */
    EW_EQUAL, EW_LESS, EW_GREATER, EW_LESS_EQUAL, EW_GREATER_EQUAL, /* T -> bool */
    EW_MAX, EW_MIN, EW_MEAN, EW_WHERE,
} ew_kind;

/* Every broadcasting op: the output takes the broadcast of all inputs' shapes;
 * its dtype is bool for comparisons and logic, X's for Where, else input 0's. */
est_status est__elementwise_infer(est_infer_ctx *ctx, ew_kind kind);

#endif
