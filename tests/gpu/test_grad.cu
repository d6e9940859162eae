/*
 * test_grad.cu: the verify executor's compute kernels (verify/ops_gemm.cu,
 * ops_conv.cu, ops_norm.cu, ops_pool.cu, ops_softmax.cu, ops_gather.cu,
 * ops_recurrent.cu, ops_attention.cu, ops_resample.cu, ops_reduce.cu,
 * ops_rmsnorm.cu, ops_sample.cu) on small random shapes:
 *   - forward against a plain host implementation;
 *   - backward against central finite differences of the forward: the loss is
 *     sum(Y * R) for a fixed random R, so dY = R (Y: output 0, or the
 *     case's loss_out).
 * Exits 77 (skipped) when there is no CUDA device.
 *
 * Standalone: it brings a minimal runtime (vx_ctx, tensors, allocator,
 * vx_fail, est_node_attr_*) so it links only the kernel files and cuBLAS:
 *   nvcc -std=c++17 -I verify -I libestimate -I layers tests/gpu/test_grad.cu \
 *        verify/ops_{gemm,conv,norm,pool,softmax,gather,recurrent,attention,resample}.cu -lcublas
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>
#include <string>
#include <vector>

#include "vx.h"

/* ---- minimal runtime ------------------------------------------------------------- */

struct vx_ctx {
    cudaStream_t stream;
    cublasHandle_t blas;
    char message[512];
    long live;
};

extern "C" {
void *vx_malloc(vx_ctx *ctx, size_t bytes, vx_category cat) {
    (void)cat;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    ctx->live++;
    return p;
}
void vx_free(vx_ctx *ctx, void *p) {
    if (!p) return;
    cudaStreamSynchronize(ctx->stream);
    cudaFree(p);
    ctx->live--;
}
void *vx_workspace(vx_ctx *ctx, size_t bytes) { return vx_malloc(ctx, bytes, VX_CAT_TEMP); }
size_t vx_dtype_size(vx_dtype dt) { return dt == VX_F32 ? 4 : dt == VX_I64 ? 8 : dt == VX_BOOL ? 1 : 2; }
vx_tensor *vx_tensor_new(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims, vx_category cat) {
    vx_tensor *t = (vx_tensor *)calloc(1, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) { t->dims[i] = dims[i]; t->numel *= dims[i]; }
    t->cat = cat;
    t->refs = 1;
    if (t->numel > 0) {
        t->data = vx_malloc(ctx, (size_t)t->numel * vx_dtype_size(dt), cat);
        if (!t->data) { free(t); return NULL; }
    }
    return t;
}
/* A host-only tensor (Resize keeps its scales so). */
vx_tensor *vx_tensor_new_host(vx_ctx *ctx, vx_dtype dt, int rank, const int64_t *dims) {
    (void)ctx;
    vx_tensor *t = (vx_tensor *)calloc(1, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) { t->dims[i] = dims[i]; t->numel *= dims[i]; }
    t->cat = VX_CAT_ACTIVATIONS;
    t->refs = 1;
    if (vx_dtype_is_float(dt)) t->host_f32 = (float *)calloc((size_t)t->numel + 1, sizeof(float));
    else t->host_i64 = (int64_t *)calloc((size_t)t->numel + 1, sizeof(int64_t));
    return t;
}
vx_tensor *vx_tensor_retain(vx_tensor *t) { if (t) t->refs++; return t; }
void vx_tensor_release(vx_ctx *ctx, vx_tensor *t) {
    if (!t || --t->refs > 0) return;
    if (t->base) vx_tensor_release(ctx, t->base);
    else vx_free(ctx, t->data);
    free(t->host_i64);
    free(t->host_f32);
    free(t);
}
/* The test's tensors are contiguous: vx_contiguous returns them. */
vx_tensor *vx_contiguous(vx_ctx *ctx, vx_tensor *t) { (void)ctx; return vx_tensor_retain(t); }
vx_tensor *vx_tensor_strided_view(vx_ctx *ctx, vx_tensor *t, int rank, const int64_t *dims, const int64_t *strides,
                                  int64_t offset) {
    (void)ctx;
    vx_tensor *v = (vx_tensor *)calloc(1, sizeof *v);
    vx_tensor *base = t->base ? t->base : t;
    *v = *t;
    v->host_i64 = NULL;
    v->host_f32 = NULL;
    v->rank = rank;
    v->numel = 1;
    for (int i = 0; i < rank; i++) { v->dims[i] = dims[i]; v->strides[i] = strides[i]; v->numel *= dims[i]; }
    v->strided = true;
    v->data = (char *)t->data + offset * (int64_t)vx_dtype_size(t->dtype);
    v->refs = 1;
    v->base = base;
    base->refs++;
    return v;
}
vx_tensor *vx_out_new(vx_ctx *ctx, vx_run *run, int k, vx_dtype dt, int rank, const int64_t *dims) {
    return run->out[k] = vx_tensor_new(ctx, dt, rank, dims, run->out_cat[k]);
}
vx_tensor *vx_grad_new(vx_ctx *ctx, vx_run *run, int k) {
    vx_dtype dt = vx_dtype_is_float(run->in[k]->dtype) ? run->in[k]->dtype : VX_F32;
    return run->grad_in[k] = vx_tensor_new(ctx, dt, run->in[k]->rank, run->in[k]->dims, run->grad_cat[k]);
}
void *vx_cublas(vx_ctx *ctx) { return ctx->blas; }
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
uint64_t vx_seed(vx_ctx *ctx) { (void)ctx; return 1; }

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
    std::vector<int64_t> i;
    bool host_only = false; /* int64: give only host_i64 */
    int64_t numel() const { int64_t n = 1; for (auto d : dims) n *= d; return n; }
};
static HT randf(std::vector<int64_t> d) { HT t; t.dims = d; t.f.resize(t.numel()); for (auto &v : t.f) v = (float)urand(); return t; }
static HT ints(std::vector<int64_t> d, std::vector<int64_t> v) { HT t; t.dt = VX_I64; t.dims = d; t.i = v; return t; }

struct Node { /* owns its attributes; est_attr views are built where the node lives (attrs()) */
    struct A {
        std::string name, s;
        est_attr_type type;
        int64_t i = 0;
        double f = 0;
        std::vector<int64_t> ints;
        std::vector<std::string> strs;
        std::vector<char *> ptrs;
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
    Node &ss(const char *n, std::vector<std::string> v) { A a; a.name = n; a.type = EST_ATTR_STRINGS; a.strs = v; spec.push_back(a); return *this; }
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
            if (a.type == EST_ATTR_STRINGS) {
                a.ptrs.clear();
                for (std::string &str : a.strs) a.ptrs.push_back((char *)str.c_str());
                e.strings = a.ptrs.data();
                e.n = (int64_t)a.ptrs.size();
            }
            built.push_back(e);
        }
        return built.data();
    }
};

