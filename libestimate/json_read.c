/*
 * json_read.c: loading the JSON graph format of docs/json-format.md, for
 * models that exist only on paper (json_write.c writes it).
 *
 * Loading parses the text with cJSON, checks every field, and builds the graph
 * with the same builder functions as the ONNX loader, so both loaders end in
 * est__graph_finish(). Writing prints a graph straight into a malloc'd string,
 * one input, initializer and node per line; what it writes loads back to the
 * same graph.
 *
 * Exactness: cJSON holds numbers as doubles, so integers are exact only up to
 * 2^53 - 1. Larger ones are written as decimal strings ("9223372036854775807"),
 * and infinities and NaN as "inf", "-inf" and "nan". Float attributes and the
 * values of float tensors other than float64 are float32 by ONNX's rules: they
 * are rounded to float32 when loaded and written with the fewest digits that
 * give the same float32 back.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "ir.h"
#include "json_format.h"

/* ---- duplicate names ------------------------------------------------------- */

typedef struct named_index {
    const char *name;
    size_t index;
} named_index;

static int cmp_named_index(const void *a, const void *b) {
    const named_index *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Finds a repeated name in names[0..n) in O(n log n). Returns 1 and the two
 * indices (*first < *second) if one repeats, 0 if none does, -1 when out of
 * memory. */
int est__json_find_duplicate(const char *const *names, size_t n, size_t *first, size_t *second) {
    if (n < 2) return 0;
    named_index *v = malloc(n * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) v[i] = (named_index){names[i], i};
    qsort(v, n, sizeof *v, cmp_named_index);
    int found = 0;
    for (size_t i = 1; i < n && !found; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0) {
            *first = v[i - 1].index;
            *second = v[i].index;
            found = 1;
        }
    free(v);
    return found;
}

/* ======================================================================== */
/* Loading                                                                  */
/* ======================================================================== */

typedef struct json_loader {
    est_graph *g;
    est_error *err;
    const char *src;
    const cJSON *opsets;  /* the "opset_import" object */
    char where[256];      /* what an error is about: "node 3 'conv1' (Conv)" */
} json_loader;

static est_status fail(json_loader *J, est_status code, const char *fmt, ...) JSON_PRINTF(3, 4);
static est_status fail(json_loader *J, est_status code, const char *fmt, ...) {
    char reason[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return est__fail(J->err, code, "%s: %s%s%s", J->src, J->where, J->where[0] ? ": " : "", reason);
}

static est_status oom(json_loader *J) {
    return est__fail(J->err, EST_ENOMEM, "%s: out of memory while loading", J->src);
}

static void set_where(json_loader *J, const char *fmt, ...) JSON_PRINTF(2, 3);
static void set_where(json_loader *J, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(J->where, sizeof J->where, fmt, ap);
    va_end(ap);
}

/* Appends ": attribute 'x'" and the like; returns the old length for restoring. */
static size_t push_where(json_loader *J, const char *what, const char *name) {
    size_t len = strlen(J->where);
    snprintf(J->where + len, sizeof J->where - len, "%s%s '%.64s'", len ? ": " : "", what, name);
    return len;
}

static const char *key_of(const cJSON *item) { return item->string ? item->string : ""; }

/* ---- fields ------------------------------------------------------------------ */

/* Fails unless every key of `obj` is in `allowed` (NULL-terminated, at most 32
 * names) and none repeats: a misspelt field is an error, not ignored. */
static est_status check_fields(json_loader *J, const cJSON *obj, const char *const *allowed) {
    uint32_t seen = 0;
    for (const cJSON *c = obj->child; c; c = c->next) {
        int k = 0;
        while (allowed[k] && strcmp(allowed[k], key_of(c)) != 0) k++;
        if (!allowed[k]) {
            char list[256] = "";
            for (int i = 0; allowed[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
            return fail(J, EST_EPARSE, "unknown field '%.64s' (known fields: %s)", key_of(c), list);
        }
        if (seen & (UINT32_C(1) << k)) return fail(J, EST_EPARSE, "field '%s' appears twice", allowed[k]);
        seen |= UINT32_C(1) << k;
    }
    return EST_OK;
}

static est_status get_required(json_loader *J, const cJSON *obj, const char *key, const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    return *out ? EST_OK : fail(J, EST_EPARSE, "missing field '%s'", key);
}

/* A string field; when optional and absent, *out is left as it is. */
static est_status get_string(json_loader *J, const cJSON *obj, const char *key, bool required,
                             const char **out) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item) return required ? fail(J, EST_EPARSE, "missing field '%s'", key) : EST_OK;
    if (!cJSON_IsString(item)) return fail(J, EST_EPARSE, "field '%s' must be a string", key);
    *out = item->valuestring;
    return EST_OK;
}

/* An array field; when optional and absent, *out is NULL. */
static est_status get_array(json_loader *J, const cJSON *obj, const char *key, bool required,
                            const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*out) return required ? fail(J, EST_EPARSE, "missing field '%s'", key) : EST_OK;
    if (!cJSON_IsArray(*out)) return fail(J, EST_EPARSE, "field '%s' must be an array", key);
    return EST_OK;
}

/* ---- numbers ------------------------------------------------------------------ */

typedef enum num_result {
    NUM_OK,
    NUM_WRONG_TYPE,  /* not a number (nor a string holding one) */
    NUM_NOT_WHOLE,   /* 1.5 where an integer belongs */
    NUM_INEXACT,     /* beyond 2^53 as a JSON number: digits may be lost */
    NUM_RANGE,       /* beyond int64, or beyond float32 for a float32 */
} num_result;

static const char *int_problem(num_result r) {
    switch (r) {
    case NUM_NOT_WHOLE: return "must be a whole number";
    case NUM_INEXACT: return "is too large to be exact as a JSON number; write it as a decimal string";
    case NUM_RANGE: return "is outside the int64 range";
    default: return "must be an integer";
    }
}

static const char *float_problem(num_result r) {
    return r == NUM_RANGE ? "is outside the float32 range"
                          : "must be a number, \"inf\", \"-inf\" or \"nan\"";
}

/* A JSON number that is a whole number below 2^53 in magnitude. */
static num_result int_from_number(double d, int64_t *out) {
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

static num_result int_from_json(const cJSON *item, int64_t *out) {
    if (cJSON_IsNumber(item)) return int_from_number(item->valuedouble, out);
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
static num_result float_from_json(const cJSON *item, bool single, double *out) {
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

static est_status parse_dtype(json_loader *J, const cJSON *obj, est_dtype *out) {
    const char *name = NULL;
    est_status st = get_string(J, obj, "dtype", true, &name);
    if (st != EST_OK) return st;
    *out = est_dtype_from_name(name);
    if (*out == EST_DT_UNDEFINED)
        return fail(J, EST_EPARSE, "unknown dtype '%.64s' (use a name such as float32, float16, int64)", name);
    return EST_OK;
}

/* One dim of a graph input: a positive integer, a symbolic name, or null. */
static est_status parse_input_dim(json_loader *J, const cJSON *item, int d, est_dimdecl *out) {
    *out = (est_dimdecl){-1, -1};
    if (cJSON_IsNull(item)) return EST_OK;
    if (cJSON_IsString(item)) {
        if (!item->valuestring[0]) return fail(J, EST_EPARSE, "dim %d is an empty name", d);
        if ((out->sym = est__graph_symbol(J->g, item->valuestring)) == -2)
            return fail(J, EST_ELIMIT, "more than %llu symbolic dim names (est_limits.max_symbols)",
                        (unsigned long long)J->g->limits.max_symbols);
        if (out->sym < 0) return oom(J);
        return EST_OK;
    }
    if (!cJSON_IsNumber(item))
        return fail(J, EST_EPARSE, "dim %d must be a positive integer, a symbolic name or null", d);
    double v = item->valuedouble;
    if (v <= 0)
        return fail(J, EST_ESHAPE, "dim %d is %.15g; dims must be positive", d, v);
    if (v > (double)J->g->limits.max_dim_value)
        return fail(J, EST_ELIMIT, "dim %d is %.15g, above the limit of %lld (est_limits.max_dim_value)", d, v,
                    (long long)J->g->limits.max_dim_value);
    if (v != floor(v)) return fail(J, EST_EPARSE, "dim %d is %.15g; dims must be whole numbers", d, v);
    out->value = (int64_t)v;
    return EST_OK;
}

static est_status parse_input_dims(json_loader *J, const cJSON *arr, est_tensor *t) {
    int rank = cJSON_GetArraySize(arr);
    if (rank > (int)J->g->limits.max_rank)
        return fail(J, EST_ELIMIT, "rank %d is above the limit of %u (est_limits.max_rank)", rank,
                    J->g->limits.max_rank);
    t->rank = rank;
    if (rank && !(t->dims = calloc((size_t)rank, sizeof *t->dims))) return oom(J);
    int d = 0;
    for (const cJSON *item = arr->child; item; item = item->next, d++) {
        est_status st = parse_input_dim(J, item, d, &t->dims[d]);
        if (st != EST_OK) return st;
    }
    return EST_OK;
}

/* A tensor as initializers and tensor attributes declare it. */
typedef struct tensor_decl {
    est_dtype dtype;
    int32_t rank;
    int64_t dims[EST_MAX_RANK];
    int64_t count;      /* elements */
    est_const *value;   /* from "values"; owned by the caller once parsed */
} tensor_decl;

/* Fixed dims: non-negative integers whose product fits in int64. */
static est_status parse_fixed_dims(json_loader *J, const cJSON *arr, tensor_decl *t) {
    int rank = cJSON_GetArraySize(arr);
    if (rank > (int)J->g->limits.max_rank)
        return fail(J, EST_ELIMIT, "rank %d is above the limit of %u (est_limits.max_rank)", rank,
                    J->g->limits.max_rank);
    t->rank = rank;
    t->count = 1;
    int d = 0;
    for (const cJSON *item = arr->child; item; item = item->next, d++) {
        if (!cJSON_IsNumber(item)) return fail(J, EST_EPARSE, "dim %d must be an integer", d);
        num_result r = int_from_number(item->valuedouble, &t->dims[d]);
        if (r == NUM_INEXACT)
            return fail(J, EST_EOVERFLOW, "dim %d is too large: the element count overflows 64 bits", d);
        if (r != NUM_OK) return fail(J, EST_EPARSE, "dim %d %s", d, int_problem(r));
        if (t->dims[d] < 0)
            return fail(J, EST_ESHAPE, "dim %d is %lld; dims must not be negative", d, (long long)t->dims[d]);
        if (t->dims[d] > J->g->limits.max_dim_value)
            return fail(J, EST_ELIMIT, "dim %d is %lld, above the limit of %lld (est_limits.max_dim_value)", d,
                        (long long)t->dims[d], (long long)J->g->limits.max_dim_value);
        if (est__mul_overflow(t->count, t->dims[d], &t->count))
            return fail(J, EST_EOVERFLOW, "the element count overflows 64 bits");
    }
    return EST_OK;
}

static est_status parse_value(json_loader *J, const cJSON *item, est_const *c, int64_t k) {
    num_result r;
    if (c->f64) {
        r = float_from_json(item, holds_single(c->dtype), &c->f64[k]);
        return r == NUM_OK ? EST_OK : fail(J, EST_EPARSE, "value %lld %s", (long long)k, float_problem(r));
    }
    if (cJSON_IsBool(item)) { /* true/false, for bool tensors written by hand */
        c->i64[k] = cJSON_IsTrue(item);
        return EST_OK;
    }
    r = int_from_json(item, &c->i64[k]);
    return r == NUM_OK ? EST_OK : fail(J, EST_EPARSE, "value %lld %s", (long long)k, int_problem(r));
}

/* "values": optional, and only for small numeric tensors. */
static est_status parse_values(json_loader *J, const cJSON *obj, tensor_decl *t) {
    const cJSON *arr = NULL;
    est_status st = get_array(J, obj, "values", false, &arr);
    if (st != EST_OK || !arr) return st;
    if (!est__dtype_is_float(t->dtype) && !est__dtype_is_int(t->dtype))
        return fail(J, EST_EPARSE, "'values' are only allowed for numeric dtypes, not %s",
                    est_dtype_name(t->dtype));
    if (t->count > EST_FOLD_MAX_ELEMENTS)
        return fail(J, EST_ELIMIT, "'values' are kept for at most %d elements; this tensor has %lld "
                    "(leave the values of weights out)", EST_FOLD_MAX_ELEMENTS, (long long)t->count);
    int n = cJSON_GetArraySize(arr);
    if (n != t->count)
        return fail(J, EST_EPARSE, "field 'values' has %d elements; its dims give %lld", n, (long long)t->count);
    if (!(t->value = est__const_new(t->dtype, t->count))) return oom(J);
    int64_t k = 0;
    for (const cJSON *item = arr->child; item; item = item->next, k++)
        if ((st = parse_value(J, item, t->value, k)) != EST_OK) return st;
    return EST_OK;
}

/* "dtype", "dims" and optional "values". On failure t->value may still hold
 * a partial constant, which the caller frees. */
static est_status parse_tensor_decl(json_loader *J, const cJSON *obj, tensor_decl *t) {
    const cJSON *dims = NULL;
    est_status st = parse_dtype(J, obj, &t->dtype);
    if (st == EST_OK) st = get_array(J, obj, "dims", true, &dims);
    if (st == EST_OK) st = parse_fixed_dims(J, dims, t);
    if (st == EST_OK) st = parse_values(J, obj, t);
    return st;
}

/* ---- header ------------------------------------------------------------------------ */

static est_status check_format(json_loader *J, const cJSON *root) {
    const char *format = NULL;
    const cJSON *version = NULL;
    est_status st = get_string(J, root, "format", true, &format);
    if (st != EST_OK) return st;
    if (strcmp(format, JSON_FORMAT_NAME) != 0)
        return fail(J, EST_EPARSE, "field 'format' is '%.64s'; a memest graph has \"%s\"", format,
                    JSON_FORMAT_NAME);
    if ((st = get_required(J, root, "version", &version)) != EST_OK) return st;
    int64_t v = 0;
    if (!cJSON_IsNumber(version) || int_from_number(version->valuedouble, &v) != NUM_OK || v < 1)
        return fail(J, EST_EPARSE, "field 'version' must be a positive integer");
    if (v > JSON_FORMAT_VERSION)
        return fail(J, EST_EUNSUPPORTED, "format version %lld is newer than this memest reads (%d)",
                    (long long)v, JSON_FORMAT_VERSION);
    return EST_OK;
}

static est_status parse_names(json_loader *J, const cJSON *root) {
    const char *name = "", *producer = "";
    est_status st = get_string(J, root, "name", false, &name);
    if (st == EST_OK) st = get_string(J, root, "producer", false, &producer);
    if (st != EST_OK) return st;
    char *n = est__strdup(name), *p = est__strdup(producer);
    if (!n || !p) {
        free(n);
        free(p);
        return oom(J);
    }
    free(J->g->name);
    free(J->g->producer);
    J->g->name = n;
    J->g->producer = p;
    return EST_OK;
}

static est_status check_opset_entry(json_loader *J, const cJSON *entry, const cJSON *opsets) {
    int64_t v = 0;
    if (!cJSON_IsNumber(entry) || int_from_number(entry->valuedouble, &v) != NUM_OK || v < 1)
        return fail(J, EST_EPARSE, "opset_import: the version of domain '%.64s' must be a positive integer",
                    key_of(entry));
    bool std = is_default_domain(key_of(entry));
    for (const cJSON *c = opsets->child; c != entry; c = c->next)
        if (strcmp(key_of(c), key_of(entry)) == 0 || (std && is_default_domain(key_of(c))))
            return fail(J, EST_EPARSE, "opset_import: domain '%.64s' is listed twice", key_of(entry));
    if (std) J->g->opset = (int64_t)entry->valuedouble;
    return EST_OK;
}

static est_status parse_opsets(json_loader *J, const cJSON *root) {
    est_status st = get_required(J, root, "opset_import", &J->opsets);
    if (st != EST_OK) return st;
    if (!cJSON_IsObject(J->opsets))
        return fail(J, EST_EPARSE, "field 'opset_import' must be an object such as {\"\": 17}");
    if (cJSON_GetArraySize(J->opsets) > JSON_MAX_DOMAINS)
        return fail(J, EST_ELIMIT, "opset_import lists more than %d domains", JSON_MAX_DOMAINS);
    for (const cJSON *c = J->opsets->child; c; c = c->next)
        if ((st = check_opset_entry(J, c, J->opsets)) != EST_OK) return st;
    if (J->g->opset == 0)
        return fail(J, EST_EUNSUPPORTED, "opset_import has no default domain (\"\"), e.g. {\"\": 17}");
    if (J->g->opset < 7)
        return fail(J, EST_EUNSUPPORTED, "opset %lld is not supported (7 and up are)", (long long)J->g->opset);
    return EST_OK;
}

/* The opset of a node's domain; 0 when the domain is not imported, as ONNX. */
static int64_t domain_opset(const json_loader *J, const char *domain) {
    if (is_default_domain(domain)) return J->g->opset;
    for (const cJSON *c = J->opsets->child; c; c = c->next)
        if (strcmp(key_of(c), domain) == 0) return (int64_t)c->valuedouble;
    return 0;
}

/* ---- inputs and initializers ----------------------------------------------------------- */

static est_status check_new_tensor_name(json_loader *J, const char *name) {
    if (!name[0]) return fail(J, EST_EPARSE, "field 'name' is empty");
    int32_t t = est__graph_find(J->g, name);
    if (t < 0) return EST_OK;
    const char *was = J->g->tensors[t].kind == EST_T_INPUT ? "a graph input" : "an initializer";
    return fail(J, EST_EGRAPH, "the name '%.64s' is already used by %s", name, was);
}

static est_status add_graph_input(json_loader *J, const char *name, int32_t *out) {
    est_graph *g = J->g;
    int32_t *grown = realloc(g->inputs, (size_t)(g->n_inputs + 1) * sizeof *grown);
    if (!grown) return oom(J);
    g->inputs = grown;
    if ((*out = est__graph_tensor(g, name)) < 0) return oom(J);
    g->inputs[g->n_inputs++] = *out;
    g->tensors[*out].kind = EST_T_INPUT;
    return EST_OK;
}

static est_status parse_input(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "dtype", "dims", "comment", NULL};
    set_where(J, "graph input %d", index);
    if (!cJSON_IsObject(obj)) return fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL;
    const cJSON *dims = NULL;
    est_dtype dtype;
    est_status st = get_string(J, obj, "name", true, &name);
    if (st != EST_OK) return st;
    set_where(J, "graph input '%.80s'", name);
    if ((st = check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = check_new_tensor_name(J, name)) != EST_OK) return st;
    if ((st = parse_dtype(J, obj, &dtype)) != EST_OK) return st;
    if ((st = get_array(J, obj, "dims", true, &dims)) != EST_OK) return st;
    int32_t t = -1;
    if ((st = add_graph_input(J, name, &t)) != EST_OK) return st;
    J->g->tensors[t].dtype = dtype;
    return parse_input_dims(J, dims, &J->g->tensors[t]);
}

static est_status add_initializer(json_loader *J, const char *name, tensor_decl *decl) {
    int32_t t = est__graph_tensor(J->g, name);
    if (t < 0) return oom(J);
    est_tensor *tt = &J->g->tensors[t];
    tt->kind = EST_T_INITIALIZER;
    tt->dtype = decl->dtype;
    tt->rank = decl->rank;
    if (decl->rank && !(tt->dims = calloc((size_t)decl->rank, sizeof *tt->dims))) return oom(J);
    for (int32_t d = 0; d < decl->rank; d++) tt->dims[d] = (est_dimdecl){decl->dims[d], -1};
    tt->value = decl->value; /* the graph owns it from here */
    decl->value = NULL;
    return EST_OK;
}

static est_status parse_initializer(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "dtype", "dims", "values", "comment", NULL};
    set_where(J, "initializer %d", index);
    if (!cJSON_IsObject(obj)) return fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL;
    est_status st = get_string(J, obj, "name", true, &name);
    if (st != EST_OK) return st;
    set_where(J, "initializer '%.80s'", name);
    if ((st = check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = check_new_tensor_name(J, name)) != EST_OK) return st;
    tensor_decl decl = {0};
    st = parse_tensor_decl(J, obj, &decl);
    if (st == EST_OK) st = add_initializer(J, name, &decl);
    est__const_free(decl.value);
    return st;
}

typedef est_status (*item_parser)(json_loader *J, const cJSON *item, int index);

static est_status parse_list(json_loader *J, const cJSON *root, const char *key, bool required,
                             item_parser parse) {
    const cJSON *arr = NULL;
    est_status st = get_array(J, root, key, required, &arr);
    if (st != EST_OK || !arr) return st;
    int index = 0;
    for (const cJSON *item = arr->child; item; item = item->next, index++)
        if ((st = parse(J, item, index)) != EST_OK) return st;
    J->where[0] = '\0';
    return EST_OK;
}

/* ---- attributes -------------------------------------------------------------------------- */

static const struct attr_kind *attr_kind_of_key(const char *key) {
    for (size_t k = 0; k < N_ATTR_KINDS; k++)
        if (strcmp(attr_kinds[k].key, key) == 0) return &attr_kinds[k];
    return NULL;
}

/* The error for a typed attribute whose content is wrong. */
static est_status bad_attr(json_loader *J, const est_attr *a, const struct attr_kind *kind,
                           const char *detail) {
    return fail(J, EST_EATTR, "attribute '%.64s' must be %s%s%s", a->name, kind->shape,
                detail ? ": " : "", detail ? detail : "");
}

static est_status parse_attr_ints(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->ints = malloc((size_t)(n ? n : 1) * sizeof *a->ints))) return oom(J);
    a->n = n;
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        num_result r = int_from_json(item, &a->ints[k]);
        if (r != NUM_OK) {
            char detail[128];
            snprintf(detail, sizeof detail, "element %d %s", k, int_problem(r));
            return bad_attr(J, a, kind, detail);
        }
    }
    return EST_OK;
}

