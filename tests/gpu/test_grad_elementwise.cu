/*
 * test_grad_elementwise.cu: the verify executor's elementwise and shape ops
 * (verify/ops_elementwise.cu, verify/ops_unary.cu, verify/ops_shape.c) on
 * small random shapes,
 * like test_grad.cu does for the compute kernels:
 *   - forward against a plain host implementation;
 *   - backward against central finite differences of the forward: the loss is
 *     sum(Y * R) for a fixed random R, so dY = R.
 * Exits 77 (skipped) when there is no CUDA device.
 *
 * It links the executor's real tensor runtime (verify/tensor.cu: views,
 * strides, host copies, vx_contiguous) and brings only the rest of a minimal
 * runtime (allocator, vx_fail, est_node_attr_*). Each case runs as exec.c
 * runs a node: host-only inputs are uploaded unless the op reads them on the
 * host (host_inputs), strided tensors are made contiguous for kernels that do
 * not read them in place (vx_op.strided), and before backward every input and
 * output the op does not save (saves_inputs / saves_outputs / saves_fn) is
 * replaced by a storage-less stub, as exec.c's stub_of does.
 *   nvcc -std=c++17 -I verify -I libestimate -I layers tests/gpu/test_grad_elementwise.cu \
 *        verify/tensor.cu verify/ops_elementwise.cu verify/ops_unary.cu verify/ops_shape.c \
 *        verify/ops_index.cu
 * (the index family's cases, verify/ops_index.cu, are in grad_index_cases.h)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "vx_internal.h"

/* ---- minimal runtime (tensor.cu brings the rest) ---------------------------------- */

static long g_live;

extern "C" {
void *vx_malloc(vx_ctx *ctx, size_t bytes, vx_category cat) {
    (void)ctx;
    (void)cat;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    g_live++;
    return p;
}
void vx_free(vx_ctx *ctx, void *p) {
    if (!p) return;
    cudaStreamSynchronize((cudaStream_t)ctx->stream);
    cudaFree(p);
    g_live--;
}
void *vx_workspace(vx_ctx *ctx, size_t bytes) { return vx_malloc(ctx, bytes, VX_CAT_TEMP); }
void vx_alloc_retag(vx_ctx *ctx, void *p, vx_category cat) { (void)ctx; (void)p; (void)cat; }
void *vx_cublas(vx_ctx *ctx) { return ctx->cublas; }
bool vx_conv_tf32(vx_ctx *ctx) { (void)ctx; return false; } /* gradients checked in float32 */
void vx_profile_section(vx_ctx *ctx, const char *what) { (void)ctx; (void)what; }
void *vx_stream(vx_ctx *ctx) { return ctx->stream; }
vx_status vx_fail(vx_ctx *ctx, vx_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
    va_end(ap);
    return st;
}
uint64_t vx_seed(vx_ctx *ctx) { return ctx->seed; }

#include "attr_readers.h"
}

/* ---- test scaffolding --------------------------------------------------------------- */

