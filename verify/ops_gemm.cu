/*
 * ops_gemm.cu: Gemm and MatMul, forward and backward, on cuBLAS (float32, or
 * bfloat16 / float16 with a float32 accumulator: cublasGemmEx).
 *
 * cuBLAS is column-major: a row-major matrix is its transpose in column-major
 * order, so row-major C = A * B runs as C^T = B^T * A^T (vxk_gemm).
 *
 * Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to (M, N).
 *   keeps A when B needs a gradient, B when A does (saves_fn).
 * MatMul: numpy matmul (1-D operands promoted, batch dims broadcast).
 *   Batches run as one GEMM when B has no batch (folded into M), as a strided
 *   batched GEMM when each operand's batch is full or absent, otherwise as a
 *   pointer-array batched GEMM. A gradient of a broadcast operand is computed
 *   per batch into a workspace and summed down. Keeps A / B like Gemm.
 */
#include <stdlib.h>

#include "ops_common.cuh"

/* ---- Gemm -------------------------------------------------------------------- */

template <typename T> static vx_status gemm_forward_t(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "Gemm needs A and B");
    const vx_tensor *A = run->in[0], *B = run->in[1];
    const vx_tensor *C = vxk_has_in(run, 2) ? run->in[2] : NULL;
    if (A->dtype != B->dtype || (C && C->dtype != A->dtype))
        return vx_fail(ctx, VX_EUNSUPPORTED, "Gemm: operands of different dtypes");
    if (A->rank != 2 || B->rank != 2) return vx_fail(ctx, VX_ESHAPE, "Gemm: A and B must be 2-D");
    bool ta = vxk_attr_int(run, "transA", 0) != 0, tb = vxk_attr_int(run, "transB", 0) != 0;
    float alpha = (float)vxk_attr_float(run, "alpha", 1.0), beta = (float)vxk_attr_float(run, "beta", 1.0);
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t Kb = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
    if (K != Kb) return vx_fail(ctx, VX_ESHAPE, "Gemm: inner dims differ (%lld, %lld)", (long long)K, (long long)Kb);
    if (!vxk_gemm_fits(M, N, K)) return vx_fail(ctx, VX_EUNSUPPORTED, "Gemm: matrix too large for cuBLAS");
    int64_t yd[2] = {M, N};
    vxk_bcast bc;
    if (C && !vxk_bcast_make(&bc, 2, yd, C->rank, C->dims))
        return vx_fail(ctx, VX_ESHAPE, "Gemm: C does not broadcast to (%lld, %lld)", (long long)M, (long long)N);
    vx_status st = vxk_new_out(ctx, run, 0, A->dtype, 2, yd);
    if (st) return st;
    T *Y = (T *)run->out[0]->data;
    if (M * N == 0) return VX_OK;
    float b2 = 0.f;
    if (C && beta != 0.f) {
        vxk_bcast_copy_kernel<T><<<vxk_blocks(M * N), VXK_THREADS, 0, vxk_stream(ctx)>>>(Y, (const T *)C->data, bc,
                                                                                       M * N, beta);
        if ((st = vxk_check(ctx, "Gemm bias"))) return st;
        b2 = 1.f;
    }
    if (K == 0) {
        if (b2 == 0.f) st = vxk_zero(ctx, Y, (size_t)(M * N) * sizeof(T));
    } else {
        st = vxk_blas_check(ctx,
                            vxk_gemm(vxk_blas(ctx), ta, tb, M, N, K, alpha, (const T *)A->data, A->dims[1],
                                     (const T *)B->data, B->dims[1], b2, Y, N),
                            "Gemm");
    }
    return st;
}

