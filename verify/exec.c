/*
 * exec.c: runs the graph. Setup (weights, inputs, constants), then `steps`
 * steps; the last is measured (peak statistics reset after zero_grad).
 *
 * Training step, as PyTorch eager runs `zero_grad(set_to_none=True); y =
 * model(x); loss = y.mean(); loss.backward(); opt.step()`:
 *  - forward in node order; each tensor is released after its last reader
 *    (or when the module call holding it returns, with hold_module_args);
 *    what a node's backward reads (vx_op.saves_*) is retained until then;
 *  - the previous y is released when the new one exists, the previous loss
 *    when the new loss exists;
 *  - backward in reverse order, gradients summed per tensor, a parameter's
 *    first gradient becoming its .grad (VX_CAT_GRADS);
 *  - the optimizer step (optim.cu), foreach-style for Adam (one temporary
 *    the size of every parameter).
 * Memory is counted by the tracking allocator only; nothing here reads the
 * estimator's plan or report.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "vx_internal.h"

typedef struct node_state {
    const vx_op *op;
    bool host;             /* ran on the host */
    bool bwd;              /* backward will run */
    bool need_grad[VX_MAX_IO];
    int n_in, n_out;
    vx_tensor *in[VX_MAX_IO];   /* retained saved inputs, or shape stubs */
    vx_tensor *out[VX_MAX_IO];
    vx_tensor *saved[4];
} node_state;

typedef struct vx_exec {
    vx_ctx *ctx;
    const est_graph *g;
    const vx_options *o;
    vx_result *r;
    bool train;
    vx_tensor **val;
    vx_tensor **grad;
    bool *req_grad;
    bool *persistent;      /* initializers, inputs, constants */
    bool *is_output;
    int32_t *pending;      /* forward reads left this step */
    int32_t *reads;        /* forward reads per step */
    int32_t **rel;         /* per node: tensors whose read ends after it */
    int32_t *rel_n;
    node_state *ns;
    vx_tensor **opt_a, **opt_b;
    vx_weights *w;
    vx_tensor *prev_y, *prev_loss;
    int64_t adam_step;
} vx_exec;

/* ---- small helpers ---------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool map_dtype(est_dtype dt, vx_dtype *out) {
    switch (dt) {
    case EST_DT_FLOAT: case EST_DT_DOUBLE: case EST_DT_FLOAT16: case EST_DT_BFLOAT16:
        *out = VX_F32;
        return true;
    case EST_DT_INT8: case EST_DT_UINT8: case EST_DT_INT16: case EST_DT_UINT16: case EST_DT_INT32:
    case EST_DT_INT64: case EST_DT_UINT32: case EST_DT_UINT64:
        *out = VX_I64;
        return true;
    case EST_DT_BOOL:
        *out = VX_BOOL;
        return true;
    default:
        return false;
    }
}

static vx_tensor *stub_of(const vx_tensor *t) {
    vx_tensor *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->dtype = t->dtype;
    s->rank = t->rank;
    memcpy(s->dims, t->dims, sizeof s->dims);
    s->numel = t->numel;
    s->cat = t->cat;
    s->refs = 1;
    s->strided = t->strided; /* the layout (MatMul's gradient follows it), no storage */
    memcpy(s->strides, t->strides, sizeof s->strides);
    return s;
}

static const char *cat_fill_name(int cat) { return est_category_name((est_category)cat); }

static vx_status oom(vx_exec *x, const char *what) {
    vx_ctx *ctx = x->ctx;
    x->r->failed_request = ctx->stats.failed_request;
    x->r->free_at_failure = ctx->stats.free_at_failure;
    x->r->fail_phase = ctx->phase;
    if (ctx->node) snprintf(x->r->fail_layer, sizeof x->r->fail_layer, "%s", ctx->node->name);
    snprintf(ctx->message, sizeof ctx->message,
             "does not fit: %s%s%s asked for %llu bytes with %llu bytes free on the device", what,
             ctx->node ? " in node " : "", ctx->node ? ctx->node->name : "",
             (unsigned long long)ctx->stats.failed_request, (unsigned long long)ctx->stats.free_at_failure);
    return VX_EOOM;
}

static vx_status check_launch(vx_exec *x) {
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(x->ctx, VX_ECUDA, "kernel launch: %s", cudaGetErrorString(e));
}

