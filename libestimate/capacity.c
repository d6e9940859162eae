/*
 * capacity.c: does a step fit a GPU, and the largest batch that does
 * (docs/capacity.md). Built on est_estimate alone: a loaded graph is
 * estimated again and again, never re-parsed, and the graph's plan makes the
 * later estimates cheaper.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* 1 GiB: the CUDA context (527 MiB) and what nvidia-smi counts but CUDA
 * cannot allocate (480 MiB on an H100, 615 MiB on an H200); then 1.5% of the
 * memory. Measured against the true largest batch of ten models on both
 * (bench/accuracy/data/capacity/): with 1 GiB alone 11 of 17 answers failed
 * on the GPU, with 1% more two (gpt2_6l on both, by 0.2-0.3%), with 1.5%
 * none. */
#define CONTEXT_RESERVE ((uint64_t)1 << 30)
#define MARGIN_PER_200 3

/* What NCCL holds outside PyTorch's allocator once a process group has run
 * a collective (NCCL 2.28.9, torch 2.11; nccl_init and outside_allocator in
 * bench/distributed/data/, docs/distributed.md): 564 MiB on an H100 alone,
 * 846 MiB on each GPU of 2 and of 4 H100s (840 on 2 H200s); HSDP's second
 * mesh dimension took 966 MiB more a GPU, tensor parallelism's DTensor
 * collectives up to 378 MiB more (4 H100s). 8 GPUs take the 4-GPU figures
 * until they are measured. */
#define NCCL_ONE_GPU_MIB 564
#define NCCL_PER_GPU_MIB 846
#define NCCL_HSDP_MIB 966
#define NCCL_TP_MIB 378

static uint64_t nccl_reserve(const est_parallel *par) {
    if (!par) return 0;
    int64_t tp = par->tp > 1 ? par->tp : 1;
    int64_t world = par->world_size > 0 ? par->world_size : tp;
    if (par->strategy == EST_STRATEGY_NONE && world <= 1) return 0; /* no process group */
    uint64_t mib = world > 1 ? NCCL_PER_GPU_MIB : NCCL_ONE_GPU_MIB;
    if (par->strategy == EST_STRATEGY_HSDP) mib += NCCL_HSDP_MIB;
    if (tp > 1) mib += NCCL_TP_MIB;
    return mib << 20;
}

uint64_t est_default_reserve(uint64_t gpu_bytes, const est_parallel *par) {
    return est_add_sat(est_add_sat(CONTEXT_RESERVE, gpu_bytes / 200 * MARGIN_PER_200), nccl_reserve(par));
}

uint64_t est_fit_usable(const est_fit *fit) {
    if (!fit) return 0;
    return fit->gpu_bytes > fit->reserve_bytes ? fit->gpu_bytes - fit->reserve_bytes : 0;
}

int64_t est_fit_headroom(const est_fit *fit, uint64_t peak_bytes) {
    if (peak_bytes > (uint64_t)INT64_MAX) return INT64_MIN;
    return (int64_t)est_fit_usable(fit) - (int64_t)peak_bytes;
}

int est_fit_ok(const est_fit *fit, uint64_t peak_bytes, const est_totals *totals) {
    return est_fit_headroom(fit, peak_bytes) >= 0 && !(totals && totals->out_of_memory);
}

est_status est_estimate_point(const est_graph *g, const est_options *opt, int64_t value, est_point *pt,
                              est_error *err) {
    if (!pt) return est__fail(err, EST_EINVAL, "est_estimate_point: pt is NULL");
    memset(pt, 0, sizeof *pt);
    pt->value = value;
    est_report *r = NULL;
    /* a point keeps the peak and totals: DDP's race needs no second estimate */
    est_status st = est__estimate_step(g, opt, &r, err);
    if (st == EST_EOVERFLOW) { /* far from fitting anything */
        pt->overflow = 1;
        pt->peak.bytes = pt->totals.peak_bytes = UINT64_MAX;
        return EST_OK;
    }
    if (st != EST_OK) return st;
    pt->totals = *est_report_totals(r);
    pt->peak = *est_report_peak(r);
    pt->peak.layer = pt->peak.module = pt->peak.label = NULL; /* they belong to the report */
    est_report_free(r);
    return EST_OK;
}