template <typename T> static vx_status gemm_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *A = run->in[0], *B = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    bool ta = vxk_attr_int(run, "transA", 0) != 0, tb = vxk_attr_int(run, "transB", 0) != 0;
    float alpha = (float)vxk_attr_float(run, "alpha", 1.0), beta = (float)vxk_attr_float(run, "beta", 1.0);
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t N = tb ? B->dims[0] : B->dims[1];
    const T *dY = (const T *)dYt->data;
    cublasHandle_t h = vxk_blas(ctx);
    vx_status st = VX_OK;
    if (run->need_grad[0]) {
        if ((st = vxk_grad(ctx, run, 0))) goto fail;
        T *dA = (T *)run->grad_in[0]->data;
        if (N == 0) st = vxk_zero(ctx, dA, (size_t)A->numel * sizeof(T));
        else if (A->numel) {
            if (!ta) st = vxk_blas_check(ctx, vxk_gemm(h, false, !tb, M, K, N, alpha, dY, N, (const T *)B->data,
                                                       B->dims[1], 0.f, dA, K), "Gemm dA");
            else st = vxk_blas_check(ctx, vxk_gemm(h, tb, true, K, M, N, alpha, (const T *)B->data, B->dims[1], dY,
                                                   N, 0.f, dA, M), "Gemm dA");
        }
        if (st) goto fail;
    }
    if (run->need_grad[1]) {
        if ((st = vxk_grad(ctx, run, 1))) goto fail;
        T *dB = (T *)run->grad_in[1]->data;
        if (M == 0) st = vxk_zero(ctx, dB, (size_t)B->numel * sizeof(T));
        else if (B->numel) {
            if (!tb) st = vxk_blas_check(ctx, vxk_gemm(h, !ta, false, K, N, M, alpha, (const T *)A->data, A->dims[1],
                                                       dY, N, 0.f, dB, N), "Gemm dB");
            else st = vxk_blas_check(ctx, vxk_gemm(h, true, ta, N, K, M, alpha, dY, N, (const T *)A->data,
                                                   A->dims[1], 0.f, dB, K), "Gemm dB");
        }
        if (st) goto fail;
    }
    if (run->n_in > 2 && run->need_grad[2] && vxk_has_in(run, 2)) {
        const vx_tensor *C = run->in[2];
        if ((st = vxk_grad(ctx, run, 2))) goto fail;
        int64_t yd[2] = {M, N};
        st = vxk_reduce_to(ctx, (T *)run->grad_in[2]->data, C->rank, C->dims, dY, 2, yd, beta);
        if (st) goto fail;
    }
    return VX_OK;
fail:
    return st;
}

/* ---- MatMul -------------------------------------------------------------------- */

typedef struct mm_plan {
    int64_t M, K, N;
    int L;                         /* batch rank of the output */
    int64_t bdims[VX_MAX_RANK];    /* output batch dims */
    int64_t nb;                    /* output batches */
    int64_t astr[VX_MAX_RANK], bstr[VX_MAX_RANK]; /* element strides per batch dim, 0 when broadcast */
    int64_t nbA, nbB;              /* batch numel of A and B */
    int ra, rb;                    /* batch ranks of A and B */
    int64_t adims[VX_MAX_RANK], bdimsB[VX_MAX_RANK];
    bool a1, b1;                   /* 1-D operands */
    int out_rank;
    int64_t out_dims[VX_MAX_RANK];
} mm_plan;