static const vx_op *find_op(const char *name) {
    const vx_op *tabs[] = {vx_ops_gemm, vx_ops_conv, vx_ops_norm, vx_ops_pool, vx_ops_softmax, vx_ops_gather,
                           vx_ops_recurrent, vx_ops_attention, vx_ops_resample, vx_ops_reduce,
                           vx_ops_rmsnorm, vx_ops_einsum, vx_ops_sample};
    size_t counts[] = {vx_ops_gemm_count, vx_ops_conv_count, vx_ops_norm_count, vx_ops_pool_count, vx_ops_softmax_count,
                       vx_ops_gather_count, vx_ops_recurrent_count, vx_ops_attention_count, vx_ops_resample_count,
                       vx_ops_reduce_count, vx_ops_rmsnorm_count, vx_ops_einsum_count, vx_ops_sample_count};
    for (int t = 0; t < (int)(sizeof counts / sizeof counts[0]); t++)
        for (size_t k = 0; k < counts[t]; k++)
            if (!strcmp(tabs[t][k].name, name)) return &tabs[t][k];
    return NULL;
}

static vx_tensor *upload(const HT &h) {
    vx_tensor *t = vx_tensor_new(&g_ctx, h.dt, (int)h.dims.size(), h.dims.data(), VX_CAT_ACTIVATIONS);
    if (h.dt == VX_I64) {
        t->host_i64 = (int64_t *)malloc(sizeof(int64_t) * (h.i.size() + 1));
        memcpy(t->host_i64, h.i.data(), sizeof(int64_t) * h.i.size());
        if (h.host_only) { vx_free(&g_ctx, t->data); t->data = NULL; }
        else if (t->data) cudaMemcpy(t->data, h.i.data(), sizeof(int64_t) * h.i.size(), cudaMemcpyHostToDevice);
    } else if (t->data && h.dt != VX_F32) { /* bfloat16 / float16 storage of the float values */
        std::vector<uint16_t> b(h.f.size());
        for (size_t k = 0; k < h.f.size(); k++) {
            if (h.dt == VX_BF16) b[k] = ((__nv_bfloat16_raw)__float2bfloat16(h.f[k])).x;
            else b[k] = ((__half_raw)__float2half(h.f[k])).x;
        }
        cudaMemcpy(t->data, b.data(), 2 * b.size(), cudaMemcpyHostToDevice);
    } else if (t->data) {
        cudaMemcpy(t->data, h.f.data(), sizeof(float) * h.f.size(), cudaMemcpyHostToDevice);
    }
    return t;
}
static HT download(const vx_tensor *t) {
    HT h;
    h.dt = t->dtype;
    h.dims.assign(t->dims, t->dims + t->rank);
    cudaStreamSynchronize(g_ctx.stream);
    if (t->dtype == VX_I64) {
        h.i.resize(t->numel);
        if (t->numel) cudaMemcpy(h.i.data(), t->data, 8 * t->numel, cudaMemcpyDeviceToHost);
    } else if (t->dtype == VX_BF16 || t->dtype == VX_F16) { /* as float values */
        std::vector<uint16_t> b(t->numel);
        if (t->numel) cudaMemcpy(b.data(), t->data, 2 * t->numel, cudaMemcpyDeviceToHost);
        h.f.resize(t->numel);
        for (int64_t k = 0; k < t->numel; k++) {
            if (t->dtype == VX_BF16) {
                __nv_bfloat16_raw r;
                r.x = b[k];
                h.f[k] = __bfloat162float(__nv_bfloat16(r));
            } else {
                __half_raw r;
                r.x = b[k];
                h.f[k] = __half2float(__half(r));
            }
        }
    } else {
        h.f.resize(t->numel);
        if (t->numel) cudaMemcpy(h.f.data(), t->data, 4 * t->numel, cudaMemcpyDeviceToHost);
    }
    return h;
}

struct Case {
    Node node;
    std::vector<HT> in;
    std::vector<bool> grad;   /* inputs checked by finite differences */
    bool training = true;
    double eps = 1e-2;
    int loss_out = 0;         /* the output the loss reads */
    std::function<HT(const std::vector<HT> &)> ref; /* host forward, or empty */
};

static void setup_run(vx_run *run, est_node *en, Node &nd, const vx_op *op, std::vector<vx_tensor *> &ins,
                      int32_t *outs, bool training) {
    memset(run, 0, sizeof *run);
    memset(en, 0, sizeof *en);
    en->name = (char *)nd.op.c_str();
    en->op_type = (char *)nd.op.c_str();
    en->domain = (char *)"";
    en->attrs = nd.attrs();
    en->n_attrs = (int32_t)nd.spec.size();
    en->opset = nd.opset;
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
    (void)op;
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

/* Forward only: output 0. */
static bool forward(Case &c, const std::vector<HT> &in, HT *out) {
    const vx_op *op = find_op(c.node.op.c_str());
    std::vector<vx_tensor *> ins;
    for (auto &h : in) ins.push_back(h.dims.empty() && h.f.empty() && h.i.empty() ? NULL : upload(h));
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, op, ins, outs, c.training);
    vx_status st = op->forward(&g_ctx, &run);
    if (st) { printf("  forward failed: %d %s\n", st, g_ctx.message); release_run(&run); return false; }
    *out = download(run.out[c.loss_out]);
    release_run(&run);
    return true;
}

static double loss_of(const HT &y, const std::vector<float> &R) {
    double s = 0;
    for (size_t k = 0; k < y.f.size(); k++) s += (double)y.f[k] * R[k];
    return s;
}

static bool close(double a, double b, double atol, double rtol) { return fabs(a - b) <= atol + rtol * fabs(b); }

#include "grad_half.h"

