/* op_util.c: helpers every op's infer function uses. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

est_status est_op_fail(est_infer_ctx *ctx, est_status code, const char *fmt, ...) {
    char reason[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    const est_node *n = ctx->node;
    return est__fail(ctx->err, code, "%s: node '%s' (%s%s%s): %s", ctx->graph->source, n->name,
                     n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "", n->op_type, reason);
}

est_status est_set_out(est_infer_ctx *ctx, int i, est_dtype dt, int rank, const int64_t *dims) {
    if (i >= ctx->n_out || !ctx->out[i]) return EST_OK;
    if (rank < 0 || rank > EST_MAX_RANK)
        return est_op_fail(ctx, EST_ELIMIT, "output %d would have rank %d (limit %d)", i, rank, EST_MAX_RANK);
    est_tval *o = ctx->out[i];
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return est_op_fail(ctx, EST_ESHAPE, "output %d would have negative dim %lld at axis %d", i,
                               (long long)dims[d], d);
        if (est__mul_overflow(count, dims[d], &count))
            return est_op_fail(ctx, EST_EOVERFLOW, "output %d: element count overflows 64 bits", i);
        o->dims[d] = dims[d];
    }
    if (est__dtype_bytes(dt, (uint64_t)count) == UINT64_MAX)
        return est_op_fail(ctx, EST_EOVERFLOW, "output %d: byte size overflows 64 bits", i);
    o->dtype = dt;
    o->rank = rank;
    o->elements = count;
    o->value = NULL;
    return EST_OK;
}

est_status est_set_out_like(est_infer_ctx *ctx, int i, const est_tval *src) {
    return est_set_out(ctx, i, src->dtype, src->rank, src->dims);
}

static est_const *fold_out(est_infer_ctx *ctx, int i, est_dtype dt, bool zeroed) {
    if (i >= ctx->n_out || !ctx->out[i] || ctx->out[i]->rank < 0) return NULL;
    if (!est__const_foldable(dt, ctx->out[i]->elements)) return NULL; /* too large, or not kept as values */
    /* from here, NULL is out of memory: said apart from "not folded" */
    if (ctx->n_owned == ctx->cap_owned) {
        int64_t cap = ctx->cap_owned ? ctx->cap_owned * 2 : 64;
        est_const **no = realloc(ctx->owned, (size_t)cap * sizeof *no);
        if (!no) {
            ctx->out_of_memory = true;
            return NULL;
        }
        ctx->owned = no;
        ctx->cap_owned = cap;
    }
    est_const *c = (zeroed ? est__const_new : est__const_new_unset)(dt, ctx->out[i]->elements);
    if (!c) {
        ctx->out_of_memory = true;
        return NULL;
    }
    ctx->owned[ctx->n_owned++] = c;
    ctx->out[i]->value = c;
    return c;
}

est_const *est_fold_out(est_infer_ctx *ctx, int i, est_dtype dt) { return fold_out(ctx, i, dt, true); }
est_const *est_fold_out_unset(est_infer_ctx *ctx, int i, est_dtype dt) { return fold_out(ctx, i, dt, false); }

static const char *const attr_type_names[] = {
    "undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
    "strings", "tensors", "graphs", "sparse tensor", "sparse tensors", "type", "types",
};

static est_status wrong_type(est_infer_ctx *ctx, const est_attr *a, const char *want) {
    const char *have = (unsigned)a->type < sizeof attr_type_names / sizeof *attr_type_names
                           ? attr_type_names[a->type] : "unknown";
    return est_op_fail(ctx, EST_EATTR, "attribute '%s' is %s, expected %s", a->name, have, want);
}

const char *const est_known_attr_names[EST_KA_COUNT] = {
    [EST_KA_GROUP] = "group", [EST_KA_KERNEL_SHAPE] = "kernel_shape", [EST_KA_STRIDES] = "strides",
    [EST_KA_DILATIONS] = "dilations", [EST_KA_PADS] = "pads", [EST_KA_AUTO_PAD] = "auto_pad",
    [EST_KA_TRAINING_MODE] = "training_mode",
};