static vx_status mm_plan_make(vx_ctx *ctx, const vx_tensor *A, const vx_tensor *B, mm_plan *p) {
    memset(p, 0, sizeof *p);
    if (A->rank < 1 || B->rank < 1) return vx_fail(ctx, VX_ESHAPE, "MatMul operands must have rank >= 1");
    p->a1 = A->rank == 1;
    p->b1 = B->rank == 1;
    p->M = p->a1 ? 1 : A->dims[A->rank - 2];
    p->K = A->dims[A->rank - 1];
    int64_t Kb = p->b1 ? B->dims[0] : B->dims[B->rank - 2];
    p->N = p->b1 ? 1 : B->dims[B->rank - 1];
    if (p->K != Kb) return vx_fail(ctx, VX_ESHAPE, "MatMul: inner dims differ (%lld, %lld)", (long long)p->K, (long long)Kb);
    if (!vxk_gemm_fits(p->M, p->N, p->K)) return vx_fail(ctx, VX_EUNSUPPORTED, "MatMul: matrix too large for cuBLAS");
    p->ra = p->a1 ? 0 : A->rank - 2;
    p->rb = p->b1 ? 0 : B->rank - 2;
    for (int i = 0; i < p->ra; i++) p->adims[i] = A->dims[i];
    for (int i = 0; i < p->rb; i++) p->bdimsB[i] = B->dims[i];
    p->L = p->ra > p->rb ? p->ra : p->rb;
    if (p->L + 2 > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "MatMul: rank too high");
    int64_t sa = p->M * p->K, sb = p->K * p->N;
    p->nb = 1;
    p->nbA = p->nbB = 1;
    for (int i = p->L - 1; i >= 0; i--) {
        int ia = i - (p->L - p->ra), ib = i - (p->L - p->rb);
        int64_t da = ia >= 0 ? p->adims[ia] : 1, db = ib >= 0 ? p->bdimsB[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return vx_fail(ctx, VX_ESHAPE, "MatMul: batch dims %lld and %lld do not broadcast", (long long)da, (long long)db);
        int64_t d = da == 1 ? db : da;
        p->bdims[i] = d;
        p->astr[i] = (da == d && d != 1) ? sa : 0;
        p->bstr[i] = (db == d && d != 1) ? sb : 0;
        sa *= da;
        sb *= db;
        p->nb *= d;
        p->nbA *= da;
        p->nbB *= db;
    }
    p->out_rank = 0;
    for (int i = 0; i < p->L; i++) p->out_dims[p->out_rank++] = p->bdims[i];
    if (!p->a1) p->out_dims[p->out_rank++] = p->M;
    if (!p->b1) p->out_dims[p->out_rank++] = p->N;
    return VX_OK;
}

/* Offset of batch b of an operand with strides str over the batch dims. */
static int64_t mm_off(const mm_plan *p, const int64_t *str, int64_t b) {
    int64_t off = 0;
    for (int i = p->L - 1; i >= 0; i--) {
        off += (b % p->bdims[i]) * str[i];
        b /= p->bdims[i];
    }
    return off;
}

/* Stride s with off(b) == b * s for every batch, or -1. */
static int64_t mm_linear(const mm_plan *p, const int64_t *str, int64_t nbx, int64_t mat) {
    if (nbx == 1) return 0;
    if (nbx == p->nb) {
        /* full: every batch dim of the output is the operand's own */
        for (int i = 0; i < p->L; i++) if (p->bdims[i] != 1 && str[i] == 0) return -1;
        return mat;
    }
    return -1;
}

/* The pointer-array batched GEMM (column-major arguments, as cuBLAS takes
 * them): cublasSgemmBatched for float, cublasGemmBatchedEx with a float32
 * accumulator for the half types. */
template <typename T>
static cublasStatus_t mm_gemm_batched(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                      const T **A, int64_t lda, const T **B, int64_t ldb, float beta, T *const *C,
                                      int64_t nb) {
    cudaDataType_t dt = vxk_cuda_type<T>();
    return cublasGemmBatchedEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, (int)m, (int)n, (int)k,
                               &alpha, (const void *const *)A, dt, (int)lda, (const void *const *)B, dt, (int)ldb, &beta,
                               (void *const *)C, dt, (int)m, (int)nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
template <>
cublasStatus_t mm_gemm_batched<float>(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                      const float **A, int64_t lda, const float **B, int64_t ldb, float beta,
                                      float *const *C, int64_t nb) {
    return cublasSgemmBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, (int)m, (int)n, (int)k,
                              &alpha, A, (int)lda, B, (int)ldb, &beta, C, (int)m, (int)nb);
}

/* C_b (m x n, contiguous, stride m*n) = alpha * op(X_b) op(W_b) over the plan's
 * batches; operand offsets follow xstr / wstr. */
template <typename T>
static vx_status mm_batched(vx_ctx *ctx, const mm_plan *p, bool tx, bool tw, int64_t m, int64_t n, int64_t k,
                            const T *X, int64_t ldx, const int64_t *xstr, int64_t nbX, int64_t xmat,
                            const T *W, int64_t ldw, const int64_t *wstr, int64_t nbW, int64_t wmat, T *C) {
    cublasHandle_t h = vxk_blas(ctx);
    int64_t nb = p->nb;
    int64_t sx = mm_linear(p, xstr, nbX, xmat), sw = mm_linear(p, wstr, nbW, wmat);
    if (sx >= 0 && sw >= 0) {
        if (nb > INT32_MAX) return vx_fail(ctx, VX_EUNSUPPORTED, "MatMul: too many batches");
        return vxk_blas_check(ctx, vxk_gemm_strided(h, tx, tw, m, n, k, 1.f, X, ldx, sx, W, ldw, sw, 0.f, C, n, m * n, nb),
                              "MatMul strided batched GEMM");
    }
    /* pointer arrays */
    size_t bytes = (size_t)nb * 3 * sizeof(void *);
    const T **hp = (const T **)malloc(bytes);
    if (!hp) return vx_fail(ctx, VX_EOOM, "host memory for MatMul pointers");
    for (int64_t b = 0; b < nb; b++) {
        hp[b] = W + mm_off(p, wstr, b);                 /* cuBLAS "A" is our right operand */
        hp[nb + b] = X + mm_off(p, xstr, b);
        hp[2 * nb + b] = C + b * m * n;
    }
    void *dp = vx_workspace(ctx, bytes);
    if (!dp) { free(hp); return vxk_oom(ctx, "MatMul pointer arrays"); }
    vx_status st = VX_OK;
    if (cudaMemcpyAsync(dp, hp, bytes, cudaMemcpyHostToDevice, vxk_stream(ctx)) != cudaSuccess)
        st = vx_fail(ctx, VX_ECUDA, "copying MatMul pointers failed");
    if (!st && cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess) st = vx_fail(ctx, VX_ECUDA, "MatMul sync failed");
    free(hp);
    if (!st) {
        const T **dpp = (const T **)dp;
        float alpha = 1.f, beta = 0.f;
        st = vxk_blas_check(ctx, mm_gemm_batched<T>(h, tw, tx, n, m, k, alpha, dpp, ldw, dpp + nb, ldx, beta,
                                                     (T *const *)(dpp + 2 * nb), nb),
                            "MatMul batched GEMM");
        if (!st && cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess)
            st = vx_fail(ctx, VX_ECUDA, "MatMul sync failed");
    }
    vx_free(ctx, dp);
    return st;
}

template <typename T> static vx_status matmul_forward_c(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "MatMul needs two inputs");
    const vx_tensor *A = run->in[0], *B = run->in[1];
    if (A->dtype != B->dtype) return vx_fail(ctx, VX_EUNSUPPORTED, "MatMul: operands of different dtypes");
    mm_plan p;
    vx_status st = mm_plan_make(ctx, A, B, &p);
    if (st) return st;
    if ((st = vxk_new_out(ctx, run, 0, A->dtype, p.out_rank, p.out_dims))) return st;
    T *Y = (T *)run->out[0]->data;
    int64_t total = p.nb * p.M * p.N;
    if (total == 0) return VX_OK;
    if (p.K == 0) st = vxk_zero(ctx, Y, (size_t)total * sizeof(T));
    else if (p.nbB == 1 && mm_linear(&p, p.astr, p.nbA, p.M * p.K) == p.M * p.K && p.nb * p.M < INT32_MAX) {
        /* B without batch: fold A's batches into M */
        st = vxk_blas_check(ctx, vxk_gemm(vxk_blas(ctx), false, false, p.nb * p.M, p.N, p.K, 1.f, (const T *)A->data,
                                          p.K, (const T *)B->data, p.N, 0.f, Y, p.N), "MatMul");
    } else {
        st = mm_batched<T>(ctx, &p, false, false, p.M, p.N, p.K, (const T *)A->data, p.K, p.astr, p.nbA, p.M * p.K,
                        (const T *)B->data, p.N, p.bstr, p.nbB, p.K * p.N, Y);
    }
    return st;
}