static void run_case(const char *name, Case c) {
    const vx_op *op = find_op(c.node.op.c_str());
    if (!op) { printf("FAIL %s: op %s missing\n", name, c.node.op.c_str()); g_failures++; return; }
    bool ok = true;
    /* forward + backward */
    std::vector<vx_tensor *> ins;
    for (auto &h : c.in) ins.push_back(h.dims.empty() && h.f.empty() && h.i.empty() ? NULL : upload(h));
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, op, ins, outs, c.training);
    for (size_t k = 0; k < c.in.size(); k++) run.need_grad[k] = k < c.grad.size() && c.grad[k];
    vx_status st = op->forward(&g_ctx, &run);
    if (st) { printf("FAIL %s: forward: %d %s\n", name, st, g_ctx.message); g_failures++; release_run(&run); return; }
    HT y = download(run.out[c.loss_out]);
    /* the executor's rule: drop what backward does not keep */
    uint32_t si = op->saves_inputs, so = op->saves_outputs;
    if (op->saves_fn) op->saves_fn(&run, &si, &so);
    std::vector<vx_tensor *> dropped;
    for (int k = 0; k < run.n_in; k++)
        if (run.in[k] && !(si & VX_SLOT(k)) && run.in[k]->data) {
            /* keep the struct (dims), poison the storage */
            cudaMemset(run.in[k]->data, 0xff, (size_t)run.in[k]->numel * vx_dtype_size(run.in[k]->dtype));
        }
    for (int k = 1; k < run.n_out; k++)
        if (run.out[k] && !(so & VX_SLOT(k)) && run.out[k]->data) {
            bool is_saved = false;
            for (int j = 0; j < 4; j++) if (run.saved[j] == run.out[k]) is_saved = true;
            if (!is_saved) cudaMemset(run.out[k]->data, 0xff, (size_t)run.out[k]->numel * vx_dtype_size(run.out[k]->dtype));
        }
    if (run.out[0] && !(so & VX_SLOT(0)) && run.out[0]->data)
        cudaMemset(run.out[0]->data, 0xff, (size_t)run.out[0]->numel * vx_dtype_size(run.out[0]->dtype));
    std::vector<float> R(y.f.size());
    for (auto &v : R) v = (float)urand();
    bool any_grad = false;
    for (bool b : c.grad) any_grad |= b;
    std::vector<HT> grads(c.in.size());
    if (any_grad && op->backward) {
        HT r; r.dims = y.dims; r.f = R;
        run.grad_out[c.loss_out] = upload(r);
        st = op->backward(&g_ctx, &run);
        if (st) { printf("FAIL %s: backward: %d %s\n", name, st, g_ctx.message); g_failures++; release_run(&run); return; }
        for (size_t k = 0; k < c.in.size(); k++)
            if (run.need_grad[k]) {
                if (!run.grad_in[k]) { printf("FAIL %s: no gradient for input %zu\n", name, k); ok = false; continue; }
                grads[k] = download(run.grad_in[k]);
            }
    }
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) { printf("FAIL %s: CUDA error %s\n", name, cudaGetErrorString(ce)); g_failures++; exit(1); }
    release_run(&run);
    /* forward reference */
    if (c.ref) {
        HT want = c.ref(c.in);
        g_checks++;
        if (want.dims != y.dims) { printf("FAIL %s: output shape differs\n", name); ok = false; }
        else {
            double worst = 0;
            for (size_t k = 0; k < want.f.size(); k++) {
                double d = fabs((double)want.f[k] - y.f[k]) / (1e-3 + fabs(want.f[k]));
                if (!close(y.f[k], want.f[k], 1e-4, 1e-3) && d > worst) worst = d;
            }
            if (worst > 0) { printf("FAIL %s: forward differs from the host reference (rel %.3g)\n", name, worst); ok = false; }
            if (want.dt == VX_I64 && want.i != y.i) { printf("FAIL %s: integer output differs from the host reference\n", name); ok = false; }
        }
    }
    /* finite differences */
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

static HT mk(std::vector<int64_t> d) { HT t; t.dims = d; t.f.assign(t.numel(), 0.f); return t; }

static HT ref_matmul(const HT &A, const HT &B) {
    /* numpy matmul */
    std::vector<int64_t> ad = A.dims, bd = B.dims;
    bool a1 = ad.size() == 1, b1 = bd.size() == 1;
    if (a1) ad.insert(ad.begin(), 1);
    if (b1) bd.push_back(1);
    int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
    size_t L = std::max(ad.size(), bd.size()) - 2;
    std::vector<int64_t> ab(L, 1), bb(L, 1), ob(L);
    for (size_t i = 0; i < ad.size() - 2; i++) ab[L - (ad.size() - 2) + i] = ad[i];
    for (size_t i = 0; i < bd.size() - 2; i++) bb[L - (bd.size() - 2) + i] = bd[i];
    int64_t nb = 1;
    for (size_t i = 0; i < L; i++) { ob[i] = std::max(ab[i], bb[i]); nb *= ob[i]; }
    std::vector<int64_t> od = ob;
    if (!a1) od.push_back(M);
    if (!b1) od.push_back(N);
    HT Y = mk(od);
    for (int64_t b = 0; b < nb; b++) {
        int64_t rem = b, ao = 0, bo = 0, as = 1, bs = 1;
        for (int i = (int)L - 1; i >= 0; i--) {
            int64_t c = rem % ob[i]; rem /= ob[i];
            ao += (ab[i] == 1 ? 0 : c) * as; as *= ab[i];
            bo += (bb[i] == 1 ? 0 : c) * bs; bs *= bb[i];
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += (double)A.f[ao * M * K + m * K + k] * B.f[bo * K * N + k * N + n];
                Y.f[b * M * N + m * N + n] = (float)s;
            }
    }
    return Y;
}

static HT ref_gemm(const HT &A, const HT &B, const HT *C, bool ta, bool tb, double alpha, double beta) {
    int64_t M = ta ? A.dims[1] : A.dims[0], K = ta ? A.dims[0] : A.dims[1], N = tb ? B.dims[0] : B.dims[1];
    HT Y = mk({M, N});
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)A.f[ta ? k * M + m : m * K + k] * B.f[tb ? n * K + k : k * N + n];
            double c = 0;
            if (C) {
                int r = (int)C->dims.size();
                int64_t cm = r == 2 ? C->dims[0] : 1, cn = r >= 1 ? C->dims[r - 1] : 1;
                c = C->f[(cm == 1 ? 0 : m) * cn + (cn == 1 ? 0 : n)];
            }
            Y.f[m * N + n] = (float)(alpha * s + beta * c);
        }
    return Y;
}

/* 2-D conv (1-D as H = 1) with explicit pads. */
static HT ref_conv(const HT &X, const HT &W, const HT *B, int64_t G, std::vector<int64_t> pads, std::vector<int64_t> st,
                   std::vector<int64_t> dl) {
    bool one = X.dims.size() == 3;
    int64_t N = X.dims[0], C = X.dims[1], H = one ? 1 : X.dims[2], Wd = X.dims.back();
    int64_t M = W.dims[0], Cg = W.dims[1], kh = one ? 1 : W.dims[2], kw = W.dims.back();
    int64_t ph = one ? 0 : pads[0], pw = one ? pads[0] : pads[1], peh = one ? 0 : pads[2], pew = one ? pads[1] : pads[3];
    int64_t sh = one ? 1 : st[0], sw = st.back(), dh = one ? 1 : dl[0], dw = dl.back();
    int64_t Ho = (H + ph + peh - ((kh - 1) * dh + 1)) / sh + 1, Wo = (Wd + pw + pew - ((kw - 1) * dw + 1)) / sw + 1;
    int64_t Mg = M / G;
    HT Y = one ? mk({N, M, Wo}) : mk({N, M, Ho, Wo});
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = B ? B->f[m] : 0;
                    int64_t g = m / Mg;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t a = 0; a < kh; a++)
                            for (int64_t b = 0; b < kw; b++) {
                                int64_t h = oh * sh - ph + a * dh, w = ow * sw - pw + b * dw;
                                if (h < 0 || h >= H || w < 0 || w >= Wd) continue;
                                s += (double)W.f[((m * Cg + c) * kh + a) * kw + b] * X.f[((n * C + g * Cg + c) * H + h) * Wd + w];
                            }
                    Y.f[((n * M + m) * Ho + oh) * Wo + ow] = (float)s;
                }
    return Y;
}

