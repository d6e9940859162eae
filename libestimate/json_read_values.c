/*
 * json_read_values.c: the JSON graph reader's building blocks (json_read.c
 * holds the reader itself): the error helpers, which name what an error is
 * about; field getters that refuse unknown, repeated and mistyped fields;
 * the readers of integers (JSON numbers up to 2^53, decimal strings beyond)
 * and of float32 or float64 values; and the reader of dtypes, dims and the
 * "values" of a tensor declaration. What they share is in json_read.h.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

/* ---- errors ------------------------------------------------------------------ */

est_status est__json_fail(json_loader *J, est_status code, const char *fmt, ...) {
    char reason[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return est__fail(J->err, code, "%s: %s%s%s", J->src, J->where, J->where[0] ? ": " : "", reason);
}

est_status est__json_oom(json_loader *J) {
    return est__fail(J->err, EST_ENOMEM, "%s: out of memory while loading", J->src);
}

void est__json_set_where(json_loader *J, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(J->where, sizeof J->where, fmt, ap);
    va_end(ap);
}

/* Appends ": attribute 'x'" and the like; returns the old length for restoring. */
size_t est__json_push_where(json_loader *J, const char *what, const char *name) {
    size_t len = strlen(J->where);
    snprintf(J->where + len, sizeof J->where - len, "%s%s '%.64s'", len ? ": " : "", what, name);
    return len;
}


/* ---- fields ------------------------------------------------------------------ */

/* Fails unless every key of `obj` is in `allowed` (NULL-terminated, at most 32
 * names) and none repeats: a misspelt field is an error, not ignored. */
est_status est__json_check_fields(json_loader *J, const cJSON *obj, const char *const *allowed) {
    uint32_t seen = 0;
    for (const cJSON *c = obj->child; c; c = c->next) {
        int k = 0;
        while (allowed[k] && strcmp(allowed[k], key_of(c)) != 0) k++;
        if (!allowed[k]) {
            char list[256] = "";
            for (int i = 0; allowed[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
            return est__json_fail(J, EST_EPARSE, "unknown field '%.64s' (known fields: %s)", key_of(c), list);
        }
        if (seen & (UINT32_C(1) << k)) return est__json_fail(J, EST_EPARSE, "field '%s' appears twice", allowed[k]);
        seen |= UINT32_C(1) << k;
    }
    return EST_OK;
}

est_status est__json_get_required(json_loader *J, const cJSON *obj, const char *key, const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    return *out ? EST_OK : est__json_fail(J, EST_EPARSE, "missing field '%s'", key);
}

/* A string field; when optional and absent, *out is left as it is. */
est_status est__json_get_string(json_loader *J, const cJSON *obj, const char *key, bool required,
                                const char **out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item) return required ? est__json_fail(J, EST_EPARSE, "missing field '%s'", key) : EST_OK;
    if (!cJSON_IsString(item)) return est__json_fail(J, EST_EPARSE, "field '%s' must be a string", key);
    *out = item->valuestring;
    return EST_OK;
}

/* An array field; when optional and absent, *out is NULL. */
est_status est__json_get_array(json_loader *J, const cJSON *obj, const char *key, bool required,
                               const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*out) return required ? est__json_fail(J, EST_EPARSE, "missing field '%s'", key) : EST_OK;
    if (!cJSON_IsArray(*out)) return est__json_fail(J, EST_EPARSE, "field '%s' must be an array", key);
    return EST_OK;
}

/* ---- numbers ------------------------------------------------------------------ */

const char *est__json_int_problem(num_result r) {
    switch (r) {
    case NUM_NOT_WHOLE: return "must be a whole number";
    case NUM_INEXACT: return "is too large to be exact as a JSON number; write it as a decimal string";
    case NUM_RANGE: return "is outside the int64 range";
    default: return "must be an integer";
    }
}

const char *est__json_float_problem(num_result r) {
    return r == NUM_RANGE ? "is outside the float32 range"
                          : "must be a number, \"inf\", \"-inf\" or \"nan\"";
}

/* A JSON number that is a whole number below 2^53 in magnitude. */
num_result est__json_int_from_number(double d, int64_t *out) {
    if (!isfinite(d)) return NUM_INEXACT;
    if (d != floor(d)) return NUM_NOT_WHOLE;
    if (fabs(d) > (double)JSON_EXACT_INT_MAX) return NUM_INEXACT;
    *out = (int64_t)d;
    return NUM_OK;
}

/* A decimal string such as "-9223372036854775808", for integers that JSON
 * numbers cannot hold exactly. */
static num_result int_from_string(const char *s, int64_t *out) {
    const char *p = s + (*s == '-');
    if (!*p) return NUM_WRONG_TYPE;
    int64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return NUM_WRONG_TYPE;
        int digit = *p - '0';
        /* Accumulate negatively: -2^63 has no positive counterpart. */
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, digit, &v)) return NUM_RANGE;
    }
    if (*s != '-') {
        if (v == INT64_MIN) return NUM_RANGE;
        v = -v;
    }
    *out = v;
    return NUM_OK;
}

