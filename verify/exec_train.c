/*
 * exec_train.c: the training half of a step (exec.c runs the forward and the
 * step around it): backward in reverse node order, with contiguous copies of
 * strided tensors a kernel cannot read, gradients summed per tensor and a
 * parameter's first gradient becoming its .grad (VX_CAT_GRADS); then the
 * optimizer step: SGD, momentum, or Adam / AdamW foreach-style.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vx_exec.h"

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
        if (!c) return vx_exec_oom(x, "a gradient sum");
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
            if (!c) return vx_exec_oom(x, "a parameter gradient");
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
    vx_tensor *sum = vx_tensor_new(ctx, cur->dtype, cur->rank, cur->dims, VX_CAT_TEMP);
    if (!sum) {
        vx_tensor_release(ctx, gr);
        return vx_exec_oom(x, "a gradient sum");
    }
    vx_tensor *cc = vx_contiguous(ctx, cur);
    if (!cc) {
        vx_tensor_release(ctx, gr);
        vx_tensor_release(ctx, sum);
        return vx_exec_oom(x, "a gradient sum");
    }
    st = vx_k_add(ctx, cc, gr, sum);
    vx_tensor_release(ctx, cc);
    vx_tensor_release(ctx, gr);
    vx_tensor_release(ctx, cur);
    x->grad[ti] = sum;
    return st;
}

void vx_exec_release_node_state(vx_exec *x, node_state *s) {
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
    run.graph = x->g;
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
        vx_exec_release_node_state(x, s);
        return VX_OK;
    }
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t ti = n->inputs[k];
        run.in[k] = s->in[k];
        run.need_grad[k] = s->need_grad[k];
        run.grad_cat[k] = ti >= 0 && is_param(x, ti) && !x->grad[ti] && !s->cast_from[k] ? VX_CAT_GRADS : VX_CAT_TEMP;
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
    if (!st) st = vx_exec_check_launch(x);
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
        vx_exec_release_node_state(x, s);
        return st == VX_EOOM ? vx_exec_oom(x, "the backward") : st;
    }
    for (int k = 0; k < n->n_inputs; k++) {
        int32_t ti = n->inputs[k];
        vx_tensor *gr = run.grad_in[k];
        if (!gr) continue;
        if (ti < 0 || !s->need_grad[k]) {
            vx_tensor_release(ctx, gr);
            continue;
        }
        if ((st = vx_amp_grad_back(x, &gr, s->cast_from[k]))) break;
        if ((st = accumulate(x, ti, gr))) break;
    }
    vx_exec_release_node_state(x, s);
    ctx->node = NULL;
    return st;
}

vx_status vx_exec_backward(vx_exec *x, vx_tensor *y, int32_t yi) {
    vx_ctx *ctx = x->ctx;
    ctx->phase = VX_PHASE_BACKWARD;
    /* loss.backward()'s seed, torch.ones_like(loss): one scalar block held
     * by autograd's Python frame until backward returns */
    vx_tensor *seed = vx_tensor_new(ctx, VX_F32, 0, NULL, VX_CAT_TEMP);
    if (!seed) return vx_exec_oom(x, "the backward seed");
    vx_status st = vx_k_fill(ctx, seed, 1.0f);
    /* d mean / d y.float(), cast down to a half y's dtype */
    vx_tensor *gy = st ? NULL : vx_tensor_new(ctx, VX_F32, y->rank, y->dims, VX_CAT_TEMP);
    if (!st && !gy) {
        vx_tensor_release(ctx, seed);
        return vx_exec_oom(x, "the loss gradient");
    }
    if (!st) st = vx_k_fill(ctx, gy, y->numel ? 1.0f / (float)y->numel : 0.0f);
    if (!st && y->dtype != VX_F32) {
        vx_tensor *low = vx_tensor_cast(ctx, gy, y->dtype, VX_CAT_TEMP);
        vx_tensor_release(ctx, gy);
        gy = low;
        if (!gy) st = vx_exec_oom(x, "the loss gradient");
    }
    if (st) {
        vx_tensor_release(ctx, gy);
        vx_tensor_release(ctx, seed);
        return st;
    }
    x->grad[yi] = gy;
    if (x->profiling) vx_profile_mark(x->prof, "(loss)", ctx->phase);
    for (int32_t i = x->g->n_nodes - 1; i >= 0 && !st; i--) {
        if (!x->ns[i].bwd) continue;
        st = backward_node(x, i);
        if (!st && x->profiling) vx_profile_mark(x->prof, x->g->nodes[i].op_type, ctx->phase);
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

vx_status vx_exec_optimizer_step(vx_exec *x) {
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
                if (first && !(x->opt_a[ti] = vx_tensor_new(ctx, gr->dtype, gr->rank, gr->dims, VX_CAT_OPTIMIZER)))
                    return vx_exec_oom(x, "the momentum buffers");
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
            x->opt_a[ti] = vx_tensor_new(ctx, gr->dtype, gr->rank, gr->dims, VX_CAT_OPTIMIZER);
            x->opt_b[ti] = vx_tensor_new(ctx, gr->dtype, gr->rank, gr->dims, VX_CAT_OPTIMIZER);
            if (!x->opt_a[ti] || !x->opt_b[ti]) return vx_exec_oom(x, "the Adam state");
            if ((st = vx_tensor_zero(ctx, x->opt_a[ti])) || (st = vx_tensor_zero(ctx, x->opt_b[ti]))) return st;
        }
        if ((st = vx_k_adam_moments(ctx, gr, x->opt_a[ti], x->opt_b[ti], b1, b2))) return st;
    }
    vx_tensor **tmp = calloc(nt > 0 ? (size_t)nt : 1, sizeof *tmp);
    if (!tmp) return vx_fail(ctx, VX_EOOM, "host out of memory");
    for (int32_t ti = 0; ti < nt && !st; ti++) {
        if (!x->grad[ti] || !is_param(x, ti)) continue;
        vx_tensor *v = x->opt_b[ti];
        if (!(tmp[ti] = vx_tensor_new(ctx, v->dtype, v->rank, v->dims, VX_CAT_TEMP)))
            st = vx_exec_oom(x, "the Adam step");
        else st = vx_k_adam_denom(ctx, v, tmp[ti], (float)sqrt(bc2), eps);
    }
    for (int32_t ti = 0; ti < nt && !st; ti++)
        if (tmp[ti]) st = vx_k_adam_update(ctx, x->val[ti], x->opt_a[ti], tmp[ti], (float)(lr / bc1), 1.0f - lr * wd);
    for (int32_t ti = 0; ti < nt; ti++) vx_tensor_release(ctx, tmp[ti]);
    free(tmp);
    return st;
}