int est_point_fits(const est_fit *fit, const est_point *pt) {
    return pt && !pt->overflow && est_fit_ok(fit, pt->peak.bytes, &pt->totals);
}

/* The search for the boundary between lo (fits) and hi (does not; 0 while
 * no batch has failed). The peak of a step is nearly affine in the batch,
 * so a line through two estimates' peaks names the batch whose peak meets
 * the usable memory: the line through batch 1 and 16 first, then lines
 * through the latest estimate and the one farthest from it (batch 1 only
 * while there is no other: workspaces bend the peak at small batches), up
 * to MAX_LINES. Batches well above that line's batch do not fit; below it the
 * allocator's segments can take more than the usable memory
 * (fragmentation), in a band where batches that fit and batches that do
 * not alternate; once a batch whose peak fits has failed, lines would only
 * creep down through that band. From there the search gallops, by 1/64 of
 * the batch and doubling, up from lo while batches fit or down from hi
 * while they do not, and bisects the bracket it crossed. With no line
 * (memory that does not grow with the batch, an overflow) the gallop starts
 * at batch 16 and doubles up to the cap. */
#define MAX_LINES 3
#define MAX_PLACED (MAX_LINES + 2) /* batch 1, batch 16 and the lines' */

typedef struct search {
    int64_t lo, hi, cap;
    int64_t b[MAX_PLACED]; /* the batches placed so far and their peaks */
    uint64_t peak[MAX_PLACED];
    int n;
    bool frag;      /* a batch whose peak fits did not fit */
    int64_t stride; /* the gallop's next stride; 0 before it, -1 once it bisects */
    bool up;        /* the gallop's direction */
} search;

/* The batch where the line through placed batches i and j meets `usable`;
 * 0 when the line does not rise. */
static int64_t line_meets(const search *s, int i, int j, uint64_t usable) {
    int64_t b0 = s->b[i], b1 = s->b[j];
    uint64_t p0 = s->peak[i], p1 = s->peak[j];
    if (b1 < b0) {
        int64_t tb = b0;
        uint64_t tp = p0;
        b0 = b1, p0 = p1, b1 = tb, p1 = tp;
    }
    if (b1 == b0 || p1 <= p0 || p1 == UINT64_MAX) return 0;
    double slope = (double)(p1 - p0) / (double)(b1 - b0);
    double b = (double)b0 + floor(((double)usable - (double)p0) / slope);
    return b >= 9.0e18 ? INT64_MAX : b < 1.0 ? 1 : (int64_t)b;
}

