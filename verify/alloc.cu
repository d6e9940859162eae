/* alloc.cu: the tracking allocator. Every device byte of a run goes through
 * vx_malloc, which rounds to 512 bytes (as PyTorch's caching allocator
 * counts blocks), tags the block with a category and keeps live bytes per
 * category and their values at the peak. Freed blocks are cached by exact
 * size for reuse, so the measured step does not pay for cudaMalloc; the
 * cache is emptied and the allocation retried before reporting out of
 * memory. With MEMEST_VERIFY_TRACE=FILE set, every allocation and free is
 * written to FILE (phase, node, sign, bytes, category, allocated after), a
 * line each, to set beside the estimate's --timeline. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "vx_internal.h"

#define TOMB ((void *)1)

static uint64_t hash_ptr(const void *p) {
    return vx_mix64((uint64_t)(uintptr_t)p);
}

static bool blocks_grow(vx_ctx *ctx) {
    uint64_t cap = ctx->blocks_cap ? ctx->blocks_cap * 2 : 1024;
    vx_block *nb = (vx_block *)calloc(cap, sizeof *nb);
    if (!nb) return false;
    for (uint64_t i = 0; i < ctx->blocks_cap; i++) {
        vx_block *b = &ctx->blocks[i];
        if (!b->p || b->p == TOMB) continue;
        uint64_t h = hash_ptr(b->p) & (cap - 1);
        while (nb[h].p) h = (h + 1) & (cap - 1);
        nb[h] = *b;
    }
    free(ctx->blocks);
    ctx->blocks = nb;
    ctx->blocks_cap = cap;
    return true;
}

static vx_block *block_find(vx_ctx *ctx, const void *p) {
    if (!ctx->blocks_cap) return NULL;
    uint64_t h = hash_ptr(p) & (ctx->blocks_cap - 1);
    while (ctx->blocks[h].p) {
        if (ctx->blocks[h].p == p) return &ctx->blocks[h];
        h = (h + 1) & (ctx->blocks_cap - 1);
    }
    return NULL;
}

static bool block_add(vx_ctx *ctx, void *p, uint64_t bytes, vx_category cat) {
    if ((ctx->blocks_used + 1) * 2 > ctx->blocks_cap && !blocks_grow(ctx)) return false;
    uint64_t h = hash_ptr(p) & (ctx->blocks_cap - 1);
    while (ctx->blocks[h].p && ctx->blocks[h].p != TOMB) h = (h + 1) & (ctx->blocks_cap - 1);
    ctx->blocks[h] = (vx_block){p, bytes, cat};
    ctx->blocks_used++;
    return true;
}

extern "C" int vx_mem_info(uint64_t *free_b, uint64_t *total_b) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
    return 1;
}

extern "C" void vx_alloc_sample_device(vx_ctx *ctx) {
    uint64_t f;
    if (ctx->track_device && vx_mem_info(&f, NULL) && f < ctx->device_free_min) ctx->device_free_min = f;
}

static const char *const category_names[] = {
#define VX_CATEGORY_NAME(e, name) #name,
    EST_CATEGORIES(VX_CATEGORY_NAME)
#undef VX_CATEGORY_NAME
};

static void trace(vx_ctx *ctx, char sign, uint64_t bytes, vx_category cat) {
    if (!ctx->trace) return;
    fprintf(ctx->trace, "%d\t%s\t%c%llu\t%s\t%llu\n", (int)ctx->phase, ctx->node ? ctx->node->name : "-", sign,
            (unsigned long long)bytes, category_names[cat], (unsigned long long)ctx->stats.total);
}

extern "C" void vx_alloc_init(vx_ctx *ctx) {
    memset(&ctx->stats, 0, sizeof ctx->stats);
    ctx->device_free_min = UINT64_MAX;
    const char *path = getenv("MEMEST_VERIFY_TRACE");
    ctx->trace = path && path[0] ? fopen(path, "w") : NULL;
}

extern "C" void vx_alloc_empty_cache(vx_ctx *ctx) {
    for (uint64_t i = 0; i < ctx->cache_n; i++) {
        cudaFree(ctx->cache[i].p);
        ctx->reserved -= ctx->cache[i].bytes;
    }
    ctx->cache_n = 0;
}

extern "C" void vx_alloc_shutdown(vx_ctx *ctx) {
    vx_alloc_empty_cache(ctx);
    for (uint64_t i = 0; i < ctx->blocks_cap; i++) {
        vx_block *b = &ctx->blocks[i];
        if (b->p && b->p != TOMB) cudaFree(b->p);
    }
    free(ctx->blocks);
    free(ctx->cache);
    free(ctx->ws);
    if (ctx->trace) fclose(ctx->trace);
    ctx->trace = NULL;
    ctx->blocks = NULL;
    ctx->cache = NULL;
    ctx->ws = NULL;
    ctx->blocks_cap = ctx->blocks_used = ctx->cache_n = ctx->cache_cap = 0;
    ctx->ws_n = ctx->ws_cap = 0;
}

static void note_peak(vx_ctx *ctx) {
    vx_alloc_stats *s = &ctx->stats;
    if (s->total > s->peak) {
        s->peak = s->total;
        memcpy(s->at_peak, s->live, sizeof s->live);
        s->peak_phase = ctx->phase;
        if (ctx->node) {
            strncpy(s->peak_layer, ctx->node->name, sizeof s->peak_layer - 1);
            s->peak_layer[sizeof s->peak_layer - 1] = 0;
        } else {
            s->peak_layer[0] = 0;
        }
    }
}

extern "C" void vx_alloc_reset_peak(vx_ctx *ctx) {
    vx_alloc_stats *s = &ctx->stats;
    s->peak = 0;
    note_peak(ctx);
    s->peak_phase = ctx->phase;
}

extern "C" void *vx_malloc(vx_ctx *ctx, size_t bytes, vx_category cat) {
    uint64_t r = ((uint64_t)bytes + VX_ALLOC_ROUND - 1) / VX_ALLOC_ROUND * VX_ALLOC_ROUND;
    if (r == 0) r = VX_ALLOC_ROUND;
    void *p = NULL;
    /* a cached block of exactly this size */
    for (uint64_t i = ctx->cache_n; i-- > 0;) {
        if (ctx->cache[i].bytes == r) {
            p = ctx->cache[i].p;
            ctx->cache[i] = ctx->cache[--ctx->cache_n];
            break;
        }
    }
    if (!p) {
        cudaError_t e = cudaMalloc(&p, r);
        if (e != cudaSuccess) {
            cudaGetLastError();
            vx_alloc_empty_cache(ctx);
            e = cudaMalloc(&p, r);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            uint64_t f = 0;
            vx_mem_info(&f, NULL);
            ctx->stats.failed_request = r;
            ctx->stats.free_at_failure = f;
            return NULL;
        }
        ctx->reserved += r;
        if (ctx->reserved > ctx->reserved_peak) ctx->reserved_peak = ctx->reserved;
        vx_alloc_sample_device(ctx);
    }
    if (!block_add(ctx, p, r, cat)) {
        cudaFree(p);
        ctx->reserved -= r;
        return NULL;
    }
    ctx->stats.live[cat] += r;
    ctx->stats.total += r;
    note_peak(ctx);
    trace(ctx, '+', r, cat);
    return p;
}

