/*
 * test_caching: the replay of PyTorch's CUDA caching allocator
 * (libestimate/caching.c) against figures derived by hand from its rules,
 * against a brute-force reference model written here on random traces, and
 * (where the linker has --wrap) with a failure injected into each host
 * allocation in turn. Also times a 50,000-event trace.
 *
 * usage: test_caching [EVENTS]   (EVENTS: length of the timed trace, 50000)
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "caching.h"
#include "sim.h"
#include "test_util.h"
#include "alloc_fail.h"

#define KiB ((uint64_t)1024)
#define MiB ((uint64_t)1048576)

static est_cache *new_cache(void) {
    est_cache *c = est__cache_new();
    if (!c) {
        printf("est__cache_new failed\n");
        exit(1);
    }
    return c;
}

/* reserved, allocated and segment count in one check */
#define CHECK_STATE(c, res, all, segs)                                                           \
    do {                                                                                         \
        CHECK(est__cache_reserved(c) == (res), "reserved %llu, want %llu",                       \
              (unsigned long long)est__cache_reserved(c), (unsigned long long)(res));            \
        CHECK(est__cache_allocated(c) == (all), "allocated %llu, want %llu",                     \
              (unsigned long long)est__cache_allocated(c), (unsigned long long)(all));           \
        CHECK(est__cache_segments(c) == (segs), "segments %llu, want %llu",                      \
              (unsigned long long)est__cache_segments(c), (unsigned long long)(segs));           \
    } while (0)

static void test_round_size(void) {
    CHECK(est__cache_round_size(0) == 512, "0");
    CHECK(est__cache_round_size(1) == 512, "1");
    CHECK(est__cache_round_size(511) == 512, "511");
    CHECK(est__cache_round_size(512) == 512, "512");
    CHECK(est__cache_round_size(513) == 1024, "513");
    CHECK(est__cache_round_size(1000) == 1024, "1000");
    CHECK(est__cache_round_size(MiB + 1) == MiB + 512, "1 MiB + 1");
}

static void test_zero_and_bad_handles(void) {
    est_cache *c = new_cache();
    CHECK(est__cache_alloc(c, 0) == EST__CACHE_NULL_HANDLE, "zero bytes: the null handle");
    CHECK_STATE(c, 0, 0, 0);
    CHECK(est__cache_release(c, EST__CACHE_NULL_HANDLE) == 0, "releasing the null handle");
    CHECK(est__cache_addr(c, EST__CACHE_NULL_HANDLE) == UINT64_MAX, "no address");
    CHECK(est__cache_release(c, -5) == -1, "negative handle");
    CHECK(est__cache_release(c, 12345) == -1, "never allocated");
    int64_t h = est__cache_alloc(c, 1000);
    CHECK(h > 0, "handle %lld", (long long)h);
    CHECK(est__cache_release(c, h) == 0, "release");
    CHECK(est__cache_release(c, h) == -1, "double release refused");
    CHECK_STATE(c, 2 * MiB, 0, 1);
    /* the slot is reused by the next allocation; the old handle stays dead */
    int64_t h2 = est__cache_alloc(c, 1000);
    CHECK(h2 > 0 && h2 != h, "new handle %lld, old %lld", (long long)h2, (long long)h);
    CHECK(est__cache_release(c, h) == -1, "stale handle refused");
    CHECK_STATE(c, 2 * MiB, 1024, 1);
    /* PyTorch's allocate() refuses 1 EiB and more */
    CHECK(est__cache_alloc(c, (uint64_t)1 << 60) == EST__CACHE_EDEVICE, "1 EiB");
    CHECK(est__cache_alloc(c, UINT64_MAX) == EST__CACHE_EDEVICE, "UINT64_MAX");
    CHECK_STATE(c, 2 * MiB, 1024, 1);
    est__cache_destroy(c);
    est__cache_destroy(NULL);
}