static int64_t distance(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

/* The line through the latest batch and the farthest from it. */
static int64_t line_guess(const search *s, uint64_t usable) {
    int last = s->n - 1, far = 0; /* batch 1 */
    for (int i = 1; i < last; i++)
        if (s->b[far] == 1 || distance(s->b[i], s->b[last]) > distance(s->b[far], s->b[last])) far = i;
    return line_meets(s, far, last, usable);
}

/* b, moved strictly inside the bracket. */
static int64_t inside(const search *s, int64_t b) {
    int64_t top = s->hi ? s->hi - 1 : s->cap;
    return b <= s->lo ? s->lo + 1 : b > top ? top : b;
}

static bool placed(const search *s, int64_t b) {
    for (int i = 0; i < s->n; i++)
        if (s->b[i] == b) return true;
    return false;
}

/* The next batch a line places; 0 when lines are done. */
static int64_t line_batch(const search *s, uint64_t usable) {
    if (s->n == 1) return inside(s, 16);
    if (s->frag || s->n == MAX_PLACED) return 0;
    int64_t b = line_guess(s, usable);
    return b && !placed(s, inside(s, b)) ? inside(s, b) : 0;
}

static int64_t next_batch(search *s, uint64_t usable) {
    if (!s->stride) {
        int64_t b = line_batch(s, usable);
        if (b) return b;
        int64_t from = s->up ? s->lo : s->hi;
        s->stride = from / 64 > 1 ? from / 64 : 1;
    }
    if (s->hi && (s->stride < 0 || s->hi - s->lo <= 2 * s->stride)) {
        s->stride = -1;
        return s->lo + (s->hi - s->lo) / 2;
    }
    if (s->up) return inside(s, s->stride > INT64_MAX - s->lo ? INT64_MAX : s->lo + s->stride);
    return s->hi - s->stride;
}

/* Takes batch b's result into the bracket. Before the gallop, the last
 * result sets its direction; a gallop step that crosses the boundary turns
 * it into bisection. */
static void record(search *s, int64_t b, uint64_t peak, bool fits, uint64_t usable) {
    if (!s->stride && s->n < MAX_PLACED) {
        s->b[s->n] = b;
        s->peak[s->n++] = peak;
    }
    if (!fits && peak <= usable) s->frag = true;
    if (s->stride > 0 && fits != s->up) s->stride = -1;
    else if (s->stride > 0) s->stride = s->stride > INT64_MAX / 2 ? INT64_MAX : s->stride * 2;
    if (!s->stride) s->up = fits;
    if (fits) s->lo = b;
    else s->hi = b;
}

est_status est_max_batch(const est_graph *g, const est_options *opt, const est_fit *fit, int64_t cap,
                         est_max_batch_result *out, est_error *err) {
    if (!g || !opt || !fit || !out || cap < 1)
        return est__fail(err, EST_EINVAL, "est_max_batch: graph, options, fit or result missing, or cap < 1");
    memset(out, 0, sizeof *out);
    est_options o = *opt;
    est_point pt;
    o.batch = 1; /* batch 1 also says whether the graph has a symbolic batch at all */
    est_status st = est_estimate_point(g, &o, 1, &out->fits, err);
    if (st != EST_OK) return st;
    out->estimates = 1;
    if (!est_point_fits(fit, &out->fits)) {
        out->next = out->fits;
        out->next_batch = 1;
        return EST_OK;
    }
    uint64_t usable = est_fit_usable(fit);
    search s = {.lo = 1, .cap = cap, .n = 1, .b = {1}, .peak = {out->fits.peak.bytes}, .up = true};
    while (s.hi ? s.hi - s.lo > 1 : s.lo < cap) {
        int64_t b = next_batch(&s, usable);
        o.batch = b;
        if ((st = est_estimate_point(g, &o, b, &pt, err)) != EST_OK) return st;
        out->estimates++;
        bool fits = est_point_fits(fit, &pt);
        if (fits) out->fits = pt; /* each guess lies inside the bracket: the latest is its end */
        else out->next = pt;
        record(&s, b, pt.overflow ? UINT64_MAX : pt.peak.bytes, fits, usable);
    }
    out->batch = s.lo;
    out->next_batch = s.hi;
    return EST_OK;
}

est_status est_sweep(const est_graph *g, const est_options *opt, const char *dim, const int64_t *values, size_t n,
                     est_point *points, size_t *done, est_error *err) {
    if (done) *done = 0;
    if (!g || !opt || !dim || (n && (!values || !points)))
        return est__fail(err, EST_EINVAL, "est_sweep: graph, options, dim, values or points missing");
    est_options o = *opt;
    bool is_batch = strcmp(dim, "batch") == 0;
    /* opt's bindings with the swept dim's slot, replaced or appended */
    est_binding *dims = calloc(opt->n_dims + 1, sizeof *dims);
    if (!dims) return est__fail(err, EST_ENOMEM, "out of memory");
    if (opt->n_dims) memcpy(dims, opt->dims, opt->n_dims * sizeof *dims);
    size_t slot = opt->n_dims;
    for (size_t i = 0; i < opt->n_dims; i++)
        if (strcmp(dims[i].name, dim) == 0) slot = i;
    if (!is_batch && slot == opt->n_dims) {
        dims[slot].name = dim;
        o.n_dims++;
    }
    o.dims = dims;
    est_status st = EST_OK;
    for (size_t i = 0; i < n && st == EST_OK; i++) {
        if (is_batch) o.batch = values[i];
        else dims[slot].value = values[i];
        st = est_estimate_point(g, &o, values[i], &points[i], err);
        if (st == EST_OK && done) *done = i + 1;
    }
    free(dims);
    return st;
}
