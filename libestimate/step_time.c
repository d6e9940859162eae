/*
 * step_time.c: the step's time on a GPU (est_time_estimate), a pass over an
 * estimate's results. docs/time-model.md explains the model and its basis;
 * docs/accuracy.md, "Step time", measures it.
 *
 * Each layer's kernels take their roofline time on the device: FLOPs over
 * the FLOP/s of the unit PyTorch runs them on, or bytes over the memory
 * bandwidth, whichever is longer, each rate a measured fraction of the
 * datasheet's (est_device). Eager PyTorch issues those kernels from the host
 * one op at a time, so the step is two clocks: the host advances by each
 * op's issue cost (est_host), and a kernel starts at the later of its issue
 * and the end of the kernel before it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "report.h"

/* Fractions of the datasheet rates that large kernels reach, measured by
 * time_layers.py's roofline probe on the H100 and the H200 machines
 * (bench/accuracy/data/time/time_layers_*_run1.json): an 8192^3 float32
 * matmul 0.76 and 0.76 of flops_fp32, the same in bfloat16 0.75 and 0.78
 * of flops_bf16; a 3x3 cuDNN convolution with TF32 0.51 and 0.59 of
 * flops_tf32; a 1 GiB copy 0.86 and 0.86 of the bandwidth. */
#define MATMUL_FRACTION 0.75
#define CONV_FRACTION 0.55
#define MEMORY_FRACTION 0.86
/* The shortest kernel: a 1-element add takes 1.1 us on the H100 and 0.9 us
 * on the H200 in the same probe. */
#define KERNEL_FLOOR_S 1e-6

struct est_time {
    est_step_time step;
    est_host host;            /* the costs it was timed with */
    est_layer_time *layers;
    size_t n_layers;
};

typedef struct clocks {
    double host, dev;
} clocks;

const char *est_bound_name(est_bound b) {
    static const char *names[] = {"none", "compute", "memory", "launch"};
    return (unsigned)b < sizeof names / sizeof *names ? names[b] : "unknown";
}

/* The defaults are time_layers.py's eager probe on the nvidia-h100-x1
 * machine (eager: Linear(8, 8) + ReLU chains; eager_noparam: ReLU chains)
 * times HOST_SCALE, the factor by which the zoo's layers cost more to
 * issue than the probe's (fitted on four models: docs/time-model.md). */
#define HOST_SCALE 2.0
void est_host_init(est_host *h) {
    if (!h) return;
    *h = (est_host){.forward_op_s = 16.84e-6 * HOST_SCALE,
                    .forward_param_s = 12.60e-6 * HOST_SCALE,
                    .backward_op_s = 22.83e-6 * HOST_SCALE,
                    .backward_param_s = 39.61e-6 * HOST_SCALE,
                    .optimizer_param_s = 21.59e-6 * HOST_SCALE};
}

static bool is_op(const char *op, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(op, *names)) return true;
    return false;
}

/* The dtype a layer computes in: autocast's low dtype for the ops it
 * lowers, else its first output's as the step stores it (--dtype). */
static est_dtype compute_dtype(const est_report *r, const est_node *n, const est_layer *L) {
    if (r->amp != EST_AMP_NONE && n->op && est_amp_class_of(n->op) == EST_AMP_LOW)
        return r->amp == EST_AMP_BF16 ? EST_DT_BFLOAT16 : EST_DT_FLOAT16;
    return L->n_outputs ? est__stored_dtype(r, L->outputs[0].dtype) : EST_DT_FLOAT;
}

/* FLOP/s of the unit PyTorch runs the layer on. Matrix products in float32
 * run on CUDA cores (torch.backends.cuda.matmul.allow_tf32 is False by
 * default), convolutions on TF32 tensor cores (cudnn.allow_tf32 is True);
 * bfloat16 and float16 on tensor cores; a rate the part lacks falls back to
 * float32's. Ops other than convolutions reach the matmul's fraction (most
 * of them are bound by memory anyway). */
static double flops_rate(const est_device *d, const char *op, est_dtype dt) {
    static const char *const conv[] = {"Conv", "ConvTranspose", NULL};
    bool is_conv = is_op(op, conv);
    double rate = d->flops_fp32;
    if (dt == EST_DT_BFLOAT16 && d->flops_bf16 > 0) rate = d->flops_bf16;
    else if (dt == EST_DT_FLOAT16 && d->flops_fp16 > 0) rate = d->flops_fp16;
    else if (dt == EST_DT_FLOAT && is_conv && d->flops_tf32 > 0) rate = d->flops_tf32;
    return rate * (is_conv ? CONV_FRACTION : MATMUL_FRACTION);
}