static est_status attr_int(est_infer_ctx *ctx, const est_attr *a, int64_t dflt, int64_t *out) {
    *out = dflt;
    if (!a) return EST_OK;
    if (a->type != EST_ATTR_INT) return wrong_type(ctx, a, "int");
    *out = a->i;
    return EST_OK;
}

est_status est_attr_int(est_infer_ctx *ctx, const char *name, int64_t dflt, int64_t *out) {
    return attr_int(ctx, est_attr_get(ctx->node, name), dflt, out);
}

est_status est_known_int(est_infer_ctx *ctx, est_known_attr k, int64_t dflt, int64_t *out) {
    return attr_int(ctx, est_known_attr_get(ctx->known, ctx->node, k), dflt, out);
}

est_status est_attr_float(est_infer_ctx *ctx, const char *name, double dflt, double *out) {
    const est_attr *a = est_attr_get(ctx->node, name);
    *out = dflt;
    if (!a) return EST_OK;
    if (a->type == EST_ATTR_INT) { *out = (double)a->i; return EST_OK; }
    if (a->type != EST_ATTR_FLOAT) return wrong_type(ctx, a, "float");
    *out = a->f;
    return EST_OK;
}

est_status est_attr_string(est_infer_ctx *ctx, const char *name, const char **out) {
    const est_attr *a = est_attr_get(ctx->node, name);
    *out = NULL;
    if (!a) return EST_OK;
    if (a->type != EST_ATTR_STRING) return wrong_type(ctx, a, "string");
    *out = a->s;
    return EST_OK;
}

static est_status attr_ints(est_infer_ctx *ctx, const est_attr *a, const int64_t **vals, int64_t *n) {
    *vals = NULL;
    *n = -1;
    if (!a) return EST_OK;
    if (a->type != EST_ATTR_INTS) return wrong_type(ctx, a, "ints");
    *vals = a->ints;
    *n = a->n;
    return EST_OK;
}

est_status est_attr_ints(est_infer_ctx *ctx, const char *name, const int64_t **vals, int64_t *n) {
    return attr_ints(ctx, est_attr_get(ctx->node, name), vals, n);
}

est_status est_known_ints(est_infer_ctx *ctx, est_known_attr k, const int64_t **vals, int64_t *n) {
    return attr_ints(ctx, est_known_attr_get(ctx->known, ctx->node, k), vals, n);
}

est_status est_attr_floats(est_infer_ctx *ctx, const char *name, const double **vals, int64_t *n) {
    const est_attr *a = est_attr_get(ctx->node, name);
    *vals = NULL;
    *n = -1;
    if (!a) return EST_OK;
    if (a->type != EST_ATTR_FLOATS) return wrong_type(ctx, a, "floats");
    *vals = a->floats;
    *n = a->n;
    return EST_OK;
}

