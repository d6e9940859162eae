/*
 * test_caching_traces: the replay of PyTorch's CUDA caching allocator
 * (libestimate/caching.c) on long traces: random ones against a brute-force
 * reference model written here, 70,000 blocks past 65,536 block slots, a
 * random scenario with (where the linker has --wrap) a failure injected
 * into each host allocation in turn, and the time of a 50,000-event trace.
 *
 * usage: test_caching_traces [EVENTS]   (EVENTS: length of the timed trace, 50000)
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "caching_util.h"
#include "alloc_fail.h"

/* ---- the brute-force reference ------------------------------------------ */

typedef struct rblk {
    uint64_t addr, size;
    int seg;
    bool alive, alloc, small;
} rblk;

typedef struct ref {
    rblk *b;
    int n, cap;
    uint64_t *seg_size;
    int nseg, segcap;
    uint64_t next_addr, limit, reserved, peak_r, allocated, peak_a, segments;
} ref;

static int ref_push(ref *r, rblk x) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->b = realloc(r->b, (size_t)r->cap * sizeof *r->b);
        if (!r->b) exit(2);
    }
    r->b[r->n] = x;
    return r->n++;
}

static void ref_empty(ref *r) {
    for (int i = 0; i < r->n; i++) {
        rblk *x = &r->b[i];
        if (x->alive && !x->alloc && x->size == r->seg_size[x->seg]) {
            x->alive = false;
            r->reserved -= x->size;
            r->segments--;
        }
    }
}