/* Roofline time of `kernels` kernels doing `flops` over `bytes`. */
static double roofline(const est_device *d, double rate, double flops, double bytes, int kernels, est_bound *bound) {
    double compute = rate > 0 ? flops / rate : 0;
    double memory = d->memory_bandwidth > 0 ? bytes / (d->memory_bandwidth * MEMORY_FRACTION) : 0;
    double floor = KERNEL_FLOOR_S * kernels;
    *bound = compute >= memory && compute >= floor ? EST_BOUND_COMPUTE
             : memory >= floor                      ? EST_BOUND_MEMORY
                                                    : EST_BOUND_LAUNCH;
    return fmax(fmax(compute, memory), floor);
}

static int param_inputs(const est_report *r, const est_node *n, bool trainable_only) {
    int count = 0;
    for (int32_t k = 0; k < n->n_inputs; k++) {
        int32_t t = n->inputs[k];
        if (t < 0 || r->graph->tensors[t].kind != EST_T_INITIALIZER || r->graph->tensors[t].role != EST_ROLE_PARAM)
            continue;
        count += !trainable_only || (r->trains && r->trains[t]);
    }
    return count;
}

/* A tensor's bytes as the step stores it (the report's are as declared). */
static double stored_bytes(const est_report *r, const est_tensor_info *t) {
    return (double)est__dtype_bytes(est__stored_dtype(r, t->dtype), t->elements);
}

/* Bytes a layer's forward kernel moves: what it reads and writes; an op
 * that computes nothing (a gather, a concatenation) reads what it writes. */
static double forward_bytes(const est_report *r, const est_layer *L) {
    double out = 0, in = 0;
    for (size_t k = 0; k < L->n_outputs; k++) out += stored_bytes(r, &L->outputs[k]);
    if (L->flops_forward == 0) return 2 * out;
    for (size_t k = 0; k < L->n_inputs; k++) in += stored_bytes(r, &L->inputs[k]);
    return in + out;
}

/* The layer's kernels: none for a view or a shape-only layer. Backward
 * reads the output's gradient and what was saved and writes the inputs'
 * gradients, about twice the forward's bytes, in one kernel per input
 * gradient and one per trainable weight. */
static void layer_time(const est_report *r, const est_device *d, size_t i, est_layer_time *lt) {
    const est_layer *L = &r->layers[i];
    const est_node *n = &r->graph->nodes[i];
    *lt = (est_layer_time){0};
    if (L->shape_only || (n->op && n->op->view != EST_VIEW_NONE)) return;
    double rate = flops_rate(d, L->op, compute_dtype(r, n, L));
    double bytes = forward_bytes(r, L);
    lt->forward_s = roofline(d, rate, (double)L->flops_forward, bytes, 1, &lt->forward_bound);
    if (r->mode == EST_MODE_TRAIN && L->flops_backward > 0)
        lt->backward_s = roofline(d, rate, (double)L->flops_backward, 2 * bytes, 1 + param_inputs(r, n, true),
                                  &lt->backward_bound);
}

static void issue(clocks *c, double host_s, double kernel_s) {
    c->host += host_s;
    c->dev = fmax(c->host, c->dev) + kernel_s;
}

static void forward_pass(const est_time *t, const est_report *r, const est_host *h, clocks *c) {
    for (size_t i = 0; i < t->n_layers; i++) {
        if (r->layers[i].shape_only) continue;
        issue(c, h->forward_op_s + h->forward_param_s * param_inputs(r, &r->graph->nodes[i], false),
              t->layers[i].forward_s);
    }
}

/* Backward in reverse order; a checkpointed layer's forward runs again
 * just before its backward. */
static double backward_pass(const est_time *t, const est_report *r, const est_host *h, clocks *c) {
    double kernels = 0;
    for (size_t i = t->n_layers; i-- > 0;) {
        const est_layer *L = &r->layers[i];
        const est_node *n = &r->graph->nodes[i];
        if (L->shape_only) continue;
        if (L->recomputed) {
            issue(c, h->forward_op_s + h->forward_param_s * param_inputs(r, n, false), t->layers[i].forward_s);
            kernels += t->layers[i].forward_s;
        }
        issue(c, h->backward_op_s + h->backward_param_s * param_inputs(r, n, true), t->layers[i].backward_s);
        kernels += t->layers[i].backward_s;
    }
    return kernels;
}

/* Passes over the trainable parameters' bytes that PyTorch's default
 * (foreach) step makes, counted from torch/optim: Adam's _multi_tensor_adam
 * reads and writes 18 (lerp_, mul_, addcmul_, sqrt, div_, add_, addcdiv_),
 * AdamW's two more (the decay's mul_); SGD's add_ 3, with momentum 6;
 * Adafactor's loop is counted as Adam's. */
