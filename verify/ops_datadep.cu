/*
 * ops_datadep.cu: ops whose output size depends on their input's values
 * (NonZero, Compress, Unique), and Multinomial's random samples.
 *
 * As PyTorch's nonzero / masked_select / unique on CUDA, the size comes from
 * one device-to-host copy (a synchronisation) before the output exists. The
 * kept positions are written in order by a stream compaction: each block
 * counts its chunk of DD_CHUNK elements, the counts come to the host (the
 * one sync), their prefix sums go back, and each block writes its chunk's
 * positions from its offset. That block-count array (8 bytes per 4096
 * elements) is a workspace held to the end of the kernel (layers/datadep.c's
 * verify rules count every workspace here); no gradient flows except
 * Compress's.
 *
 * NonZero: int64 (rank, count) of the non-zero elements' indices, row-major
 *   order (numpy.nonzero). Any dtype.
 * Compress (axis, or the flattened input): the slices whose condition entry
 *   is true; a condition shorter than the axis drops the rest. It is
 *   index_select(x, axis, nonzero(condition)): the int64 index of the kept
 *   slices (saved[0] when backward runs, as layers/datadep.c counts it, else
 *   a workspace) gathers the output, and backward writes the gradient back at it (zeros
 *   elsewhere).
 * Unique (axis, or the flattened input; sorted 1 or 0): Y, indices (first
 *   occurrence), inverse_indices and counts as the ONNX spec and
 *   numpy.unique: slices compare element by element in row-major order. The
 *   kernels compare every slice with the others, O(n^2) in the slice count:
 *   for the small tensors a model takes Unique of, and no sort buffers (the
 *   estimate counts none). Workspace: the first-occurrence list, twice (its
 *   sorted order), 8 bytes per unique slice.
 * Multinomial: sample_size draws per row from softmax(input) (the input is
 *   unnormalized log-probabilities), by inverting the row's cumulative sum on
 *   a counter-based uniform (the splitmix64 stream of ops_helpers.cu's
 *   random ops); the seed attribute is ignored, as theirs. Output int64
 *   (the executor holds int32 as int64, and so does the estimate under
 *   --kernels verify).
 */
#include <math.h>
#include <stdlib.h>

#include "ops_common.cuh"

/* ---- stream compaction ------------------------------------------------------------ */

#define DD_CHUNK 4096 /* elements per block in both passes */

/* Block b: the number of i in its chunk with keep(i). */
template <typename Keep> static __global__ void dd_count_kernel(Keep keep, int64_t n, long long *counts) {
    int64_t start = (int64_t)blockIdx.x * DD_CHUNK, end = min(start + DD_CHUNK, n);
    long long total = 0;
    for (int64_t t = start; t < end; t += blockDim.x) {
        int64_t i = t + threadIdx.x;
        total += __syncthreads_count(i < end && keep(i));
    }
    if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

/* Block b: emit(i, k) for every kept i of its chunk, k its rank among all
 * kept elements (offsets[b] + its rank within the chunk). */
template <typename Keep, typename Emit>
static __global__ void dd_write_kernel(Keep keep, Emit emit, int64_t n, const long long *offsets) {
    __shared__ int warp_base[VXK_THREADS / 32];
    __shared__ int tile_total;
    int64_t start = (int64_t)blockIdx.x * DD_CHUNK, end = min(start + DD_CHUNK, n);
    long long out = offsets[blockIdx.x];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t t = start; t < end; t += blockDim.x) {
        int64_t i = t + threadIdx.x;
        bool kept = i < end && keep(i);
        unsigned ballot = __ballot_sync(0xffffffffu, kept);
        if (lane == 0) warp_base[warp] = __popc(ballot);
        __syncthreads();
        if (threadIdx.x == 0) {
            int sum = 0;
            for (int w = 0; w < VXK_THREADS / 32; w++) {
                int c = warp_base[w];
                warp_base[w] = sum;
                sum += c;
            }
            tile_total = sum;
        }
        __syncthreads();
        if (kept) emit(i, out + warp_base[warp] + __popc(ballot & ((1u << lane) - 1u)));
        out += tile_total;
        __syncthreads(); /* before the next tile rewrites warp_base */
    }
}

/* Counts the i < n with keep(i): the one device-to-host sync. *offsets gets
 * a workspace with each block's first output rank, for dd_write. */