/* 3-D convolution: pads {d, h, w} at both ends, strides {d, h, w}, dilation 1. */
static HT ref_conv3d(const HT &X, const HT &W, const HT *B, int64_t G, std::vector<int64_t> pad, std::vector<int64_t> st) {
    int64_t N = X.dims[0], C = X.dims[1], in[3] = {X.dims[2], X.dims[3], X.dims[4]};
    int64_t M = W.dims[0], Cg = W.dims[1], k[3] = {W.dims[2], W.dims[3], W.dims[4]}, o[3];
    for (int a = 0; a < 3; a++) o[a] = (in[a] + 2 * pad[a] - k[a]) / st[a] + 1;
    int64_t Mg = M / G;
    HT Y = mk({N, M, o[0], o[1], o[2]});
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t od = 0; od < o[0]; od++)
                for (int64_t oh = 0; oh < o[1]; oh++)
                    for (int64_t ow = 0; ow < o[2]; ow++) {
                        double s = B ? B->f[m] : 0;
                        int64_t g = m / Mg;
                        for (int64_t c = 0; c < Cg; c++)
                            for (int64_t a = 0; a < k[0]; a++)
                                for (int64_t b = 0; b < k[1]; b++)
                                    for (int64_t e = 0; e < k[2]; e++) {
                                        int64_t d = od * st[0] - pad[0] + a, h = oh * st[1] - pad[1] + b,
                                                w = ow * st[2] - pad[2] + e;
                                        if (d < 0 || d >= in[0] || h < 0 || h >= in[1] || w < 0 || w >= in[2]) continue;
                                        s += (double)W.f[(((m * Cg + c) * k[0] + a) * k[1] + b) * k[2] + e] *
                                             X.f[(((n * C + g * Cg + c) * in[0] + d) * in[1] + h) * in[2] + w];
                                    }
                        Y.f[(((n * M + m) * o[0] + od) * o[1] + oh) * o[2] + ow] = (float)s;
                    }
    return Y;
}

/* Attention: Q [B, Hq, Sq, D], K, V [B, Hk, Skv, *]; an optional float mask
 * (added, broadcast from [1, 1, Sq, Skv]); causal; dropout none. */
static HT ref_attention(const std::vector<HT> &in, bool causal) {
    const HT &Q = in[0], &K = in[1], &V = in[2];
    int64_t B = Q.dims[0], Hq = Q.dims[1], Sq = Q.dims[2], D = Q.dims[3], Hk = K.dims[1], Skv = K.dims[2], Dv = V.dims[3];
    bool mask = in.size() > 3 && !in[3].f.empty();
    double scale = 1 / sqrt((double)D);
    HT Y = mk({B, Hq, Sq, Dv});
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t kv = h / (Hq / Hk);
            for (int64_t q = 0; q < Sq; q++) {
                std::vector<double> s(Skv);
                double mx = -INFINITY;
                for (int64_t j = 0; j < Skv; j++) {
                    double v = 0;
                    for (int64_t d = 0; d < D; d++)
                        v += (double)Q.f[((b * Hq + h) * Sq + q) * D + d] * K.f[((b * Hk + kv) * Skv + j) * D + d];
                    v *= scale;
                    if (mask) v += in[3].f[q * Skv + j];
                    if (causal && j > q) v = -INFINITY; /* upper-left, as ONNX */
                    s[j] = v;
                    mx = std::max(mx, v);
                }
                double sum = 0;
                for (int64_t j = 0; j < Skv; j++) sum += s[j] = exp(s[j] - mx);
                for (int64_t e = 0; e < Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Skv; j++) acc += s[j] / sum * V.f[((b * Hk + kv) * Skv + j) * Dv + e];
                    Y.f[((b * Hq + h) * Sq + q) * Dv + e] = (float)acc;
                }
            }
        }
    return Y;
}

static HT ref_softmax(const HT &X, int axis, bool log_) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t outer = 1, L = X.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= X.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -1e30, s = 0;
            for (int64_t j = 0; j < L; j++) m = std::max(m, (double)X.f[(o * L + j) * inner + i]);
            for (int64_t j = 0; j < L; j++) s += exp(X.f[(o * L + j) * inner + i] - m);
            for (int64_t j = 0; j < L; j++) {
                double v = X.f[(o * L + j) * inner + i] - m;
                Y.f[(o * L + j) * inner + i] = (float)(log_ ? v - log(s) : exp(v) / s);
            }
        }
    return Y;
}

static HT ref_layernorm(const HT &X, const HT &S, const HT *B, int axis, double eps) {
    int r = (int)X.dims.size();
    if (axis < 0) axis += r;
    int64_t rows = 1, D = 1;
    for (int i = 0; i < r; i++) (i < axis ? rows : D) *= X.dims[i];
    HT Y = mk(X.dims);
    for (int64_t o = 0; o < rows; o++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < D; j++) m += X.f[o * D + j];
        m /= D;
        for (int64_t j = 0; j < D; j++) v += (X.f[o * D + j] - m) * (X.f[o * D + j] - m);
        v /= D;
        for (int64_t j = 0; j < D; j++)
            Y.f[o * D + j] = (float)((X.f[o * D + j] - m) / sqrt(v + eps) * S.f[j] + (B ? B->f[j] : 0));
    }
    return Y;
}

static HT ref_batchnorm(const std::vector<HT> &in, bool train, double eps) {
    const HT &X = in[0];
    int64_t N = X.dims[0], C = X.dims[1], HW = X.numel() / (N * C);
    HT Y = mk(X.dims);
    for (int64_t c = 0; c < C; c++) {
        double m = 0, v = 0;
        if (train) {
            for (int64_t n = 0; n < N; n++) for (int64_t p = 0; p < HW; p++) m += X.f[(n * C + c) * HW + p];
            m /= N * HW;
            for (int64_t n = 0; n < N; n++) for (int64_t p = 0; p < HW; p++) { double d = X.f[(n * C + c) * HW + p] - m; v += d * d; }
            v /= N * HW;
        } else { m = in[3].f[c]; v = in[4].f[c]; }
        for (int64_t n = 0; n < N; n++)
            for (int64_t p = 0; p < HW; p++)
                Y.f[(n * C + c) * HW + p] = (float)((X.f[(n * C + c) * HW + p] - m) / sqrt(v + eps) * in[1].f[c] + in[2].f[c]);
    }
    return Y;
}

/* 2-D pool with explicit output size. */
static HT ref_pool(const HT &X, bool max_, int64_t k, int64_t s, int64_t p, int64_t Ho, bool incl) {
    int64_t N = X.dims[0], C = X.dims[1], H = X.dims[2], W = X.dims[3];
    HT Y = mk({N, C, Ho, Ho});
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Ho; ow++) {
                double best = -1e30, sum = 0;
                int64_t cnt = 0, cin = 0;
                for (int64_t a = 0; a < k; a++)
                    for (int64_t b = 0; b < k; b++) {
                        int64_t h = oh * s - p + a, w = ow * s - p + b;
                        if (h < H + p && w < W + p) cin++;
                        if (h < 0 || h >= H || w < 0 || w >= W) continue;
                        double v = X.f[(nc * H + h) * W + w];
                        best = std::max(best, v);
                        sum += v;
                        cnt++;
                    }
                Y.f[(nc * Ho + oh) * Ho + ow] = (float)(max_ ? best : sum / (incl ? cin : cnt));
            }
    return Y;
}

