/*
 * exec_setup.c: the executor's setup, before the first step (exec.c runs
 * the steps): every node has a kernel; initializers, Constant nodes and graph
 * inputs are made with their dims resolved against the options (--batch,
 * --dim), their values from the weights file, the IR or a seeded random fill;
 * then which tensors need gradients, and where each forward read ends.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "vx_exec.h"

/* ---- dtypes -------------------------------------------------------------------- */

/* The graph's floating tensors take the run's dtype (--dtype, as
 * model.to(dtype) converts them). */
static bool map_dtype(const vx_exec *x, est_dtype dt, vx_dtype *out) {
    switch (dt) {
    case EST_DT_FLOAT: case EST_DT_DOUBLE: case EST_DT_FLOAT16: case EST_DT_BFLOAT16:
        *out = vx_float_dtype(x->ctx);
        return true;
    case EST_DT_BOOL:
        *out = VX_BOOL;
        return true;
    default: /* every integer width is held as int64, as the verify estimate counts it */
        *out = VX_I64;
        return est__dtype_is_integer(dt);
    }
}

/* ---- dims --------------------------------------------------------------------- */

/* A parameter --trainable or --freeze left out: it gets no gradient, so
 * autograd keeps nothing for it and the optimizer has no state for it. */
static bool is_frozen(const vx_options *o, const char *name) {
    for (size_t i = 0; i < o->n_frozen; i++)
        if (o->frozen[i] && strcmp(o->frozen[i], name) == 0) return true;
    return false;
}

static vx_status resolve_dims(vx_exec *x, const est_tensor *t, int *rank, int64_t *dims) {
    if (t->rank < 0 || (!t->dims && t->rank > 0))
        return vx_fail(x->ctx, VX_EINVAL, "tensor '%s' has no declared shape", t->name);
    if (t->rank > VX_MAX_RANK) return vx_fail(x->ctx, VX_EUNSUPPORTED, "tensor '%s' has rank %d", t->name, t->rank);
    *rank = t->rank;
    bool first_sym = true;
    for (int i = 0; i < t->rank; i++) {
        const est_dimdecl *d = &t->dims[i];
        if (d->value >= 0) {
            dims[i] = d->value;
            continue;
        }
        const char *name = d->sym >= 0 && d->sym < x->g->n_symbols ? x->g->symbols[d->sym] : NULL;
        bool found = false;
        for (size_t b = 0; name && b < x->o->n_dims; b++)
            if (strcmp(x->o->dims[b].name, name) == 0) {
                dims[i] = x->o->dims[b].value;
                found = true;
            }
        if (!found && first_sym && x->o->batch > 0 && d->sym >= 0) {
            dims[i] = x->o->batch;
            found = true;
        }
        if (d->sym >= 0) first_sym = false;
        if (!found)
            return vx_fail(x->ctx, VX_EINVAL, "input '%s': dim %d (%s) is not bound (use --batch or --dim NAME=VALUE)",
                           t->name, i, name ? name : "unknown");
    }
    return VX_OK;
}

/* ---- setup ---------------------------------------------------------------------- */

/* Uploads given input values into v (float32 values converted to v's
 * floating dtype). */
static vx_status upload_given(vx_ctx *ctx, vx_tensor *v, const vx_value *given) {
    if (given->dtype == v->dtype) return vx_tensor_upload(ctx, v, given->data);
    void *h = malloc((size_t)(v->numel ? v->numel : 1) * vx_dtype_size(v->dtype));
    if (!h) return vx_fail(ctx, VX_EOOM, "host out of memory");
    vx_from_f32(v->dtype, given->data, h, v->numel);
    vx_status st = vx_tensor_upload(ctx, v, h);
    if (!st) st = vx_sync(ctx);
    free(h);
    return st;
}

/* Whether node n reads or makes a tensor the graph declares floating (one
 * of unknown dtype is left to run_node's check of the values). */