/* ---- dims --------------------------------------------------------------------- */

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
        if (t->dtype == VX_F32) t->host_f32[k] = (float)v;
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
            if (dt == VX_F32) ok = vx_weights_get(x->w, name, VX_F32, numel, t->host_f32);
            else ok = vx_weights_get(x->w, name, VX_I64, numel, t->host_i64);
        }
        if (!ok) ok = const_values(known, t);
        if (!ok && dt != VX_F32) {
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
    if (!t) return oom(x, name);
    size_t esz = dt == VX_F32 ? 4 : 8;
    void *host = numel ? malloc((size_t)numel * esz) : NULL;
    bool ok = false;
    if (host && x->w) ok = vx_weights_get(x->w, name, dt == VX_F32 ? VX_F32 : VX_I64, numel, host);
    vx_status st = VX_OK;
    if (ok) {
        if (dt == VX_BOOL) {
            uint8_t *b = host;
            for (int64_t k = 0; k < numel; k++) b[k] = ((int64_t *)host)[k] != 0;
        }
        st = vx_tensor_upload(ctx, t, host);
        if (!st) st = vx_sync(ctx);
    } else if (known && known->count == numel && host) {
        vx_tensor tmp = *t;
        tmp.host_f32 = dt == VX_F32 ? host : NULL;
        tmp.host_i64 = dt == VX_F32 ? NULL : host;
        const_values(known, &tmp);
        if (dt == VX_BOOL) {
            uint8_t *b = host;
            for (int64_t k = 0; k < numel; k++) b[k] = ((int64_t *)host)[k] != 0;
        }
        st = vx_tensor_upload(ctx, t, host);
        if (!st) st = vx_sync(ctx);
    } else if (dt == VX_F32) {
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
        if (!map_dtype(a->t_dtype, &dt))
            return vx_fail(x->ctx, VX_EUNSUPPORTED, "Constant of dtype %s", est_dtype_name(a->t_dtype));
        if (a->t_rank > VX_MAX_RANK) return vx_fail(x->ctx, VX_EUNSUPPORTED, "Constant of rank %d", a->t_rank);
        rank = a->t_rank;
        for (int i = 0; i < rank; i++) dims[i] = a->t_dims[i];
        known = a->t_value;
    } else if ((a = node_attr(n, "value_float"))) {
        dt = VX_F32;
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
        dt = VX_F32;
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

static vx_status setup(vx_exec *x) {
    vx_ctx *ctx = x->ctx;
    const est_graph *g = x->g;
    vx_status st;
    /* every node has a kernel */
    char missing[256] = "";
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        if (strcmp(n->op_type, "Constant") == 0) continue;
        bool dom_ok = !n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0 ||
                      strcmp(n->domain, "ai.memest") == 0;
        if (dom_ok && (vx_find_op(n->op_type) || vx_find_host_op(n->op_type))) continue;
        if (!strstr(missing, n->op_type) && strlen(missing) + strlen(n->op_type) + 3 < sizeof missing) {
            if (missing[0]) strcat(missing, ", ");
            strcat(missing, n->op_type);
        }
    }
    if (missing[0]) return vx_fail(ctx, VX_EUNSUPPORTED, "no kernel for: %s", missing);

    /* initializers */
    for (int32_t ti = 0; ti < g->n_tensors; ti++) {
        const est_tensor *t = &g->tensors[ti];
        if (t->kind != EST_T_INITIALIZER) continue;
        vx_dtype dt;
        if (!map_dtype(t->dtype, &dt))
            return vx_fail(ctx, VX_EUNSUPPORTED, "initializer '%s' has dtype %s", t->name, est_dtype_name(t->dtype));
        int rank;
        int64_t dims[VX_MAX_RANK];
        if ((st = resolve_dims(x, t, &rank, dims))) return st;
        vx_category cat = t->role == EST_ROLE_PARAM && dt == VX_F32 ? VX_CAT_PARAMS
                          : t->role == EST_ROLE_BUFFER              ? VX_CAT_BUFFERS
                                                                    : VX_CAT_OTHER;
        bool host_ok = cat == VX_CAT_OTHER;
        if ((st = make_value(x, ti, dt, rank, dims, cat, t->value, host_ok, &x->val[ti]))) return st;
        x->persistent[ti] = true;
        if (cat == VX_CAT_PARAMS && x->train) x->req_grad[ti] = true;
    }
    /* Constant nodes: Python constants, made once */
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].op_type, "Constant") == 0 && (st = make_constant_node(x, &g->nodes[i]))) return st;

    /* graph inputs: the batch */
    for (int32_t k = 0; k < g->n_inputs; k++) {
        int32_t ti = g->inputs[k];
        const est_tensor *t = &g->tensors[ti];
        vx_dtype dt;
        if (!map_dtype(t->dtype, &dt))
            return vx_fail(ctx, VX_EUNSUPPORTED, "input '%s' has dtype %s", t->name, est_dtype_name(t->dtype));
        const vx_value *given = NULL;
        for (size_t v = 0; v < x->o->n_inputs; v++)
            if (x->o->inputs[v].name && strcmp(x->o->inputs[v].name, t->name) == 0) given = &x->o->inputs[v];
        int rank;
        int64_t dims[VX_MAX_RANK];
        if (given) {
            rank = given->rank;
            memcpy(dims, given->dims, sizeof(int64_t) * (size_t)rank);
            dt = given->dtype;
        } else if ((st = resolve_dims(x, t, &rank, dims))) {
            return st;
        }
        vx_tensor *v = vx_tensor_new(ctx, dt, rank, dims, VX_CAT_INPUTS);
        if (!v) return oom(x, "the input batch");
        x->val[ti] = v;
        x->persistent[ti] = true;
        if (given) {
            if ((st = vx_tensor_upload(ctx, v, given->data))) return st;
        } else if (dt == VX_F32) {
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
                    if (ot->dtype == EST_DT_UNDEFINED || (map_dtype(ot->dtype, &dt) && dt == VX_F32))
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

/* ---- forward ------------------------------------------------------------------- */

static void drop_value(vx_exec *x, int32_t ti) {
    if (x->persistent[ti] || x->is_output[ti]) return;
    vx_tensor_release(x->ctx, x->val[ti]);
    x->val[ti] = NULL;
}

/* Drops the tensors whose reads end at node i (their last reader, or the
 * end of the module call holding them). */
static void release_reads(vx_exec *x, int32_t i) {
    for (int32_t r = 0; r < x->rel_n[i]; r++) {
        int32_t ti = x->rel[i][r];
        if (--x->pending[ti] == 0) drop_value(x, ti);
    }
}

static vx_status run_node(vx_exec *x, int32_t i) {
    vx_ctx *ctx = x->ctx;
    const est_node *n = &x->g->nodes[i];
    node_state *s = &x->ns[i];
    memset(s, 0, sizeof *s);
    if (strcmp(n->op_type, "Constant") == 0) {
        /* made at setup; but a module call can end here (GELU's fusion
         * leaves the 0.5 Constant as the last node of the MLP's scope), so
         * the arguments it held go now */
        release_reads(x, i);
        return VX_OK;
    }
    if (n->n_inputs > VX_MAX_IO || n->n_outputs > VX_MAX_IO)
        return vx_fail(ctx, VX_EUNSUPPORTED, "more than %d inputs or outputs", VX_MAX_IO);
    vx_run run;
    memset(&run, 0, sizeof run);
    run.node = n;
    run.n_in = n->n_inputs;
    run.n_out = n->n_outputs;
    run.training = x->train;
    run.opset = n->opset;
    bool all_host = true;
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t ti = n->inputs[k];
        if (ti < 0) continue;
        if (!x->val[ti]) return vx_fail(ctx, VX_ECUDA, "input '%s' was released or never made", x->g->tensors[ti].name);
        run.in[k] = x->val[ti];
        if (run.in[k]->data) all_host = false;
        run.need_grad[k] = x->train && x->req_grad[ti];
    }
    for (int k = 0; k < VX_MAX_IO; k++) run.out_cat[k] = VX_CAT_ACTIVATIONS;
    const vx_op *hop = vx_find_host_op(n->op_type);
    const vx_op *op = NULL;
    bool any_grad = false;
    for (int k = 0; k < n->n_inputs; k++) any_grad |= run.need_grad[k];
    vx_status st = VX_EUNSUPPORTED;
    ctx->node = n;
    if (hop && (all_host || hop->host_only) && !any_grad) {
        /* shape arithmetic on the host; too large a result falls back to the device */
        op = hop;
        s->host = true;
        st = op->forward(ctx, &run);
        if (st == VX_EUNSUPPORTED && vx_find_op(n->op_type) && !hop->host_only) {
            for (int k = 0; k < VX_MAX_IO; k++) {
                vx_tensor_release(ctx, run.out[k]);
                run.out[k] = NULL;
            }
            s->host = false;
        }
    }
    /* what this node made for itself: per-use uploads of constants and
     * contiguous copies of strided inputs (PyTorch's .contiguous() inside
     * the kernel), released when it returns */
    vx_tensor *orig[VX_MAX_IO] = {NULL}, *mine[VX_MAX_IO] = {NULL};
    if (!s->host) {
        op = vx_find_op(n->op_type);
        if (!op) return vx_fail(ctx, VX_EUNSUPPORTED, "no device kernel for %s", n->op_type);
        for (int k = 0; k < n->n_inputs; k++) {
            if (!run.in[k]) continue;
            if (op->host_inputs & VX_SLOT(k)) {
                st = vx_tensor_to_host(ctx, run.in[k]);
            } else if (!run.in[k]->data && run.in[k]->numel && x->persistent[n->inputs[k]]) {
                /* A constant (Constant node, folded initializer) read on the
                 * device: in PyTorch a tensor created in the forward (or a
                 * Python scalar), not a module attribute: an activation
                 * uploaded for this node, freed after it unless saved. */
                vx_tensor *c = vx_tensor_view(ctx, run.in[k], run.in[k]->rank, run.in[k]->dims);
                if (!c) return vx_fail(ctx, VX_EOOM, "host out of memory");
                c->cat = VX_CAT_ACTIVATIONS;
                st = vx_tensor_to_device(ctx, c);
                orig[k] = c; /* the node's input from now on (saved if backward reads it) */
                mine[k] = c;
                run.in[k] = c;
            } else {
                st = vx_tensor_to_device(ctx, run.in[k]);
            }
            if (st == VX_EOOM) return oom(x, "an upload");
            if (st) return st;
        }
        for (int k = 0; k < n->n_inputs; k++) {
            if (!orig[k]) orig[k] = run.in[k];
            if (!run.in[k] || !run.in[k]->strided || (op->strided & VX_STRIDED_IN)) continue;
            vx_tensor *c = vx_contiguous(ctx, run.in[k]);
            if (!c) return oom(x, "a contiguous copy");
            run.in[k] = c;
        }
        st = op->forward(ctx, &run);
        for (int k = 0; k < n->n_inputs; k++) {
            if (run.in[k] != orig[k]) vx_tensor_release(ctx, run.in[k]);
            run.in[k] = orig[k];
        }
    }
    s->op = op;
    vx_alloc_free_workspaces(ctx);
    if (!st) st = check_launch(x);
    if (st == VX_EOOM) return oom(x, "the forward");
    if (st) return st;
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t ti = n->outputs[k];
        if (ti < 0) {
            vx_tensor_release(ctx, run.out[k]);
            continue;
        }
        if (!run.out[k]) return vx_fail(ctx, VX_ECUDA, "the kernel made no output %d", k);
        x->val[ti] = run.out[k];
    }
    s->bwd = x->train && !s->host && op->backward && any_grad;
    if (s->bwd) {
        uint32_t si = op->saves_inputs, so = op->saves_outputs;
        if (op->saves_fn) op->saves_fn(&run, &si, &so);
        s->n_in = n->n_inputs;
        s->n_out = n->n_outputs;
        for (int k = 0; k < n->n_inputs; k++) {
            s->need_grad[k] = run.need_grad[k];
            if (!run.in[k]) continue;
            s->in[k] = (si & VX_SLOT(k)) ? vx_tensor_retain(run.in[k]) : stub_of(run.in[k]);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            if (!run.out[k]) continue;
            s->out[k] = (so & VX_SLOT(k)) ? vx_tensor_retain(run.out[k]) : stub_of(run.out[k]);
        }
        memcpy(s->saved, run.saved, sizeof s->saved);
    } else {
        for (int k = 0; k < 4; k++) vx_tensor_release(ctx, run.saved[k]);
    }
    /* outputs nobody reads */
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t ti = n->outputs[k];
        if (ti >= 0 && x->reads[ti] == 0) drop_value(x, ti);
    }
    /* reads that end here */
    release_reads(x, i);
    for (int k = 0; k < VX_MAX_IO; k++) vx_tensor_release(ctx, mine[k]);
    ctx->node = NULL;
    return VX_OK;
}