static vx_ctx g_ctx;
static int g_failures, g_checks;
static unsigned long long g_rng = 88172645463325252ull;
static double urand() { /* [-1, 1) */
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

struct HT { /* host tensor */
    vx_dtype dt = VX_F32;
    std::vector<int64_t> dims;
    std::vector<float> f;
    std::vector<int64_t> i;   /* VX_I64, and VX_BOOL as 0 / 1 */
    bool host_only = false;   /* give only the host copy (a constant) */
    /* A strided view (run_case's own run only): storage vbase, element
     * strides vst, offset voff; f holds the view's logical values. The finite
     * differences run on contiguous copies of f. */
    bool view = false;
    std::vector<float> vbase;
    std::vector<int64_t> vst;
    int64_t voff = 0;
    bool absent = false;
    int64_t numel() const { int64_t n = 1; for (auto d : dims) n *= d; return n; }
};
static HT randf(std::vector<int64_t> d) { HT t; t.dims = d; t.f.resize(t.numel()); for (auto &v : t.f) v = (float)urand(); return t; }
static HT ints(std::vector<int64_t> d, std::vector<int64_t> v, bool host = true) {
    HT t; t.dt = VX_I64; t.dims = d; t.i = v; t.host_only = host; return t;
}
static HT vec(std::vector<int64_t> v) { return ints({(int64_t)v.size()}, v); }
static HT scalarf(float v, bool host = true) { HT t; t.f = {v}; t.host_only = host; return t; }
static HT boolt(std::vector<int64_t> d, std::vector<int64_t> v, bool host = false) {
    HT t; t.dt = VX_BOOL; t.dims = d; t.i = v; t.host_only = host; return t;
}
static HT absent() { HT t; t.absent = true; return t; }
static HT mk(std::vector<int64_t> d) { HT t; t.dims = d; t.f.assign(t.numel(), 0.f); return t; }
/* Values away from zero (divisors). */
static HT awayf(std::vector<int64_t> d) {
    HT t = randf(d);
    for (auto &v : t.f) v = (v < 0 ? -1.f : 1.f) * (0.5f + fabsf(v));
    return t;
}
/* A strided view of a random storage of `storage` elements. */
static HT view_of(int64_t storage, std::vector<int64_t> dims, std::vector<int64_t> st, int64_t off) {
    HT t;
    t.dims = dims;
    t.view = true;
    t.vbase.resize(storage);
    for (auto &v : t.vbase) v = (float)urand();
    t.vst = st;
    t.voff = off;
    t.f.resize(t.numel());
    for (int64_t e = 0; e < t.numel(); e++) {
        int64_t r = e, o = off;
        for (int k = (int)dims.size() - 1; k >= 0; k--) { o += (r % dims[k]) * st[k]; r /= dims[k]; }
        t.f[e] = t.vbase[o];
    }
    return t;
}
/* The logical values of a view after its storage changed. */
static HT refresh(HT t) {
    for (int64_t e = 0; e < t.numel(); e++) {
        int64_t r = e, o = t.voff;
        for (int k = (int)t.dims.size() - 1; k >= 0; k--) { o += (r % t.dims[k]) * t.vst[k]; r /= t.dims[k]; }
        t.f[e] = t.vbase[o];
    }
    return t;
}
/* x [d0, d1, d2] as the transpose (2, 1, 0) of a contiguous [d2, d1, d0] storage. */
static HT transposed3(int64_t a, int64_t b, int64_t c) { return view_of(a * b * c, {a, b, c}, {1, a, a * b}, 0); }

struct Node { /* owns its attributes */
    struct A {
        std::string name, s;
        est_attr_type type;
        int64_t i = 0;
        double f = 0;
        std::vector<int64_t> ints;
    };
    std::string op;
    std::vector<A> spec;
    std::vector<est_attr> built;
    int64_t opset = 18;
    int n_out = 1;
    Node(const char *o) : op(o) {}
    Node &i(const char *n, int64_t v) { A a; a.name = n; a.type = EST_ATTR_INT; a.i = v; spec.push_back(a); return *this; }
    Node &f(const char *n, double v) { A a; a.name = n; a.type = EST_ATTR_FLOAT; a.f = v; spec.push_back(a); return *this; }
    Node &s(const char *n, const char *v) { A a; a.name = n; a.type = EST_ATTR_STRING; a.s = v; spec.push_back(a); return *this; }
    Node &is(const char *n, std::vector<int64_t> v) { A a; a.name = n; a.type = EST_ATTR_INTS; a.ints = v; spec.push_back(a); return *this; }
    Node &ops(int64_t v) { opset = v; return *this; }
    est_attr *attrs() {
        built.clear();
        for (A &a : spec) {
            est_attr e;
            memset(&e, 0, sizeof e);
            e.name = (char *)a.name.c_str();
            e.type = a.type;
            e.i = a.i;
            e.f = a.f;
            e.s = (char *)a.s.c_str();
            e.ints = a.ints.data();
            e.n = (int64_t)a.ints.size();
            built.push_back(e);
        }
        return built.data();
    }
};

static const vx_op *find_op(const char *name) {
    for (size_t k = 0; k < vx_ops_elementwise_count; k++)
        if (!strcmp(vx_ops_elementwise[k].name, name)) return &vx_ops_elementwise[k];
    for (size_t k = 0; k < vx_ops_unary_count; k++)
        if (!strcmp(vx_ops_unary[k].name, name)) return &vx_ops_unary[k];
    for (size_t k = 0; k < vx_ops_shape_count; k++)
        if (!strcmp(vx_ops_shape[k].name, name)) return &vx_ops_shape[k];
    for (size_t k = 0; k < vx_ops_index_count; k++)
        if (!strcmp(vx_ops_index[k].name, name)) return &vx_ops_index[k];
    for (size_t k = 0; k < vx_ops_layout_count; k++)
        if (!strcmp(vx_ops_layout[k].name, name)) return &vx_ops_layout[k];
    for (size_t k = 0; k < vx_ops_select_count; k++)
        if (!strcmp(vx_ops_select[k].name, name)) return &vx_ops_select[k];
    for (size_t k = 0; k < vx_ops_math_count; k++)
        if (!strcmp(vx_ops_math[k].name, name)) return &vx_ops_math[k];
    for (size_t k = 0; k < vx_ops_datadep_count; k++)
        if (!strcmp(vx_ops_datadep[k].name, name)) return &vx_ops_datadep[k];
    return NULL;
}

/* logical: a view HT as a contiguous tensor of its values. */
static vx_tensor *upload(const HT &h, bool logical) {
    if (h.absent) return NULL;
    int rank = (int)h.dims.size();
    if (h.view && !logical) {
        int64_t n = (int64_t)h.vbase.size();
        vx_tensor *b = vx_tensor_new(&g_ctx, VX_F32, 1, &n, VX_CAT_ACTIVATIONS);
        vx_tensor_upload(&g_ctx, b, h.vbase.data());
        vx_tensor *v = vx_tensor_strided_view(&g_ctx, b, rank, h.dims.data(), h.vst.data(), h.voff);
        vx_tensor_release(&g_ctx, b);
        return v;
    }
    if (h.host_only) {
        vx_tensor *t = vx_tensor_new_host(&g_ctx, h.dt, rank, h.dims.data());
        if (h.dt == VX_F32) memcpy(t->host_f32, h.f.data(), sizeof(float) * h.f.size());
        else memcpy(t->host_i64, h.i.data(), sizeof(int64_t) * h.i.size());
        return t;
    }
    vx_tensor *t = vx_tensor_new(&g_ctx, h.dt, rank, h.dims.data(), VX_CAT_ACTIVATIONS);
    if (h.dt == VX_F32) vx_tensor_upload(&g_ctx, t, h.f.data());
    else if (h.dt == VX_I64) vx_tensor_upload(&g_ctx, t, h.i.data());
    else {
        std::vector<uint8_t> b(h.i.size());
        for (size_t k = 0; k < b.size(); k++) b[k] = h.i[k] != 0;
        vx_tensor_upload(&g_ctx, t, b.data());
        cudaStreamSynchronize((cudaStream_t)g_ctx.stream);
    }
    return t;
}
static HT download(vx_tensor *t) {
    HT h;
    h.dt = t->dtype;
    h.dims.assign(t->dims, t->dims + t->rank);
    if (t->dtype == VX_F32) {
        h.f.resize(t->numel);
        vx_tensor_download(&g_ctx, t, h.f.data());
    } else if (t->dtype == VX_I64) {
        h.i.resize(t->numel);
        vx_tensor_download(&g_ctx, t, h.i.data());
    } else {
        std::vector<uint8_t> b(t->numel);
        vx_tensor_download(&g_ctx, t, b.data());
        h.i.assign(b.begin(), b.end());
    }
    vx_sync(&g_ctx);
    return h;
}

using Check = std::function<bool(vx_run &, const HT &y, const std::vector<float> &R, const std::vector<HT> &grads)>;

struct Case {
    Node node;
    std::vector<HT> in;
    std::vector<bool> grad;   /* inputs checked by finite differences */
    bool training = true;
    double eps = 1e-2;
    std::function<HT(const std::vector<HT> &)> ref; /* host forward, or empty */
    Check check;              /* extra checks after backward, or empty */
    int out = 0;              /* the output checked (Split's pieces); the others get no gradient */
};

static void setup_run(vx_run *run, est_node *en, Node &nd, std::vector<vx_tensor *> &ins, int32_t *outs, bool training) {
    memset(run, 0, sizeof *run);
    memset(en, 0, sizeof *en);
    en->name = (char *)nd.op.c_str();
    en->op_type = (char *)nd.op.c_str();
    en->domain = (char *)"";
    en->attrs = nd.attrs();
    en->n_attrs = (int32_t)nd.spec.size();
    en->opset = nd.opset;
    en->n_inputs = (int32_t)ins.size();
    en->n_outputs = nd.n_out;
    for (int k = 0; k < nd.n_out; k++) outs[k] = k;
    en->outputs = outs;
    run->node = en;
    run->n_in = (int)ins.size();
    run->n_out = nd.n_out;
    for (size_t k = 0; k < ins.size(); k++) run->in[k] = ins[k];
    run->training = training;
    run->opset = nd.opset;
    for (int k = 0; k < VX_MAX_IO; k++) { run->out_cat[k] = VX_CAT_ACTIVATIONS; run->grad_cat[k] = VX_CAT_TEMP; }
}

static void release_run(vx_run *run) {
    for (int k = 0; k < VX_MAX_IO; k++) {
        vx_tensor_release(&g_ctx, run->in[k]);
        vx_tensor_release(&g_ctx, run->out[k]);
        vx_tensor_release(&g_ctx, run->grad_out[k]);
        vx_tensor_release(&g_ctx, run->grad_in[k]);
    }
    for (int k = 0; k < 4; k++) vx_tensor_release(&g_ctx, run->saved[k]);
}

/* exec.c's forward preparation: uploads, host copies, contiguous copies. */
static vx_status run_forward(const vx_op *op, vx_run *run) {
    vx_tensor *orig[VX_MAX_IO] = {NULL};
    for (int k = 0; k < run->n_in; k++) {
        vx_tensor *t = run->in[k];
        if (!t) continue;
        vx_status st = (op->host_inputs & VX_SLOT(k)) ? vx_tensor_to_host(&g_ctx, t) : vx_tensor_to_device(&g_ctx, t);
        if (st) return st;
    }
    for (int k = 0; k < run->n_in; k++) {
        orig[k] = run->in[k];
        if (!run->in[k] || !run->in[k]->strided || (op->strided & VX_STRIDED_IN)) continue;
        run->in[k] = vx_contiguous(&g_ctx, run->in[k]);
    }
    vx_status st = op->forward(&g_ctx, run);
    for (int k = 0; k < run->n_in; k++) {
        if (run->in[k] != orig[k]) vx_tensor_release(&g_ctx, run->in[k]);
        run->in[k] = orig[k];
    }
    return st;
}

/* exec_train.c's backward preparation: contiguous copies of the strided
 * tensors the kernel cannot read, in their places for the call. */
static vx_status run_backward(const vx_op *op, vx_run *run) {
    vx_tensor *tmp[3 * VX_MAX_IO] = {NULL}, *keep[3 * VX_MAX_IO] = {NULL}, **where_[3 * VX_MAX_IO] = {NULL};
    int nt = 0;
    for (int k = 0; k < VX_MAX_IO; k++) {
        vx_tensor **slot[3] = {&run->in[k], &run->out[k], &run->grad_out[k]};
        for (int j = 0; j < 3; j++) {
            vx_tensor *t = *slot[j];
            uint32_t okb = j < 2 ? VX_STRIDED_SAVED : VX_STRIDED_GRAD;
            if (!t || !t->strided || !t->data || (op->strided & okb)) continue;
            keep[nt] = t;
            where_[nt] = slot[j];
            *slot[j] = tmp[nt++] = vx_contiguous(&g_ctx, t);
        }
    }
    vx_status st = op->backward(&g_ctx, run);
    for (int k = 0; k < nt; k++) {
        vx_tensor_release(&g_ctx, tmp[k]);
        *where_[k] = keep[k];
    }
    return st;
}

/* exec.c's stub_of: shape and layout, no storage. */
static vx_tensor *stub_of(const vx_tensor *t) {
    vx_tensor *s = (vx_tensor *)calloc(1, sizeof *s);
    s->dtype = t->dtype;
    s->rank = t->rank;
    memcpy(s->dims, t->dims, sizeof s->dims);
    s->numel = t->numel;
    s->cat = t->cat;
    s->refs = 1;
    s->strided = t->strided;
    memcpy(s->strides, t->strides, sizeof s->strides);
    return s;
}

/* Forward only (contiguous inputs): output 0. */
static bool forward(Case &c, const std::vector<HT> &in, HT *out) {
    const vx_op *op = find_op(c.node.op.c_str());
    std::vector<vx_tensor *> ins;
    for (auto &h : in) ins.push_back(upload(h, true));
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, ins, outs, c.training);
    vx_status st = run_forward(op, &run);
    if (st) { printf("  forward failed: %d %s\n", st, g_ctx.message); release_run(&run); return false; }
    *out = download(run.out[c.out]);
    release_run(&run);
    return true;
}