num_result est__json_int_from_json(const cJSON *item, int64_t *out) {
    if (cJSON_IsNumber(item)) return est__json_int_from_number(item->valuedouble, out);
    if (cJSON_IsString(item)) return int_from_string(item->valuestring, out);
    return NUM_WRONG_TYPE;
}

static bool special_float(const char *s, double *out) {
    if (strcmp(s, "inf") == 0 || strcmp(s, "+inf") == 0) *out = INFINITY;
    else if (strcmp(s, "-inf") == 0) *out = -INFINITY;
    else if (strcmp(s, "nan") == 0) *out = NAN;
    else return false;
    return true;
}

/* A number, or "inf"/"-inf"/"nan"; rounded to float32 when `single`. */
num_result est__json_float_from_json(const cJSON *item, bool single, double *out) {
    double d;
    if (cJSON_IsNumber(item)) {
        d = item->valuedouble;
        if (!isfinite(d)) return NUM_RANGE; /* 1e999: the parser overflowed */
    } else if (!cJSON_IsString(item) || !special_float(item->valuestring, &d)) {
        return NUM_WRONG_TYPE;
    }
    if (single) {
        float f = (float)d;
        if (isinf(f) && !isinf(d)) return NUM_RANGE;
        d = f;
    }
    *out = d;
    return NUM_OK;
}

/* ---- dtypes, dims and values ----------------------------------------------------- */

est_status est__json_parse_dtype(json_loader *J, const cJSON *obj, est_dtype *out) {
    const char *name = NULL;
    est_status st = est__json_get_string(J, obj, "dtype", true, &name);
    if (st != EST_OK) return st;
    *out = est_dtype_from_name(name);
    if (*out == EST_DT_UNDEFINED)
        return est__json_fail(J, EST_EPARSE, "unknown dtype '%.64s' (use a name such as float32, float16, int64)",
                              name);
    return EST_OK;
}

/* One dim of a graph input: a positive integer, a symbolic name, or null. */
static est_status parse_input_dim(json_loader *J, const cJSON *item, int d, est_dimdecl *out) {
    *out = (est_dimdecl){-1, -1};
    if (cJSON_IsNull(item)) return EST_OK;
    if (cJSON_IsString(item)) {
        if (!item->valuestring[0]) return est__json_fail(J, EST_EPARSE, "dim %d is an empty name", d);
        if ((out->sym = est__graph_symbol(J->g, item->valuestring)) == -2)
            return est__json_fail(J, EST_ELIMIT, "more than %llu symbolic dim names (est_limits.max_symbols)",
                                  (unsigned long long)J->g->limits.max_symbols);
        if (out->sym < 0) return est__json_oom(J);
        return EST_OK;
    }
    if (!cJSON_IsNumber(item))
        return est__json_fail(J, EST_EPARSE, "dim %d must be a positive integer, a symbolic name or null", d);
    double v = item->valuedouble;
    if (v <= 0)
        return est__json_fail(J, EST_ESHAPE, "dim %d is %.15g; dims must be positive", d, v);
    if (v > (double)J->g->limits.max_dim_value)
        return est__json_fail(J, EST_ELIMIT, "dim %d is %.15g, above the limit of %lld (est_limits.max_dim_value)",
                              d, v, (long long)J->g->limits.max_dim_value);
    if (v != floor(v)) return est__json_fail(J, EST_EPARSE, "dim %d is %.15g; dims must be whole numbers", d, v);
    out->value = (int64_t)v;
    return EST_OK;
}

est_status est__json_parse_input_dims(json_loader *J, const cJSON *arr, est_tensor *t) {
    int rank = cJSON_GetArraySize(arr);
    if (rank > (int)J->g->limits.max_rank)
        return est__json_fail(J, EST_ELIMIT, "rank %d is above the limit of %u (est_limits.max_rank)", rank,
                              J->g->limits.max_rank);
    t->rank = rank;
    if (rank && !(t->dims = est__graph_dims(J->g, (size_t)rank))) return est__json_oom(J);
    int d = 0;
    for (const cJSON *item = arr->child; item; item = item->next, d++) {
        est_status st = parse_input_dim(J, item, d, &t->dims[d]);
        if (st != EST_OK) return st;
    }
    return EST_OK;
}