static bool touches_float(const est_graph *g, const est_node *n) {
    for (int side = 0; side < 2; side++) {
        int cnt = side ? n->n_outputs : n->n_inputs;
        const int32_t *ids = side ? n->outputs : n->inputs;
        for (int k = 0; k < cnt; k++) {
            if (ids[k] < 0) continue;
            est_dtype dt = g->tensors[ids[k]].dtype;
            if (dt == EST_DT_FLOAT || dt == EST_DT_DOUBLE || dt == EST_DT_FLOAT16 || dt == EST_DT_BFLOAT16) return true;
        }
    }
    return false;
}

/* In a half run, the ops whose kernels hold floats but take no half tensor
 * yet, listed in `missing` (refused before anything runs). */
static void missing_half_kernels(const vx_exec *x, char *missing, size_t cap) {
    const est_graph *g = x->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        const vx_op *op = vx_find_op(n->op_type), *hop = vx_find_host_op(n->op_type);
        if (strcmp(n->op_type, "Constant") == 0 || !op || (op->dtypes & VX_HALF)) continue;
        if ((hop && hop->host_only) || !touches_float(g, n)) continue;
        if (!strstr(missing, n->op_type) && strlen(missing) + strlen(n->op_type) + 3 < cap) {
            if (missing[0]) strcat(missing, ", ");
            strcat(missing, n->op_type);
        }
    }
}

/* The first consumer of tensor ti, and the slot. */
static const est_node *consumer_of(const est_graph *g, int32_t ti, int *slot) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == ti) {
                *slot = k;
                return &g->nodes[i];
            }
    return NULL;
}

/* Float fill for a weight the file does not hold. */
static void random_range(const est_graph *g, int32_t ti, const vx_tensor *t, float *lo, float *hi, bool *constant) {
    int slot = -1;
    const est_node *n = consumer_of(g, ti, &slot);
    *constant = false;
    if (n && strcmp(n->op_type, "BatchNormalization") == 0) {
        *constant = true;
        *lo = *hi = (slot == 1 || slot == 4) ? 1.0f : 0.0f;
        return;
    }
    if (n && strcmp(n->op_type, "LayerNormalization") == 0) {
        *constant = true;
        *lo = *hi = slot == 1 ? 1.0f : 0.0f;
        return;
    }
    double fan_in = t->rank >= 2 && t->dims[0] > 0 ? (double)t->numel / (double)t->dims[0] : (double)t->numel;
    if (fan_in < 1) fan_in = 1;
    float b = (float)(1.0 / sqrt(fan_in));
    *lo = -b;
    *hi = b;
}

/* Values for an initializer or Constant from the IR (small ones). */
static bool const_values(const est_const *c, vx_tensor *t) {
    if (!c || c->count != t->numel) return false;
    for (int64_t k = 0; k < t->numel; k++) {
        double v = c->i64 ? (double)c->i64[k] : c->f64 ? c->f64[k] : 0;
        if (vx_dtype_is_float(t->dtype)) t->host_f32[k] = (float)v;
        else t->host_i64[k] = c->i64 ? c->i64[k] : (int64_t)v;
    }
    return true;
}

/* Makes a persistent tensor: host-only when small and not trainable, else
 * on the device under cat. Values: file, IR constant, attribute, random. */