static double loss_of(const HT &y, const std::vector<float> &R) {
    double s = 0;
    for (size_t k = 0; k < y.f.size(); k++) s += (double)y.f[k] * R[k];
    return s;
}

static bool close(double a, double b, double atol, double rtol) { return fabs(a - b) <= atol + rtol * fabs(b); }

#include "grad_half_elementwise.h"

static void run_case(const char *name, Case c) {
    const vx_op *op = find_op(c.node.op.c_str());
    if (!op) { printf("FAIL %s: op %s missing\n", name, c.node.op.c_str()); g_failures++; return; }
    bool ok = true;
    std::vector<vx_tensor *> ins;
    for (auto &h : c.in) ins.push_back(upload(h, false));
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, ins, outs, c.training);
    for (size_t k = 0; k < c.in.size(); k++) run.need_grad[k] = k < c.grad.size() && c.grad[k];
    vx_status st = run_forward(op, &run);
    if (st) { printf("FAIL %s: forward: %d %s\n", name, st, g_ctx.message); g_failures++; release_run(&run); return; }
    if (!run.out[c.out]) { printf("FAIL %s: no output\n", name); g_failures++; release_run(&run); return; }
    HT y = download(run.out[c.out]);
    /* the executor's rule: what backward does not keep becomes a stub */
    uint32_t si = op->saves_inputs, so = op->saves_outputs;
    if (op->saves_fn) op->saves_fn(&run, &si, &so);
    for (int k = 0; k < run.n_in; k++)
        if (run.in[k] && !(si & VX_SLOT(k))) {
            vx_tensor *s = stub_of(run.in[k]);
            vx_tensor_release(&g_ctx, run.in[k]);
            run.in[k] = s;
        }
    for (int k = 0; k < run.n_out; k++)
        if (run.out[k] && !(so & VX_SLOT(k))) {
            vx_tensor *s = stub_of(run.out[k]);
            vx_tensor_release(&g_ctx, run.out[k]);
            run.out[k] = s;
        }
    std::vector<float> R(y.f.size());
    for (auto &v : R) v = (float)urand();
    bool any_grad = false;
    for (bool b : c.grad) any_grad |= b;
    std::vector<HT> grads(c.in.size());
    if (any_grad && !op->backward) { printf("FAIL %s: no backward\n", name); ok = false; }
    if (any_grad && op->backward) {
        HT r; r.dims = y.dims; r.f = R;
        run.grad_out[c.out] = upload(r, true);
        st = run_backward(op, &run);
        if (st) { printf("FAIL %s: backward: %d %s\n", name, st, g_ctx.message); g_failures++; release_run(&run); return; }
        for (size_t k = 0; k < c.in.size(); k++)
            if (run.need_grad[k]) {
                if (!run.grad_in[k]) { printf("FAIL %s: no gradient for input %zu\n", name, k); ok = false; continue; }
                if (run.grad_in[k]->dtype != VX_F32 || run.grad_in[k]->numel != c.in[k].numel()) {
                    printf("FAIL %s: gradient %zu has the wrong shape\n", name, k);
                    ok = false;
                    continue;
                }
                grads[k] = download(run.grad_in[k]);
            }
    }
    if (c.check) {
        g_checks++;
        if (!c.check(run, y, R, grads)) ok = false;
    }
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) { printf("FAIL %s: CUDA error %s\n", name, cudaGetErrorString(ce)); g_failures++; exit(1); }
    release_run(&run);
    if (c.ref) {
        HT want = c.ref(c.in);
        g_checks++;
        if (want.dims != y.dims) { printf("FAIL %s: output shape differs\n", name); ok = false; }
        else {
            double worst = 0;
            for (size_t k = 0; k < want.f.size(); k++) {
                double d = fabs((double)want.f[k] - y.f[k]) / (1e-3 + fabs(want.f[k]));
                if (!close(y.f[k], want.f[k], 1e-4, 1e-3) && !(d <= worst)) worst = d;
            }
            if (worst > 0) { printf("FAIL %s: forward differs from the host reference (rel %.3g)\n", name, worst); ok = false; }
        }
    }
    for (size_t k = 0; k < c.in.size(); k++) {
        if (k >= c.grad.size() || !c.grad[k]) continue;
        HT &x = c.in[k];
        int64_t n = x.numel();
        int samples = n < 24 ? (int)n : 24;
        double worst = 0;
        int64_t worst_at = -1;
        double wa = 0, wn = 0;
        for (int s = 0; s < samples; s++) {
            int64_t e = samples == n ? s : (int64_t)((urand() + 1) * 0.5 * n) % n;
            std::vector<HT> ip = c.in, im = c.in;
            ip[k].f[e] += (float)c.eps;
            im[k].f[e] -= (float)c.eps;
            HT yp, ym;
            if (!forward(c, ip, &yp) || !forward(c, im, &ym)) { ok = false; break; }
            double num = (loss_of(yp, R) - loss_of(ym, R)) / (2 * c.eps);
            double ana = grads[k].f.empty() ? NAN : grads[k].f[e];
            g_checks++;
            if (!(close(ana, num, 2e-2, 2e-2))) {
                double d = fabs(ana - num);
                if (!(d <= worst)) { worst = d; worst_at = e; wa = ana; wn = num; }
            }
        }
        if (worst_at >= 0) {
            printf("FAIL %s: d/dinput%zu[%lld]: backward %.6g, finite differences %.6g\n", name, k, (long long)worst_at, wa, wn);
            ok = false;
        }
    }
    printf("%s %s\n", ok ? "ok  " : "FAIL", name);
    if (!ok) g_failures++;
    if (op->dtypes & VX_HALF) {
        half_case(name, c, VX_BF16);
        half_case(name, c, VX_F16);
    }
}