template <typename Keep>
static vx_status dd_count(vx_ctx *ctx, Keep keep, int64_t n, long long **offsets, int64_t *total, const char *what) {
    int64_t blocks = (n + DD_CHUNK - 1) / DD_CHUNK;
    *offsets = NULL;
    *total = 0;
    if (!blocks) return VX_OK;
    if (blocks > INT32_MAX) return vx_fail(ctx, VX_EUNSUPPORTED, "%s: input too large", what);
    *offsets = (long long *)vx_workspace(ctx, (size_t)blocks * sizeof(long long));
    long long *host = (long long *)malloc((size_t)blocks * sizeof(long long));
    if (!*offsets || !host) {
        free(host);
        return vxk_oom(ctx, what);
    }
    cudaStream_t s = vxk_stream(ctx);
    dd_count_kernel<<<(unsigned)blocks, VXK_THREADS, 0, s>>>(keep, n, *offsets);
    vx_status st = vxk_check(ctx, what);
    if (!st && (cudaMemcpyAsync(host, *offsets, (size_t)blocks * sizeof(long long), cudaMemcpyDeviceToHost, s) !=
                    cudaSuccess ||
                cudaStreamSynchronize(s) != cudaSuccess))
        st = vx_fail(ctx, VX_ECUDA, "%s: reading the counts back failed", what);
    for (int64_t b = 0; !st && b < blocks; b++) {
        long long c = host[b];
        host[b] = *total;
        *total += c;
    }
    /* pageable source: the copy is staged before cudaMemcpyAsync returns */
    if (!st && cudaMemcpyAsync(*offsets, host, (size_t)blocks * sizeof(long long), cudaMemcpyHostToDevice, s) !=
                   cudaSuccess)
        st = vx_fail(ctx, VX_ECUDA, "%s: writing the offsets failed", what);
    free(host);
    return st;
}

template <typename Keep, typename Emit>
static vx_status dd_write(vx_ctx *ctx, Keep keep, Emit emit, int64_t n, const long long *offsets, const char *what) {
    int64_t blocks = (n + DD_CHUNK - 1) / DD_CHUNK;
    if (blocks) dd_write_kernel<<<(unsigned)blocks, VXK_THREADS, 0, vxk_stream(ctx)>>>(keep, emit, n, offsets);
    return vxk_check(ctx, what);
}

/* ---- NonZero ---------------------------------------------------------------------- */

template <typename T> struct dd_nonzero {
    const T *x;
    __device__ bool operator()(int64_t i) const { return x[i] != (T)0; }
};

/* Writes element i's indices as column k of the (rank, count) output. */
struct dd_coords {
    long long *y;
    int rank;
    int64_t count;
    int64_t dims[VX_MAX_RANK];
    __device__ void operator()(int64_t i, int64_t k) const {
        for (int d = rank - 1; d >= 0; d--) {
            y[d * count + k] = i % dims[d];
            i /= dims[d];
        }
    }
};

template <typename T> static vx_status nonzero_run(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    dd_nonzero<T> keep = {(const T *)X->data};
    long long *offsets;
    int64_t count;
    vx_status st = dd_count(ctx, keep, X->numel, &offsets, &count, "NonZero");
    int64_t yd[2] = {X->rank, count};
    if (!st) st = vxk_new_out(ctx, run, 0, VX_I64, 2, yd);
    if (!st && run->out[0]->numel) {
        dd_coords emit = {(long long *)run->out[0]->data, X->rank, count, {0}};
        memcpy(emit.dims, X->dims, sizeof emit.dims);
        st = dd_write(ctx, keep, emit, X->numel, offsets, "NonZero");
    }
    vx_free(ctx, offsets);
    return st;
}

static vx_status nonzero_forward(vx_ctx *ctx, vx_run *run) {
    switch (run->in[0]->dtype) {
    case VX_F32: return nonzero_run<float>(ctx, run);
    case VX_I64: return nonzero_run<long long>(ctx, run);
    case VX_BOOL: return nonzero_run<uint8_t>(ctx, run);
    default: return vx_fail(ctx, VX_EUNSUPPORTED, "NonZero: %s input", vx_dtype_name(run->in[0]->dtype));
    }
}

/* ---- Compress --------------------------------------------------------------------- */

struct dd_true {
    const uint8_t *cond;
    __device__ bool operator()(int64_t i) const { return cond[i] != 0; }
};
struct dd_store_index {
    long long *idx;
    __device__ void operator()(int64_t i, int64_t k) const { idx[k] = i; }
};

/* The (outer, len, inner) view of X that Compress selects along. */
typedef struct dd_slices {
    int64_t outer, len, inner;
} dd_slices;