static vx_status make_value(vx_exec *x, int32_t ti, vx_dtype dt, int rank, const int64_t *dims, vx_category cat,
                            const est_const *known, bool allow_host, vx_tensor **out) {
    vx_ctx *ctx = x->ctx;
    const char *name = ti >= 0 ? x->g->tensors[ti].name : "";
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= dims[i];
    if (allow_host && numel <= VX_HOST_MAX) {
        vx_tensor *t = vx_tensor_new_host(ctx, dt, rank, dims);
        if (!t) return vx_fail(ctx, VX_EOOM, "host out of memory");
        t->cat = cat;
        bool ok = false;
        if (x->w) {
            if (vx_dtype_is_float(dt)) ok = vx_weights_get(x->w, name, VX_F32, numel, t->host_f32);
            else ok = vx_weights_get(x->w, name, VX_I64, numel, t->host_i64);
        }
        if (!ok) ok = const_values(known, t);
        if (!ok && !vx_dtype_is_float(dt)) {
            vx_tensor_release(ctx, t);
            return vx_fail(ctx, VX_EIO, "constant '%s' has no values in the file", name);
        }
        if (!ok) {
            float lo, hi;
            bool c;
            random_range(x->g, ti, t, &lo, &hi, &c);
            uint64_t s = vx_mix64(x->o->seed ^ (uint64_t)ti * 0x9e37ull);
            for (int64_t k = 0; k < numel; k++) {
                s = vx_mix64(s);
                t->host_f32[k] = c ? lo : lo + (hi - lo) * (float)((s >> 40) / 16777216.0);
            }
        }
        *out = t;
        return VX_OK;
    }
    vx_tensor *t = vx_tensor_new(ctx, dt, rank, dims, cat);
    if (!t) return vx_exec_oom(x, name);
    bool is_float = vx_dtype_is_float(dt);
    size_t esz = is_float ? 4 : 8;
    void *host = numel ? malloc((size_t)numel * esz) : NULL;
    bool ok = false;
    if (host && x->w) ok = vx_weights_get(x->w, name, is_float ? VX_F32 : VX_I64, numel, host);
    vx_status st = VX_OK;
    if (ok) {
        if (dt == VX_BOOL) {
            uint8_t *b = host;
            for (int64_t k = 0; k < numel; k++) b[k] = ((int64_t *)host)[k] != 0;
        }
        if (is_float) vx_from_f32(dt, host, host, numel); /* in place: the storage is narrower */
        st = vx_tensor_upload(ctx, t, host);
        if (!st) st = vx_sync(ctx);
    } else if (known && known->count == numel && host) {
        vx_tensor tmp = *t;
        tmp.host_f32 = is_float ? host : NULL;
        tmp.host_i64 = is_float ? NULL : host;
        const_values(known, &tmp);
        if (dt == VX_BOOL) {
            uint8_t *b = host;
            for (int64_t k = 0; k < numel; k++) b[k] = ((int64_t *)host)[k] != 0;
        }
        if (is_float) vx_from_f32(dt, host, host, numel);
        st = vx_tensor_upload(ctx, t, host);
        if (!st) st = vx_sync(ctx);
    } else if (is_float) {
        float lo, hi;
        bool c;
        random_range(x->g, ti, t, &lo, &hi, &c);
        st = vx_k_random(ctx, t, lo, hi, vx_mix64(x->o->seed ^ (uint64_t)ti * 0x9e37ull));
    } else {
        st = vx_tensor_zero(ctx, t);
    }
    free(host);
    if (st) {
        vx_tensor_release(ctx, t);
        return st;
    }
    *out = t;
    return VX_OK;
}