/* ---- host references ------------------------------------------------------------------ */

/* numpy broadcast of several shapes */
static std::vector<int64_t> bshape(std::vector<std::vector<int64_t>> s) {
    size_t r = 0;
    for (auto &d : s) r = std::max(r, d.size());
    std::vector<int64_t> o(r, 1);
    for (auto &d : s)
        for (size_t i = 0; i < d.size(); i++) {
            int64_t &v = o[r - d.size() + i];
            if (d[i] != 1) v = d[i];
        }
    return o;
}
/* element of x (shape xd) read at output index e of shape od */
static int64_t boff(const std::vector<int64_t> &od, const std::vector<int64_t> &xd, int64_t e) {
    int64_t off = 0, s = 1;
    for (int d = (int)od.size() - 1; d >= 0; d--) {
        int64_t c = e % od[d];
        e /= od[d];
        int xd_i = d - ((int)od.size() - (int)xd.size());
        if (xd_i < 0) continue;
        if (xd[xd_i] != 1) off += c * s;
        s *= xd[xd_i];
    }
    return off;
}

static HT ref_binary(const HT &a, const HT &b, char op) {
    HT y = mk(bshape({a.dims, b.dims}));
    for (int64_t e = 0; e < y.numel(); e++) {
        double x = a.f[boff(y.dims, a.dims, e)], z = b.f[boff(y.dims, b.dims, e)];
        y.f[e] = (float)(op == '+' ? x + z : op == '-' ? x - z : op == '*' ? x * z : x / z);
    }
    return y;
}