/* Sums per-batch gradients Tw (nb x r x c) onto an operand whose batch
 * dims (rank rx, dims xd) broadcast to the output's. */
template <typename T>
static vx_status mm_reduce_batches(vx_ctx *ctx, const mm_plan *p, T *dst, const T *Tw, int rx, const int64_t *xd,
                                   int64_t r, int64_t c) {
    int64_t big[VX_MAX_RANK], small[VX_MAX_RANK];
    for (int i = 0; i < p->L; i++) big[i] = p->bdims[i];
    big[p->L] = r;
    big[p->L + 1] = c;
    for (int i = 0; i < rx; i++) small[i] = xd[i];
    small[rx] = r;
    small[rx + 1] = c;
    return vxk_reduce_to(ctx, dst, rx + 2, small, Tw, p->L + 2, big, 1.f);
}

template <typename T> static vx_status matmul_backward_c(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *A = run->in[0], *B = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    mm_plan p;
    vx_status st = mm_plan_make(ctx, A, B, &p);
    if (st) return st;
    const T *dY = (const T *)dYt->data, *Ad = (const T *)A->data, *Bd = (const T *)B->data;
    int64_t M = p.M, K = p.K, N = p.N, nb = p.nb;
    int64_t ystr[VX_MAX_RANK];
    {
        int64_t s = M * N;
        for (int i = p.L - 1; i >= 0; i--) { ystr[i] = p.bdims[i] == 1 ? 0 : s; s *= p.bdims[i]; }
    }
    cublasHandle_t h = vxk_blas(ctx);
    T *Tw = NULL;
    if (run->need_grad[0]) {
        if ((st = vxk_grad(ctx, run, 0))) goto fail;
        T *dA = (T *)run->grad_in[0]->data;
        bool a_full = mm_linear(&p, p.astr, p.nbA, M * K) == M * K || nb == 1;
        if (A->numel == 0) {
        } else if (N == 0 || nb == 0) {
            st = vxk_zero(ctx, dA, (size_t)A->numel * sizeof(T));
        } else if (a_full && p.nbB == 1 && nb * M < INT32_MAX) {
            /* dA (nb*M x K) = dY (nb*M x N) * B^T */
            st = vxk_blas_check(ctx, vxk_gemm(h, false, true, nb * M, K, N, 1.f, dY, N, Bd, N, 0.f, dA, K), "MatMul dA");
        } else if (a_full) {
            st = mm_batched<T>(ctx, &p, false, true, M, K, N, dY, N, ystr, nb, M * N, Bd, N, p.bstr, p.nbB, K * N, dA);
        } else {
            Tw = (T *)vx_workspace(ctx, (size_t)(nb * M * K) * sizeof(T));
            if (!Tw) { st = vxk_oom(ctx, "MatMul dA workspace"); goto fail; }
            st = mm_batched<T>(ctx, &p, false, true, M, K, N, dY, N, ystr, nb, M * N, Bd, N, p.bstr, p.nbB, K * N, Tw);
            if (!st) st = mm_reduce_batches<T>(ctx, &p, dA, Tw, p.ra, p.adims, M, K);
            if (!st && cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess) st = vx_fail(ctx, VX_ECUDA, "sync failed");
            vx_free(ctx, Tw);
            Tw = NULL;
        }
        if (st) goto fail;
    }
    if (run->need_grad[1]) {
        if ((st = vxk_grad(ctx, run, 1))) goto fail;
        T *dB = (T *)run->grad_in[1]->data;
        bool b_full = mm_linear(&p, p.bstr, p.nbB, K * N) == K * N || nb == 1;
        bool a_lin = mm_linear(&p, p.astr, p.nbA, M * K) == M * K;
        if (B->numel == 0) {
        } else if (M == 0 || nb == 0) {
            st = vxk_zero(ctx, dB, (size_t)B->numel * sizeof(T));
        } else if (p.nbB == 1 && (a_lin || nb == 1) && nb * M < INT32_MAX) {
            /* dB (K x N) = A^T (K x nb*M) * dY (nb*M x N) */
            st = vxk_blas_check(ctx, vxk_gemm(h, true, false, K, N, nb * M, 1.f, Ad, K, dY, N, 0.f, dB, N), "MatMul dB");
        } else if (b_full) {
            st = mm_batched<T>(ctx, &p, true, false, K, N, M, Ad, K, p.astr, p.nbA, M * K, dY, N, ystr, nb, M * N, dB);
        } else {
            Tw = (T *)vx_workspace(ctx, (size_t)(nb * K * N) * sizeof(T));
            if (!Tw) { st = vxk_oom(ctx, "MatMul dB workspace"); goto fail; }
            st = mm_batched<T>(ctx, &p, true, false, K, N, M, Ad, K, p.astr, p.nbA, M * K, dY, N, ystr, nb, M * N, Tw);
            if (!st) st = mm_reduce_batches<T>(ctx, &p, dB, Tw, p.rb, p.bdimsB, K, N);
            if (!st && cudaStreamSynchronize(vxk_stream(ctx)) != cudaSuccess) st = vx_fail(ctx, VX_ECUDA, "sync failed");
            vx_free(ctx, Tw);
            Tw = NULL;
        }
        if (st) goto fail;
    }
    return VX_OK;
fail:
    return st;
}

