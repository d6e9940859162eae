/*
 * json_format.h: what the JSON graph format's reader (json_read.c) and
 * writer (json_write.c) share: its name and version, the exactness bound of
 * its integers, and the attribute kinds (docs/json-format.md). Internal.
 */
#ifndef MEMEST_JSON_FORMAT_H
#define MEMEST_JSON_FORMAT_H

#include <stdbool.h>
#include <string.h>

#include "ir.h"

#define JSON_FORMAT_NAME "memest-graph"
#define JSON_FORMAT_VERSION 1
/* The largest integer every JSON reader holds exactly (doubles). */
#define JSON_EXACT_INT_MAX (((int64_t)1 << 53) - 1)
/* opset_import domains; bounds the per-node domain lookup. */
#define JSON_MAX_DOMAINS 256

#if defined(__GNUC__)
#define JSON_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define JSON_PRINTF(fmt, args)
#endif

/* Attribute types by the key that names them in {"ints": [...]}. */
struct attr_kind {
    const char *key;
    est_attr_type type;
    const char *shape;  /* for error messages: what a well-formed one looks like */
};
static const struct attr_kind attr_kinds[] = {
    {"int", EST_ATTR_INT, "{\"int\": N}"},
    {"float", EST_ATTR_FLOAT, "{\"float\": X}"},
    {"string", EST_ATTR_STRING, "{\"string\": \"...\"}"},
    {"ints", EST_ATTR_INTS, "{\"ints\": [...]}"},
    {"floats", EST_ATTR_FLOATS, "{\"floats\": [...]}"},
    {"strings", EST_ATTR_STRINGS, "{\"strings\": [...]}"},
    {"tensor", EST_ATTR_TENSOR, "{\"tensor\": {\"dtype\": ..., \"dims\": [...]}}"},
    /* Kept by type only: memest never looks inside them. */
    {"graph", EST_ATTR_GRAPH, "{\"graph\": null}"},
    {"graphs", EST_ATTR_GRAPHS, "{\"graphs\": null}"},
    {"tensors", EST_ATTR_TENSORS, "{\"tensors\": null}"},
    {"sparse_tensor", EST_ATTR_SPARSE_TENSOR, "{\"sparse_tensor\": null}"},
    {"sparse_tensors", EST_ATTR_SPARSE_TENSORS, "{\"sparse_tensors\": null}"},
    {"type_proto", EST_ATTR_TYPE_PROTO, "{\"type_proto\": null}"},
    {"type_protos", EST_ATTR_TYPE_PROTOS, "{\"type_protos\": null}"},
};
#define N_ATTR_KINDS (sizeof attr_kinds / sizeof attr_kinds[0])

static inline const struct attr_kind *attr_kind_of_type(est_attr_type type) {
    for (size_t k = 0; k < N_ATTR_KINDS; k++)
        if (attr_kinds[k].type == type) return &attr_kinds[k];
    return NULL;
}

static inline bool is_default_domain(const char *domain) {
    return !domain[0] || strcmp(domain, "ai.onnx") == 0;
}

/* Values of every float dtype but float64 are float32 in the file. */
static inline bool holds_single(est_dtype dt) { return dt != EST_DT_DOUBLE; }


/* Finds a repeated name in names[0..n) in O(n log n). Returns 1 and the two
 * indices (*first < *second) if one repeats, 0 if none does, -1 when out of
 * memory. */
int est__json_find_duplicate(const char *const *names, size_t n, size_t *first, size_t *second);

#endif
