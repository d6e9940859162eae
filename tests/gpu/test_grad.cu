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

#include "grad_refs.h"

/* ---- cases ---------------------------------------------------------------------------- */

/* Gemm, MatMul, Einsum, Conv */
#include "grad_linear_cases.h"
/* BatchNormalization, LayerNormalization, pooling and reductions, softmax, gather, transpose */
#include "grad_norm_softmax_gather_cases.h"
/* LSTM, GRU, RNN, Attention */
#include "grad_recurrent_attention_cases.h"

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

    linear_cases();
    norm_softmax_gather_cases();
    recurrent_attention_cases();

    norm_pool_resize_cases();
    reduce_cases();
    sample_cases();

    printf("%d checks, %d failing cases, %ld device blocks still allocated\n", g_checks, g_failures, g_ctx.live);
    cublasDestroy(g_ctx.blas);
    cudaStreamDestroy(g_ctx.stream);
    return g_failures || g_ctx.live ? 1 : 0;
}