/* ---- MatMul's entry points: strided operands -------------------------------------
 * The executor hands MatMul strided views as they are (vx_op.strided). As
 * aten::matmul does: a 2-D right operand that is a transposed contiguous
 * matrix (x @ W.t(), a Linear's Transpose of its weight) goes to cuBLAS with
 * the transpose flag, no copy, and its gradient comes out in the weight's own
 * layout (mm_mat2_backward's column-major case), a transposed view; any
 * other strided operand (attention's heads after a Transpose) is copied to a
 * contiguous temporary for the call (bmm's .contiguous()). */

/* B (K x N) viewing a contiguous N x K matrix. */
static bool mm_bt(const vx_tensor *B) {
    return B && B->strided && B->rank == 2 && B->strides[0] == 1 && B->strides[1] == B->dims[0];
}

/* The fold path (A's batches, or its one matrix, folded into M; B without
 * batch) applies. */
static bool mm_fold(const mm_plan *p) {
    bool a_rows = p->nbA == 1 || mm_linear(p, p->astr, p->nbA, p->M * p->K) == p->M * p->K;
    return p->nbB == 1 && !p->b1 && p->K > 0 && a_rows && p->nb * p->M < INT32_MAX;
}

/* Runs fn with contiguous copies of the strided tensors in slots. */
static vx_status mm_contiguous_call(vx_ctx *ctx, vx_run *run, vx_status (*fn)(vx_ctx *, vx_run *), bool bwd) {
    vx_tensor *orig[3] = {run->in[0], run->in[1], bwd ? run->out[0] : NULL}, *c[3] = {NULL, NULL, NULL};
    vx_status st = VX_OK;
    for (int i = 0; i < 3 && !st; i++) {
        if (!orig[i]) continue;
        if (!(c[i] = vx_contiguous(ctx, orig[i]))) st = vxk_oom(ctx, "MatMul contiguous operand");
    }
    if (!st) {
        run->in[0] = c[0];
        run->in[1] = c[1];
        if (bwd) run->out[0] = c[2];
        st = fn(ctx, run);
    }
    run->in[0] = orig[0];
    run->in[1] = orig[1];
    if (bwd) run->out[0] = orig[2];
    for (int i = 0; i < 3; i++) vx_tensor_release(ctx, c[i]);
    return st;
}