static HT ref_unary(const HT &x, std::function<double(double)> fn) {
    HT y = mk(x.dims);
    for (size_t e = 0; e < x.f.size(); e++) y.f[e] = (float)fn(x.f[e]);
    return y;
}

static HT ref_where(const HT &c, const HT &x, const HT &z) {
    HT y = mk(bshape({c.dims, x.dims, z.dims}));
    for (int64_t e = 0; e < y.numel(); e++)
        y.f[e] = c.i[boff(y.dims, c.dims, e)] ? x.f[boff(y.dims, x.dims, e)] : z.f[boff(y.dims, z.dims, e)];
    return y;
}

static HT ref_expand(const HT &x, const HT &shape) {
    HT y = mk(bshape({x.dims, shape.i}));
    for (int64_t e = 0; e < y.numel(); e++) y.f[e] = x.f[boff(y.dims, x.dims, e)];
    return y;
}

/* numpy's slice(start, end, step) indices on a dim of d */
static std::vector<int64_t> slice_indices(int64_t d, int64_t b, int64_t e, int64_t s) {
    auto adj = [&](int64_t v, bool is_start) {
        if (v < 0) { v += d; if (v < 0) v = s < 0 ? -1 : 0; }
        else if (v >= d) v = s < 0 ? d - 1 : d;
        (void)is_start;
        return v;
    };
    b = adj(b, true);
    e = adj(e, false);
    std::vector<int64_t> r;
    for (int64_t k = b; s > 0 ? k < e : k > e; k += s) r.push_back(k);
    return r;
}
static HT ref_slice(const HT &x, std::vector<int64_t> st, std::vector<int64_t> en, std::vector<int64_t> ax,
                    std::vector<int64_t> sp) {
    int r = (int)x.dims.size();
    std::vector<std::vector<int64_t>> idx(r);
    for (int i = 0; i < r; i++) for (int64_t k = 0; k < x.dims[i]; k++) idx[i].push_back(k);
    for (size_t j = 0; j < st.size(); j++) {
        int a = (int)(ax.empty() ? j : ax[j] < 0 ? ax[j] + r : ax[j]);
        idx[a] = slice_indices(x.dims[a], st[j], en[j], sp.empty() ? 1 : sp[j]);
    }
    std::vector<int64_t> od;
    for (auto &v : idx) od.push_back((int64_t)v.size());
    HT y = mk(od);
    for (int64_t e = 0; e < y.numel(); e++) {
        int64_t rem = e, off = 0, s = 1;
        for (int i = r - 1; i >= 0; i--) {
            off += idx[i][rem % od[i]] * s;
            rem /= od[i];
            s *= x.dims[i];
        }
        y.f[e] = x.f[off];
    }
    return y;
}

