/*
 * sum_to.c: what summing a gradient down to a broadcast input's shape
 * allocates on the GPU.
 *
 * Autograd sums the gradient of a broadcasting op down to each broadcast
 * input's shape (torch/csrc/autograd/input_metadata.cpp, reduce_grad:
 * at::sum_to): a Linear's bias gradient (addmm's "self" in derivatives.yaml)
 * and the gradient of a weight broadcast over the batch (an RMSNorm's Mul,
 * a LayerScale) are column sums, grad.sum(0, keepdim=True) over a grad of
 * [rows, cols]. ATen runs them through its reduction kernel (aten/src/ATen/
 * native/cuda/Reduce.cuh, setReduceConfig), which splits the rows across
 * blocks when the columns alone leave the GPU idle, and then stages each
 * block's partial sums in a global buffer of float32 accumulators, as many
 * as the block has threads across times its output vector for each output
 * and block. That buffer, and a semaphore per column of blocks, are the
 * workspace.
 *
 * The configuration below follows setReduceConfig for an outer reduction
 * (the reduced rows are not the contiguous dimension): the outputs are
 * vectorized by 4, 2 or 1 (what divides the columns), a block has at most
 * 512 / vector threads, 32 across the columns and the rest down the rows,
 * and the rows are split across blocks when each thread would otherwise sum
 * 256 values or more and the grid does not fill the device (its SMs times
 * the blocks one SM holds: est_device). Checked on the H100 against 216
 * configurations (bench/accuracy/probe_sum.py, bench/accuracy/data/reduce/):
 * of their 648 transients (two layouts and a bias gradient, in float32,
 * bfloat16 and float16) the model gives 638 to the 512-byte block; the
 * other 10 measured 1 MiB more (all 9 at 1024 x 16000, one bias gradient at
 * 16384 x 96).
 */
#include "registry.h"

enum { MAX_NUM_THREADS = 512, WARP = 32, MIN_VALUES_PER_THREAD = 16, MAX_VALUES_PER_THREAD = 256 };

static int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The largest power of two <= n (n >= 1). */
static int64_t last_pow2(int64_t n) {
    int64_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

static uint64_t block_bytes(uint64_t bytes) { return bytes == 0 ? 0 : (bytes + 511) / 512 * 512; }

uint64_t est_column_sum_workspace(const est_device *dev, uint64_t rows, uint64_t cols) {
    if (!dev || rows < 2 || cols == 0 || rows > INT64_MAX / 2 || cols > INT64_MAX / 2) return 0;
    int64_t vec = cols % 4 == 0 ? 4 : cols % 2 == 0 ? 2 : 1;
    int64_t max_threads = MAX_NUM_THREADS / vec;
    int64_t dim0 = (int64_t)cols / vec, dim1 = (int64_t)rows;
    int64_t dim0_pow2 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
    int64_t dim1_pow2 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
    int64_t width = dim0_pow2 < WARP ? dim0_pow2 : WARP;
    int64_t height = dim1_pow2 < max_threads / width ? dim1_pow2 : max_threads / width;
    width = dim0_pow2 < max_threads / height ? dim0_pow2 : max_threads / height;
    int64_t threads = width * height;
    int64_t step_output = width, per_thread = dim1;
    bool rows_across_warps = per_thread >= height * MIN_VALUES_PER_THREAD || per_thread >= MAX_VALUES_PER_THREAD;
    if (rows_across_warps) per_thread = div_up(per_thread, height);
    else step_output *= height;
    int64_t grid_x = div_up(dim0, step_output);
    int64_t blocks_per_sm = dev->max_threads_per_sm > 0 ? dev->max_threads_per_sm / threads : 0;
    int64_t target = (int64_t)dev->sm_count * blocks_per_sm;
    if (!rows_across_warps || per_thread < MAX_VALUES_PER_THREAD || grid_x > target) return 0;
    int64_t by_grid = div_up(target, grid_x), by_min = div_up(per_thread, MIN_VALUES_PER_THREAD);
    int64_t by_max = div_up(per_thread, MAX_VALUES_PER_THREAD);
    int64_t ctas = by_grid < by_min ? by_grid : by_min;
    if (ctas < by_max) ctas = by_max;
    if (ctas <= 1) return 0;
    uint64_t staging = est_mul_sat(est_mul_sat(4 * cols, (uint64_t)ctas), (uint64_t)(width * vec));
    return est_add_sat(block_bytes(staging), block_bytes(4 * (uint64_t)grid_x));
}

uint64_t est_sum_to_workspace(const est_cost_ctx *c, int i) {
    /* memest verify's executor sums with one block or thread per output
     * (verify/ops_common.cuh, vxk_reduce_run): no staging buffer */
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) return 0;
    const est_tval *y = est_cost_out(c, 0), *x = est_cost_in(c, i);
    if (!y || !x || y->rank < 0 || x->rank < 0 || x->rank > y->rank || x->elements >= y->elements) return 0;
    /* x's dims right-aligned under y's; the reduced ones must lead */
    uint64_t rows = 1, cols = 1;
    bool kept_seen = false;
    for (int d = 0; d < y->rank; d++) {
        int64_t xd = d < y->rank - x->rank ? 1 : x->dims[d - (y->rank - x->rank)];
        if (y->dims[d] == 1) continue;
        if (xd == 1) {
            if (kept_seen) return 0; /* a reduction inside the kept dims: not an outer one */
            rows = est_mul_sat(rows, (uint64_t)y->dims[d]);
        } else {
            kept_seen = true;
            cols = est_mul_sat(cols, (uint64_t)y->dims[d]);
        }
    }
    return est_column_sum_workspace(est_cost_device(c), rows, cols);
}