static est_status parse_attr_floats(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->floats = malloc((size_t)(n ? n : 1) * sizeof *a->floats))) return oom(J);
    a->n = n;
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        num_result r = float_from_json(item, true, &a->floats[k]);
        if (r != NUM_OK) {
            char detail[128];
            snprintf(detail, sizeof detail, "element %d %s", k, float_problem(r));
            return bad_attr(J, a, kind, detail);
        }
    }
    return EST_OK;
}

static est_status parse_attr_strings(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->strings = calloc((size_t)(n ? n : 1), sizeof *a->strings))) return oom(J);
    a->n = n; /* entries stay NULL until set, which freeing allows */
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        if (!cJSON_IsString(item)) {
            char detail[64];
            snprintf(detail, sizeof detail, "element %d must be a string", k);
            return bad_attr(J, a, kind, detail);
        }
        if (!(a->strings[k] = est__strdup(item->valuestring))) return oom(J);
    }
    return EST_OK;
}

static est_status parse_attr_tensor(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    static const char *const fields[] = {"dtype", "dims", "values", NULL};
    if (!cJSON_IsObject(v)) return bad_attr(J, a, kind, NULL);
    size_t len = push_where(J, "attribute", a->name);
    tensor_decl decl = {0};
    est_status st = check_fields(J, v, fields);
    if (st == EST_OK) st = parse_tensor_decl(J, v, &decl);
    J->where[len] = '\0';
    if (st != EST_OK) {
        est__const_free(decl.value);
        return st;
    }
    a->t_dtype = decl.dtype;
    a->t_rank = decl.rank;
    memcpy(a->t_dims, decl.dims, sizeof a->t_dims);
    a->t_value = decl.value;
    return EST_OK;
}