static vx_status forward(vx_exec *x) {
    x->ctx->phase = VX_PHASE_FORWARD;
    memcpy(x->pending, x->reads, sizeof(int32_t) * (size_t)x->g->n_tensors);
    for (int32_t i = 0; i < x->g->n_nodes; i++) {
        vx_status st = run_node(x, i);
        if (st) return st;
    }
    return VX_OK;
}

/* ---- backward ------------------------------------------------------------------ */

static bool is_param(vx_exec *x, int32_t ti) {
    return x->g->tensors[ti].kind == EST_T_INITIALIZER && x->req_grad[ti];
}

static vx_status accumulate(vx_exec *x, int32_t ti, vx_tensor *gr) {
    vx_ctx *ctx = x->ctx;
    vx_tensor *cur = x->grad[ti];
    vx_tensor *v = x->val[ti];
    if (v && gr->numel != v->numel) {
        vx_tensor_release(ctx, gr);
        return vx_fail(ctx, VX_ESHAPE, "gradient of '%s' has %lld elements, the tensor %lld",
                       x->g->tensors[ti].name, (long long)gr->numel, (long long)v->numel);
    }
    if (cur && gr->strided) {
        /* summing into a buffer: read the strided gradient contiguously */
        vx_tensor *c = vx_contiguous(ctx, gr);
        vx_tensor_release(ctx, gr);
        if (!c) return oom(x, "a gradient sum");
        gr = c;
    }
    if (is_param(x, ti)) {
        if (!cur) {
            /* AccumulateGrad steals a gradient nobody else holds when its
             * layout is the parameter's (a contiguous view of its whole
             * storage included), else clones it */
            vx_tensor *sto = vx_tensor_storage(gr);
            if (!gr->strided && vx_tensor_exclusive(gr) && gr->data == sto->data && gr->numel == sto->numel) {
                if (gr->cat != VX_CAT_GRADS) vx_tensor_retag(ctx, gr, VX_CAT_GRADS);
                x->grad[ti] = gr;
                return VX_OK;
            }
            vx_tensor *c = vx_tensor_clone(ctx, gr, VX_CAT_GRADS);
            vx_tensor_release(ctx, gr);
            if (!c) return oom(x, "a parameter gradient");
            x->grad[ti] = c;
            return VX_OK;
        }
        vx_status st = vx_k_add_inplace(ctx, cur, gr);
        vx_tensor_release(ctx, gr);
        return st;
    }
    if (!cur) {
        x->grad[ti] = gr;
        return VX_OK;
    }
    vx_status st;
    if (vx_tensor_exclusive(cur) && !cur->strided && vx_tensor_storage(cur) != vx_tensor_storage(gr)) {
        st = vx_k_add_inplace(ctx, cur, gr);
        vx_tensor_release(ctx, gr);
        return st;
    }
    vx_tensor *sum = vx_tensor_new(ctx, VX_F32, cur->rank, cur->dims, VX_CAT_TEMP);
    if (!sum) {
        vx_tensor_release(ctx, gr);
        return oom(x, "a gradient sum");
    }
    vx_tensor *cc = vx_contiguous(ctx, cur);
    if (!cc) {
        vx_tensor_release(ctx, gr);
        vx_tensor_release(ctx, sum);
        return oom(x, "a gradient sum");
    }
    st = vx_k_add(ctx, cc, gr, sum);
    vx_tensor_release(ctx, cc);
    vx_tensor_release(ctx, gr);
    vx_tensor_release(ctx, cur);
    x->grad[ti] = sum;
    return st;
}