static HT ref_reduce_mean(const HT &X, std::vector<int> axes, bool keep) {
    int r = (int)X.dims.size();
    std::vector<bool> red(r, false);
    for (int a : axes) red[a < 0 ? a + r : a] = true;
    std::vector<int64_t> od, kd;
    int64_t cnt = 1;
    for (int i = 0; i < r; i++) {
        kd.push_back(red[i] ? 1 : X.dims[i]);
        if (red[i]) { cnt *= X.dims[i]; if (keep) od.push_back(1); }
        else od.push_back(X.dims[i]);
    }
    HT Y = mk(od);
    std::vector<double> acc(Y.f.size(), 0.0);
    std::vector<int64_t> idx(r, 0);
    for (int64_t e = 0; e < X.numel(); e++) {
        int64_t rem = e, o = 0;
        std::vector<int64_t> c(r);
        for (int i = r - 1; i >= 0; i--) { c[i] = rem % X.dims[i]; rem /= X.dims[i]; }
        for (int i = 0; i < r; i++) o = o * kd[i] + (red[i] ? 0 : c[i]);
        acc[o] += X.f[e];
    }
    for (size_t k = 0; k < acc.size(); k++) Y.f[k] = (float)(acc[k] / cnt);
    return Y;
}

static HT ref_transpose(const HT &X, std::vector<int64_t> perm) {
    int r = (int)X.dims.size();
    std::vector<int64_t> od(r), st(r);
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) { st[i] = s; s *= X.dims[i]; }
    for (int i = 0; i < r; i++) od[i] = X.dims[perm[i]];
    HT Y = mk(od);
    for (int64_t o = 0; o < X.numel(); o++) {
        int64_t rem = o, off = 0;
        for (int i = r - 1; i >= 0; i--) { off += (rem % od[i]) * st[perm[i]]; rem /= od[i]; }
        Y.f[o] = X.f[off];
    }
    return Y;
}

static HT ref_gather(const HT &X, const HT &I, int axis) {
    int r = (int)X.dims.size();
    int64_t outer = 1, A = X.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= X.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= X.dims[i];
    std::vector<int64_t> od(X.dims.begin(), X.dims.begin() + axis);
    od.insert(od.end(), I.dims.begin(), I.dims.end());
    od.insert(od.end(), X.dims.begin() + axis + 1, X.dims.end());
    HT Y = mk(od);
    int64_t nI = (int64_t)I.i.size();
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < nI; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t k = I.i[j] < 0 ? I.i[j] + A : I.i[j];
                Y.f[(o * nI + j) * inner + i] = X.f[(o * A + k) * inner + i];
            }
    return Y;
}

/* ONNX's LSTM ('L', gates i, o, f, c), GRU ('G', z, r, h) and RNN ('R'), in
 * double; inputs X, W, R, [B], [sequence_lens: empty], [initial_h],
 * [initial_c]. Returns output `out`: Y, Y_h or Y_c. */
struct RnnSpec {
    char kind;
    int D;
    bool layout1, lbr, relu;
};
static HT ref_rnn(const RnnSpec &sp, const std::vector<HT> &in, int out) {
    const HT &X = in[0], &W = in[1], &R = in[2];
    bool L1 = sp.layout1;
    int64_t T = X.dims[L1 ? 1 : 0], N = X.dims[L1 ? 0 : 1], I = X.dims[2], H = R.dims[2], D = sp.D;
    int64_t G = sp.kind == 'L' ? 4 : sp.kind == 'G' ? 3 : 1;
    auto present = [&](size_t k) { return in.size() > k && !in[k].f.empty(); };
    HT Y = L1 ? mk({N, T, D, H}) : mk({T, D, N, H});
    HT S = L1 ? mk({N, D, H}) : mk({D, N, H}), C = S;
    auto yi = [&](int64_t t, int64_t d, int64_t n, int64_t j) { return L1 ? ((n * T + t) * D + d) * H + j : ((t * D + d) * N + n) * H + j; };
    auto si = [&](int64_t d, int64_t n, int64_t j) { return L1 ? (n * D + d) * H + j : (d * N + n) * H + j; };
    auto xi = [&](int64_t t, int64_t n, int64_t i) { return L1 ? (n * T + t) * I + i : (t * N + n) * I + i; };
    auto sg = [](double v) { return 1.0 / (1.0 + exp(-v)); };
    for (int64_t d = 0; d < D; d++) {
        std::vector<double> h(N * H, 0.0), c(N * H, 0.0);
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) {
                if (present(5)) h[n * H + j] = in[5].f[si(d, n, j)];
                if (present(6)) c[n * H + j] = in[6].f[si(d, n, j)];
            }
        auto wx = [&](int64_t t, int64_t n, int64_t g) {
            double v = present(3) ? in[3].f[d * 2 * G * H + g] : 0.0;
            for (int64_t i = 0; i < I; i++) v += (double)W.f[(d * G * H + g) * I + i] * X.f[xi(t, n, i)];
            return v;
        };
        auto rh = [&](const std::vector<double> &hv, int64_t n, int64_t g) {
            double v = present(3) ? in[3].f[d * 2 * G * H + G * H + g] : 0.0;
            for (int64_t k = 0; k < H; k++) v += (double)R.f[(d * G * H + g) * H + k] * hv[n * H + k];
            return v;
        };
        for (int64_t s = 0; s < T; s++) {
            int64_t t = d == 1 ? T - 1 - s : s;
            std::vector<double> hn(N * H), cn(N * H), rhv(N * H);
            if (sp.kind == 'G' && !sp.lbr) /* r o h_prev for every unit first */
                for (int64_t n = 0; n < N; n++)
                    for (int64_t j = 0; j < H; j++) rhv[n * H + j] = sg(wx(t, n, H + j) + rh(h, n, H + j)) * h[n * H + j];
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) {
                    int64_t e = n * H + j;
                    if (sp.kind == 'L') {
                        double i_ = sg(wx(t, n, j) + rh(h, n, j)), o = sg(wx(t, n, H + j) + rh(h, n, H + j));
                        double f = sg(wx(t, n, 2 * H + j) + rh(h, n, 2 * H + j));
                        double cc = tanh(wx(t, n, 3 * H + j) + rh(h, n, 3 * H + j));
                        cn[e] = f * c[e] + i_ * cc;
                        hn[e] = o * tanh(cn[e]);
                    } else if (sp.kind == 'G') {
                        double z = sg(wx(t, n, j) + rh(h, n, j)), r = sg(wx(t, n, H + j) + rh(h, n, H + j));
                        double cand = sp.lbr ? wx(t, n, 2 * H + j) + r * rh(h, n, 2 * H + j) : wx(t, n, 2 * H + j) + rh(rhv, n, 2 * H + j);
                        hn[e] = (1 - z) * tanh(cand) + z * h[e];
                    } else {
                        double v = wx(t, n, j) + rh(h, n, j);
                        hn[e] = sp.relu ? (v > 0 ? v : 0) : tanh(v);
                    }
                }
            h = hn;
            if (sp.kind == 'L') c = cn;
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) Y.f[yi(t, d, n, j)] = (float)h[n * H + j];
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) {
                S.f[si(d, n, j)] = (float)h[n * H + j];
                C.f[si(d, n, j)] = (float)c[n * H + j];
            }
    }
    return out == 0 ? Y : out == 1 ? S : C;
}

/* ---- cases ---------------------------------------------------------------------------- */