/* Returns the block index; -2 for a device failure. */
static int ref_alloc(ref *r, uint64_t bytes) {
    uint64_t size = bytes < 512 ? 512 : (bytes + 511) / 512 * 512;
    bool small = size <= MiB;
    int best = -1;
    for (int i = 0; i < r->n; i++) {
        rblk *x = &r->b[i];
        if (!x->alive || x->alloc || x->small != small || x->size < size) continue;
        if (best < 0 || x->size < r->b[best].size || (x->size == r->b[best].size && x->addr < r->b[best].addr))
            best = i;
    }
    if (best < 0) {
        uint64_t seg = size <= MiB ? 2 * MiB : size < 10 * MiB ? 20 * MiB : (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
        if (r->limit && r->reserved + seg > r->limit) {
            ref_empty(r);
            if (r->reserved + seg > r->limit) return -2;
        }
        if (r->nseg == r->segcap) {
            r->segcap = r->segcap ? 2 * r->segcap : 64;
            r->seg_size = realloc(r->seg_size, (size_t)r->segcap * sizeof *r->seg_size);
            if (!r->seg_size) exit(2);
        }
        r->seg_size[r->nseg] = seg;
        best = ref_push(r, (rblk){.addr = r->next_addr, .size = seg, .seg = r->nseg, .alive = true, .small = small});
        r->nseg++;
        r->next_addr += seg;
        r->reserved += seg;
        r->segments++;
        if (r->reserved > r->peak_r) r->peak_r = r->reserved;
    }
    uint64_t rest = r->b[best].size - size;
    int a = best;
    if (small ? rest >= 512 : rest > MiB) {
        rblk front = r->b[best];
        front.size = size;
        a = ref_push(r, front);
        r->b[best].addr += size;
        r->b[best].size = rest;
    }
    r->b[a].alloc = true;
    r->allocated += r->b[a].size;
    if (r->allocated > r->peak_a) r->peak_a = r->allocated;
    return a;
}

static void ref_free(ref *r, int i) {
    rblk *x = &r->b[i];
    x->alloc = false;
    r->allocated -= x->size;
    for (int j = 0; j < r->n; j++) {
        rblk *y = &r->b[j];
        if (j == i || !y->alive || y->alloc || y->seg != x->seg) continue;
        if (y->addr + y->size == x->addr) { /* prev */
            x->addr = y->addr;
            x->size += y->size;
            y->alive = false;
        }
    }
    for (int j = 0; j < r->n; j++) {
        rblk *y = &r->b[j];
        if (j == i || !y->alive || y->alloc || y->seg != x->seg) continue;
        if (x->addr + x->size == y->addr) { /* next */
            x->size += y->size;
            y->alive = false;
        }
    }
}

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static uint64_t rnd_below(uint64_t n) { return rnd() % n; }

/* Request sizes that exercise every rule: boundaries, repeats (ties), small,
 * between 1 and 10 MiB, large. */
static uint64_t rnd_size(void) {
    static const uint64_t fixed[] = {0, 1, 511, 512, 513, 1024 * 1024, 1024 * 1024 + 1, 1024 * 1024 - 512,
                                     10485760, 10485760 - 1, 10485760 + 1, 20971520, 19 * 1048576,
                                     19 * 1048576 - 512, 4096, 65536, 3 * 1048576, 12 * 1048576};
    switch (rnd_below(6)) {
    case 0: return fixed[rnd_below(sizeof fixed / sizeof fixed[0])];
    case 1: case 2: return 1 + rnd_below(MiB);
    case 3: return MiB + 1 + rnd_below(9 * MiB);
    case 4: return (1 + rnd_below(16)) * 512 * KiB; /* repeats */
    default: return 10 * MiB + rnd_below(90 * MiB);
    }
}

/* Past 65,536 slots dead slots are reused lowest first (a bitmap, where a
 * list served before): the blocks' addresses follow the allocator's rules
 * whichever slots hold them. 70,000 blocks of 512 bytes fill 18 segments
 * in order; freeing blocks 4m and 4m + 1 leaves 1,024-byte holes at 2,048m
 * (each free merges, killing a slot), and 512-byte requests then take a
 * hole's front, then its back, lowest hole first. */
static void test_many_slots(void) {
    enum { N = 70000, WARM = 2000 };
    est_cache *c = new_cache();
    static int64_t h[N];
    for (int i = 0; i < WARM; i++) h[i] = est__cache_alloc(c, 512); /* dead slots before the bitmap */
    for (int i = 0; i < WARM; i++) est__cache_release(c, h[i]);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        h[i] = est__cache_alloc(c, 512);
        bad += est__cache_addr(c, h[i]) != (uint64_t)i * 512;
    }
    CHECK(bad == 0, "%d of %d blocks not in address order", bad, N);
    for (int i = 0; i + 1 < N; i += 4) {
        CHECK(est__cache_release(c, h[i]) == 0, "release %d", i);
        CHECK(est__cache_release(c, h[i + 1]) == 0, "release %d", i + 1);
        h[i] = h[i + 1] = 0;
    }
    static int64_t again[N / 4];
    bad = 0;
    for (int k = 0; k < N / 4; k++) {
        again[k] = est__cache_alloc(c, 512);
        bad += est__cache_addr(c, again[k]) != (uint64_t)(k / 2) * 2048 + (uint64_t)(k % 2) * 512;
    }
    CHECK(bad == 0, "%d of %d blocks not at their hole", bad, N / 4);
    CHECK_STATE(c, 18 * 2 * MiB, (uint64_t)(N - N / 2 + N / 4) * 512, 18);
    for (int i = 0; i < N; i++)
        if (h[i]) CHECK(est__cache_release(c, h[i]) == 0, "release %d", i);
    for (int k = 0; k < N / 4; k++) CHECK(est__cache_release(c, again[k]) == 0, "release again %d", k);
    CHECK_STATE(c, 18 * 2 * MiB, 0, 18);
    est__cache_destroy(c);
}

