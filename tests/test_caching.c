/*
 * test_caching: the replay of PyTorch's CUDA caching allocator
 * (libestimate/caching.c) against figures derived by hand from its rules:
 * rounding, the small and large pools, splits, best fit, merges,
 * emptying, peaks, a memory limit, and a cache per CUDA stream. Long
 * traces (a brute-force reference on random ones, host allocation
 * failures, the timed trace) are test_caching_traces.
 *
 * usage: test_caching
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "caching_util.h"
#include "sim.h"

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

int main(void) {
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
    return test_result("test_caching");
}