static vx_status compress_slices(vx_ctx *ctx, const vx_run *run, dd_slices *s, int *axis) {
    const vx_tensor *X = run->in[0], *cond = run->in[1];
    if (cond->dtype != VX_BOOL || cond->rank != 1)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Compress: the condition must be a 1-D bool tensor");
    if (X->dtype != VX_F32 && X->dtype != VX_I64)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Compress: %s input", vx_dtype_name(X->dtype));
    int64_t axis_attr = vxk_attr_int(run, "axis", INT64_MIN); /* absent: the flattened input */
    bool has_axis = axis_attr != INT64_MIN;
    *axis = has_axis ? vxk_axis(axis_attr, X->rank) : -1;
    if (has_axis && *axis < 0) return vx_fail(ctx, VX_EINVAL, "Compress: axis out of range");
    s->outer = has_axis ? vxk_prod(X->dims, 0, *axis) : 1;
    s->len = has_axis ? X->dims[*axis] : X->numel;
    s->inner = has_axis ? vxk_prod(X->dims, *axis + 1, X->rank) : 1;
    if (cond->numel > s->len)
        return vx_fail(ctx, VX_EINVAL, "Compress: %lld condition entries for %lld slices", (long long)cond->numel,
                       (long long)s->len);
    return VX_OK;
}

/* y[o, k, i] = x[o, idx[k], i] (forward); dx[o, idx[k], i] = dy[o, k, i]
 * (backward, into zeros). Elements of 4 or 8 bytes, moved as such. */
template <typename T>
static __global__ void dd_select_kernel(T *y, const T *x, const long long *idx, dd_slices s, int64_t kept,
                                        bool backward) {
    VXK_LOOP(e, s.outer * kept * s.inner) {
        int64_t i = e % s.inner, k = (e / s.inner) % kept, o = e / (s.inner * kept);
        int64_t src = (o * s.len + idx[k]) * s.inner + i;
        if (backward) y[src] = x[e];
        else y[e] = x[src];
    }
}

static void dd_select(vx_ctx *ctx, void *y, const void *x, size_t esize, const long long *idx, dd_slices s,
                      int64_t kept, bool backward) {
    int64_t n = s.outer * kept * s.inner;
    if (esize == 8)
        dd_select_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((long long *)y, (const long long *)x, idx,
                                                                            s, kept, backward);
    else
        dd_select_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>((float *)y, (const float *)x, idx, s,
                                                                            kept, backward);
}

static vx_status compress_forward(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0], *cond = run->in[1];
    dd_slices s;
    int axis;
    vx_status st = compress_slices(ctx, run, &s, &axis);
    if (st) return st;
    dd_true keep = {(const uint8_t *)cond->data};
    long long *offsets;
    int64_t kept;
    if ((st = dd_count(ctx, keep, cond->numel, &offsets, &kept, "Compress"))) return st;
    int64_t yd[VX_MAX_RANK];
    memcpy(yd, X->dims, sizeof yd);
    if (axis >= 0) yd[axis] = kept;
    else yd[0] = kept;
    if ((st = vxk_new_out(ctx, run, 0, X->dtype, axis >= 0 ? X->rank : 1, yd))) return st;
    /* the kept slices' index: backward's (layers/datadep.c counts it), else
     * a workspace of the forward */
    long long *idx;
    if (run->training && run->need_grad[0]) {
        if ((st = vxk_new_saved(ctx, run, 0, VX_I64, 1, &kept))) return st;
        idx = (long long *)run->saved[0]->data;
    } else {
        idx = kept ? (long long *)vx_workspace(ctx, (size_t)kept * sizeof(long long)) : NULL;
        if (kept && !idx) return vxk_oom(ctx, "Compress index");
    }
    if (kept) {
        dd_store_index emit = {idx};
        st = dd_write(ctx, keep, emit, cond->numel, offsets, "Compress");
    }
    if (!st && run->out[0]->numel) {
        dd_select(ctx, run->out[0]->data, X->data, vx_dtype_size(X->dtype), idx, s, kept, false);
        st = vxk_check(ctx, "Compress");
    }
    vx_free(ctx, offsets);
    if (!run->saved[0]) vx_free(ctx, idx);
    return st;
}

