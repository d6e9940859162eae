/*
 * ops_einsum.cu: Einsum with two operands whose equation is a batched
 * matrix product (the `einsum` family): "bij,bjk->bik", "bhqd,bhkd->bhqk",
 * "ij,j->i"... Each letter is a batch letter (both operands and the
 * output), a row letter (first operand and output), a column letter (second
 * operand and output) or a contracted one (both operands, not the output).
 * As torch.einsum's bmm path: each operand is permuted to (batch, rows,
 * contracted) / (batch, contracted, columns), copied where that is not
 * already its layout (VX_CAT_TEMP), multiplied with cuBLAS, and the product
 * permuted into the output. Backward: the two bmm's of MatMul on the same
 * permutations. Keeps the first operand when the second needs a gradient
 * and the second when the first does, as MatMul. Refused (VX_EUNSUPPORTED):
 * one or three operands, "...", a letter repeated in one operand (a
 * diagonal), a letter summed in one operand only. bfloat16 / float16
 * operands go through cublasGemmEx with a float32 accumulator (vxk_gemm's
 * half overloads), as MatMul's.
 */
#include "ops_common.cuh"

#define EIN_MAX 3 * VX_MAX_RANK

/* dst (contiguous, dims) [i] = src[sum of coordinate d * sstride[d]]. */
typedef struct ein_perm {
    int rank;
    int64_t dims[VX_MAX_RANK], sstride[VX_MAX_RANK];
} ein_perm;

template <typename T> static __global__ void ein_permute_kernel(T *dst, const T *src, int64_t n, ein_perm p) {
    VXK_LOOP(i, n) {
        int64_t r = i, off = 0;
        for (int d = p.rank - 1; d >= 0; d--) {
            off += (r % p.dims[d]) * p.sstride[d];
            r /= p.dims[d];
        }
        dst[i] = src[off];
    }
}

typedef struct ein_plan {
    char a[VX_MAX_RANK + 1], b[VX_MAX_RANK + 1], o[VX_MAX_RANK + 1]; /* the three subscripts */
    int64_t size[128];                                                /* per letter */
    /* batch+rows+contracted, batch+contracted+cols, batch+rows+cols (sized for the parts, which are at most rank) */
    char pa[EIN_MAX + 1], pb[EIN_MAX + 1], pc[EIN_MAX + 1];
    int64_t batch, m, n, k;
} ein_plan;

static int ein_pos(const char *s, char c) {
    const char *p = strchr(s, c);
    return p && c ? (int)(p - s) : -1;
}

/* Parses "a,b->o" (spaces ignored) against the operands' ranks and dims. */
static vx_status ein_parse(vx_ctx *ctx, const vx_run *run, const vx_tensor *A, const vx_tensor *B, ein_plan *pl) {
    const char *eq = vxk_attr_string(run, "equation", "");
    char *dst[3] = {pl->a, pl->b, pl->o};
    int part = 0, len = 0;
    memset(pl, 0, sizeof *pl);
    for (const char *c = eq; *c; c++) {
        if (*c == ' ') continue;
        if (*c == ',' && part == 0) { part = 1; len = 0; continue; }
        if (*c == '-' && c[1] == '>' && part == 1) { part = 2; len = 0; c++; continue; }
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')) || len == VX_MAX_RANK || ein_pos(dst[part], *c) >= 0)
            return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum \"%s\": only two operands, -> and distinct letters per operand", eq);
        dst[part][len++] = *c;
    }
    if (part != 2) return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum \"%s\": two operands and an explicit output only", eq);
    if ((int)strlen(pl->a) != A->rank || (int)strlen(pl->b) != B->rank)
        return vx_fail(ctx, VX_ESHAPE, "Einsum \"%s\": subscripts do not match the operands' ranks", eq);
    for (int i = 0; i < A->rank; i++) pl->size[(int)pl->a[i]] = A->dims[i];
    for (int i = 0; i < B->rank; i++) {
        int64_t *s = &pl->size[(int)pl->b[i]];
        if (ein_pos(pl->a, pl->b[i]) >= 0 && *s != B->dims[i])
            return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum \"%s\": letter %c has sizes %lld and %lld (broadcast)", eq,
                           pl->b[i], (long long)*s, (long long)B->dims[i]);
        *s = B->dims[i];
    }
    char batch[VX_MAX_RANK + 1] = "", rows[VX_MAX_RANK + 1] = "", cols[VX_MAX_RANK + 1] = "", con[VX_MAX_RANK + 1] = "";
    pl->batch = pl->m = pl->n = pl->k = 1;
    for (const char *c = pl->o; *c; c++) {
        bool in_a = ein_pos(pl->a, *c) >= 0, in_b = ein_pos(pl->b, *c) >= 0;
        char *to = in_a && in_b ? batch : in_a ? rows : in_b ? cols : NULL;
        if (!to) return vx_fail(ctx, VX_ESHAPE, "Einsum \"%s\": output letter %c is in no operand", eq, *c);
        to[strlen(to)] = *c;
    }
    for (const char *c = pl->a; *c; c++) {
        if (ein_pos(pl->o, *c) >= 0) continue;
        if (ein_pos(pl->b, *c) < 0)
            return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum \"%s\": letter %c is summed in one operand only", eq, *c);
        con[strlen(con)] = *c;
    }
    for (const char *c = pl->b; *c; c++)
        if (ein_pos(pl->o, *c) < 0 && ein_pos(pl->a, *c) < 0)
            return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum \"%s\": letter %c is summed in one operand only", eq, *c);
    for (const char *c = batch; *c; c++) pl->batch *= pl->size[(int)*c];
    for (const char *c = rows; *c; c++) pl->m *= pl->size[(int)*c];
    for (const char *c = cols; *c; c++) pl->n *= pl->size[(int)*c];
    for (const char *c = con; *c; c++) pl->k *= pl->size[(int)*c];
    snprintf(pl->pa, sizeof pl->pa, "%s%s%s", batch, rows, con);
    snprintf(pl->pb, sizeof pl->pb, "%s%s%s", batch, con, cols);
    snprintf(pl->pc, sizeof pl->pc, "%s%s%s", batch, rows, cols);
    if (!vxk_gemm_fits(pl->m, pl->n, pl->k) || pl->batch >= INT32_MAX)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum: matrices too large for cuBLAS");
    return VX_OK;
}

