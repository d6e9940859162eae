/*
 * exec_amp.c: torch.autocast("cuda", dtype=low) for the executor (--amp).
 *
 * Weights, gradients and optimizer state stay float32; each op runs in the
 * dtype its autocast class gives it (layers/amp.c, the op table shared with
 * the estimator; the executor's own bookkeeping is here):
 *   lower precision (matmuls, convolutions, attention, recurrent layers):
 *     the low dtype;
 *   fp32 (norms, exp, log, losses...) and fp32 output (softmax, sums):
 *     float32;
 *   promote (everything else): the low dtype when every floating input
 *     that takes part in PyTorch's type promotion is low, else float32
 *     (est_amp_operand_promotes: activations, and an element-wise op's
 *     weights and constants of rank 1 or more but a linear layer's bias).
 * Kernels take operands of one dtype, so every floating input in another
 * dtype is copied to the op's before the kernel runs: a parameter's copy
 * is cached until autocast exits (autocast_mode.cpp caches casts of leaf
 * tensors that require grad), any other copy is the node's own and lives
 * while its backward keeps it. A copy's gradient is cast back to the
 * input's dtype before it is summed (ToCopyBackward).
 */
#include <stdlib.h>

#include "vx_exec.h"

#define AMP_KEEP ((vx_dtype)-1)

vx_status vx_amp_setup(vx_exec *x) {
    if (x->o->amp == EST_AMP_NONE) return VX_OK;
    x->amp_low = x->o->amp == EST_AMP_FP16 ? VX_F16 : VX_BF16;
    x->amp_cache = calloc((size_t)(x->g->n_tensors ? x->g->n_tensors : 1), sizeof *x->amp_cache);
    return x->amp_cache ? VX_OK : vx_fail(x->ctx, VX_EOOM, "host out of memory");
}

/* A weight or a constant: an initializer, or a value made on the host
 * (Constant nodes, shape arithmetic), which in PyTorch is a Python scalar. */
static bool is_constant(const vx_exec *x, int32_t ti, const vx_tensor *t) {
    return x->g->tensors[ti].kind == EST_T_INITIALIZER || (!t->data && t->numel && x->persistent[ti]);
}

void vx_amp_targets(const vx_exec *x, int32_t i, const vx_run *run, vx_dtype *want) {
    const est_node *n = &x->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) want[k] = AMP_KEEP;
    if (!x->amp_cache) return;
    est_amp_class cls = est_amp_class_of(n->op);
    vx_dtype to;
    switch (cls) {
    case EST_AMP_LOW: to = x->amp_low; break;
    case EST_AMP_FP32:
    case EST_AMP_FP32_OUT: to = VX_F32; break;
    case EST_AMP_PROMOTE: {
        bool any_act = false, all_low = true;
        for (int k = 0; k < n->n_inputs; k++) {
            const vx_tensor *t = run->in[k];
            if (!t || !vx_dtype_is_float(t->dtype)) continue;
            if (!est_amp_operand_promotes(x->g, n, k, !is_constant(x, n->inputs[k], t), t->rank)) continue;
            any_act = true;
            if (t->dtype != x->amp_low) all_low = false;
        }
        to = any_act && all_low ? x->amp_low : VX_F32;
        break;
    }
    default: return; /* Cast: the declared dtype */
    }
    for (int k = 0; k < n->n_inputs; k++)
        if (run->in[k] && vx_dtype_is_float(run->in[k]->dtype) && run->in[k]->dtype != to) want[k] = to;
}

/* Whether autocast caches the copy: a float32 parameter that requires grad
 * (in inference, every parameter: torch.no_grad leaves requires_grad set),
 * or a view of one, as the exporters write F.linear's weight (MatMul of
 * its Transpose). */
static bool cached(const vx_exec *x, int32_t ti, vx_dtype to) {
    vx_tensor *v = x->val[ti];
    if (to != x->amp_low || !v || vx_tensor_storage(v)->cat != VX_CAT_PARAMS) return false;
    return x->train ? x->req_grad[ti] : true;
}

/* The parameter a cached copy is kept under: ti, or the initializer a view
 * of it reads (the TorchScript exporter writes one Transpose per use, and
 * ALBERT's shared layer reads each weight 12 times). */
static int32_t cache_slot(const vx_exec *x, int32_t ti) {
    const est_graph *g = x->g;
    int32_t t = ti;
    for (int hops = 0; hops < 8 && g->tensors[t].kind != EST_T_INITIALIZER; hops++) {
        int32_t p = g->tensors[t].producer;
        if (p < 0 || g->nodes[p].n_inputs < 1 || g->nodes[p].inputs[0] < 0) return ti;
        t = g->nodes[p].inputs[0];
    }
    return g->tensors[t].kind == EST_T_INITIALIZER ? t : ti;
}

static bool same_shape(const vx_tensor *a, const vx_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

vx_status vx_amp_cast_inputs(vx_exec *x, int32_t i, vx_run *run, const vx_dtype *want, vx_tensor **orig,
                             vx_tensor **mine, uint8_t *cast_from) {
    const est_node *n = &x->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
        vx_tensor *t = run->in[k];
        if (want[k] == AMP_KEEP || !t || !t->data || t->dtype == want[k]) continue;
        int32_t ti = n->inputs[k];
        vx_tensor *c;
        int32_t slot = cached(x, ti, want[k]) ? cache_slot(x, ti) : -1;
        if (slot >= 0 && (!x->amp_cache[slot] || same_shape(x->amp_cache[slot], t))) {
            c = x->amp_cache[slot];
            if (!c && !(c = x->amp_cache[slot] = vx_tensor_cast(x->ctx, t, want[k], VX_CAT_ACTIVATIONS)))
                return vx_exec_oom(x, "an autocast copy");
        } else {
            if (!(c = vx_tensor_cast(x->ctx, t, want[k], VX_CAT_ACTIVATIONS))) return vx_exec_oom(x, "an autocast copy");
            vx_tensor_release(x->ctx, mine[k]); /* a per-use upload, now copied */
            mine[k] = c;
        }
        cast_from[k] = (uint8_t)(t->dtype + 1);
        run->in[k] = orig[k] = c;
    }
    return VX_OK;
}

void vx_amp_exit(vx_exec *x) {
    if (!x->amp_cache) return;
    for (int32_t ti = 0; ti < x->g->n_tensors; ti++) {
        vx_tensor_release(x->ctx, x->amp_cache[ti]);
        x->amp_cache[ti] = NULL;
    }
}

vx_status vx_amp_grad_back(vx_exec *x, vx_tensor **gr, uint8_t cast_from) {
    if (!cast_from || (*gr)->dtype == (vx_dtype)(cast_from - 1)) return VX_OK;
    vx_tensor *c = vx_tensor_cast(x->ctx, *gr, (vx_dtype)(cast_from - 1), (*gr)->cat);
    vx_tensor_release(x->ctx, *gr);
    *gr = c;
    return c ? VX_OK : vx_exec_oom(x, "a gradient cast back");
}
