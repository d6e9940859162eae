/*
 * recurrent.c: LSTM, GRU and RNN, as PyTorch's nn.LSTM, nn.GRU and nn.RNN
 * run them on a GPU: one cuDNN call (aten::_cudnn_rnn) for all their layers.
 *
 * Both exporters write one ONNX node per layer (each direction in it), with
 * the layer's output Y in ONNX's [seq, directions, batch, hidden] order; the
 * passes say how that meets PyTorch's memory: onnx/rnn_weights.c gives the
 * node the module's own weights, libestimate/lifetimes.c's
 * rnn_output_in_torch_layout() reads Y as PyTorch's [seq, batch,
 * directions * hidden] output, and onnx/rnn_weights.c records how many layers
 * the module's call runs (the node attribute EST_RNN_CALL_LAYERS).
 *
 * Memory, from bench/accuracy/probe_rnn.py's two grids on the H100 (cuDNN
 * 9.19; bench/accuracy/data/rnn/, fitted by fit_rnn.py; docs/memory-model.md,
 * "Recurrent layers"):
 *  - saved for backward (derivatives.yaml, _cudnn_rnn: input, weight, hx, cx,
 *    output, reserve): X, the initial states, Y, and cuDNN's reserve space.
 *    Per layer, float32: 4 * D * (k * T * N * H + m * N * H) bytes, k = 5, 6,
 *    1 and m = 2, 1, 1 for LSTM, GRU and RNN (the gates, the cell, the final
 *    states): within 1% on 154 of the 176 float32 calls probed; the others
 *    (mostly small stacked calls, where cuDNN picks another algorithm)
 *    reserve up to 20% (LSTM), 7% (GRU) and 48% (RNN) more. Between layers PyTorch keeps each layer's output in the reserve;
 *    here it is the layer's own Y, which the next layer saves as its input.
 *    Half precision: 14, 15 and 3 bytes per D * T * N * H instead (two calls
 *    a mode; small calls add 45 to 200 KiB this leaves out).
 *  - workspace: a linear fit, least squares in bytes, of the whole call's
 *    transient bytes (forward in training and in eval mode, backward) in 1,
 *    L * D, the call's weight bytes, D * T * N * H and T * N * I bytes: on
 *    the zoo's calls within 1% from batch 256 to 8192 and within 21% at
 *    batches 1 to 64; median errors over the 182 calls probed 6-19%, the
 *    worst (small calls, a few MiB) 45-180%. Each layer's node carries the
 *    whole call's workspace, since the call holds it while it runs every
 *    layer.
 *
 * memest verify's executor (EST_KERNELS_VERIFY, verify/ops_recurrent.cu)
 * keeps its own reserve, [D, T * N, K * H] in X's dtype with K = 5, 4, 1
 * (LSTM: the four gates and the cell; GRU: three gates and the candidate's
 * recurrent product; RNN: the pre-activation), saved in training and a
 * workspace in inference, with Y too when the node omits it. Its backward
 * takes the gates' gradients for every step, T * N * KG elements in X's
 * dtype (KG = 4, 4, 1 times H), and the carried dh (and LSTM's dc), N * H
 * floats each (float32 whatever X's dtype). A strided input (the Transpose
 * of a batch-first input) is copied for the forward and again for the
 * backward.
 *
 * FLOPs per step, batch row and direction (docs/flops.md): the two products
 * 2 * G * H * (I + H), G gates (4, 3, 1), and per hidden unit the bias adds
 * and activations, 3 * G, plus the state update, 5 (LSTM), 4 (GRU), 0 (RNN).
 * Backward: the products once for the weights and once for the inputs and
 * the hidden state, the element-wise part twice.
 */
#include <string.h>

#include "registry.h"

typedef enum rnn_mode { RNN_TANH = 0, RNN_GRU, RNN_LSTM, RNN_MODES } rnn_mode;

typedef struct rnn_rule {
    int gates;            /* G: rows of W per direction, in units of H */
    int state_update;     /* element-wise FLOPs per hidden unit beyond the gates */
    int reserve_per_step; /* k: float32 reserve, per T * N * H, in elements */
    int reserve_per_row;  /* m: per N * H */
    int half_bytes;       /* the half-precision reserve, bytes per T * N * H */
    /* the call's transient bytes, forward in training and in eval mode, and
     * backward: 1, L * D, the call's weight bytes, D * T * N * H * es and
     * T * N * I * es (es: the element's bytes) */
    double fwd[5], eval[5], bwd[5];
} rnn_rule;

/* Fitted by bench/accuracy/fit_rnn.py to bench/accuracy/data/rnn/ (the
 * three H100 grids, cuDNN 9.19), least squares in bytes. */
