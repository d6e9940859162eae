/*
 * json_read_attrs.c: a node's "attributes" object in the JSON graph format
 * ({"axis": {"int": 1}}, one type key per attribute), read into est_attr:
 * the type keys, the per-type element checks and the size cap. json_read.c
 * calls it for each node; what they share is in json_read.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

/* ---- attributes -------------------------------------------------------------------------- */

static const struct attr_kind *attr_kind_of_key(const char *key) {
    for (size_t k = 0; k < N_ATTR_KINDS; k++)
        if (strcmp(attr_kinds[k].key, key) == 0) return &attr_kinds[k];
    return NULL;
}

/* The error for a typed attribute whose content is wrong. */
static est_status bad_attr(json_loader *J, const est_attr *a, const struct attr_kind *kind,
                           const char *detail) {
    return est__json_fail(J, EST_EATTR, "attribute '%.64s' must be %s%s%s", a->name, kind->shape,
                          detail ? ": " : "", detail ? detail : "");
}

static est_status parse_attr_ints(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->ints = est__graph_attr_room(J->g, (size_t)n * sizeof *a->ints))) return est__json_oom(J);
    a->n = n;
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        num_result r = est__json_int_from_json(item, &a->ints[k]);
        if (r != NUM_OK) {
            char detail[128];
            snprintf(detail, sizeof detail, "element %d %s", k, est__json_int_problem(r));
            return bad_attr(J, a, kind, detail);
        }
    }
    return EST_OK;
}

static est_status parse_attr_floats(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->floats = est__graph_attr_room(J->g, (size_t)n * sizeof *a->floats))) return est__json_oom(J);
    a->n = n;
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        num_result r = est__json_float_from_json(item, true, &a->floats[k]);
        if (r != NUM_OK) {
            char detail[128];
            snprintf(detail, sizeof detail, "element %d %s", k, est__json_float_problem(r));
            return bad_attr(J, a, kind, detail);
        }
    }
    return EST_OK;
}

static est_status parse_attr_strings(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    if (!cJSON_IsArray(v)) return bad_attr(J, a, kind, NULL);
    int n = cJSON_GetArraySize(v);
    if (!(a->strings = est__graph_attr_room(J->g, (size_t)n * sizeof *a->strings))) return est__json_oom(J);
    a->n = n;
    int k = 0;
    for (const cJSON *item = v->child; item; item = item->next, k++) {
        if (!cJSON_IsString(item)) {
            char detail[64];
            snprintf(detail, sizeof detail, "element %d must be a string", k);
            return bad_attr(J, a, kind, detail);
        }
        const char *text = item->valuestring;
        if (!(a->strings[k] = est__graph_attr_text(J->g, text, strlen(text)))) return est__json_oom(J);
    }
    return EST_OK;
}

static est_status parse_attr_tensor(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    static const char *const fields[] = {"dtype", "dims", "values", NULL};
    if (!cJSON_IsObject(v)) return bad_attr(J, a, kind, NULL);
    size_t len = est__json_push_where(J, "attribute", a->name);
    tensor_decl decl = {0};
    est_status st = est__json_check_fields(J, v, fields);
    if (st == EST_OK) st = est__json_parse_tensor_decl(J, v, &decl);
    J->where[len] = '\0';
    if (st != EST_OK) {
        est__const_free(decl.value);
        return st;
    }
    a->t_dtype = decl.dtype;
    a->t_rank = decl.rank;
    a->t_value = decl.value;
    size_t dims = (size_t)(decl.rank > 0 ? decl.rank : 0) * sizeof *a->t_dims;
    if (!(a->t_dims = est__graph_attr_copy(J->g, decl.dims, dims))) return est__json_oom(J);
    return EST_OK;
}

static est_status parse_attr_scalar(json_loader *J, const cJSON *v, est_attr *a, const struct attr_kind *kind) {
    num_result r;
    switch (a->type) {
    case EST_ATTR_INT:
        r = est__json_int_from_json(v, &a->i);
        return r == NUM_OK ? EST_OK : bad_attr(J, a, kind, est__json_int_problem(r));
    case EST_ATTR_FLOAT:
        r = est__json_float_from_json(v, true, &a->f);
        return r == NUM_OK ? EST_OK : bad_attr(J, a, kind, est__json_float_problem(r));
    case EST_ATTR_STRING:
        if (!cJSON_IsString(v)) return bad_attr(J, a, kind, NULL);
        return (a->s = est__graph_attr_text(J->g, v->valuestring, strlen(v->valuestring))) ? EST_OK : est__json_oom(J);
    default: /* kept by type only */
        return cJSON_IsNull(v) ? EST_OK : bad_attr(J, a, kind, NULL);
    }
}

/* One attribute: "name": {"type": value}, with exactly one type key. */
static est_status parse_attr(json_loader *J, const cJSON *item, est_attr *a) {
    const char *name = key_of(item);
    if (!(a->name = est__graph_attr_text(J->g, name, strlen(name)))) return est__json_oom(J);
    if (!a->name[0]) return est__json_fail(J, EST_EATTR, "an attribute has an empty name");
    if (!cJSON_IsObject(item) || !item->child || item->child->next)
        return est__json_fail(J, EST_EATTR, "attribute '%.64s' must be an object with one type key, such as "
                              "{\"int\": 1} or {\"ints\": [1, 1]}", a->name);
    const cJSON *v = item->child;
    const struct attr_kind *kind = attr_kind_of_key(key_of(v));
    if (!kind)
        return est__json_fail(J, EST_EATTR, "attribute '%.64s' has unknown type '%.32s' (types: int, float, string, "
                              "ints, floats, strings, tensor)", a->name, key_of(v));
    a->type = kind->type;
    /* the cap on elements (arrays) and bytes (strings) of one attribute */
    uint64_t size = cJSON_IsArray(v) ? (uint64_t)cJSON_GetArraySize(v) : cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (cJSON_IsArray(v))
        for (const cJSON *e = v->child; e; e = e->next)
            if (cJSON_IsString(e) && strlen(e->valuestring) > size) size = strlen(e->valuestring);
    if (size > J->g->limits.max_attr_elements)
        return est__json_fail(J, EST_ELIMIT, "attribute '%.64s' holds %llu elements or bytes, above the limit of %llu "
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
    if (!names) return est__json_oom(J);
    int k = 0;
    for (const cJSON *c = attrs->child; c; c = c->next) names[k++] = key_of(c);
    size_t first, second;
    int dup = est__json_find_duplicate(names, (size_t)n, &first, &second);
    est_status st = dup < 0 ? est__json_oom(J)
                    : dup   ? est__json_fail(J, EST_EATTR, "attribute '%.64s' appears twice", names[first])
                            : EST_OK;
    free(names);
    return st;
}

est_status est__json_parse_attrs(json_loader *J, const cJSON *obj, est_node *n) {
    const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(obj, "attributes");
    if (!attrs) return EST_OK;
    if (!cJSON_IsObject(attrs))
        return est__json_fail(J, EST_EPARSE, "field 'attributes' must be an object such as {\"axis\": {\"int\": 1}}");
    int count = cJSON_GetArraySize(attrs);
    est_status st = check_attr_names(J, attrs, count);
    if (st != EST_OK) return st;
    if (!(n->attrs = est__graph_attrs(J->g, (size_t)count))) return est__json_oom(J);
    for (const cJSON *item = attrs->child; item; item = item->next)
        if ((st = parse_attr(J, item, &n->attrs[n->n_attrs++])) != EST_OK) return st;
    return EST_OK;
}
