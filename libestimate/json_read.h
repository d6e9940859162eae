/*
 * json_read.h: what the JSON graph reader's files share: the loader's state,
 * the error helpers and the field, number and tensor readers of
 * json_read_values.c, and the attribute reader of json_read_attrs.c, which
 * json_read.c's node parser calls. Internal.
 */
#ifndef MEMEST_JSON_READ_H
#define MEMEST_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cJSON.h"
#include "ir.h"
#include "json_format.h"

typedef struct json_loader {
    est_graph *g;
    est_error *err;
    const char *src;
    const cJSON *opsets;  /* the "opset_import" object */
    char where[256];      /* what an error is about: "node 3 'conv1' (Conv)" */
} json_loader;

/* ---- errors (json_read_values.c) ---------------------------------------------- */

/* Fails with "SRC: WHERE: REASON". */
est_status est__json_fail(json_loader *J, est_status code, const char *fmt, ...) JSON_PRINTF(3, 4);
est_status est__json_oom(json_loader *J);
/* Sets what the next errors are about. */
void est__json_set_where(json_loader *J, const char *fmt, ...) JSON_PRINTF(2, 3);
/* Appends ": attribute 'x'" and the like; returns the old length for restoring. */
size_t est__json_push_where(json_loader *J, const char *what, const char *name);

static inline const char *key_of(const cJSON *item) { return item->string ? item->string : ""; }

/* ---- fields (json_read_values.c) ---------------------------------------------- */

/* Fails unless every key of `obj` is in `allowed` (NULL-terminated, at most 32
 * names) and none repeats. */
est_status est__json_check_fields(json_loader *J, const cJSON *obj, const char *const *allowed);
est_status est__json_get_required(json_loader *J, const cJSON *obj, const char *key, const cJSON **out);
/* A string field; when optional and absent, *out is left as it is. */
est_status est__json_get_string(json_loader *J, const cJSON *obj, const char *key, bool required,
                                const char **out);
/* An array field; when optional and absent, *out is NULL. */
est_status est__json_get_array(json_loader *J, const cJSON *obj, const char *key, bool required,
                               const cJSON **out);

/* ---- numbers (json_read_values.c) --------------------------------------------- */

typedef enum num_result {
    NUM_OK,
    NUM_WRONG_TYPE,  /* not a number (nor a string holding one) */
    NUM_NOT_WHOLE,   /* 1.5 where an integer belongs */
    NUM_INEXACT,     /* beyond 2^53 as a JSON number: digits may be lost */
    NUM_RANGE,       /* beyond int64, or beyond float32 for a float32 */
} num_result;

/* What is wrong with an integer or a float, for an error message. */
const char *est__json_int_problem(num_result r);
const char *est__json_float_problem(num_result r);
/* A JSON number that is a whole number below 2^53 in magnitude. */
num_result est__json_int_from_number(double d, int64_t *out);
/* A JSON number, or a decimal string for integers beyond 2^53. */
num_result est__json_int_from_json(const cJSON *item, int64_t *out);
/* A number, or "inf"/"-inf"/"nan"; rounded to float32 when `single`. */
num_result est__json_float_from_json(const cJSON *item, bool single, double *out);

/* ---- dtypes, dims and values (json_read_values.c) ------------------------------ */

/* A tensor as initializers and tensor attributes declare it. */
typedef struct tensor_decl {
    est_dtype dtype;
    int32_t rank;
    int64_t dims[EST_MAX_RANK];
    int64_t count;      /* elements */
    est_const *value;   /* from "values"; owned by the caller once parsed */
} tensor_decl;

est_status est__json_parse_dtype(json_loader *J, const cJSON *obj, est_dtype *out);
/* The dims of a graph input: positive integers, symbolic names or nulls. */
est_status est__json_parse_input_dims(json_loader *J, const cJSON *arr, est_tensor *t);
/* "dtype", "dims" and optional "values". On failure t->value may still hold
 * a partial constant, which the caller frees. */
est_status est__json_parse_tensor_decl(json_loader *J, const cJSON *obj, tensor_decl *t);

/* ---- attributes (json_read_attrs.c) -------------------------------------------- */

/* A node's optional "attributes" object, into n->attrs. */
est_status est__json_parse_attrs(json_loader *J, const cJSON *obj, est_node *n);

#endif