static const rnn_rule rules[RNN_MODES] = {
    [RNN_TANH] = {1, 0, 1, 1, 3,
                  {1.129e6, 1.059e7, 0.987, 2.909, 4.102},
                  {1.011e6, 1.01e7, 0.7953, 2.164, -0.005726},
                  {2.871e5, 1.124e7, 0.2683, 3.929, 5.086}},
    [RNN_GRU] = {3, 4, 6, 1, 15,
                 {9.705e4, 1.051e7, 0.9493, 3.813, 2.364},
                 {1.877e6, 1.016e7, 0.8999, 4.899, -2.761},
                 {-1.752e6, 1.125e7, 0.7102, 4.888, 3.177}},
    [RNN_LSTM] = {4, 5, 5, 2, 14,
                  {1.226e6, 1.051e7, 0.4334, 9.585, -7.864},
                  {3.161e6, 1.036e7, 0.3643, 10.78, -12.41},
                  {-3.198e5, 1.09e7, 0.2523, 10.83, -7.373}},
};

static rnn_mode mode_of(const est_node *n) {
    return n->op_type[0] == 'L' ? RNN_LSTM : n->op_type[0] == 'G' ? RNN_GRU : RNN_TANH;
}

/* ---- shapes ----------------------------------------------------------------- */

static est_status directions(est_infer_ctx *ctx, int64_t *d) {
    const char *dir;
    est_status st = est_attr_string(ctx, "direction", &dir);
    if (st != EST_OK) return st;
    if (!dir || strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) *d = 1;
    else if (strcmp(dir, "bidirectional") == 0) *d = 2;
    else return est_op_fail(ctx, EST_EATTR, "attribute 'direction' is '%s', expected forward, reverse or bidirectional", dir);
    return EST_OK;
}

/* Checks a weight input of shape [D, rows, cols]. */
static est_status check_weight(est_infer_ctx *ctx, int slot, const char *what, int64_t d, int64_t rows, int64_t cols) {
    const est_tval *w = est_in(ctx, slot);
    if (!w || w->rank < 0) return EST_OK;
    int64_t want[3] = {d, rows, cols};
    int rank = cols < 0 ? 2 : 3;
    bool ok = w->rank == rank;
    for (int k = 0; ok && k < rank; k++) ok = w->dims[k] == want[k];
    if (ok) return EST_OK;
    char got[96], expect[96];
    return est_op_fail(ctx, EST_ESHAPE, "%s (input %d) has shape %s, expected %s", what, slot,
                       est_dims_str(got, sizeof got, w->rank, w->dims), est_dims_str(expect, sizeof expect, rank, want));
}

/* X is [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1); Y
 * is [seq, D, batch, hidden] or [batch, seq, D, hidden]; Y_h and Y_c are
 * [D, batch, hidden] or [batch, D, hidden]. */
static est_status rnn_infer(est_infer_ctx *ctx) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (x->rank != 3) return est_op_fail(ctx, EST_ESHAPE, "X has rank %d, expected 3", x->rank);
    int64_t d = 1, hidden, layout;
    if ((st = directions(ctx, &d)) != EST_OK || (st = est_attr_int(ctx, "layout", 0, &layout)) != EST_OK) return st;
    if (layout != 0 && layout != 1)
        return est_op_fail(ctx, EST_EATTR, "attribute 'layout' is %lld, expected 0 or 1", (long long)layout);
    const est_tval *r = est_in(ctx, 2);
    if ((st = est_attr_int(ctx, "hidden_size", r && r->rank == 3 ? r->dims[2] : -1, &hidden)) != EST_OK) return st;
    if (hidden <= 0) return est_op_fail(ctx, EST_EATTR, "attribute 'hidden_size' is missing or not positive");
    int64_t g = rules[mode_of(ctx->node)].gates;
    if ((st = check_weight(ctx, 1, "W", d, g * hidden, x->dims[2])) != EST_OK ||
        (st = check_weight(ctx, 2, "R", d, g * hidden, hidden)) != EST_OK ||
        (st = check_weight(ctx, 3, "B", d, 2 * g * hidden, -1)) != EST_OK)
        return st;
    int64_t seq = x->dims[layout ? 1 : 0], batch = x->dims[layout ? 0 : 1];
    int64_t y[4] = {seq, d, batch, hidden}, y_layout1[4] = {batch, seq, d, hidden};
    int64_t state[3] = {d, batch, hidden}, state_layout1[3] = {batch, d, hidden};
    if ((st = est_set_out(ctx, 0, x->dtype, 4, layout ? y_layout1 : y)) != EST_OK) return st;
    for (int k = 1; k < 3; k++)
        if ((st = est_set_out(ctx, k, x->dtype, 3, layout ? state_layout1 : state)) != EST_OK) return st;
    return EST_OK;
}