/* Fixed dims: non-negative integers whose product fits in int64. */
static est_status parse_fixed_dims(json_loader *J, const cJSON *arr, tensor_decl *t) {
    int rank = cJSON_GetArraySize(arr);
    if (rank > (int)J->g->limits.max_rank)
        return est__json_fail(J, EST_ELIMIT, "rank %d is above the limit of %u (est_limits.max_rank)", rank,
                              J->g->limits.max_rank);
    t->rank = rank;
    t->count = 1;
    int d = 0;
    for (const cJSON *item = arr->child; item; item = item->next, d++) {
        if (!cJSON_IsNumber(item)) return est__json_fail(J, EST_EPARSE, "dim %d must be an integer", d);
        num_result r = est__json_int_from_number(item->valuedouble, &t->dims[d]);
        if (r == NUM_INEXACT)
            return est__json_fail(J, EST_EOVERFLOW, "dim %d is too large: the element count overflows 64 bits", d);
        if (r != NUM_OK) return est__json_fail(J, EST_EPARSE, "dim %d %s", d, est__json_int_problem(r));
        if (t->dims[d] < 0)
            return est__json_fail(J, EST_ESHAPE, "dim %d is %lld; dims must not be negative", d, (long long)t->dims[d]);
        if (t->dims[d] > J->g->limits.max_dim_value)
            return est__json_fail(J, EST_ELIMIT, "dim %d is %lld, above the limit of %lld (est_limits.max_dim_value)",
                                  d, (long long)t->dims[d], (long long)J->g->limits.max_dim_value);
        if (est__mul_overflow(t->count, t->dims[d], &t->count))
            return est__json_fail(J, EST_EOVERFLOW, "the element count overflows 64 bits");
    }
    return EST_OK;
}

static est_status parse_value(json_loader *J, const cJSON *item, est_const *c, int64_t k) {
    num_result r;
    if (c->f64) {
        r = est__json_float_from_json(item, holds_single(c->dtype), &c->f64[k]);
        return r == NUM_OK ? EST_OK
                           : est__json_fail(J, EST_EPARSE, "value %lld %s", (long long)k, est__json_float_problem(r));
    }
    if (cJSON_IsBool(item)) { /* true/false, for bool tensors written by hand */
        c->i64[k] = cJSON_IsTrue(item);
        return EST_OK;
    }
    r = est__json_int_from_json(item, &c->i64[k]);
    return r == NUM_OK ? EST_OK
                       : est__json_fail(J, EST_EPARSE, "value %lld %s", (long long)k, est__json_int_problem(r));
}

/* "values": optional, and only for small numeric tensors. */
static est_status parse_values(json_loader *J, const cJSON *obj, tensor_decl *t) {
    const cJSON *arr = NULL;
    est_status st = est__json_get_array(J, obj, "values", false, &arr);
    if (st != EST_OK || !arr) return st;
    if (!est__dtype_is_float(t->dtype) && !est__dtype_is_int(t->dtype))
        return est__json_fail(J, EST_EPARSE, "'values' are only allowed for numeric dtypes, not %s",
                              est_dtype_name(t->dtype));
    if (t->count > EST_FOLD_MAX_ELEMENTS)
        return est__json_fail(J, EST_ELIMIT, "'values' are kept for at most %d elements; this tensor has %lld "
                              "(leave the values of weights out)", EST_FOLD_MAX_ELEMENTS, (long long)t->count);
    int n = cJSON_GetArraySize(arr);
    if (n != t->count)
        return est__json_fail(J, EST_EPARSE, "field 'values' has %d elements; its dims give %lld", n,
                              (long long)t->count);
    if (!(t->value = est__const_new(t->dtype, t->count))) return est__json_oom(J);
    int64_t k = 0;
    for (const cJSON *item = arr->child; item; item = item->next, k++)
        if ((st = parse_value(J, item, t->value, k)) != EST_OK) return st;
    return EST_OK;
}

/* "dtype", "dims" and optional "values". On failure t->value may still hold
 * a partial constant, which the caller frees. */
est_status est__json_parse_tensor_decl(json_loader *J, const cJSON *obj, tensor_decl *t) {
    const cJSON *dims = NULL;
    est_status st = est__json_parse_dtype(J, obj, &t->dtype);
    if (st == EST_OK) st = est__json_get_array(J, obj, "dims", true, &dims);
    if (st == EST_OK) st = parse_fixed_dims(J, dims, t);
    if (st == EST_OK) st = parse_values(J, obj, t);
    return st;
}