static est_status parse_attr_scalar(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    num_result r;
    switch (a->type) {
    case EST_ATTR_INT:
        r = int_from_json(v, &a->i);
        return r == NUM_OK ? EST_OK : bad_attr(J, a, kind, int_problem(r));
    case EST_ATTR_FLOAT:
        r = float_from_json(v, true, &a->f);
        return r == NUM_OK ? EST_OK : bad_attr(J, a, kind, float_problem(r));
    case EST_ATTR_STRING:
        if (!cJSON_IsString(v)) return bad_attr(J, a, kind, NULL);
        return (a->s = est__strdup(v->valuestring)) ? EST_OK : oom(J);
    default: /* kept by type only */
        return cJSON_IsNull(v) ? EST_OK : bad_attr(J, a, kind, NULL);
    }
}

/* One attribute: "name": {"type": value}, with exactly one type key. */
static est_status parse_attr(json_loader *J, const cJSON *item, est_attr *a) {
    if (!(a->name = est__strdup(key_of(item)))) return oom(J);
    if (!a->name[0]) return fail(J, EST_EATTR, "an attribute has an empty name");
    if (!cJSON_IsObject(item) || !item->child || item->child->next)
        return fail(J, EST_EATTR, "attribute '%.64s' must be an object with one type key, such as "
                    "{\"int\": 1} or {\"ints\": [1, 1]}", a->name);
    const cJSON *v = item->child;
    const struct attr_kind *kind = attr_kind_of_key(key_of(v));
    if (!kind)
        return fail(J, EST_EATTR, "attribute '%.64s' has unknown type '%.32s' (types: int, float, string, "
                    "ints, floats, strings, tensor)", a->name, key_of(v));
    a->type = kind->type;
    /* the cap on elements (arrays) and bytes (strings) of one attribute */
    uint64_t size = cJSON_IsArray(v) ? (uint64_t)cJSON_GetArraySize(v) : cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (cJSON_IsArray(v))
        for (const cJSON *e = v->child; e; e = e->next)
            if (cJSON_IsString(e) && strlen(e->valuestring) > size) size = strlen(e->valuestring);
    if (size > J->g->limits.max_attr_elements)
        return fail(J, EST_ELIMIT, "attribute '%.64s' holds %llu elements or bytes, above the limit of %llu "
                    "(est_limits.max_attr_elements)", a->name, (unsigned long long)size,
                    (unsigned long long)J->g->limits.max_attr_elements);
    switch (kind->type) {
    case EST_ATTR_INTS: return parse_attr_ints(J, v, a, kind);
    case EST_ATTR_FLOATS: return parse_attr_floats(J, v, a, kind);
    case EST_ATTR_STRINGS: return parse_attr_strings(J, v, a, kind);
    case EST_ATTR_TENSOR: return parse_attr_tensor(J, v, a, kind);
    default: return parse_attr_scalar(J, v, a, kind);
    }
}