static void release_node_state(vx_exec *x, node_state *s) {
    for (int k = 0; k < VX_MAX_IO; k++) {
        vx_tensor_release(x->ctx, s->in[k]);
        vx_tensor_release(x->ctx, s->out[k]);
        s->in[k] = s->out[k] = NULL;
    }
    for (int k = 0; k < 4; k++) {
        vx_tensor_release(x->ctx, s->saved[k]);
        s->saved[k] = NULL;
    }
    s->bwd = false;
}

static vx_status backward_node(vx_exec *x, int32_t i) {
    vx_ctx *ctx = x->ctx;
    const est_node *n = &x->g->nodes[i];
    node_state *s = &x->ns[i];
    vx_run run;
    memset(&run, 0, sizeof run);
    run.node = n;
    run.n_in = s->n_in;
    run.n_out = s->n_out;
    run.training = x->train;
    run.opset = n->opset;
    bool any_out = false;
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t ti = n->outputs[k];
        run.out[k] = s->out[k];
        if (ti >= 0 && x->grad[ti]) {
            run.grad_out[k] = x->grad[ti];
            any_out = true;
        }
    }
    if (!any_out) {
        release_node_state(x, s);
        return VX_OK;
    }
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t ti = n->inputs[k];
        run.in[k] = s->in[k];
        run.need_grad[k] = s->need_grad[k];
        run.grad_cat[k] = ti >= 0 && is_param(x, ti) && !x->grad[ti] ? VX_CAT_GRADS : VX_CAT_TEMP;
        run.out_cat[k] = VX_CAT_ACTIVATIONS;
    }
    memcpy(run.saved, s->saved, sizeof run.saved);
    ctx->node = n;
    /* contiguous copies of strided tensors the kernel cannot read as they
     * are, for the duration of the call (VX_CAT_TEMP) */
    vx_tensor *tmp[3 * VX_MAX_IO] = {NULL};
    int nt = 0;
    vx_status st = VX_OK;
    for (int k = 0; k < VX_MAX_IO && !st; k++) {
        vx_tensor **slot[3] = {&run.in[k], &run.out[k], &run.grad_out[k]};
        for (int j = 0; j < 3; j++) {
            vx_tensor *t = *slot[j];
            uint32_t ok = j < 2 ? VX_STRIDED_SAVED : VX_STRIDED_GRAD;
            if (!t || !t->strided || !t->data || (s->op->strided & ok)) continue;
            vx_tensor *c = vx_contiguous(ctx, t);
            if (!c) {
                st = VX_EOOM;
                break;
            }
            *slot[j] = tmp[nt++] = c;
        }
    }
    if (!st) st = s->op->backward(ctx, &run);
    for (int k = 0; k < nt; k++) vx_tensor_release(ctx, tmp[k]);
    vx_alloc_free_workspaces(ctx);
    if (!st) st = check_launch(x);
    /* the node's output gradients are consumed */
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t ti = n->outputs[k];
        if (ti >= 0 && x->grad[ti]) {
            vx_tensor_release(ctx, x->grad[ti]);
            x->grad[ti] = NULL;
        }
    }
    if (st) {
        for (int k = 0; k < n->n_inputs; k++) vx_tensor_release(ctx, run.grad_in[k]);
        release_node_state(x, s);
        return st == VX_EOOM ? oom(x, "the backward") : st;
    }
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t ti = n->inputs[k];
        vx_tensor *gr = run.grad_in[k];
        if (!gr) continue;
        if (ti < 0 || !s->need_grad[k]) {
            vx_tensor_release(ctx, gr);
            continue;
        }
        if ((st = accumulate(x, ti, gr))) break;
    }
    release_node_state(x, s);
    ctx->node = NULL;
    return st;
}

