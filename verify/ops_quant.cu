/*
 * ops_quant.cu: MatMulInteger and QLinearMatMul, the quantized products
 * (inference ops: no gradient). The executor holds every integer tensor as
 * int64 (vx.h), 8-bit operands included, and the --kernels verify estimate
 * counts them so; one thread per output element sums over K in 64-bit
 * integers.
 *
 * MatMulInteger: Y (int32) = (A - a_zero_point) (B - b_zero_point), numpy
 *   matmul broadcasting of the batch dims; a zero point is a scalar, or A's
 *   per row (M entries) / B's per column (N entries).
 * QLinearMatMul: y = saturate(rint(acc * (a_scale * b_scale / y_scale)) +
 *   y_zero_point), acc the MatMulInteger sum; scales and zero points scalar
 *   or per row / column as above; the range is y_zero_point's declared type
 *   (uint8 or int8), as the ONNX reference clips.
 */
#include <math.h>
#include <string.h>

#include "ops_common.cuh"

#define QMM_TPB 256

/* Output batches over numpy-broadcast batch dims, and each operand's
 * matrix offset per batch dim (0 where it broadcasts). */
struct QGeom {
    int64_t M, N, K, batches;
    int nbd;
    int64_t bd[VX_MAX_RANK], as[VX_MAX_RANK], bs[VX_MAX_RANK];
};

/* A per-row / per-column quantization parameter: a device array of n
 * entries (n 1: a scalar), or none. */
struct QParam {
    const void *p;
    int64_t n;
    bool is_float;
};

static __device__ __forceinline__ double qparam(const QParam &q, int64_t i, double none) {
    if (!q.p) return none;
    int64_t k = q.n > 1 ? i : 0;
    return q.is_float ? (double)((const float *)q.p)[k] : (double)((const long long *)q.p)[k];
}

__global__ void k_qmm(const long long *A, const long long *B, long long *Y, QGeom g, QParam azp, QParam bzp,
                      QParam as, QParam bs, QParam ys, QParam yzp, bool qlinear, long long lo, long long hi) {
    int64_t total = g.batches * g.M * g.N;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i % g.N, m = (i / g.N) % g.M, b = i / (g.M * g.N);
        int64_t ao = 0, bo = 0;
        for (int d = g.nbd - 1; d >= 0; d--) {
            int64_t c = b % g.bd[d];
            b /= g.bd[d];
            ao += c * g.as[d];
            bo += c * g.bs[d];
        }
        long long za = (long long)qparam(azp, m, 0), zb = (long long)qparam(bzp, n, 0), acc = 0;
        const long long *a = A + ao + m * g.K, *bcol = B + bo + n;
        for (int64_t k = 0; k < g.K; k++) acc += (a[k] - za) * (bcol[k * g.N] - zb);
        if (!qlinear) {
            Y[i] = (long long)(int)acc; /* int32 */
            continue;
        }
        float scale = (float)qparam(as, m, 1) * (float)qparam(bs, n, 1) / (float)qparam(ys, 0, 1);
        double v = rint((double)acc * scale) + qparam(yzp, 0, 0);
        Y[i] = (long long)(v < lo ? lo : v > hi ? hi : v);
    }
}

static vx_status qparam_of(vx_ctx *ctx, const vx_run *run, int k, int64_t want, QParam *q) {
    memset(q, 0, sizeof *q);
    if (!vxk_has_in(run, k)) return VX_OK;
    const vx_tensor *t = run->in[k];
    if (t->strided || (t->numel != 1 && t->numel != want) || (t->dtype != VX_I64 && t->dtype != VX_F32))
        return vx_fail(ctx, VX_EUNSUPPORTED, "%s: input %d holds %lld values (a scalar or %lld wanted)",
                       run->node->op_type, k, (long long)t->numel, (long long)want);
    q->p = t->data;
    q->n = t->numel;
    q->is_float = t->dtype == VX_F32;
    return VX_OK;
}