template <typename T> static vx_status matmul_forward_t(vx_ctx *ctx, vx_run *run) {
    if (!vxk_has_in(run, 0) || !vxk_has_in(run, 1)) return vx_fail(ctx, VX_ESHAPE, "MatMul needs two inputs");
    const vx_tensor *A = run->in[0], *B = run->in[1];
    mm_plan p;
    if (!A->strided && mm_bt(B) && A->dtype == B->dtype && !mm_plan_make(ctx, A, B, &p) &&
        mm_fold(&p)) {
        vx_status st = vxk_new_out(ctx, run, 0, A->dtype, p.out_rank, p.out_dims);
        if (st || p.nb * p.M * p.N == 0) return st;
        /* Y (nb*M x N) = A (nb*M x K) * W^T, W stored N x K */
        return vxk_blas_check(ctx, vxk_gemm(vxk_blas(ctx), false, true, p.nb * p.M, p.N, p.K, 1.f,
                                            (const T *)A->data, p.K, (const T *)B->data, p.K, 0.f,
                                            (T *)run->out[0]->data, p.N), "MatMul");
    }
    return mm_contiguous_call(ctx, run, matmul_forward_c<T>, false);
}

template <typename T> static vx_status matmul_backward_t(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *A = run->in[0], *B = run->in[1], *dYt = run->grad_out[0];
    if (!dYt) return VX_OK;
    mm_plan p;
    if (!A->strided && mm_bt(B) && !dYt->strided && !mm_plan_make(ctx, A, B, &p) && mm_fold(&p) && p.M > 0 &&
        p.N > 0 && p.nb > 0) {
        int64_t M = p.nb * p.M, K = p.K, N = p.N;
        const T *dY = (const T *)dYt->data;
        cublasHandle_t h = vxk_blas(ctx);
        vx_status st;
        if (run->need_grad[0]) {
            if ((st = vxk_grad(ctx, run, 0))) return st;
            /* dA (M x K) = dY (M x N) * W (N x K) */
            st = vxk_blas_check(ctx, vxk_gemm(h, false, false, M, K, N, 1.f, dY, N, (const T *)B->data, K, 0.f,
                                              (T *)run->grad_in[0]->data, K), "MatMul dA");
            if (st) return st;
        }
        if (run->need_grad[1]) {
            /* dW (N x K) = dY^T * A, returned as the K x N transposed view */
            int64_t wd[2] = {N, K}, vd[2] = {K, N}, vs[2] = {1, K};
            vx_tensor *w = vx_tensor_new(ctx, A->dtype, 2, wd, run->grad_cat[1]);
            if (!w) return vxk_oom(ctx, "gradient");
            st = vxk_blas_check(ctx, vxk_gemm(h, true, false, N, K, M, 1.f, dY, N, (const T *)A->data, K, 0.f,
                                              (T *)w->data, K), "MatMul dB");
            run->grad_in[1] = st ? NULL : vx_tensor_strided_view(ctx, w, 2, vd, vs, 0);
            vx_tensor_release(ctx, w);
            if (st) return st;
            if (!run->grad_in[1]) return vxk_oom(ctx, "gradient");
        }
        return VX_OK;
    }
    return mm_contiguous_call(ctx, run, matmul_backward_c<T>, true);
}


/* ---- dispatch on the storage dtype ------------------------------------------------ */

static vx_dtype in0_dtype(const vx_run *run) { return vxk_has_in(run, 0) ? run->in[0]->dtype : VX_F32; }
static vx_status gemm_forward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, in0_dtype(run), "Gemm", gemm_forward_t<T>(ctx, run));
}
static vx_status gemm_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, in0_dtype(run), "Gemm", gemm_backward_t<T>(ctx, run));
}
static vx_status matmul_forward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, in0_dtype(run), "MatMul", matmul_forward_t<T>(ctx, run));
}
static vx_status matmul_backward(vx_ctx *ctx, vx_run *run) {
    VXK_FLOAT_DISPATCH(ctx, in0_dtype(run), "MatMul", matmul_backward_t<T>(ctx, run));
}

extern "C" {
const vx_op vx_ops_gemm[] = {
    {"Gemm", gemm_forward, gemm_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, vxk_product_saves, 0, VX_HALF},
    {"MatMul", matmul_forward, matmul_backward, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, vxk_product_saves,
     VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
};
const size_t vx_ops_gemm_count = sizeof vx_ops_gemm / sizeof vx_ops_gemm[0];
}