/* ---- training-step rules ------------------------------------------------- */

typedef struct rnn_dims {
    uint64_t seq, batch, input, hidden, dirs;
    uint64_t call_layers, call_input; /* the PyTorch call's layers and first input size */
    double elem_bytes;                /* of Y as the step stores it; 0 when Y is empty */
} rnn_dims;

static rnn_dims dims_of(const est_cost_ctx *c) {
    rnn_dims r = {0};
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    if (!x || x->rank != 3 || !y || y->rank != 4) return r;
    bool layout1 = est_node_attr_int(c->node, "layout", 0) == 1;
    r.seq = (uint64_t)x->dims[layout1 ? 1 : 0];
    r.batch = (uint64_t)x->dims[layout1 ? 0 : 1];
    r.input = (uint64_t)x->dims[2];
    r.dirs = (uint64_t)y->dims[layout1 ? 2 : 1];
    r.hidden = (uint64_t)y->dims[3];
    int64_t layers = est_node_attr_int(c->node, EST_RNN_CALL_LAYERS, 1);
    r.call_layers = layers > 0 ? (uint64_t)layers : 1;
    int64_t call_input = est_node_attr_int(c->node, EST_RNN_CALL_INPUT, 0);
    r.call_input = call_input > 0 ? (uint64_t)call_input : r.input;
    uint64_t n = est_tval_elements(y);
    r.elem_bytes = n ? (double)est_cost_bytes(c, y) / (double)n : 0;
    return r;
}

static void rnn_flops(const est_cost_ctx *c, est_flops *f) {
    const rnn_rule *rule = &rules[mode_of(c->node)];
    rnn_dims d = dims_of(c);
    uint64_t rows = est_mul_sat(est_mul_sat(d.seq, d.batch), d.dirs); /* steps x batch x directions */
    uint64_t gh = est_mul_sat((uint64_t)rule->gates, d.hidden);
    uint64_t products = est_mul_sat(rows, est_mul_sat(2, est_mul_sat(gh, est_add_sat(d.input, d.hidden))));
    uint64_t pointwise = est_mul_sat(rows, est_mul_sat(d.hidden, (uint64_t)(3 * rule->gates + rule->state_update)));
    f->fwd = est_add_sat(products, pointwise);
    f->bwd = est_backward_runs(c) ? est_add_sat(est_mul_sat(2, products), est_mul_sat(2, pointwise)) : 0;
}

/* cuDNN's reserve space of one layer. */
static uint64_t reserve_bytes(const est_cost_ctx *c, const rnn_dims *d) {
    const rnn_rule *rule = &rules[mode_of(c->node)];
    uint64_t es = (uint64_t)d->elem_bytes;
    uint64_t tnh = est_mul_sat(est_mul_sat(d->seq, d->batch), est_mul_sat(d->hidden, d->dirs));
    uint64_t rows = est_mul_sat(est_mul_sat(d->batch, d->hidden), d->dirs);
    uint64_t per_step = es >= 4 ? est_mul_sat(es * (uint64_t)rule->reserve_per_step, tnh)
                                : est_mul_sat((uint64_t)rule->half_bytes, tnh);
    return est_add_sat(per_step, est_mul_sat(es * (uint64_t)rule->reserve_per_row, rows));
}

/* ---- memest verify's executor -------------------------------------------- */

static const int verify_reserve_slots[RNN_MODES] = {[RNN_TANH] = 1, [RNN_GRU] = 4, [RNN_LSTM] = 5};

/* The executor's reserve, and Y when the node omits it (both in X's dtype). */
static uint64_t verify_forward_bytes(const est_cost_ctx *c, const rnn_dims *d) {
    uint64_t es = (uint64_t)d->elem_bytes;
    uint64_t tnh = est_mul_sat(est_mul_sat(d->seq, d->batch), est_mul_sat(d->hidden, d->dirs));
    uint64_t reserve = est_alloc_bytes(est_mul_sat(tnh, es * (uint64_t)verify_reserve_slots[mode_of(c->node)]));
    bool y_omitted = c->node->n_outputs < 1 || c->node->outputs[0] < 0;
    return est_add_sat(reserve, y_omitted ? est_alloc_bytes(est_mul_sat(tnh, es)) : 0);
}

/* dG in X's dtype; dh and dc float32. */
static uint64_t verify_backward_bytes(const est_cost_ctx *c, const rnn_dims *d) {
    rnn_mode m = mode_of(c->node);
    uint64_t nh = est_mul_sat(d->batch, d->hidden), columns = m == RNN_TANH ? 1 : 4;
    uint64_t dg = est_alloc_bytes(est_mul_sat(est_mul_sat(d->seq, nh), (uint64_t)d->elem_bytes * columns));
    return est_add_sat(dg, est_mul_sat(m == RNN_LSTM ? 2 : 1, est_alloc_bytes(est_mul_sat(nh, 4))));
}