static vx_status backward(vx_exec *x, vx_tensor *y, int32_t yi) {
    vx_ctx *ctx = x->ctx;
    ctx->phase = VX_PHASE_BACKWARD;
    /* loss.backward()'s seed, torch.ones_like(loss): one scalar block held
     * by autograd's Python frame until backward returns */
    vx_tensor *seed = vx_tensor_new(ctx, VX_F32, 0, NULL, VX_CAT_TEMP);
    if (!seed) return oom(x, "the backward seed");
    vx_status st = vx_k_fill(ctx, seed, 1.0f);
    /* d mean / d y */
    vx_tensor *gy = st ? NULL : vx_tensor_new(ctx, VX_F32, y->rank, y->dims, VX_CAT_TEMP);
    if (!st && !gy) {
        vx_tensor_release(ctx, seed);
        return oom(x, "the loss gradient");
    }
    if (!st) st = vx_k_fill(ctx, gy, y->numel ? 1.0f / (float)y->numel : 0.0f);
    if (st) {
        vx_tensor_release(ctx, gy);
        vx_tensor_release(ctx, seed);
        return st;
    }
    x->grad[yi] = gy;
    for (int32_t i = x->g->n_nodes - 1; i >= 0 && !st; i--) {
        if (!x->ns[i].bwd) continue;
        st = backward_node(x, i);
    }
    vx_tensor_release(ctx, seed);
    if (st) return st;
    /* gradients that reached no parameter (graph inputs, dead ends) */
    for (int32_t ti = 0; ti < x->g->n_tensors; ti++)
        if (x->grad[ti] && !is_param(x, ti)) {
            vx_tensor_release(ctx, x->grad[ti]);
            x->grad[ti] = NULL;
        }
    return VX_OK;
}