static void test_small_pool(void) {
    est_cache *c = new_cache();
    /* 1000 bytes: rounded to 1024, small pool, a new 2 MiB segment */
    int64_t a = est__cache_alloc(c, 1000);
    CHECK_STATE(c, 2 * MiB, 1024, 1);
    CHECK(est__cache_addr(c, a) == 0, "first block at the segment's start");
    est__cache_release(c, a);
    CHECK_STATE(c, 2 * MiB, 0, 1);
    est__cache_destroy(c);

    /* four 512 KiB blocks fill one 2 MiB segment exactly; the fifth opens another */
    c = new_cache();
    int64_t h[5];
    for (int i = 0; i < 4; i++) {
        h[i] = est__cache_alloc(c, 512 * KiB);
        CHECK(est__cache_addr(c, h[i]) == (uint64_t)i * 512 * KiB, "block %d at %llu", i,
              (unsigned long long)est__cache_addr(c, h[i]));
    }
    CHECK_STATE(c, 2 * MiB, 2 * MiB, 1);
    h[4] = est__cache_alloc(c, 512 * KiB);
    CHECK_STATE(c, 4 * MiB, 2 * MiB + 512 * KiB, 2);
    CHECK(est__cache_addr(c, h[4]) == 2 * MiB, "second segment above the first");
    est__cache_destroy(c);

    /* four mixed small requests share one segment */
    c = new_cache();
    est__cache_alloc(c, 1);           /* 512 */
    est__cache_alloc(c, 100000);      /* 100352 */
    est__cache_alloc(c, 300 * KiB);   /* 307200 */
    est__cache_alloc(c, MiB);         /* 1 MiB: still small (<= kSmallSize) */
    CHECK_STATE(c, 2 * MiB, 512 + 100352 + 307200 + MiB, 1);
    est__cache_destroy(c);

    /* small split: a remainder of exactly 512 is split off, 0 is not */
    c = new_cache();
    est__cache_alloc(c, MiB);               /* [0, 1 MiB), remainder 1 MiB */
    int64_t b = est__cache_alloc(c, MiB - 512); /* remainder 512 >= kMinBlockSize: split */
    CHECK_STATE(c, 2 * MiB, 2 * MiB - 512, 1);
    int64_t d = est__cache_alloc(c, 1);     /* takes the last 512 */
    CHECK_STATE(c, 2 * MiB, 2 * MiB, 1);
    CHECK(est__cache_addr(c, d) == 2 * MiB - 512, "last 512 at %llu", (unsigned long long)est__cache_addr(c, d));
    est__cache_alloc(c, 1);                 /* segment full: a new one */
    CHECK_STATE(c, 4 * MiB, 2 * MiB + 512, 2);
    /* freeing b merges nothing (neighbours allocated); a 1 MiB - 512 request reuses it */
    est__cache_release(c, b);
    int64_t b2 = est__cache_alloc(c, MiB - 600);
    CHECK(est__cache_addr(c, b2) == MiB, "reused at 1 MiB");
    CHECK_STATE(c, 4 * MiB, 2 * MiB + 512, 2);
    est__cache_destroy(c);
}

static void test_large_pool(void) {
    /* 3 MiB -> 20 MiB segment (1 MiB < size < 10 MiB); 4 MiB reuses its remainder */
    est_cache *c = new_cache();
    int64_t a = est__cache_alloc(c, 3 * MiB);
    CHECK_STATE(c, 20 * MiB, 3 * MiB, 1);
    int64_t b = est__cache_alloc(c, 4 * MiB);
    CHECK_STATE(c, 20 * MiB, 7 * MiB, 1);
    CHECK(est__cache_addr(c, a) == 0 && est__cache_addr(c, b) == 3 * MiB, "b right after a");
    /* 1 MiB + 1 rounds to 1 MiB + 512: large pool, fits the 13 MiB remainder */
    int64_t e = est__cache_alloc(c, MiB + 1);
    CHECK_STATE(c, 20 * MiB, 8 * MiB + 512, 1);
    CHECK(est__cache_addr(c, e) == 7 * MiB, "e after b");
    /* a small request never uses the large pool's free space */
    est__cache_alloc(c, 1000);
    CHECK_STATE(c, 22 * MiB, 8 * MiB + 512 + 1024, 2);
    est__cache_destroy(c);

    /* sizes >= 10 MiB get their own segment, rounded up to 2 MiB */
    c = new_cache();
    est__cache_alloc(c, 12 * MiB);
    CHECK_STATE(c, 12 * MiB, 12 * MiB, 1);
    /* 11.5 MiB: a 12 MiB segment; the 0.5 MiB remainder is not split (<= 1 MiB),
     * so the whole 12 MiB counts as allocated */
    est__cache_alloc(c, 11 * MiB + 512 * KiB);
    CHECK_STATE(c, 24 * MiB, 24 * MiB, 2);
    est__cache_alloc(c, 10 * MiB);  /* exactly kMinLargeAlloc: 10 MiB segment */
    CHECK_STATE(c, 34 * MiB, 34 * MiB, 3);
    est__cache_alloc(c, 10 * MiB - 1); /* rounds to 10 MiB: a 10 MiB segment again */
    CHECK_STATE(c, 44 * MiB, 44 * MiB, 4);
    /* 10 MiB - 512 is below kMinLargeAlloc: a 20 MiB segment, split (10 MiB + 512 left) */
    est__cache_alloc(c, 10 * MiB - 512);
    CHECK_STATE(c, 64 * MiB, 54 * MiB - 512, 5);
    est__cache_destroy(c);
}