static HT ref_concat(const std::vector<HT> &in, int axis) {
    int r = (int)in[0].dims.size();
    if (axis < 0) axis += r;
    std::vector<int64_t> od = in[0].dims;
    od[axis] = 0;
    for (auto &t : in) od[axis] += t.dims[axis];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= od[i];
    for (int i = axis + 1; i < r; i++) inner *= od[i];
    HT y = mk(od);
    int64_t k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (auto &t : in) {
            int64_t w = t.dims[axis] * inner;
            for (int64_t j = 0; j < w; j++) y.f[k++] = t.f[o * w + j];
        }
    return y;
}

static std::function<HT(const std::vector<HT> &)> reshaped(std::vector<int64_t> dims) {
    return [dims](const std::vector<HT> &in) { HT y = in[0]; y.dims = dims; y.view = false; return y; };
}

/* ---- cases ---------------------------------------------------------------------------- */

/* Integer or bool outputs: y.i against want, element by element. */
static Check exact_check(std::vector<int64_t> want) {
    return [want](vx_run &, const HT &y, const std::vector<float> &, const std::vector<HT> &) {
        if (y.i != want) { printf("  integer output differs from the host reference\n"); return false; }
        return true;
    };
}

/* Add, Sub, Mul, Div, comparisons and logical ops, Mod, Max, Min, Not,
 * RandomUniformLike, the unary ops, Dropout, Where (verify/ops_elementwise.cu,
 * verify/ops_unary.cu) */