/* ---- optimizer ------------------------------------------------------------------ */

static vx_status optimizer_step(vx_exec *x) {
    vx_ctx *ctx = x->ctx;
    ctx->phase = VX_PHASE_OPTIMIZER;
    ctx->node = NULL;
    est_optimizer kind = x->o->optimizer;
    vx_status st = VX_OK;
    const float lr_sgd = 1e-3f, mom = 0.9f;
    if (kind == EST_OPT_SGD || kind == EST_OPT_MOMENTUM) {
        for (int32_t ti = 0; ti < x->g->n_tensors && !st; ti++) {
            vx_tensor *gr = x->grad[ti];
            if (!gr || !is_param(x, ti)) continue;
            if (kind == EST_OPT_SGD) {
                st = vx_k_sgd(ctx, x->val[ti], gr, lr_sgd);
            } else {
                bool first = !x->opt_a[ti];
                if (first && !(x->opt_a[ti] = vx_tensor_new(ctx, VX_F32, gr->rank, gr->dims, VX_CAT_OPTIMIZER)))
                    return oom(x, "the momentum buffers");
                st = vx_k_momentum(ctx, x->val[ti], gr, x->opt_a[ti], lr_sgd, mom, first);
            }
        }
        return st;
    }
    /* Adam / AdamW, foreach: moments, then sqrt(v) temporaries for every
     * parameter at once, then the update. */
    const float lr = 1e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = kind == EST_OPT_ADAMW ? 1e-2f : 0.0f;
    x->adam_step++;
    double bc1 = 1.0 - pow(b1, (double)x->adam_step), bc2 = 1.0 - pow(b2, (double)x->adam_step);
    int32_t nt = x->g->n_tensors;
    for (int32_t ti = 0; ti < nt; ti++) {
        vx_tensor *gr = x->grad[ti];
        if (!gr || !is_param(x, ti)) continue;
        if (!x->opt_a[ti]) {
            x->opt_a[ti] = vx_tensor_new(ctx, VX_F32, gr->rank, gr->dims, VX_CAT_OPTIMIZER);
            x->opt_b[ti] = vx_tensor_new(ctx, VX_F32, gr->rank, gr->dims, VX_CAT_OPTIMIZER);
            if (!x->opt_a[ti] || !x->opt_b[ti]) return oom(x, "the Adam state");
            if ((st = vx_tensor_zero(ctx, x->opt_a[ti])) || (st = vx_tensor_zero(ctx, x->opt_b[ti]))) return st;
        }
        if ((st = vx_k_adam_moments(ctx, gr, x->opt_a[ti], x->opt_b[ti], b1, b2))) return st;
    }
    vx_tensor **tmp = calloc(nt > 0 ? (size_t)nt : 1, sizeof *tmp);
    if (!tmp) return vx_fail(ctx, VX_EOOM, "host out of memory");
    for (int32_t ti = 0; ti < nt && !st; ti++) {
        if (!x->grad[ti] || !is_param(x, ti)) continue;
        vx_tensor *v = x->opt_b[ti];
        if (!(tmp[ti] = vx_tensor_new(ctx, VX_F32, v->rank, v->dims, VX_CAT_TEMP))) st = oom(x, "the Adam step");
        else st = vx_k_adam_denom(ctx, v, tmp[ti], (float)sqrt(bc2), eps);
    }
    for (int32_t ti = 0; ti < nt && !st; ti++)
        if (tmp[ti]) st = vx_k_adam_update(ctx, x->val[ti], x->opt_a[ti], tmp[ti], (float)(lr / bc1), 1.0f - lr * wd);
    for (int32_t ti = 0; ti < nt; ti++) vx_tensor_release(ctx, tmp[ti]);
    free(tmp);
    return st;
}