static void test_random_against_reference(void) {
    int mismatches = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
        est_cache *c = new_cache();
        ref r = {0};
        if (seed % 3 == 0) {
            r.limit = (40 + rnd_below(400)) * MiB;
            est__cache_set_limit(c, r.limit);
        }
        int64_t live_h[600];
        int live_r[600];
        int nlive = 0;
        int events = 1500 + (int)rnd_below(1500);
        for (int ev = 0; ev < events && !mismatches; ev++) {
            uint64_t op = rnd_below(100);
            if (op < 2) {
                est__cache_empty(c);
                ref_empty(&r);
            } else if (op < 3) {
                est__cache_reset_peak(c);
                r.peak_r = r.reserved;
                r.peak_a = r.allocated;
            } else if (nlive < 600 && (op < 53 || nlive == 0)) {
                uint64_t bytes = rnd_size();
                int64_t h = est__cache_alloc(c, bytes);
                if (bytes == 0) {
                    if (h != EST__CACHE_NULL_HANDLE) mismatches++;
                    continue;
                }
                int ri = ref_alloc(&r, bytes);
                if (ri == -2) {
                    if (h != EST__CACHE_EDEVICE) mismatches++;
                    CHECK(h == EST__CACHE_EDEVICE, "seed %llu event %d: device OOM expected, got %lld",
                          (unsigned long long)seed, ev, (long long)h);
                } else if (h <= 0 || est__cache_addr(c, h) != r.b[ri].addr) {
                    mismatches++;
                    CHECK(0, "seed %llu event %d: alloc %llu: handle %lld at %llu, reference at %llu",
                          (unsigned long long)seed, ev, (unsigned long long)bytes, (long long)h,
                          (unsigned long long)est__cache_addr(c, h), (unsigned long long)r.b[ri].addr);
                } else {
                    live_h[nlive] = h;
                    live_r[nlive] = ri;
                    nlive++;
                }
            } else if (nlive > 0) {
                int k = (int)rnd_below((uint64_t)nlive);
                CHECK(est__cache_release(c, live_h[k]) == 0, "release");
                ref_free(&r, live_r[k]);
                live_h[k] = live_h[nlive - 1];
                live_r[k] = live_r[nlive - 1];
                nlive--;
            }
            if (est__cache_reserved(c) != r.reserved || est__cache_allocated(c) != r.allocated ||
                est__cache_peak_reserved(c) != r.peak_r || est__cache_peak_allocated(c) != r.peak_a ||
                est__cache_segments(c) != r.segments) {
                mismatches++;
                CHECK(0, "seed %llu event %d: reserved %llu/%llu allocated %llu/%llu peaks %llu/%llu %llu/%llu",
                      (unsigned long long)seed, ev, (unsigned long long)est__cache_reserved(c),
                      (unsigned long long)r.reserved, (unsigned long long)est__cache_allocated(c),
                      (unsigned long long)r.allocated, (unsigned long long)est__cache_peak_reserved(c),
                      (unsigned long long)r.peak_r, (unsigned long long)est__cache_peak_allocated(c),
                      (unsigned long long)r.peak_a);
            }
            CHECK(est__cache_allocated(c) <= est__cache_reserved(c), "allocated <= reserved");
        }
        /* free everything, empty: nothing reserved */
        for (int k = 0; k < nlive; k++) CHECK(est__cache_release(c, live_h[k]) == 0, "final release");
        CHECK(est__cache_allocated(c) == 0, "all freed");
        est__cache_empty(c);
        CHECK_STATE(c, 0, 0, 0);
        free(r.b);
        free(r.seg_size);
        est__cache_destroy(c);
    }
    CHECK(mismatches == 0, "%d mismatches against the reference", mismatches);
}

/* ---- timing ----------------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A trace shaped like a training step: a forward pass that keeps most
 * activations and frees temporaries soon, then a backward pass that frees the
 * activations in reverse while making and freeing gradients. Returns the
 * number of events. */
static int training_trace(int events, uint64_t *bytes, int *free_of) {
    /* an event is an alloc (bytes[i] > 0, free_of[i] = -1) or the free of
     * event free_of[i]'s allocation */
    int n = 0, nfwd = events / 4;
    int *kept = malloc((size_t)events * sizeof *kept);
    int nkept = 0;
    int pending = -1; /* a temporary freed after the next allocation */
    while (n < events && nkept < nfwd) {
        uint64_t sz = rnd_below(4) == 0 ? 1 + rnd_below(MiB) : (1 + rnd_below(64)) * 256 * KiB;
        bytes[n] = sz;
        free_of[n] = -1;
        int id = n++;
        if (pending >= 0 && n < events) {
            bytes[n] = 0;
            free_of[n++] = pending;
            pending = -1;
        }
        if (rnd_below(3) == 0) pending = id;
        else kept[nkept++] = id;
    }
    if (pending >= 0 && n < events) {
        bytes[n] = 0;
        free_of[n++] = pending;
    }
    while (n + 3 <= events && nkept > 0) {
        int act = kept[--nkept];
        bytes[n] = bytes[act]; /* its gradient */
        free_of[n] = -1;
        int grad = n++;
        bytes[n] = 0;
        free_of[n++] = act;
        bytes[n] = 0;
        free_of[n++] = grad;
    }
    free(kept);
    return n;
}

