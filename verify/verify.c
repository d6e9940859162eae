/* verify.c: the module's entry points (verify.h): device checks, the CUDA
 * context, stream and cuBLAS handle with its workspace, then exec.c. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "vx_internal.h"

#define VX_EXPORT __attribute__((visibility("default")))

vx_status vx_execute(vx_ctx *ctx, const est_graph *g, const vx_options *o, vx_result *r);

vx_status vx_fail(vx_ctx *ctx, vx_status st, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ctx->node)
        snprintf(ctx->message, sizeof ctx->message, "node '%s' (%s): %s", ctx->node->name, ctx->node->op_type, buf);
    else
        snprintf(ctx->message, sizeof ctx->message, "%s", buf);
    return st;
}

void *vx_cublas(vx_ctx *ctx) {
    return ctx->cublas;
}

bool vx_conv_tf32(vx_ctx *ctx) {
    return ctx->conv_tf32;
}

void *vx_stream(vx_ctx *ctx) {
    return ctx->stream;
}

uint64_t vx_seed(vx_ctx *ctx) {
    return vx_mix64(ctx->seed + 0x51ed27ull * ++ctx->rng_calls);
}

VX_EXPORT int memest_verify_abi(void) {
    return MEMEST_VERIFY_ABI;
}

/* The GPU code in the module: VX_CUDA_ARCHS (SASS, e.g. 80,86,89,90) and
 * VX_CUDA_PTX_ARCH come from meson's verify_archs option (verify/meson.build). */
#if !defined(VX_CUDA_ARCHS) || !defined(VX_CUDA_PTX_ARCH)
#error "VX_CUDA_ARCHS and VX_CUDA_PTX_ARCH come from verify/meson.build"
#endif
static const int built_archs[] = {VX_CUDA_ARCHS};
#define N_BUILT_ARCHS (sizeof built_archs / sizeof built_archs[0])

VX_EXPORT const char *memest_verify_archs(void) {
    static char text[256];
    if (!text[0]) {
        size_t used = 0;
        for (size_t i = 0; i < N_BUILT_ARCHS && used < sizeof text; i++)
            used += (size_t)snprintf(text + used, sizeof text - used, "%ssm_%d", i ? ", " : "", built_archs[i]);
        if (used < sizeof text) snprintf(text + used, sizeof text - used, " + compute_%d PTX", VX_CUDA_PTX_ARCH);
    }
    return text;
}

/* Whether the module holds code a device of compute capability cc (major *
 * 10 + minor) runs: SASS for sm_XY runs on X.Z for Z >= Y, and the driver
 * compiles the PTX for compute_P on any device of P or later. */
static bool runs_on(int cc) {
    for (size_t i = 0; i < N_BUILT_ARCHS; i++)
        if (built_archs[i] / 10 == cc / 10 && built_archs[i] % 10 <= cc % 10) return true;
    return cc >= VX_CUDA_PTX_ARCH;
}

VX_EXPORT int memest_verify_has_op(const char *op_type) {
    if (!op_type) return 0;
    return strcmp(op_type, "Constant") == 0 || vx_find_op(op_type) || vx_find_host_op(op_type);
}

VX_EXPORT int memest_verify_device_count(char *msg, size_t msg_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "no CUDA GPU available: %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        cudaGetLastError();
        return 0;
    }
    if (msg && msg_size) msg[0] = 0;
    return n;
}

VX_EXPORT void memest_verify_options_init(vx_options *o) {
    memset(o, 0, sizeof *o);
    o->mode = EST_MODE_TRAIN;
    o->optimizer = EST_OPT_ADAM;
    o->dtype = EST_DT_FLOAT;
    o->seed = 0x6d656d657374ull;
    o->steps = 2;
    o->hold_module_args = 1;
    o->cublas_workspace = 32ull << 20;
}

VX_EXPORT void memest_verify_result_free(vx_result *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_outputs; i++) free(r->outputs[i].data);
    free(r->outputs);
    r->outputs = NULL;
    r->n_outputs = 0;
}

static vx_status finish(vx_result *r, vx_status st, const char *msg) {
    r->status = st;
    if (msg && !r->message[0]) snprintf(r->message, sizeof r->message, "%s", msg);
    return st;
}