static const est_attr *node_attr(const est_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static vx_status make_constant_node(vx_exec *x, const est_node *n) {
    int32_t ti = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (ti < 0) return VX_OK;
    const est_attr *a;
    int64_t dims[VX_MAX_RANK];
    est_const tmpc = {0};
    double fv;
    int64_t iv;
    vx_dtype dt;
    int rank = 0;
    const est_const *known = NULL;
    if ((a = node_attr(n, "value")) && a->type == EST_ATTR_TENSOR) {
        if (!map_dtype(x, a->t_dtype, &dt))
            return vx_fail(x->ctx, VX_EUNSUPPORTED, "Constant of dtype %s", est_dtype_name(a->t_dtype));
        if (a->t_rank > VX_MAX_RANK) return vx_fail(x->ctx, VX_EUNSUPPORTED, "Constant of rank %d", a->t_rank);
        rank = a->t_rank;
        for (int i = 0; i < rank; i++) dims[i] = a->t_dims[i];
        known = a->t_value;
    } else if ((a = node_attr(n, "value_float"))) {
        dt = vx_float_dtype(x->ctx);
        fv = a->f;
        tmpc = (est_const){.dtype = EST_DT_FLOAT, .count = 1, .f64 = &fv};
        known = &tmpc;
    } else if ((a = node_attr(n, "value_int"))) {
        dt = VX_I64;
        iv = a->i;
        tmpc = (est_const){.dtype = EST_DT_INT64, .count = 1, .i64 = &iv};
        known = &tmpc;
    } else if ((a = node_attr(n, "value_ints"))) {
        dt = VX_I64;
        rank = 1;
        dims[0] = a->n;
        tmpc = (est_const){.dtype = EST_DT_INT64, .count = a->n, .i64 = a->ints};
        known = &tmpc;
    } else if ((a = node_attr(n, "value_floats"))) {
        dt = vx_float_dtype(x->ctx);
        rank = 1;
        dims[0] = a->n;
        tmpc = (est_const){.dtype = EST_DT_FLOAT, .count = a->n, .f64 = a->floats};
        known = &tmpc;
    } else {
        return vx_fail(x->ctx, VX_EUNSUPPORTED, "Constant without a supported value attribute");
    }
    /* Small ones stay on the host and are uploaded per use as activations
     * (run_node); a large one is made once on the device (other). */
    vx_status st = make_value(x, ti, dt, rank, dims, VX_CAT_OTHER, known, true, &x->val[ti]);
    if (!st) x->persistent[ti] = true;
    return st;
}

vx_status vx_exec_setup(vx_exec *x) {
    vx_ctx *ctx = x->ctx;
    const est_graph *g = x->g;
    vx_status st;
    /* every node has a kernel */
    char missing[256] = "";
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Constant") == 0) continue;
        if (vx_domain_runs(n->domain) && (vx_find_op(n->op_type) || vx_find_host_op(n->op_type))) continue;
        if (!strstr(missing, n->op_type) && strlen(missing) + strlen(n->op_type) + 3 < sizeof missing) {
            if (missing[0]) strcat(missing, ", ");
            strcat(missing, n->op_type);
        }
    }
    if (missing[0]) return vx_fail(ctx, VX_EUNSUPPORTED, "no kernel for: %s", missing);
    if (vx_float_dtype(ctx) != VX_F32) {
        missing_half_kernels(x, missing, sizeof missing);
        if (missing[0])
            return vx_fail(ctx, VX_EUNSUPPORTED, "no %s kernel for %s yet", vx_dtype_name(vx_float_dtype(ctx)), missing);
    }

    /* initializers */
    for (int32_t ti = 0; ti < g->n_tensors; ti++) {
        const est_tensor *t = &g->tensors[ti];
        /* an initializer no node reads (a pass replaced its readers, as
         * onnx/rnn_weights.c does) never exists in PyTorch's step */
        if (t->kind != EST_T_INITIALIZER || t->readers == 0) continue;
        vx_dtype dt;
        if (!map_dtype(x, t->dtype, &dt))
            return vx_fail(ctx, VX_EUNSUPPORTED, "initializer '%s' has dtype %s", t->name, est_dtype_name(t->dtype));
        int rank;
        int64_t dims[VX_MAX_RANK];
        if ((st = resolve_dims(x, t, &rank, dims))) return st;
        vx_category cat = t->role == EST_ROLE_PARAM && vx_dtype_is_float(dt) ? VX_CAT_PARAMS
                          : t->role == EST_ROLE_BUFFER              ? VX_CAT_BUFFERS
                                                                    : VX_CAT_OTHER;
        bool host_ok = cat == VX_CAT_OTHER;
        if ((st = make_value(x, ti, dt, rank, dims, cat, t->value, host_ok, &x->val[ti]))) return st;
        x->persistent[ti] = true;
        if (cat == VX_CAT_PARAMS && x->train && !is_frozen(x->o, t->name)) x->req_grad[ti] = true;
    }
    /* Constant nodes: Python constants, made once */
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].op_type, "Constant") == 0 && (st = make_constant_node(x, &g->nodes[i]))) return st;

    /* graph inputs: the batch */
    for (int32_t k = 0; k < g->n_inputs; k++) {
        int32_t ti = g->inputs[k];
        const est_tensor *t = &g->tensors[ti];
        vx_dtype dt;
        if (!map_dtype(x, t->dtype, &dt))
            return vx_fail(ctx, VX_EUNSUPPORTED, "input '%s' has dtype %s", t->name, est_dtype_name(t->dtype));
        const vx_value *given = NULL;
        for (size_t v = 0; v < x->o->n_inputs; v++)
            if (x->o->inputs[v].name && strcmp(x->o->inputs[v].name, t->name) == 0) given = &x->o->inputs[v];
        int rank;
        int64_t dims[VX_MAX_RANK];
        if (given) {
            rank = given->rank;
            memcpy(dims, given->dims, sizeof(int64_t) * (size_t)rank);
            /* float32 values of a float input are converted to the run's dtype */
            if (!(given->dtype == VX_F32 && vx_dtype_is_float(dt))) dt = given->dtype;
        } else if ((st = resolve_dims(x, t, &rank, dims))) {
            return st;
        }
        vx_tensor *v = vx_tensor_new(ctx, dt, rank, dims, VX_CAT_INPUTS);
        if (!v) return vx_exec_oom(x, "the input batch");
        x->val[ti] = v;
        x->persistent[ti] = true;
        if (given) {
            if ((st = upload_given(ctx, v, given))) return st;
        } else if (vx_dtype_is_float(dt)) {
            if ((st = vx_k_random(ctx, v, -1.0f, 1.0f, vx_mix64(x->o->seed + 7 + (uint64_t)k)))) return st;
        } else {
            /* indices: below the smallest table they index (Gather data dim 0) */
            int64_t bound = INT64_MAX;
            for (int32_t i = 0; i < g->n_nodes; i++) {
                const est_node *n = &g->nodes[i];
                if (strcmp(n->op_type, "Gather") || n->n_inputs < 2 || n->inputs[1] != ti) continue;
                const est_tensor *d = &g->tensors[n->inputs[0]];
                if (d->rank > 0 && d->dims && d->dims[0].value > 0 && d->dims[0].value < bound)
                    bound = d->dims[0].value;
            }
            if (bound == INT64_MAX) bound = 2;
            if (dt == VX_BOOL) bound = 2;
            int64_t *h = malloc((size_t)(v->numel ? v->numel : 1) * sizeof(int64_t));
            if (!h) return vx_fail(ctx, VX_EOOM, "host out of memory");
            uint64_t s = x->o->seed + 99;
            for (int64_t e = 0; e < v->numel; e++) h[e] = (int64_t)((s = vx_mix64(s)) % (uint64_t)bound);
            if (dt == VX_BOOL) {
                uint8_t *b = (uint8_t *)h;
                for (int64_t e = 0; e < v->numel; e++) b[e] = (uint8_t)h[e];
            }
            st = vx_tensor_upload(ctx, v, h);
            if (!st) st = vx_sync(ctx);
            if (!st && v->numel <= VX_HOST_MAX) {
                if (dt == VX_I64) {
                    v->host_i64 = h;
                    h = NULL;
                } else {
                    st = vx_tensor_to_host(ctx, v);
                }
            }
            free(h);
            if (st) return st;
        }
    }
    /* requires_grad, forward reads and release points */
    for (int32_t k = 0; k < g->n_outputs; k++) x->is_output[g->outputs[k]] = true;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Constant") == 0) continue;
        const vx_op *op = vx_find_op(n->op_type);
        bool any = false;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && x->req_grad[n->inputs[k]]) any = true;
        if (any && op && op->backward)
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) {
                    vx_dtype dt = VX_F32;
                    const est_tensor *ot = &g->tensors[n->outputs[k]];
                    if (ot->dtype == EST_DT_UNDEFINED || (map_dtype(x, ot->dtype, &dt) && vx_dtype_is_float(dt)))
                        x->req_grad[n->outputs[k]] = true;
                }
        for (int k = 0; k < n->n_inputs; k++) {
            int32_t ti = n->inputs[k];
            if (ti < 0) continue;
            int32_t at = i;
            if (x->o->hold_module_args && n->input_held_until && n->input_held_until[k] > i)
                at = n->input_held_until[k];
            if (at >= g->n_nodes) at = g->n_nodes - 1;
            int32_t *nr = realloc(x->rel[at], (size_t)(x->rel_n[at] + 1) * sizeof(int32_t));
            if (!nr) return vx_fail(ctx, VX_EOOM, "host out of memory");
            x->rel[at] = nr;
            nr[x->rel_n[at]++] = ti;
            x->reads[ti]++;
        }
    }
    return vx_sync(ctx);
}