static void test_timing(int events) {
    uint64_t *bytes = malloc((size_t)events * sizeof *bytes);
    int *free_of = malloc((size_t)events * sizeof *free_of);
    int64_t *h = malloc((size_t)events * sizeof *h);
    if (!bytes || !free_of || !h) exit(2);

    /* 1: random, up to 4,000 live blocks */
    rng_state = 12345;
    int n = 0, nlive = 0;
    int *live = malloc((size_t)events * sizeof *live);
    while (n < events) {
        if (nlive < 4000 && (nlive == 0 || rnd_below(2) == 0)) {
            bytes[n] = rnd_size();
            free_of[n] = -1;
            live[nlive++] = n++;
        } else {
            int k = (int)rnd_below((uint64_t)nlive);
            bytes[n] = 0;
            free_of[n++] = live[k];
            live[k] = live[--nlive];
        }
    }
    free(live);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            rng_state = 777;
            n = training_trace(events, bytes, free_of);
        }
        double best = 1e30;
        uint64_t peak = 0;
        for (int rep = 0; rep < 5; rep++) {
            est_cache *c = new_cache();
            double t0 = now_ms();
            for (int i = 0; i < n; i++) {
                if (free_of[i] < 0) h[i] = est__cache_alloc(c, bytes[i]);
                else est__cache_release(c, h[free_of[i]]);
            }
            double t = now_ms() - t0;
            if (t < best) best = t;
            peak = est__cache_peak_reserved(c);
            CHECK(est__cache_allocated(c) <= est__cache_reserved(c), "allocated <= reserved");
            est__cache_destroy(c);
        }
        printf("timing: %s trace of %d events: %.3f ms (best of 5), peak reserved %.1f MiB\n",
               pass ? "training-step" : "random", n, best, (double)peak / (double)MiB);
    }
    free(bytes);
    free(free_of);
    free(h);
}

/* ---- host allocation failures ------------------------------------------------ */

#ifdef TEST_WRAP_ALLOC
/* Runs a fixed scenario; every est__cache_alloc that fails for host memory
 * must leave the state as it was, and is retried. Returns the final peak
 * reserved, or 0 when est__cache_new failed. */
static uint64_t alloc_scenario(void) {
    est_cache *c = est__cache_new();
    if (!c) return 0;
    int64_t h[300];
    rng_state = 99;
    for (int i = 0; i < 300; i++) {
        uint64_t bytes = rnd_size();
        uint64_t res = est__cache_reserved(c), all = est__cache_allocated(c), segs = est__cache_segments(c);
        h[i] = est__cache_alloc(c, bytes);
        if (h[i] == EST__CACHE_ENOMEM) {
            CHECK(est__cache_reserved(c) == res && est__cache_allocated(c) == all &&
                      est__cache_segments(c) == segs, "state unchanged after ENOMEM at %d", i);
            h[i] = est__cache_alloc(c, bytes);
        }
        CHECK(h[i] >= 0, "alloc %d: %lld", i, (long long)h[i]);
        if (i % 3 == 2) CHECK(est__cache_release(c, h[i - 1]) == 0, "release %d", i - 1);
    }
    est__cache_empty(c);
    uint64_t peak = est__cache_peak_reserved(c);
    est__cache_destroy(c);
    return peak;
}

static void test_host_alloc_failures(void) {
    uint64_t want = alloc_scenario();
    long k = 0;
    for (;; k++) {
        alloc_fail_at(k);
        uint64_t got = alloc_scenario();
        if (!alloc_fail_done()) break;
        if (k == 0) CHECK(got == 0, "est__cache_new must fail first");
        else CHECK(got == want, "failure %ld: peak %llu, want %llu", k, (unsigned long long)got,
                   (unsigned long long)want);
    }
    CHECK(k >= 3, "the scenario grows the block array (%ld allocations)", k);
    printf("host allocation failures: %ld injected\n", k);
}
#endif

int main(int argc, char **argv) {
    int events = argc > 1 ? atoi(argv[1]) : 50000;
    if (events < 10) events = 10;
    test_random_against_reference();
    test_many_slots();
#ifdef TEST_WRAP_ALLOC
    test_host_alloc_failures();
#endif
    test_timing(events);
    return test_result("test_caching_traces");
}