static void test_large_split_threshold(void) {
    /* 19 MiB: 20 MiB segment, remainder exactly 1 MiB: not split (remaining > kSmallSize fails) */
    est_cache *c = new_cache();
    int64_t a = est__cache_alloc(c, 19 * MiB);
    CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
    est__cache_release(c, a);
    CHECK_STATE(c, 20 * MiB, 0, 1);
    /* 19 MiB - 512: remainder 1 MiB + 512: split */
    a = est__cache_alloc(c, 19 * MiB - 512);
    CHECK_STATE(c, 20 * MiB, 19 * MiB - 512, 1);
    /* the split-off 1 MiB + 512 serves a 1 MiB + 1 request (rounded to 1 MiB + 512) */
    int64_t b = est__cache_alloc(c, MiB + 1);
    CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
    CHECK(est__cache_addr(c, b) == 19 * MiB - 512, "b in the remainder");
    est__cache_destroy(c);

    /* a reused free block is split the same way: 12 MiB free, 11 MiB request:
     * remainder 1 MiB, not split */
    c = new_cache();
    a = est__cache_alloc(c, 12 * MiB);
    est__cache_release(c, a);
    a = est__cache_alloc(c, 11 * MiB);
    CHECK_STATE(c, 12 * MiB, 12 * MiB, 1);
    est__cache_release(c, a);
    /* 10 MiB: remainder 2 MiB > 1 MiB, split */
    a = est__cache_alloc(c, 10 * MiB);
    CHECK_STATE(c, 12 * MiB, 10 * MiB, 1);
    est__cache_destroy(c);
}

static void test_reuse_and_best_fit(void) {
    est_cache *c = new_cache();
    int64_t a = est__cache_alloc(c, 3 * MiB);
    est__cache_release(c, a);             /* merges back with the 17 MiB remainder */
    a = est__cache_alloc(c, 3 * MiB);
    CHECK_STATE(c, 20 * MiB, 3 * MiB, 1);
    est__cache_release(c, a);
    a = est__cache_alloc(c, 20 * MiB);    /* the whole merged segment fits exactly */
    CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
    est__cache_destroy(c);

    /* best fit: free blocks of 14 MiB (lower address) and 12 MiB; 11 MiB takes the 12 */
    c = new_cache();
    int64_t x = est__cache_alloc(c, 14 * MiB);
    int64_t y = est__cache_alloc(c, 12 * MiB);
    est__cache_release(c, x);
    est__cache_release(c, y);
    a = est__cache_alloc(c, 11 * MiB);
    CHECK(est__cache_addr(c, a) == 14 * MiB, "11 MiB in the 12 MiB block, at %llu",
          (unsigned long long)est__cache_addr(c, a));
    int64_t b = est__cache_alloc(c, 13 * MiB);   /* then 13 MiB fits the 14 MiB block */
    CHECK(est__cache_addr(c, b) == 0, "13 MiB in the 14 MiB block");
    CHECK_STATE(c, 26 * MiB, 26 * MiB, 2);
    est__cache_destroy(c);

    /* ties: two free 12 MiB segments; the lower address wins, whatever the free order */
    c = new_cache();
    x = est__cache_alloc(c, 12 * MiB);
    y = est__cache_alloc(c, 12 * MiB);
    est__cache_release(c, y);
    est__cache_release(c, x);
    a = est__cache_alloc(c, 12 * MiB);
    CHECK(est__cache_addr(c, a) == 0, "tie to the lower address");
    b = est__cache_alloc(c, 12 * MiB);
    CHECK(est__cache_addr(c, b) == 12 * MiB, "then the other");
    CHECK_STATE(c, 24 * MiB, 24 * MiB, 2);
    est__cache_destroy(c);

    /* a smaller fitting block in another segment beats a bigger one in the same */
    c = new_cache();
    y = est__cache_alloc(c, 16 * MiB);    /* 16 MiB segment at 0 */
    x = est__cache_alloc(c, 2 * MiB);     /* 20 MiB segment at 16 MiB: [x 2][free 18] */
    CHECK(est__cache_addr(c, x) == 16 * MiB, "x in the second segment");
    est__cache_release(c, y);
    a = est__cache_alloc(c, 15 * MiB);    /* free 16 < free 18: y's block, whole (1 MiB left) */
    CHECK(est__cache_addr(c, a) == 0, "15 MiB in the 16 MiB segment");
    CHECK_STATE(c, 36 * MiB, 18 * MiB, 2);
    est__cache_destroy(c);
}