extern "C" void vx_free(vx_ctx *ctx, void *p) {
    if (!p) return;
    vx_block *b = block_find(ctx, p);
    if (!b) return; /* not ours: ignore rather than corrupt the counts */
    ctx->stats.live[b->cat] -= b->bytes;
    ctx->stats.total -= b->bytes;
    trace(ctx, '-', b->bytes, b->cat);
    uint64_t bytes = b->bytes;
    b->p = TOMB;
    ctx->blocks_used--;
    /* forget it among the running kernel's workspaces */
    for (int i = 0; i < ctx->ws_n; i++)
        if (ctx->ws[i] == p) ctx->ws[i] = ctx->ws[--ctx->ws_n];
    if (ctx->cache_n == ctx->cache_cap) {
        uint64_t cap = ctx->cache_cap ? ctx->cache_cap * 2 : 256;
        vx_free_block *nc = (vx_free_block *)realloc(ctx->cache, cap * sizeof *nc);
        if (!nc) {
            cudaFree(p);
            ctx->reserved -= bytes;
            return;
        }
        ctx->cache = nc;
        ctx->cache_cap = cap;
    }
    ctx->cache[ctx->cache_n++] = (vx_free_block){p, bytes};
}

extern "C" void vx_alloc_retag(vx_ctx *ctx, void *p, vx_category cat) {
    vx_block *b = block_find(ctx, p);
    if (!b || b->cat == cat) return;
    ctx->stats.live[b->cat] -= b->bytes;
    ctx->stats.live[cat] += b->bytes;
    trace(ctx, '-', b->bytes, b->cat);
    trace(ctx, '+', b->bytes, cat);
    b->cat = cat;
}

extern "C" void *vx_workspace(vx_ctx *ctx, size_t bytes) {
    if (ctx->ws_n == ctx->ws_cap) {
        int cap = ctx->ws_cap ? ctx->ws_cap * 2 : 16;
        void **nw = (void **)realloc(ctx->ws, (size_t)cap * sizeof *nw);
        if (!nw) return NULL;
        ctx->ws = nw;
        ctx->ws_cap = cap;
    }
    void *p = vx_malloc(ctx, bytes, VX_CAT_TEMP);
    if (p) ctx->ws[ctx->ws_n++] = p;
    return p;
}

extern "C" void vx_alloc_free_workspaces(vx_ctx *ctx) {
    while (ctx->ws_n > 0) vx_free(ctx, ctx->ws[ctx->ws_n - 1]);
}
