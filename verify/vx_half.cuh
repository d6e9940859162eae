/*
 * vx_half.cuh: storage dtypes for kernels. A floating tensor is stored as
 * float, __nv_bfloat16 or __half (vx_dtype VX_F32, VX_BF16, VX_F16); kernels
 * are templates on the storage type T, load with vxk_ld (to float), compute
 * in float32 as PyTorch's half kernels accumulate, and store with vxk_st<T>.
 * For T = float both are the identity, so the float32 kernels are the same
 * code as before they were templates.
 */
#ifndef MEMEST_VX_HALF_CUH
#define MEMEST_VX_HALF_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include "vx.h"

typedef __nv_bfloat16 vxk_bf16;
typedef __half vxk_f16;

static __host__ __device__ __forceinline__ float vxk_ld(float v) { return v; }
static __host__ __device__ __forceinline__ float vxk_ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __host__ __device__ __forceinline__ float vxk_ld(__half v) { return __half2float(v); }

template <typename T> static __host__ __device__ __forceinline__ T vxk_st(float v);
template <> __host__ __device__ __forceinline__ float vxk_st<float>(float v) { return v; }
template <> __host__ __device__ __forceinline__ __nv_bfloat16 vxk_st<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __host__ __device__ __forceinline__ __half vxk_st<__half>(float v) { return __float2half(v); }

/* atomicAdd of a float into storage T (gradients scattered onto a
 * broadcast operand, an embedding row, a pooling window): float atomics for
 * float, the half types' own atomics (sm_70 / sm_80) otherwise. */
static __device__ __forceinline__ void vxk_atomic_add_t(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void vxk_atomic_add_t(__nv_bfloat16 *p, float v) { atomicAdd(p, __float2bfloat16(v)); }
static __device__ __forceinline__ void vxk_atomic_add_t(__half *p, float v) { atomicAdd(p, __float2half(v)); }

/* cuBLAS's dtype for a storage type. */
template <typename T> static inline cudaDataType_t vxk_cuda_type();
template <> inline cudaDataType_t vxk_cuda_type<float>() { return CUDA_R_32F; }
template <> inline cudaDataType_t vxk_cuda_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <> inline cudaDataType_t vxk_cuda_type<__half>() { return CUDA_R_16F; }

/* Calls F<T>::run(args...) with T the storage type of dt (a float dtype);
 * VX_EUNSUPPORTED for another dtype. */
#define VXK_FLOAT_DISPATCH(ctx, dt, what, CALL)                                                                        \
    do {                                                                                                               \
        switch (dt) {                                                                                                  \
        case VX_F32: { typedef float T; return CALL; }                                                                 \
        case VX_BF16: { typedef __nv_bfloat16 T; return CALL; }                                                        \
        case VX_F16: { typedef __half T; return CALL; }                                                                \
        default: return vx_fail(ctx, VX_EUNSUPPORTED, "%s: a floating tensor wanted (got %s)", what, vx_dtype_name(dt)); \
        }                                                                                                              \
    } while (0)

#endif