#include "grad_elementwise_cases.h"

/* Expand, Reshape, Flatten, Squeeze, Unsqueeze, Slice, Concat, Cast, Identity (verify/ops_shape.c) */
#include "grad_shape_cases.h"

/* Split, Pad, CumSum, Trilu, GatherND, ScatterND (verify/ops_index.cu) */
#include "grad_index_cases.h"

/* Tile, DepthToSpace, SpaceToDepth, ReverseSequence, EyeLike, OneHot, Size,
 * the random generators (verify/ops_layout.cu), ScatterElements, Scatter,
 * TopK (verify/ops_select.cu) */
#include "grad_layout_cases.h"

/* Max / Min of n inputs, Pow with a tensor exponent, IsNaN, IsInf (verify/ops_math.cu) */
#include "grad_math_cases.h"

/* Softsign .. Atanh (verify/ops_unary.cu), PRelu, Sum, Mean, the bitwise ops,
 * CastLike (verify/ops_math.cu) */
#include "grad_unary2_cases.h"

/* NonZero, Compress, Unique, Multinomial (verify/ops_datadep.cu) */
#include "grad_datadep_cases.h"

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps the lines before it */
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    cudaStream_t s;
    cudaStreamCreate(&s);
    g_ctx.stream = s;
    g_ctx.seed = 12345;

    binary_cases();
    compare_cases();
    unary_cases();
    dropout_cases();
    where_cases();
    shape_cases();
    index_cases();
    layout_cases();
    math_cases();
    unary2_cases();
    prelu_sum_cases();
    bitwise_cases();
    datadep_cases();

    printf("%d checks, %d failing cases, %ld device blocks still allocated\n", g_checks, g_failures, g_live);
    cudaStreamDestroy(s);
    return g_failures || g_live ? 1 : 0;
}