/* ---- a step ---------------------------------------------------------------------- */

static int32_t loss_output(vx_exec *x) {
    for (int32_t k = 0; k < x->g->n_outputs; k++) {
        int32_t ti = x->g->outputs[k];
        if (x->val[ti] && x->val[ti]->dtype == VX_F32) return ti;
    }
    return -1;
}

static vx_status step(vx_exec *x, bool measured) {
    vx_ctx *ctx = x->ctx;
    vx_status st;
    /* zero_grad(set_to_none=True) */
    for (int32_t ti = 0; ti < x->g->n_tensors; ti++) {
        vx_tensor_release(ctx, x->grad[ti]);
        x->grad[ti] = NULL;
    }
    if ((st = vx_sync(ctx))) return st;
    ctx->phase = VX_PHASE_FORWARD;
    if (measured) {
        vx_alloc_reset_peak(ctx);
        x->r->resident_before = ctx->stats.total;
    }
    double t0 = now_ms();
    if ((st = forward(x))) return st;
    /* y rebound: the previous output goes */
    vx_tensor_release(ctx, x->prev_y);
    x->prev_y = NULL;
    int32_t yi = loss_output(x);
    if (x->train) {
        if (yi < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "no floating graph output to take the loss of");
        vx_tensor *y = x->val[yi];
        vx_tensor *loss = vx_tensor_new(ctx, VX_F32, 0, NULL, VX_CAT_OTHER);
        if (!loss) return oom(x, "the loss");
        vx_tensor *yc = vx_contiguous(ctx, y); /* y.mean() reads a strided y in place; rare */
        if (!yc) return oom(x, "the loss");
        st = vx_k_mean(ctx, yc, loss);
        vx_tensor_release(ctx, yc);
        if (st) return st;
        vx_tensor_release(ctx, x->prev_loss);
        x->prev_loss = loss;
        if ((st = backward(x, y, yi))) return st;
        if ((st = optimizer_step(x))) return st;
    }
    if ((st = vx_sync(ctx))) return st;
    double t1 = now_ms();
    if (measured) x->r->step_ms = t1 - t0;
    else x->r->first_step_ms = t1 - t0;
    /* node states left (nodes whose backward never came) */
    for (int32_t i = 0; i < x->g->n_nodes; i++) release_node_state(x, &x->ns[i]);
    /* outputs: keep y as the previous output, fetch, drop the rest */
    if (measured && x->o->fetch_outputs) {
        x->r->outputs = calloc((size_t)(x->g->n_outputs ? x->g->n_outputs : 1), sizeof(vx_value));
        if (!x->r->outputs) return vx_fail(ctx, VX_EOOM, "host out of memory");
        for (int32_t k = 0; k < x->g->n_outputs; k++) {
            int32_t ti = x->g->outputs[k];
            vx_tensor *t = x->val[ti];
            vx_value *v = &x->r->outputs[x->r->n_outputs++];
            v->name = x->g->tensors[ti].name;
            if (!t) continue;
            v->dtype = t->dtype;
            v->rank = t->rank;
            memcpy(v->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
            v->numel = t->numel;
            v->data = malloc((size_t)(t->numel ? t->numel : 1) * vx_dtype_size(t->dtype));
            if (!v->data) return vx_fail(ctx, VX_EOOM, "host out of memory");
            if ((st = vx_tensor_download(ctx, t, v->data))) return st;
        }
    }
    for (int32_t k = 0; k < x->g->n_outputs; k++) {
        int32_t ti = x->g->outputs[k];
        if (!x->val[ti] || x->persistent[ti]) continue;
        if (ti == yi && x->train) {
            vx_tensor_retag(ctx, x->val[ti], VX_CAT_OTHER);
            x->prev_y = x->val[ti];
        } else {
            vx_tensor_release(ctx, x->val[ti]);
        }
        x->val[ti] = NULL;
    }
    /* anything else still bound (outputs of dead nodes) */
    for (int32_t ti = 0; ti < x->g->n_tensors; ti++)
        if (x->val[ti] && !x->persistent[ti]) {
            vx_tensor_release(ctx, x->val[ti]);
            x->val[ti] = NULL;
        }
    if (measured) x->r->resident_after = ctx->stats.total;
    return VX_OK;
}

static void exec_free(vx_exec *x) {
    vx_ctx *ctx = x->ctx;
    int32_t nt = x->g->n_tensors;
    if (x->ns)
        for (int32_t i = 0; i < x->g->n_nodes; i++) release_node_state(x, &x->ns[i]);
    for (int32_t ti = 0; ti < nt; ti++) {
        if (x->val) vx_tensor_release(ctx, x->val[ti]);
        if (x->grad) vx_tensor_release(ctx, x->grad[ti]);
        if (x->opt_a) vx_tensor_release(ctx, x->opt_a[ti]);
        if (x->opt_b) vx_tensor_release(ctx, x->opt_b[ti]);
    }
    vx_tensor_release(ctx, x->prev_y);
    vx_tensor_release(ctx, x->prev_loss);
    if (x->rel)
        for (int32_t i = 0; i < x->g->n_nodes; i++) free(x->rel[i]);
    free(x->rel);
    free(x->rel_n);
    free(x->val);
    free(x->grad);
    free(x->req_grad);
    free(x->persistent);
    free(x->is_output);
    free(x->pending);
    free(x->reads);
    free(x->ns);
    free(x->opt_a);
    free(x->opt_b);
    vx_weights_free(x->w);
}

/* Runs the whole protocol; fills the measured fields of r. */
vx_status vx_execute(vx_ctx *ctx, const est_graph *g, const vx_options *o, vx_result *r);
vx_status vx_execute(vx_ctx *ctx, const est_graph *g, const vx_options *o, vx_result *r) {
    vx_exec x;
    memset(&x, 0, sizeof x);
    x.ctx = ctx;
    x.g = g;
    x.o = o;
    x.r = r;
    x.train = o->mode == EST_MODE_TRAIN;
    size_t nt = (size_t)(g->n_tensors ? g->n_tensors : 1), nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    x.val = calloc(nt, sizeof *x.val);
    x.grad = calloc(nt, sizeof *x.grad);
    x.req_grad = calloc(nt, sizeof *x.req_grad);
    x.persistent = calloc(nt, sizeof *x.persistent);
    x.is_output = calloc(nt, sizeof *x.is_output);
    x.pending = calloc(nt, sizeof *x.pending);
    x.reads = calloc(nt, sizeof *x.reads);
    x.opt_a = calloc(nt, sizeof *x.opt_a);
    x.opt_b = calloc(nt, sizeof *x.opt_b);
    x.rel = calloc(nn, sizeof *x.rel);
    x.rel_n = calloc(nn, sizeof *x.rel_n);
    x.ns = calloc(nn, sizeof *x.ns);
    vx_status st = VX_OK;
    if (!x.val || !x.grad || !x.req_grad || !x.persistent || !x.is_output || !x.pending || !x.reads || !x.opt_a ||
        !x.opt_b || !x.rel || !x.rel_n || !x.ns)
        st = vx_fail(ctx, VX_EOOM, "host out of memory");
    const char *wpath = o->weights_path ? o->weights_path : g->source;
    if (!st) {
        char msg[256] = "";
        if (vx_weights_open(wpath, &x.w, msg, sizeof msg) != VX_OK) st = vx_fail(ctx, VX_EIO, "%s", msg);
    }
    ctx->phase = VX_PHASE_SETUP;
    if (!st) st = setup(&x);
    int steps = o->steps > 0 ? o->steps : 2;
    for (int s = 0; s < steps && !st; s++) st = step(&x, s == steps - 1);
    if (!st) {
        r->peak = ctx->stats.peak;
        memcpy(r->at_peak, ctx->stats.at_peak, sizeof r->at_peak);
        r->peak_phase = ctx->stats.peak_phase;
        memcpy(r->peak_layer, ctx->stats.peak_layer, sizeof r->peak_layer);
        r->nodes = (size_t)g->n_nodes;
    }
    (void)cat_fill_name;
    exec_free(&x);
    return st;
}