/* Copies src (contiguous in the order of the letters `from`) into dst,
 * contiguous in the order of `to`. */
template <typename T>
static vx_status ein_permute(vx_ctx *ctx, const ein_plan *pl, T *dst, const T *src, const char *from, const char *to,
                             int64_t n) {
    ein_perm p;
    int64_t stride[128] = {0}, s = 1;
    for (int i = (int)strlen(from) - 1; i >= 0; i--) { stride[(int)from[i]] = s; s *= pl->size[(int)from[i]]; }
    p.rank = (int)strlen(to);
    for (int i = 0; i < p.rank; i++) { p.dims[i] = pl->size[(int)to[i]]; p.sstride[i] = stride[(int)to[i]]; }
    if (!n) return VX_OK;
    ein_permute_kernel<T><<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(dst, src, n, p);
    return vxk_check(ctx, "Einsum permute");
}

/* src as laid out in `to`: itself when `from` already is that order, else a
 * permuted copy in a workspace (*ws, to free). */
template <typename T>
static const T *ein_as(vx_ctx *ctx, const ein_plan *pl, const T *src, const char *from, const char *to, int64_t n,
                       T **ws, vx_status *st) {
    *ws = NULL;
    *st = VX_OK;
    if (strcmp(from, to) == 0) return src;
    *ws = (T *)vx_workspace(ctx, (size_t)(n ? n : 1) * sizeof(T));
    if (!*ws) { *st = vxk_oom(ctx, "Einsum permuted operand"); return NULL; }
    if ((*st = ein_permute(ctx, pl, *ws, src, from, to, n))) return NULL;
    return *ws;
}

template <typename T> static vx_status einsum_fwd_t(vx_ctx *ctx, vx_run *run, const ein_plan &pl) {
    const vx_tensor *A = run->in[0], *B = run->in[1];
    vx_tensor *Y = run->out[0];
    vx_status st;
    T *wa, *wb, *wc = NULL;
    const T *pa = ein_as(ctx, &pl, (const T *)A->data, pl.a, pl.pa, A->numel, &wa, &st);
    if (!pa) return st;
    const T *pb = ein_as(ctx, &pl, (const T *)B->data, pl.b, pl.pb, B->numel, &wb, &st);
    if (!pb) return st;
    T *c = (T *)Y->data;
    bool direct = strcmp(pl.pc, pl.o) == 0;
    if (!direct) {
        if (!(wc = (T *)vx_workspace(ctx, (size_t)Y->numel * sizeof(T)))) return vxk_oom(ctx, "Einsum product");
        c = wc;
    }
    cublasSetStream(vxk_blas(ctx), vxk_stream(ctx));
    st = vxk_blas_check(ctx, vxk_gemm_strided(vxk_blas(ctx), false, false, pl.m, pl.n, pl.k, 1.f, pa, pl.k, pl.m * pl.k,
                                              pb, pl.n, pl.k * pl.n, 0.f, c, pl.n, pl.m * pl.n, pl.batch), "Einsum");
    if (!st && !direct) st = ein_permute(ctx, &pl, (T *)Y->data, wc, pl.pc, pl.o, Y->numel);
    vx_free(ctx, wa);
    vx_free(ctx, wb);
    vx_free(ctx, wc);
    return st;
}

