/*
 * profile.c: where the measured step's time goes, by op type and phase
 * (MEMEST_VERIFY_PROFILE=FILE, docs/verify.md). The stream is synchronized
 * after every node, so each node's share is its kernels plus its host work;
 * the step is slower for it, and its step time is not the one to compare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "vx_exec.h"

#define PROFILE_ROWS 512

typedef struct profile_row {
    const char *op_type;
    int phase;
    long calls;
    double ms;
} profile_row;

struct vx_profile {
    FILE *f;
    double last;
    int n;
    profile_row rows[PROFILE_ROWS];
};

static double profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

vx_profile *vx_profile_open(void) {
    const char *path = getenv("MEMEST_VERIFY_PROFILE");
    if (!path || !*path) return NULL;
    vx_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (!(p->f = fopen(path, "a"))) {
        free(p);
        return NULL;
    }
    return p;
}

void vx_profile_start(vx_profile *p) {
    if (!p) return;
    cudaDeviceSynchronize();
    p->n = 0;
    p->last = profile_now();
}

void vx_profile_mark(vx_profile *p, const char *op_type, int phase) {
    if (!p) return;
    cudaDeviceSynchronize();
    double t = profile_now(), dt = t - p->last;
    p->last = t;
    int i = 0;
    while (i < p->n && !(p->rows[i].phase == phase && strcmp(p->rows[i].op_type, op_type) == 0)) i++;
    if (i == p->n) {
        if (p->n == PROFILE_ROWS) return;
        p->rows[p->n++] = (profile_row){op_type, phase, 0, 0.0};
    }
    p->rows[i].calls++;
    p->rows[i].ms += dt;
}

/* One JSON line per run: {"model", "batch", "rows": [[op, phase, calls, ms], ...]}. */
void vx_profile_write(vx_profile *p, const char *model, int64_t batch) {
    if (!p) return;
    fprintf(p->f, "{\"model\": \"%s\", \"batch\": %lld, \"rows\": [", model ? model : "", (long long)batch);
    for (int i = 0; i < p->n; i++)
        fprintf(p->f, "%s[\"%s\", \"%s\", %ld, %.4f]", i ? ", " : "", p->rows[i].op_type,
                p->rows[i].phase == VX_PHASE_SETUP ? "setup" : est_phase_name((est_phase)(p->rows[i].phase - 1)), p->rows[i].calls, p->rows[i].ms);
    fprintf(p->f, "]}\n");
}

void vx_profile_section(vx_ctx *ctx, const char *what) {
    vx_profile_mark(ctx->prof, what, ctx->phase);
}

void vx_profile_close(vx_profile *p) {
    if (!p) return;
    fclose(p->f);
    free(p);
}