static vx_status compress_backward(vx_ctx *ctx, vx_run *run) {
    if (!run->need_grad[0]) return VX_OK;
    dd_slices s;
    int axis;
    vx_status st = compress_slices(ctx, run, &s, &axis);
    if (st || (st = vxk_grad(ctx, run, 0))) return st;
    vx_tensor *dX = run->grad_in[0];
    const vx_tensor *dY = run->grad_out[0], *idx = run->saved[0];
    if ((st = vxk_zero(ctx, dX->data, (size_t)dX->numel * vx_dtype_size(dX->dtype)))) return st;
    if (!dY || !dY->numel) return VX_OK;
    if (!idx) return vx_fail(ctx, VX_ECUDA, "Compress backward: the index was not kept");
    dd_select(ctx, dX->data, dY->data, vx_dtype_size(dX->dtype), (const long long *)idx->data, s, idx->numel, true);
    return vxk_check(ctx, "Compress backward");
}

/* ---- Unique ----------------------------------------------------------------------- */

/* Slice a of X (outer, n, inner) against slice b: -1, 0 or 1 (row-major). */
template <typename T> struct dd_slice_cmp {
    const T *x;
    int64_t outer, n, inner;
    __device__ int operator()(int64_t a, int64_t b) const {
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                T va = x[(o * n + a) * inner + i], vb = x[(o * n + b) * inner + i];
                if (va != vb) return va < vb ? -1 : 1;
            }
        return 0;
    }
};

/* Slice s is the first of its value. */
template <typename T> struct dd_first {
    dd_slice_cmp<T> cmp;
    __device__ bool operator()(int64_t s) const {
        for (int64_t j = 0; j < s; j++)
            if (cmp(j, s) == 0) return false;
        return true;
    }
};

/* sorted: order[rank of first[k] among the unique slices] = first[k]. */
template <typename T>
static __global__ void dd_sort_unique_kernel(long long *order, const long long *first, dd_slice_cmp<T> cmp, int64_t u) {
    VXK_LOOP(k, u) {
        int64_t rank = 0;
        for (int64_t m = 0; m < u; m++) rank += cmp(first[m], first[k]) < 0;
        order[rank] = first[k];
    }
}

/* Per slice s: its unique slot (inverse_indices); per slot k: its count. */
template <typename T>
static __global__ void dd_inverse_kernel(long long *inverse, const long long *order, dd_slice_cmp<T> cmp, int64_t u) {
    VXK_LOOP(s, cmp.n) {
        int64_t k = 0;
        while (k < u - 1 && cmp(order[k], s) != 0) k++;
        inverse[s] = k;
    }
}
template <typename T>
static __global__ void dd_counts_kernel(long long *counts, const long long *order, dd_slice_cmp<T> cmp, int64_t u) {
    VXK_LOOP(k, u) {
        long long c = 0;
        for (int64_t s = 0; s < cmp.n; s++) c += cmp(order[k], s) == 0;
        counts[k] = c;
    }
}

template <typename T> static vx_status unique_run(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    int64_t axis_attr = vxk_attr_int(run, "axis", INT64_MIN); /* absent: the flattened input */
    bool has_axis = axis_attr != INT64_MIN;
    int axis = has_axis ? vxk_axis(axis_attr, X->rank) : -1;
    if (has_axis && axis < 0) return vx_fail(ctx, VX_EINVAL, "Unique: axis out of range");
    dd_slice_cmp<T> cmp = {(const T *)X->data, has_axis ? vxk_prod(X->dims, 0, axis) : 1,
                           has_axis ? X->dims[axis] : X->numel, has_axis ? vxk_prod(X->dims, axis + 1, X->rank) : 1};
    dd_first<T> keep = {cmp};
    long long *offsets;
    int64_t u;
    vx_status st = dd_count(ctx, keep, cmp.n, &offsets, &u, "Unique");
    if (st) return st;
    long long *first = u ? (long long *)vx_workspace(ctx, 2 * (size_t)u * sizeof(long long)) : NULL;
    if (u && !first) st = vxk_oom(ctx, "Unique");
    long long *order = first;
    if (!st && u) {
        dd_store_index emit = {first};
        st = dd_write(ctx, keep, emit, cmp.n, offsets, "Unique");
        if (!st && vxk_attr_int(run, "sorted", 1)) {
            order = first + u;
            dd_sort_unique_kernel<<<vxk_blocks(u), VXK_THREADS, 0, vxk_stream(ctx)>>>(order, first, cmp, u);
        }
    }
    int64_t yd[VX_MAX_RANK];
    memcpy(yd, X->dims, sizeof yd);
    if (has_axis) yd[axis] = u;
    else yd[0] = u;
    if (!st) st = vxk_new_out(ctx, run, 0, X->dtype, has_axis ? X->rank : 1, yd);
    if (!st && u) {
        dd_slices s = {cmp.outer, cmp.n, cmp.inner};
        dd_select(ctx, run->out[0]->data, X->data, sizeof(T), order, s, u, false);
    }
    if (!st && vxk_has_out(run, 1) && !(st = vxk_new_out(ctx, run, 1, VX_I64, 1, &u)) && u &&
        cudaMemcpyAsync(run->out[1]->data, order, (size_t)u * sizeof(long long), cudaMemcpyDeviceToDevice,
                        vxk_stream(ctx)) != cudaSuccess)
        st = vx_fail(ctx, VX_ECUDA, "Unique: copying the indices failed");
    if (!st && vxk_has_out(run, 2) && !(st = vxk_new_out(ctx, run, 2, VX_I64, 1, &cmp.n)) && cmp.n)
        dd_inverse_kernel<<<vxk_blocks(cmp.n), VXK_THREADS, 0, vxk_stream(ctx)>>>((long long *)run->out[2]->data, order,
                                                                                 cmp, u);
    if (!st && vxk_has_out(run, 3) && !(st = vxk_new_out(ctx, run, 3, VX_I64, 1, &u)) && u)
        dd_counts_kernel<<<vxk_blocks(u), VXK_THREADS, 0, vxk_stream(ctx)>>>((long long *)run->out[3]->data, order, cmp,
                                                                             u);
    if (!st) st = vxk_check(ctx, "Unique");
    vx_free(ctx, offsets); /* both workspaces live with the outputs, as layers/datadep.c counts them */
    vx_free(ctx, first);
    return st;
}