static est_status check_attr_names(json_loader *J, const cJSON *attrs, int n) {
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!names) return oom(J);
    int k = 0;
    for (const cJSON *c = attrs->child; c; c = c->next) names[k++] = key_of(c);
    size_t first, second;
    int dup = est__json_find_duplicate(names, (size_t)n, &first, &second);
    est_status st = dup < 0 ? oom(J)
                    : dup   ? fail(J, EST_EATTR, "attribute '%.64s' appears twice", names[first])
                            : EST_OK;
    free(names);
    return st;
}

static est_status parse_attrs(json_loader *J, const cJSON *obj, est_node *n) {
    const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(obj, "attributes");
    if (!attrs) return EST_OK;
    if (!cJSON_IsObject(attrs))
        return fail(J, EST_EPARSE, "field 'attributes' must be an object such as {\"axis\": {\"int\": 1}}");
    int count = cJSON_GetArraySize(attrs);
    est_status st = check_attr_names(J, attrs, count);
    if (st != EST_OK) return st;
    if (!(n->attrs = calloc((size_t)(count ? count : 1), sizeof *n->attrs))) return oom(J);
    for (const cJSON *item = attrs->child; item; item = item->next)
        if ((st = parse_attr(J, item, &n->attrs[n->n_attrs++])) != EST_OK) return st;
    return EST_OK;
}