static double optimizer_passes(est_optimizer o) {
    switch (o) {
    case EST_OPT_SGD: return 3;
    case EST_OPT_MOMENTUM: return 6;
    case EST_OPT_ADAMW: return 20;
    default: return 18;
    }
}

static void optimizer_step(est_time *t, const est_report *r, const est_device *d, const est_host *h, clocks *c) {
    double params = 0, bytes = 0;
    for (size_t p = 0; p < r->n_params; p++)
        if (r->params[p].trainable) {
            params++;
            bytes += (double)r->params[p].bytes; /* as the step stores them */
        }
    est_bound unused;
    double kernels = params ? roofline(d, 0, 0, optimizer_passes(r->optimizer) * bytes, 1, &unused) : 0;
    issue(c, h->optimizer_param_s * params, kernels);
    t->step.device_s[EST_PHASE_OPTIMIZER] = kernels;
}

static void simulate_step(est_time *t, const est_report *r, const est_device *d, const est_host *h) {
    clocks c = {0, 0};
    double end = 0;
    double fwd_kernels = 0;
    for (size_t i = 0; i < t->n_layers; i++) fwd_kernels += t->layers[i].forward_s;
    int64_t micro = r->mode == EST_MODE_TRAIN ? r->grad_accum : 1;
    for (int64_t m = 0; m < micro; m++) {
        forward_pass(t, r, h, &c);
        t->step.phase_s[EST_PHASE_FORWARD] += fmax(c.host, c.dev) - end;
        t->step.device_s[EST_PHASE_FORWARD] += fwd_kernels;
        end = fmax(c.host, c.dev);
        if (r->mode != EST_MODE_TRAIN) break;
        t->step.device_s[EST_PHASE_BACKWARD] += backward_pass(t, r, h, &c);
        t->step.phase_s[EST_PHASE_BACKWARD] += fmax(c.host, c.dev) - end;
        end = fmax(c.host, c.dev);
    }
    if (r->mode == EST_MODE_TRAIN) {
        optimizer_step(t, r, d, h, &c);
        t->step.phase_s[EST_PHASE_OPTIMIZER] = fmax(c.host, c.dev) - end;
    }
    t->step.step_s = fmax(c.host, c.dev);
    t->step.host_s = c.host;
    for (int p = 0; p < EST_PHASE_COUNT; p++) t->step.device_total_s += t->step.device_s[p];
}

static bool valid_host(const est_host *h) {
    const double v[] = {h->forward_op_s, h->forward_param_s, h->backward_op_s, h->backward_param_s,
                        h->optimizer_param_s};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (!isfinite(v[i]) || v[i] < 0) return false;
    return true;
}

est_status est_time_estimate(const est_report *r, const est_device *dev, const est_host *host, est_time **out,
                             est_error *err) {
    if (!out) return est__fail(err, EST_EINVAL, "est_time_estimate: out is NULL");
    *out = NULL;
    if (!r) return est__fail(err, EST_EINVAL, "est_time_estimate: report is NULL");
    est_host defaults;
    if (!host) {
        est_host_init(&defaults);
        host = &defaults;
    }
    if (!valid_host(host))
        return est__fail(err, EST_EINVAL, "est_time_estimate: a host cost is negative or not finite");
    const est_device *d = dev ? dev : r->device;
    est_time *t = calloc(1, sizeof *t);
    if (t) t->layers = calloc(r->n_layers + 1, sizeof *t->layers);
    if (!t || !t->layers) {
        est_time_free(t);
        return est__fail(err, EST_ENOMEM, "out of memory");
    }
    t->n_layers = r->n_layers;
    t->step.device = d;
    t->host = *host;
    for (size_t i = 0; i < r->n_layers; i++) layer_time(r, d, i, &t->layers[i]);
    simulate_step(t, r, d, host);
    *out = t;
    return EST_OK;
}

const est_step_time *est_time_step(const est_time *t) { return t ? &t->step : NULL; }

const est_layer_time *est_time_layer(const est_time *t, size_t i) {
    return t && i < t->n_layers ? &t->layers[i] : NULL;
}

const est_host *est_time_host(const est_time *t) { return t ? &t->host : NULL; }

const char *est_step_time_bound(const est_step_time *st) {
    return st && st->host_s > st->device_total_s ? "host" : "gpu";
}

void est_time_free(est_time *t) {
    if (!t) return;
    free(t->layers);
    free(t);
}
