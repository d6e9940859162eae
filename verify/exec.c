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
 *
 * Setup is exec_setup.c, backward and the optimizer step exec_train.c; what
 * they share with this file is in vx_exec.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "vx_exec.h"

/* ---- small helpers ---------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

vx_status vx_exec_oom(vx_exec *x, const char *what) {
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

vx_status vx_exec_check_launch(vx_exec *x) {
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(x->ctx, VX_ECUDA, "kernel launch: %s", cudaGetErrorString(e));
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
    run.graph = x->g;
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
        vx_dtype want[VX_MAX_IO];
        vx_amp_targets(x, i, &run, want);
        for (int k = 0; k < n->n_inputs; k++) {
            if (!run.in[k]) continue;
            if (op->host_inputs & VX_SLOT(k)) {
                want[k] = (vx_dtype)-1; /* read on the host, in float32 */
                st = vx_tensor_to_host(ctx, run.in[k]);
            } else if (!run.in[k]->data && run.in[k]->numel && x->persistent[n->inputs[k]]) {
                /* A constant (Constant node, folded initializer) read on the
                 * device: in PyTorch a tensor created in the forward (or a
                 * Python scalar), not a module attribute: an activation
                 * uploaded for this node, freed after it unless saved. */
                vx_tensor *c = vx_tensor_view(ctx, run.in[k], run.in[k]->rank, run.in[k]->dims);
                if (!c) return vx_fail(ctx, VX_EOOM, "host out of memory");
                c->cat = VX_CAT_ACTIVATIONS;
                if ((int)want[k] >= 0) c->dtype = want[k]; /* autocast: made in the op's dtype */
                st = vx_tensor_to_device(ctx, c);
                orig[k] = c; /* the node's input from now on (saved if backward reads it) */
                mine[k] = c;
                run.in[k] = c;
            } else {
                st = vx_tensor_to_device(ctx, run.in[k]);
            }
            if (st == VX_EOOM) return vx_exec_oom(x, "an upload");
            if (st) return st;
        }
        if ((st = vx_amp_cast_inputs(x, i, &run, want, orig, mine, s->cast_from))) return st;
        if (!(op->dtypes & VX_HALF))
            for (int k = 0; k < n->n_inputs; k++)
                if (run.in[k] && vx_dtype_is_float(run.in[k]->dtype) && run.in[k]->dtype != VX_F32)
                    return vx_fail(ctx, VX_EUNSUPPORTED, "no %s kernel for %s yet", vx_dtype_name(run.in[k]->dtype),
                                   n->op_type);
        for (int k = 0; k < n->n_inputs; k++) {
            if (!orig[k]) orig[k] = run.in[k];
            if (!run.in[k] || !run.in[k]->strided || (op->strided & VX_STRIDED_IN)) continue;
            vx_tensor *c = vx_contiguous(ctx, run.in[k]);
            if (!c) return vx_exec_oom(x, "a contiguous copy");
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
    if (!st) st = vx_exec_check_launch(x);
    if (!st && !s->host && !(op->dtypes & VX_HALF) && vx_float_dtype(ctx) != VX_F32)
        for (int k = 0; k < n->n_outputs && !st; k++)
            if (run.out[k] && run.out[k]->dtype == VX_F32) /* a float32 tensor in a half run */
                st = vx_fail(ctx, VX_EUNSUPPORTED, "no %s kernel for %s yet", vx_dtype_name(vx_float_dtype(ctx)),
                             n->op_type);
    if (st == VX_EOOM) return vx_exec_oom(x, "the forward");
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
        if (x->profiling) vx_profile_mark(x->prof, x->g->nodes[i].op_type, x->ctx->phase);
    }
    return VX_OK;
}

/* ---- a step ---------------------------------------------------------------------- */

static int32_t loss_output(vx_exec *x) {
    for (int32_t k = 0; k < x->g->n_outputs; k++) {
        int32_t ti = x->g->outputs[k];
        if (x->val[ti] && vx_dtype_is_float(x->val[ti]->dtype)) return ti;
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
    x->profiling = measured && x->prof;
    if (x->profiling) vx_profile_start(x->prof);
    ctx->prof = x->profiling ? x->prof : NULL;
    double t0 = now_ms();
    if ((st = forward(x))) return st;
    /* y rebound: the previous output goes */
    vx_tensor_release(ctx, x->prev_y);
    x->prev_y = NULL;
    int32_t yi = loss_output(x);
    if (!x->train) vx_amp_exit(x);
    if (x->train) {
        if (yi < 0) return vx_fail(ctx, VX_EUNSUPPORTED, "no floating graph output to take the loss of");
        vx_tensor *y = x->val[yi];
        /* loss = y.float().mean(): a half y is copied to float32 for it */
        vx_tensor *yc = y->dtype == VX_F32 ? vx_contiguous(ctx, y) : vx_tensor_cast(ctx, y, VX_F32, VX_CAT_TEMP);
        if (!yc) return vx_exec_oom(x, "the loss");
        vx_tensor *loss = vx_tensor_new(ctx, VX_F32, 0, NULL, VX_CAT_OTHER);
        st = loss ? vx_k_mean(ctx, yc, loss) : vx_exec_oom(x, "the loss");
        vx_tensor_release(ctx, yc);
        if (st) return st;
        vx_tensor_release(ctx, x->prev_loss);
        x->prev_loss = loss;
        vx_amp_exit(x);
        if ((st = vx_exec_backward(x, y, yi))) return st;
        if ((st = vx_exec_optimizer_step(x))) return st;
        if (x->profiling) vx_profile_mark(x->prof, "(optimizer)", ctx->phase);
    }
    if ((st = vx_sync(ctx))) return st;
    double t1 = now_ms();
    if (x->profiling) vx_profile_write(x->prof, x->g->source, x->o->batch);
    ctx->prof = NULL;
    if (measured) x->r->step_ms = t1 - t0;
    else x->r->first_step_ms = t1 - t0;
    /* node states left (nodes whose backward never came) */
    for (int32_t i = 0; i < x->g->n_nodes; i++) vx_exec_release_node_state(x, &x->ns[i]);
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
            if (t->dtype == VX_BF16 || t->dtype == VX_F16) { /* fetched as float32 */
                float *f = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
                if (!f) return vx_fail(ctx, VX_EOOM, "host out of memory");
                vx_to_f32(t->dtype, v->data, f, t->numel);
                free(v->data);
                v->data = f;
                v->dtype = VX_F32;
            }
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
        for (int32_t i = 0; i < x->g->n_nodes; i++) vx_exec_release_node_state(x, &x->ns[i]);
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
    vx_amp_exit(x);
    free(x->amp_cache);
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
    x.prof = vx_profile_open();
    if (!st) st = vx_amp_setup(&x);
    if (!st) st = vx_exec_setup(&x);
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
    vx_profile_close(x.prof);
    exec_free(&x);
    return st;
}