/* ---- nodes ------------------------------------------------------------------------------------ */

/* Node inputs or outputs: tensor names, "" for an omitted optional one. */
static est_status parse_io(json_loader *J, const cJSON *obj, const char *key, bool required,
                           int32_t **ids, int32_t *n) {
    const cJSON *arr = NULL;
    est_status st = get_array(J, obj, key, required, &arr);
    if (st != EST_OK) return st;
    int count = arr ? cJSON_GetArraySize(arr) : 0;
    if (count > EST_MAX_IO) return fail(J, EST_ELIMIT, "more than %d %s", EST_MAX_IO, key);
    if (!(*ids = malloc((size_t)(count ? count : 1) * sizeof **ids))) return oom(J);
    for (const cJSON *item = arr ? arr->child : NULL; item; item = item->next) {
        if (!cJSON_IsString(item))
            return fail(J, EST_EPARSE, "%s %d must be a tensor name (a string; \"\" when omitted)",
                        key[0] == 'i' ? "input" : "output", (int)*n);
        int32_t t = -1;
        if (item->valuestring[0] && (t = est__graph_tensor(J->g, item->valuestring)) < 0) return oom(J);
        (*ids)[(*n)++] = t;
    }
    return EST_OK;
}

static est_status set_node_names(json_loader *J, est_node *n, const char *name, const char *op,
                                 const char *domain, int index) {
    char generated[96];
    if (!name) { /* unnamed, as the ONNX loader names it */
        snprintf(generated, sizeof generated, "%.60s_%d", op, index);
        name = generated;
    }
    if (!(n->name = est__strdup(name)) || !(n->op_type = est__strdup(op)) ||
        !(n->domain = est__strdup(domain)))
        return oom(J);
    n->opset = domain_opset(J, domain);
    return EST_OK;
}