/* InstanceNormalization, 3-D pooling, Resize / Upsample, ConvTranspose */
#include "grad_norm_pool_resize_cases.h"
/* ReduceMax..ReduceLogSumExp, ArgMax, ArgMin, Hardmax */
#include "grad_reduce_norm_cases.h"
/* GridSample, RoiAlign, MaxRoiPool */
#include "grad_sample_cases.h"

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps the lines before it */
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    cudaStreamCreate(&g_ctx.stream);
    if (cublasCreate(&g_ctx.blas) != CUBLAS_STATUS_SUCCESS) { printf("cublasCreate failed\n"); return 1; }
    cublasSetStream(g_ctx.blas, g_ctx.stream);
    cublasSetMathMode(g_ctx.blas, CUBLAS_PEDANTIC_MATH); /* no TF32: exact FP32 for the comparisons */

    /* Gemm */
    {
        Case c{Node("Gemm").i("transB", 1).f("alpha", 0.7).f("beta", 1.3), {randf({3, 4}), randf({5, 4}), randf({5})}, {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], &in[2], false, true, 0.7, 1.3); };
        run_case("Gemm transB, alpha, beta, bias (N)", c);
        Case d{Node("Gemm").i("transA", 1), {randf({4, 3}), randf({4, 5}), randf({3, 1})}, {true, true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], &in[2], true, false, 1, 1); };
        run_case("Gemm transA, bias (M, 1)", d);
        Case e{Node("Gemm").i("transA", 1).i("transB", 1), {randf({4, 3}), randf({2, 4})}, {true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_gemm(in[0], in[1], NULL, true, true, 1, 1); };
        run_case("Gemm transA transB, no bias", e);
    }
    /* MatMul */
    {
        auto mm = [](const char *name, std::vector<int64_t> a, std::vector<int64_t> b) {
            Case c{Node("MatMul"), {randf(a), randf(b)}, {true, true}};
            c.ref = [](const std::vector<HT> &in) { return ref_matmul(in[0], in[1]); };
            run_case(name, c);
        };
        mm("MatMul 2-D", {3, 4}, {4, 5});
        mm("MatMul batch x 2-D (folded)", {2, 3, 4}, {4, 5});
        mm("MatMul batched same batch", {2, 3, 4}, {2, 4, 5});
        mm("MatMul broadcast batch dims", {2, 1, 3, 4}, {3, 4, 2});
        mm("MatMul 2-D x batch", {3, 4}, {2, 4, 5});
        mm("MatMul 1-D x batch", {4}, {2, 4, 3});
        mm("MatMul batch x 1-D", {2, 3, 4}, {4});
        mm("MatMul 1-D x 1-D", {4}, {4});
    }
    /* Einsum (two operands, matmul-like) against a host einsum over every letter */
    {
        auto ein = [](const char *name, const char *eq, std::vector<int64_t> a, std::vector<int64_t> b) {
            Case c{Node("Einsum").s("equation", eq), {randf(a), randf(b)}, {true, true}};
            std::string e; /* the equation without its spaces, for the reference's parser */
            for (const char *p = eq; *p; p++)
                if (*p != ' ') e += *p;
            c.ref = [e](const std::vector<HT> &in) {
                std::string sa = e.substr(0, e.find(',')), sb = e.substr(e.find(',') + 1, e.find('-') - e.find(',') - 1),
                            so = e.substr(e.find('>') + 1), all;
                int64_t size[128] = {0};
                for (size_t i = 0; i < sa.size(); i++) size[(int)sa[i]] = in[0].dims[i];
                for (size_t i = 0; i < sb.size(); i++) size[(int)sb[i]] = in[1].dims[i];
                for (char ch : sa + sb) if (all.find(ch) == std::string::npos) all += ch;
                std::vector<int64_t> od;
                for (char ch : so) od.push_back(size[(int)ch]);
                HT y = mk(od);
                int64_t total = 1;
                for (char ch : all) total *= size[(int)ch];
                for (int64_t t = 0; t < total; t++) {
                    int64_t at[128] = {0}, r = t;
                    for (int i = (int)all.size() - 1; i >= 0; i--) { at[(int)all[i]] = r % size[(int)all[i]]; r /= size[(int)all[i]]; }
                    auto off = [&](const std::string &s) { int64_t o = 0; for (char ch : s) o = o * size[(int)ch] + at[(int)ch]; return o; };
                    y.f[off(so)] += in[0].f[off(sa)] * in[1].f[off(sb)];
                }
                return y;
            };
            run_case(name, c);
        };
        ein("Einsum bij,bjk->bik (bmm)", "bij,bjk->bik", {2, 3, 4}, {2, 4, 5});
        ein("Einsum bhqd,bhkd->bhqk (attention scores)", "bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5});
        ein("Einsum ij,j->i (matrix-vector)", "ij,j->i", {3, 4}, {4});
        ein("Einsum ik,kj->ji (permuted output)", "ik,kj->ji", {3, 4}, {4, 5});
        ein("Einsum bn,anm->bam (batch letter in the middle)", "bn, anm -> bam", {2, 3}, {4, 3, 5});
    }
    /* Conv */
    {
        Case c{Node("Conv").i("group", 2).is("pads", {1, 1, 1, 1}).is("strides", {2, 1}).is("dilations", {1, 2}),
               {randf({2, 4, 7, 6}), randf({6, 2, 3, 3}), randf({6})}, {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 2, {1, 1, 1, 1}, {2, 1}, {1, 2}); };
        run_case("Conv 2-D group 2, pads, strides, dilations, bias", c);
        Case d{Node("Conv").i("group", 3).is("pads", {1, 1, 1, 1}), {randf({2, 3, 5, 5}), randf({6, 1, 3, 3}), randf({6})},
               {true, true, true}};
        d.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 3, {1, 1, 1, 1}, {1, 1}, {1, 1}); };
        run_case("Conv depthwise (multiplier 2)", d);
        Case e{Node("Conv"), {randf({2, 4, 5, 5}), randf({3, 4, 1, 1})}, {true, true}};
        e.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}); };
        run_case("Conv 1x1", e);
        Case f{Node("Conv").is("strides", {2}).is("pads", {1, 0}), {randf({2, 3, 9}), randf({4, 3, 3}), randf({4})}, {true, true, true}};
        f.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], &in[2], 1, {1, 0}, {2}, {1}); };
        run_case("Conv 1-D strides, asymmetric pads", f);
        Case g{Node("Conv").s("auto_pad", "SAME_UPPER").is("strides", {2, 2}), {randf({1, 2, 6, 6}), randf({3, 2, 3, 3})}, {true, true}};
        g.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {0, 0, 1, 1}, {2, 2}, {1, 1}); };
        run_case("Conv SAME_UPPER stride 2", g);
        Case h{Node("Conv").is("pads", {1, 1, 1, 1}), {randf({5, 3, 4, 4}), randf({2, 3, 3, 3})}, {true, true}};
        h.ref = [](const std::vector<HT> &in) { return ref_conv(in[0], in[1], NULL, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}); };
        run_case("Conv chunked batch (C*k*k > M)", h);
        Case k3{Node("Conv").is("pads", {1, 1, 1, 1, 1, 1}).is("strides", {1, 2, 2}),
                {randf({2, 3, 4, 5, 5}), randf({4, 3, 3, 3, 3}), randf({4})}, {true, true, true}};
        k3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], &in[2], 1, {1, 1, 1}, {1, 2, 2}); };
        run_case("Conv 3-D pads 1, strides (1, 2, 2), bias", k3);
        Case d3{Node("Conv").i("group", 2).is("pads", {0, 1, 1, 0, 1, 1}), {randf({1, 2, 3, 4, 4}), randf({4, 1, 2, 3, 3})},
                {true, true}};
        d3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 2, {0, 1, 1}, {1, 1, 1}); };
        run_case("Conv 3-D depthwise (multiplier 2)", d3);
        Case p3{Node("Conv"), {randf({2, 3, 2, 3, 3}), randf({2, 3, 1, 1, 1})}, {true, true}};
        p3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 1, {0, 0, 0}, {1, 1, 1}); };
        run_case("Conv 3-D 1x1x1", p3);
        Case g3{Node("Conv").i("group", 2).is("pads", {1, 0, 1, 1, 0, 1}).is("strides", {2, 1, 2}),
                {randf({2, 4, 5, 6, 7}), randf({4, 2, 3, 3, 2}), randf({4})}, {true, true, true}};
        g3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], &in[2], 2, {1, 0, 1}, {2, 1, 2}); };
        run_case("Conv 3-D group 2, strides (2, 1, 2)", g3);
        /* rows 200 wide: the staged im2col takes its output rows in runs */
        Case w3{Node("Conv").is("pads", {1, 1, 1, 1, 1, 1}), {randf({1, 2, 3, 40, 200}), randf({2, 2, 3, 3, 3})},
                {true, true}};
        w3.ref = [](const std::vector<HT> &in) { return ref_conv3d(in[0], in[1], NULL, 1, {1, 1, 1}, {1, 1, 1}); };
        run_case("Conv 3-D, output rows in runs", w3);
    }
    /* BatchNormalization, LayerNormalization */
    {
        HT var = randf({4});
        for (auto &v : var.f) v = fabsf(v) + 0.5f;
        Case c{Node("BatchNormalization").f("epsilon", 1e-5), {randf({3, 4, 2, 3}), randf({4}), randf({4}), randf({4}), var},
               {true, true, true, false, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, true, 1e-5); };
        run_case("BatchNormalization training", c);
        Case d = c;
        d.training = false;
        d.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, false, 1e-5); };
        run_case("BatchNormalization inference", d);
        Case e{Node("BatchNormalization"), {randf({4, 3}), randf({3}), randf({3}), randf({3}), var}, {true, true, true, false, false}};
        e.in[4].dims = {3};
        e.in[4].f.resize(3);
        e.ref = [](const std::vector<HT> &in) { return ref_batchnorm(in, true, 1e-5); };
        run_case("BatchNormalization training 2-D input", e);
        Case f{Node("LayerNormalization"), {randf({2, 3, 8}), randf({8}), randf({8})}, {true, true, true}};
        f.ref = [](const std::vector<HT> &in) { return ref_layernorm(in[0], in[1], &in[2], -1, 1e-5); };
        run_case("LayerNormalization axis -1", f);
        Case g{Node("LayerNormalization").i("axis", 1), {randf({2, 3, 4}), randf({3, 4})}, {true, true}};
        g.ref = [](const std::vector<HT> &in) { return ref_layernorm(in[0], in[1], NULL, 1, 1e-5); };
        run_case("LayerNormalization axis 1, no bias", g);
    }
    /* pooling and reductions */
    {
        Case c{Node("MaxPool").is("kernel_shape", {3, 3}).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}), {randf({2, 3, 7, 7})}, {true}};
        c.eps = 1e-3;
        c.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], true, 3, 2, 1, 4, false); };
        run_case("MaxPool 3x3 stride 2 pad 1", c);
        Case d{Node("MaxPool").is("kernel_shape", {2, 2}).is("strides", {2, 2}).i("ceil_mode", 1), {randf({1, 2, 5, 5})}, {true}};
        d.eps = 1e-3;
        d.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], true, 2, 2, 0, 3, false); };
        run_case("MaxPool ceil_mode", d);
        Case d2 = d;
        d2.node.n_out = 2;
        run_case("MaxPool with Indices output", d2);
        Case e{Node("AveragePool").is("kernel_shape", {3, 3}).is("strides", {2, 2}).is("pads", {1, 1, 1, 1}), {randf({2, 3, 7, 7})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], false, 3, 2, 1, 4, false); };
        run_case("AveragePool exclude pad", e);
        Case f = e;
        f.node.i("count_include_pad", 1);
        f.ref = [](const std::vector<HT> &in) { return ref_pool(in[0], false, 3, 2, 1, 4, true); };
        run_case("AveragePool count_include_pad", f);
        Case g{Node("GlobalAveragePool"), {randf({2, 3, 4, 5})}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {2, 3}, true); };
        run_case("GlobalAveragePool", g);
        Case h{Node("ReduceMean").is("axes", {1}).i("keepdims", 0), {randf({2, 3, 4})}, {true}};
        h.node.opset = 13;
        h.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {1}, false); };
        run_case("ReduceMean axes attribute, keepdims 0", h);
        HT axes = ints({2}, {0, -1});
        axes.host_only = true;
        Case k{Node("ReduceMean"), {randf({2, 3, 4}), axes}, {true, false}};
        k.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {0, 2}, true); };
        run_case("ReduceMean axes input (opset 18), host only", k);
        Case m{Node("ReduceMean"), {randf({3, 4})}, {true}};
        m.ref = [](const std::vector<HT> &in) { return ref_reduce_mean(in[0], {0, 1}, true); };
        run_case("ReduceMean all axes", m);
    }
    /* softmax */
    {
        Case c{Node("Softmax").i("axis", 1), {randf({2, 5, 3})}, {true}};
        c.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], 1, false); };
        run_case("Softmax axis 1 (strided)", c);
        Case d{Node("Softmax"), {randf({4, 7})}, {true}};
        d.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], -1, false); };
        run_case("Softmax last axis", d);
        Case e{Node("LogSoftmax"), {randf({3, 300})}, {true}};
        e.ref = [](const std::vector<HT> &in) { return ref_softmax(in[0], -1, true); };
        run_case("LogSoftmax last axis (300)", e);
        Case f{Node("Softmax"), {randf({2, 3, 4})}, {true}};
        f.node.opset = 11; /* axis 1, flattened: softmax over 12 */
        f.ref = [](const std::vector<HT> &in) {
            HT x = in[0];
            x.dims = {2, 12};
            HT y = ref_softmax(x, 1, false);
            y.dims = {2, 3, 4};
            return y;
        };
        run_case("Softmax opset 11 (coerced to 2-D)", f);
    }
    /* gather, transpose */
    {
        Case c{Node("Gather"), {randf({10, 4}), ints({2, 3}, {1, 3, 3, -1, 0, 9})}, {true, false}};
        c.ref = [](const std::vector<HT> &in) { return ref_gather(in[0], in[1], 0); };
        run_case("Gather axis 0 (embedding, repeated and negative indices)", c);
        HT hi = ints({4}, {4, 0, 2, 4});
        hi.host_only = true;
        Case d{Node("Gather").i("axis", 1), {randf({3, 5, 2}), hi}, {true, false}};
        d.ref = [](const std::vector<HT> &in) { return ref_gather(in[0], in[1], 1); };
        run_case("Gather axis 1, host-only indices", d);
        Case e{Node("GatherElements").i("axis", 1), {randf({3, 4}), ints({3, 2}, {0, 3, 1, 1, 2, -4})}, {true, false}};
        e.ref = [](const std::vector<HT> &in) {
            HT y = mk({3, 2});
            for (int r = 0; r < 3; r++)
                for (int j = 0; j < 2; j++) {
                    int64_t k = in[1].i[r * 2 + j];
                    if (k < 0) k += 4;
                    y.f[r * 2 + j] = in[0].f[r * 4 + k];
                }
            return y;
        };
        run_case("GatherElements axis 1", e);
        Case e2{Node("GatherElements").i("axis", 0), {ints({2, 3}, {10, 11, 12, 20, 21, 22}), ints({2, 3}, {1, 0, 1, 0, 0, -1})},
                {false, false}};
        e2.ref = [](const std::vector<HT> &in) {
            std::vector<int64_t> v(6);
            for (int p = 0; p < 6; p++) {
                int64_t k = in[1].i[p] < 0 ? in[1].i[p] + 2 : in[1].i[p];
                v[p] = in[0].i[k * 3 + p % 3];
            }
            return ints({2, 3}, v);
        };
        run_case("GatherElements int64 data (RoBERTa's position ids)", e2);
        Case f{Node("Transpose").is("perm", {2, 0, 1}), {randf({2, 3, 4})}, {true}};
        f.ref = [](const std::vector<HT> &in) { return ref_transpose(in[0], {2, 0, 1}); };
        run_case("Transpose perm (2, 0, 1)", f);
        Case g{Node("Transpose"), {randf({2, 3, 4, 5})}, {true}};
        g.ref = [](const std::vector<HT> &in) { return ref_transpose(in[0], {3, 2, 1, 0}); };
        run_case("Transpose default (reversed)", g);
    }

    /* recurrent layers: T 3, N 2, I 3, H 4 */
    {
        auto rnn_case = [](const char *name, RnnSpec sp, bool bias, bool h0, bool c0, int n_out, int loss_out) {
            int64_t T = 3, N = 2, I = 3, H = 4, D = sp.D, G = sp.kind == 'L' ? 4 : sp.kind == 'G' ? 3 : 1;
            Node nd(sp.kind == 'L' ? "LSTM" : sp.kind == 'G' ? "GRU" : "RNN");
            nd.i("hidden_size", H);
            if (D == 2) nd.s("direction", "bidirectional");
            if (sp.layout1) nd.i("layout", 1);
            if (sp.kind == 'G') nd.i("linear_before_reset", sp.lbr ? 1 : 0);
            if (sp.relu) nd.ss("activations", {"Relu"});
            nd.n_out = n_out;
            std::vector<int64_t> state = sp.layout1 ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
            std::vector<HT> in = {randf(sp.layout1 ? std::vector<int64_t>{N, T, I} : std::vector<int64_t>{T, N, I}),
                                  randf({D, G * H, I}), randf({D, G * H, H})};
            std::vector<bool> grad = {true, true, true};
            in.push_back(bias ? randf({D, 2 * G * H}) : HT());
            grad.push_back(bias);
            if (h0 || c0) { in.push_back(HT()); grad.push_back(false); }
            if (h0 || c0) { in.push_back(h0 ? randf(state) : HT()); grad.push_back(h0); }
            if (c0) { in.push_back(randf(state)); grad.push_back(true); }
            Case c{nd, in, grad};
            c.loss_out = loss_out;
            if (sp.relu) c.eps = 1e-3;
            c.ref = [sp, loss_out](const std::vector<HT> &x) { return ref_rnn(sp, x, loss_out); };
            run_case(name, c);
        };
        rnn_case("LSTM bidirectional, B, initial_h, initial_c (Y)", {'L', 2, false, false, false}, true, true, true, 3, 0);
        rnn_case("LSTM forward, no B, no initial state (Y_h)", {'L', 1, false, false, false}, false, false, false, 2, 1);
        rnn_case("LSTM bidirectional, initial_c (Y_c)", {'L', 2, false, false, false}, true, false, true, 3, 2);
        rnn_case("LSTM layout 1, bidirectional (Y_h)", {'L', 2, true, false, false}, true, true, true, 2, 1);
        rnn_case("GRU linear_before_reset 1, bidirectional, B, initial_h (Y)", {'G', 2, false, true, false}, true, true, false, 2, 0);
        rnn_case("GRU linear_before_reset 1, no initial state (Y_h)", {'G', 1, false, true, false}, true, false, false, 2, 1);
        rnn_case("GRU linear_before_reset 0, B, initial_h (Y)", {'G', 1, false, false, false}, true, true, false, 2, 0);
        rnn_case("GRU linear_before_reset 0, bidirectional (Y_h)", {'G', 2, false, false, false}, true, false, false, 2, 1);
        rnn_case("RNN tanh bidirectional, B, initial_h (Y)", {'R', 2, false, false, false}, true, true, false, 2, 0);
        rnn_case("RNN Relu layout 1, initial_h (Y_h)", {'R', 1, true, false, true}, true, true, false, 2, 1);
    }

    /* Attention */
    {
        Case a{Node("Attention"), {randf({2, 2, 3, 5}), randf({2, 2, 4, 5}), randf({2, 2, 4, 3})}, {true, true, true}};
        a.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention [2, 2, 3, 5] x 4 keys", a);
        Case m{Node("Attention"), {randf({2, 2, 3, 5}), randf({2, 2, 4, 5}), randf({2, 2, 4, 3}), randf({1, 1, 3, 4})},
               {true, true, true, true}};
        m.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention, float mask [1, 1, 3, 4] with its gradient", m);
        Case q{Node("Attention"), {randf({1, 4, 3, 4}), randf({1, 2, 3, 4}), randf({1, 2, 3, 2})}, {true, true, true}};
        q.ref = [](const std::vector<HT> &in) { return ref_attention(in, false); };
        run_case("Attention grouped-query (4 query heads, 2 key heads)", q);
        Case c{Node("Attention").i("is_causal", 1), {randf({1, 2, 4, 3}), randf({1, 2, 4, 3}), randf({1, 2, 4, 3})},
               {true, true, true}};
        c.ref = [](const std::vector<HT> &in) { return ref_attention(in, true); };
        run_case("Attention is_causal", c);
        Case d{Node("Attention").i("memest.dropout", 1), {randf({1, 2, 4, 3}), randf({1, 2, 5, 3}), randf({1, 2, 5, 3})},
               {true, true, true}};
        run_case("Attention with dropout (a fixed mask: finite differences only)", d);
    }

    norm_pool_resize_cases();
    reduce_cases();
    sample_cases();

    printf("%d checks, %d failing cases, %ld device blocks still allocated\n", g_checks, g_failures, g_ctx.live);
    cublasDestroy(g_ctx.blas);
    cudaStreamDestroy(g_ctx.stream);
    return g_failures || g_ctx.live ? 1 : 0;
}