static void test_merge(void) {
    /* 20 MiB segment: a [0,8) b [8,16) c [16,20) (c: 3 MiB with a 1 MiB rest: not split) */
    for (int order = 0; order < 2; order++) {
        est_cache *c = new_cache();
        int64_t a = est__cache_alloc(c, 8 * MiB);
        int64_t b = est__cache_alloc(c, 8 * MiB);
        int64_t d = est__cache_alloc(c, 3 * MiB);
        CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
        CHECK(est__cache_addr(c, d) == 16 * MiB, "c at 16 MiB");
        /* free a and b in either order: one 16 MiB free block (merge with next or prev) */
        est__cache_release(c, order ? b : a);
        est__cache_release(c, order ? a : b);
        CHECK_STATE(c, 20 * MiB, 4 * MiB, 1);
        int64_t e = est__cache_alloc(c, 15 * MiB);  /* fits only the merged block; 1 MiB rest: whole */
        CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
        CHECK(est__cache_addr(c, e) == 0, "merged block at 0");
        est__cache_release(c, e);
        /* empty_cache keeps the segment: c is still allocated in it */
        est__cache_empty(c);
        CHECK_STATE(c, 20 * MiB, 4 * MiB, 1);
        /* freeing c merges into one whole free segment, which empty_cache releases */
        est__cache_release(c, d);
        CHECK_STATE(c, 20 * MiB, 0, 1);
        est__cache_empty(c);
        CHECK_STATE(c, 0, 0, 0);
        est__cache_destroy(c);
    }

    /* three-way merge: free a, c, then b joins both */
    est_cache *c = new_cache();
    int64_t a = est__cache_alloc(c, 256 * KiB);
    int64_t b = est__cache_alloc(c, 256 * KiB);
    int64_t d = est__cache_alloc(c, 256 * KiB);
    int64_t keep = est__cache_alloc(c, 256 * KiB);
    est__cache_release(c, a);
    est__cache_release(c, d);
    int64_t f = est__cache_alloc(c, 700 * KiB);  /* no free block of 700 KiB: the rest [1 MiB, 2 MiB) */
    CHECK(est__cache_addr(c, f) == MiB, "700 KiB in the tail at %llu", (unsigned long long)est__cache_addr(c, f));
    est__cache_release(c, b);                    /* [a b d] merge: 768 KiB at 0 */
    int64_t g = est__cache_alloc(c, 768 * KiB);
    CHECK(est__cache_addr(c, g) == 0, "768 KiB at 0 after the merge");
    CHECK_STATE(c, 2 * MiB, 768 * KiB + 256 * KiB + 700 * KiB, 1);
    (void)keep;
    est__cache_destroy(c);
}