static est_status parse_node(json_loader *J, const cJSON *obj, int index) {
    static const char *const fields[] = {"name", "op", "domain", "scope", "inputs", "outputs", "attributes",
                                         "comment", NULL};
    set_where(J, "node %d", index);
    if (!cJSON_IsObject(obj)) return fail(J, EST_EPARSE, "must be an object");
    const char *name = NULL, *op = NULL, *domain = "";
    est_status st = get_string(J, obj, "name", false, &name);
    if (st != EST_OK) return st;
    if (name && !name[0]) return fail(J, EST_EPARSE, "field 'name' is empty (leave it out instead)");
    if (name) set_where(J, "node %d '%.80s'", index, name);
    if ((st = get_string(J, obj, "op", true, &op)) != EST_OK) return st;
    if (!op[0]) return fail(J, EST_EPARSE, "field 'op' is empty");
    if (name) set_where(J, "node %d '%.80s' (%.40s)", index, name, op);
    else set_where(J, "node %d (%.40s)", index, op);
    if ((st = check_fields(J, obj, fields)) != EST_OK) return st;
    if ((st = get_string(J, obj, "domain", false, &domain)) != EST_OK) return st;
    const char *scope = NULL; /* the module path the node ran in (docs/json-format.md) */
    if ((st = get_string(J, obj, "scope", false, &scope)) != EST_OK) return st;
    est_node *n = est__graph_add_node(J->g);
    if (!n) return oom(J);
    st = set_node_names(J, n, name, op, domain, index);
    if (st == EST_OK && scope && !(n->scope = est__strdup(scope))) st = oom(J);
    if (st == EST_OK) st = parse_io(J, obj, "inputs", false, &n->inputs, &n->n_inputs);
    if (st == EST_OK) st = parse_io(J, obj, "outputs", true, &n->outputs, &n->n_outputs);
    if (st == EST_OK) st = parse_attrs(J, obj, n);
    return st;
}