/* The executor's contiguous copies of strided inputs (a Transpose of the
 * batch-first input), made for the forward and again for the backward. */
static uint64_t verify_input_copies(const est_cost_ctx *c) {
    uint64_t bytes = 0;
    for (int k = 0; k <= 6; k++)
        if (est_cost_strided(c, k)) bytes = est_add_sat(bytes, est_alloc_bytes(est_cost_bytes(c, est_cost_in(c, k))));
    return bytes;
}

/* X, Y and the states by the executor's shapes: Y is absent from dims_of()
 * when the node omits it, so take the sizes from X, the states and R. */
static rnn_dims verify_dims(const est_cost_ctx *c) {
    rnn_dims r = {0};
    const est_tval *x = est_cost_in(c, 0), *rw = est_cost_in(c, 2);
    if (!x || x->rank != 3 || !rw || rw->rank != 3) return r;
    bool layout1 = est_node_attr_int(c->node, "layout", 0) == 1;
    r.seq = (uint64_t)x->dims[layout1 ? 1 : 0];
    r.batch = (uint64_t)x->dims[layout1 ? 0 : 1];
    r.input = (uint64_t)x->dims[2];
    r.dirs = (uint64_t)rw->dims[0];
    r.hidden = (uint64_t)rw->dims[2];
    uint64_t n = est_tval_elements(x);
    r.elem_bytes = n ? (double)(est_cost_bytes(c, x) / n) : 4; /* X's dtype, as the executor stores it */
    return r;
}

static void rnn_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) {
        for (int k = 0; k <= 6; k++)
            if (k != 4) est_save_input(c, s, k);
        est_save_output(c, s, 0);
        rnn_dims d = verify_dims(c);
        est_save_extra(s, verify_forward_bytes(c, &d));
        return;
    }
    est_save_input(c, s, 0); /* X */
    for (int k = 1; k <= 3; k++) est_save_input(c, s, k); /* the weights: parameters, free to keep */
    est_save_input(c, s, 5); /* initial_h */
    est_save_input(c, s, 6); /* initial_c */
    est_save_output(c, s, 0);
    rnn_dims d = dims_of(c);
    est_save_extra(s, reserve_bytes(c, &d));
}

/* A workspace fit (rnn_rule) at the call's dims. The call's weights are
 * taken as this layer's times the call's layers. */
static uint64_t fitted(const est_cost_ctx *c, const double *fit) {
    rnn_dims d = dims_of(c);
    double es = d.elem_bytes > 0 ? d.elem_bytes : 4.0;
    double weights = 0;
    for (int k = 1; k <= 3; k++) weights += (double)est_cost_bytes(c, est_cost_in(c, k));
    double tn = (double)d.seq * (double)d.batch;
    double bytes = fit[0] + fit[1] * (double)d.call_layers * (double)d.dirs + fit[2] * weights * (double)d.call_layers +
                   fit[3] * (double)d.dirs * tn * (double)d.hidden * es + fit[4] * tn * (double)d.call_input * es;
    if (!(bytes > 0)) return 0;
    return bytes >= 1.8e19 ? UINT64_MAX : (uint64_t)bytes;
}

/* In eval mode cuDNN makes no reserve and takes its own workspace. */
static uint64_t rnn_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) {
        rnn_dims d = verify_dims(c);
        return est_add_sat(verify_input_copies(c), est_cost_train(c) ? 0 : verify_forward_bytes(c, &d));
    }
    const rnn_rule *rule = &rules[mode_of(c->node)];
    return fitted(c, est_cost_train(c) ? rule->fwd : rule->eval);
}

static uint64_t rnn_backward_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) {
        rnn_dims d = verify_dims(c);
        return est_add_sat(verify_input_copies(c), verify_backward_bytes(c, &d));
    }
    return fitted(c, rules[mode_of(c->node)].bwd);
}

/* sequence_lens (slot 4) is an index; P (slot 7), the peepholes, no exporter
 * of PyTorch writes. */
#define RNN_OP(op_name, max_in, max_out) \
    {.name = op_name, .min_inputs = 3, .max_inputs = max_in, .min_outputs = 0, .max_outputs = max_out, \
     .infer = rnn_infer, .nondiff_inputs = EST_SLOT(4), .flops = rnn_flops, .saves = rnn_saves, \
     .workspace = rnn_workspace, .backward_workspace = rnn_backward_workspace, .verify_writes_unread = true}

EST_FAMILY(recurrent,
    RNN_OP("RNN", 6, 2),
    RNN_OP("GRU", 6, 2),
    RNN_OP("LSTM", 8, 3),
);