VX_EXPORT vx_status memest_verify_run(const est_graph *g, const vx_options *opt, vx_result *r) {
    memset(r, 0, sizeof *r);
    vx_options o;
    if (opt) o = *opt;
    else memest_verify_options_init(&o);
    vx_dtype fdt = VX_F32;
    if (o.dtype == EST_DT_BFLOAT16) fdt = VX_BF16;
    else if (o.dtype == EST_DT_FLOAT16) fdt = VX_F16;
    else if (o.dtype != EST_DT_FLOAT && o.dtype != EST_DT_UNDEFINED) {
        snprintf(r->message, sizeof r->message, "verify runs float32, bfloat16 or float16 (asked for %s)",
                 est_dtype_name(o.dtype));
        return finish(r, VX_EINVAL, NULL);
    }
    if (!o.cublas_workspace) o.cublas_workspace = 32ull << 20;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(r->message, sizeof r->message, "no CUDA GPU available: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        cudaGetLastError();
        return finish(r, VX_ENOGPU, NULL);
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
        snprintf(r->device_name, sizeof r->device_name, "%.100s", prop.name);
        /* refused here, with the list, rather than by the first kernel
         * launch's "no kernel image is available" */
        int cc = prop.major * 10 + prop.minor;
        if (!runs_on(cc)) {
            char archs[128] = "";
            for (size_t i = 0, used = 0; i < N_BUILT_ARCHS && used < sizeof archs; i++)
                used += (size_t)snprintf(archs + used, sizeof archs - used, ",%d", built_archs[i]);
            snprintf(r->message, sizeof r->message,
                     "GPU %s is sm_%d; this verify module is built for %s: rebuild it with -Dverify_archs=%d%s",
                     r->device_name, cc, memest_verify_archs(), cc, archs);
            return finish(r, VX_EDEVICE, NULL);
        }
    }
    /* the context */
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        snprintf(r->message, sizeof r->message, "cannot create a CUDA context: %s", cudaGetErrorString(e));
        return finish(r, VX_ENOGPU, NULL);
    }
    uint64_t free0 = 0, total = 0, free1 = 0;
    vx_mem_info(&free0, &total);
    r->device_total = total;
    r->context_bytes = total - free0;

    vx_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return finish(r, VX_EOOM, "host out of memory");
    ctx->seed = o.seed;
    ctx->fdt = fdt;
    vx_alloc_init(ctx);
    vx_status st = VX_OK;
    cudaStream_t stream = NULL;
    cublasHandle_t h = NULL;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        st = VX_ECUDA;
        snprintf(ctx->message, sizeof ctx->message, "cannot create a CUDA stream");
    }
    ctx->stream = stream;
    if (!st && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        st = VX_ECUDA;
        snprintf(ctx->message, sizeof ctx->message, "cannot create the cuBLAS handle");
    }
    ctx->cublas = h;
    if (!st) {
        cublasSetStream(h, stream);
        cublasSetMathMode(h, CUBLAS_DEFAULT_MATH); /* full float32, no TF32 */
        /* convolutions in TF32 as PyTorch's cuDNN runs them by default;
         * MEMEST_VERIFY_CONV_TF32=0 keeps them in float32 (numerics checks) */
        const char *tf32 = getenv("MEMEST_VERIFY_CONV_TF32");
        ctx->conv_tf32 = !(tf32 && strcmp(tf32, "0") == 0);
        if (cudaMalloc(&ctx->cublas_ws, o.cublas_workspace) != cudaSuccess) {
            cudaGetLastError();
            st = VX_EOOM;
            snprintf(ctx->message, sizeof ctx->message, "does not fit: the cuBLAS workspace (%llu bytes)",
                     (unsigned long long)o.cublas_workspace);
        } else {
            ctx->cublas_ws_bytes = o.cublas_workspace;
            cublasSetWorkspace(h, ctx->cublas_ws, o.cublas_workspace);
        }
    }
    if (!st) {
        vx_mem_info(&free1, NULL);
        r->cublas_bytes = free0 > free1 ? free0 - free1 : 0;
        r->cublas_workspace = ctx->cublas_ws_bytes;
        r->device_used_before = total - free1;
        ctx->track_device = true;
        ctx->device_free_min = free1;
        st = vx_execute(ctx, g, &o, r);
        r->device_used_peak = ctx->device_free_min == UINT64_MAX ? r->device_used_before : total - ctx->device_free_min;
        r->reserved_peak = ctx->reserved_peak;
    }
    if (st) snprintf(r->message, sizeof r->message, "%s", ctx->message[0] ? ctx->message : "failed");
    if (st == VX_EOOM && !r->failed_request) {
        r->failed_request = ctx->stats.failed_request;
        r->free_at_failure = ctx->stats.free_at_failure;
    }
    cudaDeviceSynchronize();
    cudaGetLastError();
    vx_alloc_shutdown(ctx);
    if (h) cublasDestroy(h);
    if (ctx->cublas_ws) cudaFree(ctx->cublas_ws);
    if (stream) cudaStreamDestroy(stream);
    free(ctx);
    return finish(r, st, NULL);
}