/* Node names label the report and every error, so they must be unique. */
static est_status check_node_names(json_loader *J) {
    est_graph *g = J->g;
    const char **names = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *names);
    if (!names) return oom(J);
    for (int32_t i = 0; i < g->n_nodes; i++) names[i] = g->nodes[i].name;
    size_t first, second;
    int dup = est__json_find_duplicate(names, (size_t)g->n_nodes, &first, &second);
    free(names);
    if (dup < 0) return oom(J);
    if (!dup) return EST_OK;
    const est_node *n = &g->nodes[second];
    set_where(J, "node %zu '%.80s' (%.40s)", second, n->name, n->op_type);
    return fail(J, EST_EGRAPH, "the node name is already used by node %zu", first);
}

/* ---- graph outputs ------------------------------------------------------------------------------ */

static est_status parse_outputs(json_loader *J, const cJSON *root) {
    const cJSON *arr = NULL;
    est_status st = get_array(J, root, "outputs", true, &arr);
    if (st != EST_OK) return st;
    int count = cJSON_GetArraySize(arr), k = 0;
    est_graph *g = J->g;
    if (!(g->outputs = malloc((size_t)(count ? count : 1) * sizeof *g->outputs))) return oom(J);
    for (const cJSON *item = arr->child; item; item = item->next, k++) {
        if (!cJSON_IsString(item) || !item->valuestring[0])
            return fail(J, EST_EPARSE, "graph output %d must be a tensor name", k);
        int32_t t = est__graph_find(g, item->valuestring);
        if (t < 0)
            return fail(J, EST_EGRAPH, "graph output '%.80s' is not produced by any node, graph input "
                        "or initializer", item->valuestring);
        g->outputs[g->n_outputs++] = t;
    }
    return EST_OK;
}

/* ---- top level --------------------------------------------------------------------------------- */

/* Depth of nested arrays and objects; cJSON stops parsing at 1000 levels, so
 * this recursion is bounded. */
static uint32_t nesting(const cJSON *item) {
    uint32_t deepest = 0;
    for (const cJSON *c = item->child; c; c = c->next) {
        uint32_t d = nesting(c);
        if (d > deepest) deepest = d;
    }
    return item->child || cJSON_IsArray(item) || cJSON_IsObject(item) ? deepest + 1 : 0;
}

static est_status check_sizes(json_loader *J, const cJSON *root) {
    const est_limits *lim = &J->g->limits;
    uint32_t depth = nesting(root);
    if (depth > lim->max_nesting)
        return fail(J, EST_ELIMIT, "arrays and objects nested %u deep, above the limit of %u (est_limits.max_nesting)",
                    depth, lim->max_nesting);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    uint64_t n_nodes = cJSON_IsArray(nodes) ? (uint64_t)cJSON_GetArraySize(nodes) : 0;
    if (n_nodes > lim->max_nodes)
        return fail(J, EST_ELIMIT, "%llu nodes, above the limit of %llu (est_limits.max_nodes)",
                    (unsigned long long)n_nodes, (unsigned long long)lim->max_nodes);
    uint64_t n_tensors = 0;
    static const char *const lists[] = {"inputs", "initializers"};
    for (int i = 0; i < 2; i++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, lists[i]);
        if (cJSON_IsArray(arr)) n_tensors += (uint64_t)cJSON_GetArraySize(arr);
    }
    if (n_tensors > lim->max_tensors)
        return fail(J, EST_ELIMIT, "%llu inputs and initializers, above the limit of %llu tensors "
                    "(est_limits.max_tensors)", (unsigned long long)n_tensors, (unsigned long long)lim->max_tensors);
    return EST_OK;
}