static void test_empty_cache(void) {
    est_cache *c = new_cache();
    int64_t s = est__cache_alloc(c, 1000);       /* small segment, stays (live block) */
    int64_t g = est__cache_alloc(c, 12 * MiB);   /* 12 MiB segment, stays */
    int64_t l = est__cache_alloc(c, 3 * MiB);    /* 20 MiB segment, freed */
    int64_t t = est__cache_alloc(c, 2000);       /* second small block, freed */
    est__cache_release(c, l);
    est__cache_release(c, t);
    CHECK_STATE(c, 34 * MiB, 1024 + 12 * MiB, 3);
    est__cache_empty(c);
    CHECK_STATE(c, 14 * MiB, 1024 + 12 * MiB, 2);
    est__cache_empty(c);                         /* idempotent */
    CHECK_STATE(c, 14 * MiB, 1024 + 12 * MiB, 2);
    est__cache_release(c, s);
    est__cache_release(c, g);
    est__cache_empty(c);
    CHECK_STATE(c, 0, 0, 0);
    /* a new segment after empty_cache */
    est__cache_alloc(c, 3 * MiB);
    CHECK_STATE(c, 20 * MiB, 3 * MiB, 1);
    est__cache_destroy(c);
}

static void test_peaks(void) {
    est_cache *c = new_cache();
    int64_t a = est__cache_alloc(c, 12 * MiB);
    int64_t b = est__cache_alloc(c, 12 * MiB);
    CHECK(est__cache_peak_reserved(c) == 24 * MiB, "peak reserved");
    CHECK(est__cache_peak_allocated(c) == 24 * MiB, "peak allocated");
    est__cache_release(c, a);
    est__cache_release(c, b);
    est__cache_empty(c);
    CHECK_STATE(c, 0, 0, 0);
    CHECK(est__cache_peak_reserved(c) == 24 * MiB, "peak survives empty_cache");
    CHECK(est__cache_peak_allocated(c) == 24 * MiB, "peak allocated survives");
    est__cache_reset_peak(c);
    CHECK(est__cache_peak_reserved(c) == 0 && est__cache_peak_allocated(c) == 0, "reset to current");
    a = est__cache_alloc(c, 1000);
    CHECK(est__cache_peak_reserved(c) == 2 * MiB, "new peak reserved");
    CHECK(est__cache_peak_allocated(c) == 1024, "new peak allocated");
    /* reset with blocks live: peak = current, not 0 */
    b = est__cache_alloc(c, 3 * MiB);
    est__cache_release(c, b);
    est__cache_reset_peak(c);
    CHECK(est__cache_peak_reserved(c) == 22 * MiB, "peak = current reserved");
    CHECK(est__cache_peak_allocated(c) == 1024, "peak = current allocated");
    /* reuse without a new segment leaves the reserved peak alone */
    b = est__cache_alloc(c, 5 * MiB);
    CHECK(est__cache_peak_reserved(c) == 22 * MiB, "reuse: no new reserved peak");
    CHECK(est__cache_peak_allocated(c) == 1024 + 5 * MiB, "allocated peak rises");
    est__cache_destroy(c);
}

static void test_limit(void) {
    est_cache *c = new_cache();
    est__cache_set_limit(c, 30 * MiB);
    int64_t a = est__cache_alloc(c, 12 * MiB);
    est__cache_release(c, a);          /* cached: 12 MiB reserved, free */
    /* 20 MiB: no free block fits; 12 + 20 > 30: release the cached 12, retry */
    int64_t b = est__cache_alloc(c, 20 * MiB);
    CHECK(b > 0, "fits after releasing the cache");
    CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
    CHECK(est__cache_peak_reserved(c) == 20 * MiB, "peak 20 MiB");
    /* 12 MiB more: 32 > 30 and nothing to release: device OOM */
    CHECK(est__cache_alloc(c, 12 * MiB) == EST__CACHE_EDEVICE, "over the limit");
    CHECK_STATE(c, 20 * MiB, 20 * MiB, 1);
    /* exactly at the limit is allowed */
    CHECK(est__cache_alloc(c, 10 * MiB) > 0, "20 + 10 == limit");
    CHECK_STATE(c, 30 * MiB, 30 * MiB, 2);
    /* a failed request still empties the cache first (as PyTorch's malloc does) */
    est__cache_release(c, b);
    int64_t s = est__cache_alloc(c, 1000);  /* small pool: needs 2 MiB more: 32 > 30 */
    CHECK(s > 0, "small after releasing the free 20 MiB segment");
    CHECK_STATE(c, 12 * MiB, 10 * MiB + 1024, 2);
    est__cache_set_limit(c, 0);
    CHECK(est__cache_alloc(c, 100 * MiB) > 0, "no limit");
    est__cache_destroy(c);
}

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