static vx_status qmm_geom(vx_ctx *ctx, const vx_tensor *A, const vx_tensor *B, QGeom *g, int *rank, int64_t *dims) {
    memset(g, 0, sizeof *g);
    if (A->rank < 2 || B->rank < 2 || A->strided || B->strided || A->dtype != VX_I64 || B->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "quantized product: contiguous integer operands of rank >= 2 wanted");
    g->M = A->dims[A->rank - 2];
    g->K = A->dims[A->rank - 1];
    g->N = B->dims[B->rank - 1];
    if (B->dims[B->rank - 2] != g->K) return vx_fail(ctx, VX_ESHAPE, "quantized product: inner dims differ");
    int ra = A->rank - 2, rb = B->rank - 2;
    g->nbd = ra > rb ? ra : rb;
    int64_t sa = g->M * g->K, sb = g->K * g->N;
    g->batches = 1;
    for (int d = g->nbd - 1; d >= 0; d--) {
        int da = d - (g->nbd - ra), db = d - (g->nbd - rb);
        int64_t ea = da >= 0 ? A->dims[da] : 1, eb = db >= 0 ? B->dims[db] : 1;
        if (ea != eb && ea != 1 && eb != 1) return vx_fail(ctx, VX_ESHAPE, "quantized product: batch dims do not broadcast");
        g->bd[d] = ea > eb ? ea : eb;
        g->as[d] = ea == 1 ? 0 : sa;
        g->bs[d] = eb == 1 ? 0 : sb;
        if (da >= 0) sa *= ea;
        if (db >= 0) sb *= eb;
        g->batches *= g->bd[d];
    }
    *rank = g->nbd + 2;
    memcpy(dims, g->bd, sizeof(int64_t) * (size_t)g->nbd);
    dims[g->nbd] = g->M;
    dims[g->nbd + 1] = g->N;
    return VX_OK;
}

/* slots: A, B, then a_scale, a_zp, b_scale, b_zp, y_scale, y_zp (QLinear)
 * or a_zp, b_zp (Integer); -1 for none. */
static vx_status qmm_forward(vx_ctx *ctx, vx_run *run, bool qlinear) {
    int ia = 0, ib = qlinear ? 3 : 1;
    if (!vxk_has_in(run, ia) || !vxk_has_in(run, ib)) return vx_fail(ctx, VX_ESHAPE, "%s needs A and B", run->node->op_type);
    QGeom g;
    int rank = 0;
    int64_t dims[VX_MAX_RANK];
    vx_status st = qmm_geom(ctx, run->in[ia], run->in[ib], &g, &rank, dims);
    QParam azp, bzp, as, bs, ys, yzp;
    memset(&as, 0, sizeof as);
    bs = ys = yzp = as;
    if (!st) st = qparam_of(ctx, run, 2, g.M, &azp);
    if (!st) st = qparam_of(ctx, run, qlinear ? 5 : 3, g.N, &bzp);
    long long lo = 0, hi = 0;
    if (qlinear) {
        if (!st) st = qparam_of(ctx, run, 1, g.M, &as);
        if (!st) st = qparam_of(ctx, run, 4, g.N, &bs);
        if (!st) st = qparam_of(ctx, run, 6, 1, &ys);
        if (!st) st = qparam_of(ctx, run, 7, 1, &yzp);
        int32_t t = run->graph && run->node->n_inputs > 7 ? run->node->inputs[7] : -1;
        bool signed8 = t >= 0 && run->graph->tensors[t].dtype == EST_DT_INT8;
        lo = signed8 ? -128 : 0;
        hi = signed8 ? 127 : 255;
    }
    if (st) return st;
    vx_tensor *Y = vx_out_new(ctx, run, 0, VX_I64, rank, dims);
    if (!Y) return vxk_oom(ctx, "output");
    if (!Y->numel) return VX_OK;
    int64_t nb = (Y->numel + QMM_TPB - 1) / QMM_TPB;
    unsigned blocks = (unsigned)(nb > 65535LL * 16 ? 65535LL * 16 : nb);
    k_qmm<<<blocks, QMM_TPB, 0, (cudaStream_t)vx_stream(ctx)>>>((const long long *)run->in[ia]->data,
                                                                 (const long long *)run->in[ib]->data,
                                                                 (long long *)Y->data, g, azp, bzp, as, bs, ys, yzp,
                                                                 qlinear, lo, hi);
    cudaError_t e = cudaPeekAtLastError();
    return e == cudaSuccess ? VX_OK : vx_fail(ctx, VX_ECUDA, "%s: %s", run->node->op_type, cudaGetErrorString(e));
}

static vx_status matmul_integer_fwd(vx_ctx *ctx, vx_run *run) { return qmm_forward(ctx, run, false); }
static vx_status qlinear_matmul_fwd(vx_ctx *ctx, vx_run *run) { return qmm_forward(ctx, run, true); }

extern "C" {
const vx_op vx_ops_quant[] = {
    {"MatMulInteger", matmul_integer_fwd, NULL, 0, 0, false, 0, NULL, 0, 0},
    {"QLinearMatMul", qlinear_matmul_fwd, NULL, 0, 0, false, 0, NULL, 0, 0},
};
const size_t vx_ops_quant_count = sizeof vx_ops_quant / sizeof vx_ops_quant[0];
}