static est_status build_graph(json_loader *J, const cJSON *root) {
    static const char *const fields[] = {"format", "version", "name", "producer", "opset_import", "inputs",
                                         "initializers", "nodes", "outputs", "comment", NULL};
    if (!cJSON_IsObject(root)) return fail(J, EST_EPARSE, "the top level must be a JSON object");
    est_status st = check_sizes(J, root);
    if (st == EST_OK) st = check_fields(J, root, fields);
    if (st == EST_OK) st = check_format(J, root);
    if (st == EST_OK) st = parse_names(J, root);
    if (st == EST_OK) st = parse_opsets(J, root);
    if (st == EST_OK) st = parse_list(J, root, "inputs", true, parse_input);
    if (st == EST_OK) st = parse_list(J, root, "initializers", false, parse_initializer);
    if (st == EST_OK) st = parse_list(J, root, "nodes", true, parse_node);
    if (st == EST_OK) st = check_node_names(J);
    if (st == EST_OK) {
        J->where[0] = '\0';
        st = parse_outputs(J, root);
    }
    return st == EST_OK ? est__graph_finish(J->g, J->err) : st;
}

static bool is_blank(const char *text, size_t size) {
    for (size_t i = 0; i < size; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n') return false;
    return true;
}

/* "line 3, column 14 (byte 52), near '...'" for a syntax error at `at`. */
static est_status syntax_error(const char *text, size_t size, size_t at, const char *src, const char *what,
                               est_error *err) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; i++) {
        column = text[i] == '\n' ? 1 : column + 1;
        line += text[i] == '\n';
    }
    char near[24];
    size_t k = 0;
    for (; k < sizeof near - 1 && at + k < size && text[at + k] != '\n'; k++) {
        unsigned char c = (unsigned char)text[at + k];
        near[k] = c >= 32 && c < 127 ? (char)c : '?';
    }
    near[k] = '\0';
    return est__fail(err, EST_EPARSE, "%s: %s at line %zu, column %zu (byte %zu), near '%s'", src, what, line,
                     column, at, near);
}

/* cJSON writes its global error position (the one cJSON_GetErrorPtr()
 * reads) on every parse: the library's only shared mutable state, so parses
 * take turns. */
static pthread_mutex_t cjson_parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parses exactly `size` bytes (no NUL needed) as one JSON value. */
static est_status parse_text(const char *text, size_t size, const char *src, cJSON **out, est_error *err) {
    /* The parse end comes back through the argument, not from the global. */
    const char *end = NULL;
    pthread_mutex_lock(&cjson_parse_lock);
    *out = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    pthread_mutex_unlock(&cjson_parse_lock);
    size_t at = end && end >= text && end <= text + size ? (size_t)(end - text) : 0;
    if (!*out) return syntax_error(text, size, at, src, "invalid JSON (or out of memory)", err);
    while (at < size && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' || text[at] == '\n')) at++;
    if (at == size) return EST_OK;
    cJSON_Delete(*out);
    *out = NULL;
    return syntax_error(text, size, at, src, "unexpected text after the graph", err);
}

est_status est_load_json_buffer(const char *text, size_t size, const char *name, est_graph **out,
                                est_error *err) {
    return est__load_json(text, size, name, NULL, out, err);
}

est_status est_load_json_buffer_limited(const char *text, size_t size, const char *name, const est_limits *lim,
                                        est_graph **out, est_error *err) {
    return est__load_json(text, size, name, lim, out, err);
}

est_status est__load_json(const char *text, size_t size, const char *name, const est_limits *user_lim,
                          est_graph **out, est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_load_json_buffer: out is NULL");
    *out = NULL;
    const char *src = name ? name : "<memory>";
    if (!text && size) return est__fail(err, EST_EINVAL, "%s: text is NULL", src);
    est_limits lim;
    est__limits_resolve(user_lim, &lim);
    if (size > lim.max_file_bytes)
        return est__fail(err, EST_ELIMIT, "%s: %zu bytes, above the limit of %llu (est_limits.max_file_bytes)", src,
                         size, (unsigned long long)lim.max_file_bytes);
    if (is_blank(text, size)) return est__fail(err, EST_EPARSE, "%s: the file is empty", src);
    cJSON *root = NULL;
    est_status st = parse_text(text, size, src, &root, err);
    if (st != EST_OK) return st;
    json_loader J = {.g = est__graph_new(src), .err = err, .src = src};
    if (J.g) J.g->limits = lim;
    st = J.g ? build_graph(&J, root) : est__fail(err, EST_ENOMEM, "%s: out of memory", src);
    cJSON_Delete(root);
    if (st != EST_OK) {
        est_graph_free(J.g);
        return st;
    }
    *out = J.g;
    return EST_OK;
}