/* The simulation's replay keeps a cache per CUDA stream (sim.h,
 * key_stream): a block freed on one stream is never given to a request of
 * another, so FSDP's all-gather and reduce-scatter buffers hold 2 MiB
 * segments of their own beside the compute stream's; reserved memory and its
 * peak are all streams' together. */
static void test_streams(void) {
    est_report r;
    memset(&r, 0, sizeof r);
    sim s;
    memset(&s, 0, sizeof s);
    s.r = &r;
    s.cache = est__cache_new();
    CHECK(s.cache != NULL, "streams: cache");
    if (!s.cache) return;
    s.handed_on = true; /* as est__simulate sets it once the cache is made */
    const uint64_t act = KEY(K_STORAGE, 7, 1), gathered = KEY(K_PAR, 0, P_GATHERED),
                   reduce = KEY(K_PAR, 0, P_REDUCE_INPUT);
    CHECK(key_stream(act) == STREAM_COMPUTE && key_stream(gathered) == STREAM_ALL_GATHER &&
              key_stream(reduce) == STREAM_REDUCE_SCATTER && key_stream(KEY(K_PAR, 0, P_UNSHARDED)) == STREAM_COMPUTE,
          "streams: the keys' streams");
    est__sim_alloc(&s, EST_CAT_ACTIVATIONS, 256 * KiB, act);
    est__sim_release(&s, EST_CAT_ACTIVATIONS, 256 * KiB, act); /* a free block in the compute stream's segment */
    CHECK(est__sim_reserved(&s) == 2 * MiB, "streams: compute %llu", (unsigned long long)est__sim_reserved(&s));
    est__sim_alloc(&s, EST_CAT_COMM, 256 * KiB, gathered);
    CHECK(est__sim_reserved(&s) == 4 * MiB, "streams: the all-gather stream takes a segment of its own, %llu",
          (unsigned long long)est__sim_reserved(&s));
    est__sim_release(&s, EST_CAT_COMM, 256 * KiB, gathered);
    est__sim_alloc(&s, EST_CAT_COMM, 256 * KiB, gathered);
    est__sim_alloc(&s, EST_CAT_COMM, 512 * KiB, reduce);
    est__sim_alloc(&s, EST_CAT_ACTIVATIONS, 256 * KiB, act);
    CHECK(est__sim_reserved(&s) == 6 * MiB && est__sim_peak_reserved(&s) == 6 * MiB,
          "streams: each stream reuses its own blocks: reserved %llu, peak %llu, expected 6 MiB",
          (unsigned long long)est__sim_reserved(&s), (unsigned long long)est__sim_peak_reserved(&s));
    CHECK(!s.cache_failed && s.total == 1024 * KiB, "streams: 1 MiB allocated, %llu", (unsigned long long)s.total);
    est__sim_release(&s, EST_CAT_COMM, 256 * KiB, gathered);
    est__sim_release(&s, EST_CAT_COMM, 512 * KiB, reduce);
    est__sim_release(&s, EST_CAT_ACTIVATIONS, 256 * KiB, act);
    CHECK(s.blocks.count == 0 && est__cache_allocated(s.side_cache[0]) == 0 && est__cache_allocated(s.side_cache[1]) == 0,
          "streams: every block released to its own stream's cache");
    est__cache_destroy(s.cache);
    for (int k = 0; k < STREAM_COUNT - 1; k++) est__cache_destroy(s.side_cache[k]);
    free(s.blocks.keys);
    free(s.blocks.handles);
}

int main(int argc, char **argv) {
    int events = argc > 1 ? atoi(argv[1]) : 50000;
    if (events < 10) events = 10;
    test_round_size();
    test_zero_and_bad_handles();
    test_small_pool();
    test_large_pool();
    test_large_split_threshold();
    test_reuse_and_best_fit();
    test_merge();
    test_empty_cache();
    test_peaks();
    test_limit();
    test_streams();
    test_random_against_reference();
    test_many_slots();
#ifdef TEST_WRAP_ALLOC
    test_host_alloc_failures();
#endif
    test_timing(events);
    return test_result("test_caching");
}
