/* ops_bcast.cuh: what ops_elementwise.cu and ops_helpers.cu share: launch
 * sizes, the launch check, and numpy broadcasting as per-operand strides
 * over the output's index space. */
#ifndef MEMEST_OPS_BCAST_CUH
#define MEMEST_OPS_BCAST_CUH

#include <cuda_runtime.h>
#include <string.h>

#include "ops_common.cuh"

/* Half storage: the same kernels load to float and store back (vx_half.cuh);
 * copies that do not compute (Where, Expand, Slice) move 2-byte words. */
typedef unsigned short h16;

#define TPB 256

static inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + TPB - 1) / TPB;
    if (b > 65535LL * 16) b = 65535LL * 16;
    return (unsigned)(b < 1 ? 1 : b);
}

#define STREAM(ctx) ((cudaStream_t)vx_stream(ctx))
#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static vx_status launched(vx_ctx *ctx, const char *what) {
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess) return VX_OK;
    cudaGetLastError();
    return vx_fail(ctx, VX_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* ---- broadcasting -------------------------------------------------------------- */

/* Output index space (rank, dims) and, per operand, its strides there (0 on
 * a broadcast dim). */
struct Bc {
    int rank;
    int64_t dims[VX_MAX_RANK];
    int64_t st[3][VX_MAX_RANK];
};

static void bc_strides(Bc *bc, int which, const int64_t *dims, int rank) {
    int off = bc->rank - rank;
    int64_t s = 1;
    for (int d = bc->rank - 1; d >= 0; d--) {
        if (d < off) {
            bc->st[which][d] = 0;
            continue;
        }
        int64_t e = dims[d - off];
        bc->st[which][d] = e == 1 ? 0 : s;
        s *= e;
    }
}

/* Like bc_strides, through t's own strides when t is a strided view (an
 * expanded, sliced or transposed operand is read in place, as PyTorch's
 * TensorIterator does). */
static void bc_strides_t(Bc *bc, int which, const vx_tensor *t) {
    if (!t->strided) {
        bc_strides(bc, which, t->dims, t->rank);
        return;
    }
    int off = bc->rank - t->rank;
    for (int d = 0; d < bc->rank; d++)
        bc->st[which][d] = d < off || t->dims[d - off] == 1 ? 0 : t->strides[d - off];
}

static __device__ __forceinline__ void bc_offsets(const Bc &bc, int64_t i, int nops, int64_t *off) {
    off[0] = off[1] = off[2] = 0;
    for (int d = bc.rank - 1; d >= 0; d--) {
        int64_t c = i % bc.dims[d];
        i /= bc.dims[d];
        for (int k = 0; k < nops; k++) off[k] += c * bc.st[k][d];
    }
}

#endif