static vx_status unique_forward(vx_ctx *ctx, vx_run *run) {
    switch (run->in[0]->dtype) {
    case VX_F32: return unique_run<float>(ctx, run);
    case VX_I64: return unique_run<long long>(ctx, run);
    case VX_BOOL: return unique_run<uint8_t>(ctx, run);
    default: return vx_fail(ctx, VX_EUNSUPPORTED, "Unique: %s input", vx_dtype_name(run->in[0]->dtype));
    }
}

/* ---- Multinomial -------------------------------------------------------------------- */


/* Sample j of row b: the first class whose cumulative exp(x - max) passes
 * u * sum (the last class when rounding leaves none). */
static __global__ void dd_multinomial_kernel(long long *y, const float *x, int64_t classes, int64_t samples,
                                             int64_t n, unsigned long long seed) {
    VXK_LOOP(i, n) {
        const float *row = x + (i / samples) * classes;
        float top = -INFINITY, sum = 0.f;
        for (int64_t c = 0; c < classes; c++) top = fmaxf(top, row[c]);
        for (int64_t c = 0; c < classes; c++) sum += expf(row[c] - top);
        float target = vxk_rand_u01(seed, i) * sum, cum = 0.f;
        int64_t pick = classes - 1;
        for (int64_t c = 0; c < classes; c++) {
            cum += expf(row[c] - top);
            if (cum > target) { pick = c; break; }
        }
        y[i] = pick;
    }
}

static vx_status multinomial_forward(vx_ctx *ctx, vx_run *run) {
    const vx_tensor *X = run->in[0];
    if (X->dtype != VX_F32 || X->rank != 2)
        return vx_fail(ctx, VX_EUNSUPPORTED, "Multinomial: a float32 [batch_size, class_size] input only");
    int64_t samples = vxk_attr_int(run, "sample_size", 1);
    if (samples < 1 || X->dims[1] < 1) return vx_fail(ctx, VX_EINVAL, "Multinomial: sample_size and classes must be positive");
    int64_t yd[2] = {X->dims[0], samples};
    vx_status st = vxk_new_out(ctx, run, 0, VX_I64, 2, yd);
    if (st || !run->out[0]->numel) return st;
    int64_t n = run->out[0]->numel;
    dd_multinomial_kernel<<<vxk_blocks(n), VXK_THREADS, 0, vxk_stream(ctx)>>>(
        (long long *)run->out[0]->data, (const float *)X->data, X->dims[1], samples, n, vx_seed(ctx));
    return vxk_check(ctx, "Multinomial");
}

extern "C" {
const vx_op vx_ops_datadep[] = {
    {"NonZero", nonzero_forward, NULL, 0, 0, false},
    /* backward reads the kept slices' index (saved[0]) only */
    {"Compress", compress_forward, compress_backward, 0, 0, false},
    {"Unique", unique_forward, NULL, 0, 0, false},
    {"Multinomial", multinomial_forward, NULL, 0, 0, false},
};
const size_t vx_ops_datadep_count = sizeof vx_ops_datadep / sizeof vx_ops_datadep[0];
}