est_status est_axis(est_infer_ctx *ctx, int64_t axis, int rank, int *out) {
    if (axis < -(int64_t)rank || axis >= rank)
        return est_op_fail(ctx, EST_EATTR, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return EST_OK;
}

est_status est_in_ints(est_infer_ctx *ctx, int i, const int64_t **vals, int64_t *n) {
    const est_tval *t = est_in(ctx, i);
    *vals = NULL;
    *n = -1;
    if (!t || !t->value) return EST_OK;
    if (!t->value->i64)
        return est_op_fail(ctx, EST_ESHAPE, "input %d must be an integer tensor", i);
    *vals = t->value->i64;
    *n = t->value->count;
    return EST_OK;
}

est_status est_broadcast(est_infer_ctx *ctx, int ra, const int64_t *a, int rb, const int64_t *b,
                         int *rank, int64_t *dims) {
    int r = ra > rb ? ra : rb;
    for (int d = 0; d < r; d++) {
        int64_t da = d - (r - ra) >= 0 ? a[d - (r - ra)] : 1;
        int64_t db = d - (r - rb) >= 0 ? b[d - (r - rb)] : 1;
        if (da == db || db == 1) dims[d] = da;
        else if (da == 1) dims[d] = db;
        else
            return est_op_fail(ctx, EST_ESHAPE, "cannot broadcast dim %lld with %lld at axis %d",
                               (long long)da, (long long)db, d);
    }
    *rank = r;
    return EST_OK;
}

int64_t est_const_get_i(const est_const *c, int64_t k) {
    if (c->i64) return c->i64[k];
    double f = c->f64[k];
    if (f != f) return 0;
    if (f >= 9.2e18) return INT64_MAX;
    if (f <= -9.2e18) return INT64_MIN;
    return (int64_t)f;
}

double est_const_get_f(const est_const *c, int64_t k) {
    return c->f64 ? c->f64[k] : (double)c->i64[k];
}

void est_const_set(est_const *c, int64_t k, double f, int64_t i, bool from_float) {
    if (c->f64) {
        c->f64[k] = from_float ? f : (double)i;
        return;
    }
    int64_t v;
    if (!from_float) v = i;
    else if (f != f) v = 0;
    else if (f >= 9.2e18) v = INT64_MAX;
    else if (f <= -9.2e18) v = INT64_MIN;
    else v = (int64_t)f;
    if (c->dtype == EST_DT_BOOL) v = from_float ? (f != 0) : (i != 0);
    c->i64[k] = v;
}

est_status est_infer_like_input0(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    return est_set_out_like(ctx, 0, x);
}

/* The window attributes' defaults: strides and dilations of 1, pads of 0. */
static const int64_t window_ones[EST_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
_Static_assert(EST_MAX_RANK == 12, "window_ones holds EST_MAX_RANK ones");
static const int64_t window_zeros[2 * EST_MAX_RANK];

/* Points *vals at the `want` values of the ints attribute a (`name`), not
 * copied (a Conv or pool reads three at every estimate); absent, *vals
 * keeps its default. */
static inline est_status window_attr(est_infer_ctx *ctx, const est_attr *a, const char *name, const int64_t **vals,
                                     int64_t want) {
    if (!a) return EST_OK;
    if (a->type != EST_ATTR_INTS) return wrong_type(ctx, a, "ints");
    if (a->n != want)
        return est_op_fail(ctx, EST_EATTR, "attribute '%s' has %lld values, expected %lld", name,
                           (long long)a->n, (long long)want);
    *vals = a->ints;
    return EST_OK;
}

est_status est_window_out(est_infer_ctx *ctx, int n, const int64_t *in, const int64_t *kernel,
                          bool ceil_mode, int64_t *out) {
    const int64_t *strides = window_ones, *dil = window_ones, *pads = window_zeros;
    est_status st;
    const est_node_attrs *known = ctx->known;
    const est_node *node = ctx->node;
    const est_attr *auto_pad_attr = est_known_attr_get(known, node, EST_KA_AUTO_PAD);
    if ((st = window_attr(ctx, est_known_attr_get(known, node, EST_KA_STRIDES), "strides", &strides, n)) != EST_OK ||
        (st = window_attr(ctx, est_known_attr_get(known, node, EST_KA_DILATIONS), "dilations", &dil, n)) != EST_OK ||
        (st = window_attr(ctx, est_known_attr_get(known, node, EST_KA_PADS), "pads", &pads, 2 * n)) != EST_OK)
        return st;
    if (auto_pad_attr && auto_pad_attr->type != EST_ATTR_STRING) return wrong_type(ctx, auto_pad_attr, "string");
    const char *auto_pad = auto_pad_attr && auto_pad_attr->s ? auto_pad_attr->s : "NOTSET";
    bool valid = false, same = false, explicit_pads = true; /* NOTSET, the default, compares no string */
    if (auto_pad_attr) {
        valid = strcmp(auto_pad, "VALID") == 0;
        same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
        explicit_pads = valid || strcmp(auto_pad, "NOTSET") == 0;
    }
    for (int i = 0; i < n; i++) {
        if (strides[i] <= 0 || dil[i] <= 0 || kernel[i] <= 0)
            return est_op_fail(ctx, EST_EATTR, "kernel, strides and dilations must be positive (axis %d)", i);
        if (pads[i] < 0 || pads[i + n] < 0)
            return est_op_fail(ctx, EST_EATTR, "pads must not be negative (axis %d)", i);
        if (kernel[i] > EST_MAX_DIM_VALUE || dil[i] > EST_MAX_DIM_VALUE || strides[i] > EST_MAX_DIM_VALUE ||
            pads[i] > EST_MAX_DIM_VALUE || pads[i + n] > EST_MAX_DIM_VALUE)
            return est_op_fail(ctx, EST_ELIMIT, "window attributes above %lld", (long long)EST_MAX_DIM_VALUE);
        int64_t span = dil[i] * (kernel[i] - 1) + 1; /* bounded: both < 2^40 */
        if (same) {
            out[i] = (in[i] + strides[i] - 1) / strides[i];
        } else if (explicit_pads) {
            /* VALID is explicit padding of zero; ceil_mode still applies */
            int64_t pad_begin = valid ? 0 : pads[i], padded = in[i] + (valid ? 0 : pads[i] + pads[i + n]);
            if (padded < span)
                return est_op_fail(ctx, EST_ESHAPE, "window of %lld is larger than the padded input %lld (axis %d)",
                                   (long long)span, (long long)padded, i);
            int64_t num = padded - span;
            out[i] = (ceil_mode ? (num + strides[i] - 1) / strides[i] : num / strides[i]) + 1;
            /* ceil_mode: the last window must start inside the input or left padding */
            if (ceil_mode && (out[i] - 1) * strides[i] >= in[i] + pad_begin) out[i]--;
        } else {
            return est_op_fail(ctx, EST_EATTR, "unknown auto_pad '%s'", auto_pad);
        }
    }
    return EST_OK;
}

uint64_t est_tval_bytes(const est_tval *t) {
    return t && t->rank >= 0 ? est__dtype_bytes(t->dtype, (uint64_t)t->elements) : 0;
}

void est_save_extra(est_saved *s, uint64_t bytes) {
    if (s->n_extra < EST_MAX_EXTRA) s->extra_bytes[s->n_extra++] = bytes;
}

/* ---- helpers for training-step rules ------------------------------------ */

uint64_t est_alloc_bytes(uint64_t bytes) {
    return bytes > UINT64_MAX - EST_ALLOC_ROUND ? UINT64_MAX : (bytes + EST_ALLOC_ROUND - 1) / EST_ALLOC_ROUND * EST_ALLOC_ROUND;
}

uint64_t est_stat_bytes(const est_tval *x, uint64_t count) {
    return est_mul_sat(count, x && x->dtype == EST_DT_DOUBLE ? 8 : 4);
}

/* Copies element j of src into element k of dst, converting between storages. */
void est_const_copy(est_const *dst, int64_t k, const est_const *src, int64_t j) {
    if (dst->i64) dst->i64[k] = est_const_get_i(src, j);
    else dst->f64[k] = est_const_get_f(src, j);
}

/* Row-major strides of a shape. */
void est_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

/* Advances a row-major multi-index by one element. */
void est_next_index(int rank, const int64_t *dims, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return;
        idx[d] = 0;
    }
}

/* The name of node input i, or "" when absent. */
const char *est_in_name(const est_infer_ctx *ctx, int i) {
    if (i >= ctx->node->n_inputs || ctx->node->inputs[i] < 0) return "";
    return ctx->graph->tensors[ctx->node->inputs[i]].name;
}

est_status est_in_known_ints(est_infer_ctx *ctx, int i, const char *what, const int64_t **vals, int64_t *n) {
    if (!est_in(ctx, i)) return est_op_fail(ctx, EST_EGRAPH, "input %d (the %s) is missing", i, what);
    est_status st = est_in_ints(ctx, i, vals, n);
    if (st != EST_OK) return st;
    if (*n < 0)
        return est_op_fail(ctx, EST_ESHAPE,
                           "cannot resolve the %s: the values of input %d ('%s') are not known at "
                           "estimate time",
                           what, i, est_in_name(ctx, i));
    return EST_OK;
}

const char *est_dims_str(char *buf, size_t size, int rank, const int64_t *dims) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < rank && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

int64_t est_dims_product(int from, int to, const int64_t *dims) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= dims[d];
    return p;
}