static vx_status einsum_fwd(vx_ctx *ctx, vx_run *run) {
    if (run->n_in != 2 || !vxk_has_in(run, 1))
        return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum: two operands only");
    const vx_tensor *A = run->in[0], *B = run->in[1];
    if (!vx_dtype_is_float(A->dtype) || B->dtype != A->dtype)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Einsum: two floating operands of one dtype only");
    ein_plan pl;
    vx_status st = ein_parse(ctx, run, A, B, &pl);
    if (st) return st;
    int64_t dims[VX_MAX_RANK];
    int ro = (int)strlen(pl.o);
    for (int i = 0; i < ro; i++) dims[i] = pl.size[(int)pl.o[i]];
    if ((st = vxk_new_out(ctx, run, 0, A->dtype, ro, dims))) return st;
    vx_tensor *Y = run->out[0];
    if (!Y->numel) return VX_OK;
    if (pl.k == 0) return vxk_zero(ctx, Y->data, (size_t)Y->numel * vx_dtype_size(Y->dtype));
    VXK_FLOAT_DISPATCH(ctx, A->dtype, "Einsum", einsum_fwd_t<T>(ctx, run, pl));
}

/* dA' = dC' B'^T, dB' = A'^T dC' on the (batch, rows, contracted) layouts,
 * then permuted back to each operand's subscripts. */
template <typename T> static vx_status einsum_bwd_t(vx_ctx *ctx, vx_run *run, const ein_plan &pl) {
    const vx_tensor *dY = run->grad_out[0];
    vx_status st;
    T *wdc, *wo = NULL, *wg = NULL;
    const T *dc = ein_as(ctx, &pl, (const T *)dY->data, pl.o, pl.pc, dY->numel, &wdc, &st);
    if (!dc) return st;
    cublasHandle_t h = vxk_blas(ctx);
    cublasSetStream(h, vxk_stream(ctx));
    for (int k = 0; k < 2 && !st; k++) {
        if (!run->need_grad[k] || !run->grad_in[k]->numel) continue;
        const vx_tensor *other = run->in[1 - k];
        const char *osub = k == 0 ? pl.b : pl.a, *operm = k == 0 ? pl.pb : pl.pa;
        const char *sub = k == 0 ? pl.a : pl.b, *perm = k == 0 ? pl.pa : pl.pb;
        const T *po = ein_as(ctx, &pl, (const T *)other->data, osub, operm, other->numel, &wo, &st);
        if (!po) break;
        vx_tensor *G = run->grad_in[k];
        bool direct = strcmp(sub, perm) == 0;
        T *g = (T *)G->data;
        if (!direct && !(g = wg = (T *)vx_workspace(ctx, (size_t)G->numel * sizeof(T)))) {
            st = vxk_oom(ctx, "Einsum gradient");
            break;
        }
        if (k == 0) /* (m x n) (k x n)^T */
            st = vxk_blas_check(ctx, vxk_gemm_strided(h, false, true, pl.m, pl.k, pl.n, 1.f, dc, pl.n, pl.m * pl.n, po,
                                                      pl.n, pl.k * pl.n, 0.f, g, pl.k, pl.m * pl.k, pl.batch),
                                "Einsum backward");
        else /* (m x k)^T (m x n) */
            st = vxk_blas_check(ctx, vxk_gemm_strided(h, true, false, pl.k, pl.n, pl.m, 1.f, po, pl.k, pl.m * pl.k, dc,
                                                      pl.n, pl.m * pl.n, 0.f, g, pl.n, pl.k * pl.n, pl.batch),
                                "Einsum backward");
        if (!st && !direct) st = ein_permute(ctx, &pl, (T *)G->data, wg, perm, sub, G->numel);
        vx_free(ctx, wo);
        vx_free(ctx, wg);
        wo = wg = NULL;
    }
    vx_free(ctx, wdc);
    return st;
}

static vx_status einsum_bwd(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *A = run->in[0], *B = run->in[1], *dY = run->grad_out[0];
    ein_plan pl;
    vx_status st = ein_parse(ctx, run, A, B, &pl);
    if (st) return st;
    for (int k = 0; k < 2; k++)
        if (run->need_grad[k]) {
            if ((st = vxk_grad(ctx, run, k))) return st;
            if (!dY || pl.k == 0 || !run->grad_in[k]->numel)
                if ((st = vxk_zero(ctx, run->grad_in[k]->data, (size_t)run->grad_in[k]->numel * vx_dtype_size(A->dtype))))
                    return st;
        }
    if (!dY || pl.k == 0 || !dY->numel) return VX_OK;
    VXK_FLOAT_DISPATCH(ctx, A->dtype, "Einsum backward", einsum_bwd_t<T>(ctx, run, pl));
}

extern "C" const vx_op vx_ops_einsum[] = {
    {"Einsum", einsum_fwd, einsum_bwd, VX_SLOT(0) | VX_SLOT(1), 0, false, 0, vxk_product_saves, 0, VX_HALF},
};
extern "C" const size_t vx_ops_einsum_count = sizeof vx_ops_einsum / sizeof vx_ops_einsum[0];
