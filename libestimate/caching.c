/*
 * caching.c: a replay of PyTorch's CUDA caching allocator, to predict
 * torch.cuda.max_memory_reserved() from a sequence of allocations and frees.
 *
 * Source: pytorch/pytorch, c10/cuda/CUDACachingAllocator.cpp (read at
 * commit 001074d25084), namespace c10::cuda::CUDACachingAllocator::Native,
 * class DeviceCachingAllocator (the "native" backend; PYTORCH_CUDA_ALLOC_CONF
 * unset). Default configuration, from the CUDAAllocatorConfig constructor
 * (c10/cuda/CUDAAllocatorConfig.cpp): max_split_size SIZE_MAX,
 * garbage_collection_threshold 0, expandable_segments false,
 * roundup_power2_divisions all 0. Also assumed: no CUDA graph capture, one
 * stream, no recordStream (no cross-stream events, so a freed block goes
 * straight to free_block), and no FreeCudaMemoryCallbacksRegistry callback
 * that frees memory (trigger_free_memory_callbacks finds nothing).
 *
 * The rules, each with the function that states it:
 *
 *  1. Zero bytes: NativeCachingAllocator::allocate() calls malloc only
 *     `if (size != 0)`; a zero-byte allocation is a null pointer and free(null)
 *     returns at once. Requests of 1 EiB or more throw OutOfMemoryError in
 *     allocate() ("Tried to allocate more than 1EB memory").
 *  2. round_size(): size < kMinBlockSize (512) -> 512; otherwise (no
 *     roundup_power2_divisions) the next multiple of 512. Every later rule
 *     works on the rounded size.
 *  3. get_pool(): rounded size <= kSmallSize (1 MiB) -> small_blocks, else
 *     large_blocks. A request is served only from its own pool (blocks never
 *     move between pools: a split remainder stays in the pool it came from).
 *  4. get_free_block(): pool.blocks is a std::set ordered by
 *     BlockComparatorSize: (stream, size, ptr). The search key has the
 *     request's size and ptr null, so lower_bound gives the smallest free
 *     block with size >= request, the lowest address among equal sizes
 *     (best fit). The max_split_size checks there never fire when it is
 *     SIZE_MAX. The found block leaves the free set.
 *  5. get_allocation_size(), used by alloc_block() when no free block fits (a
 *     new segment, one cudaMalloc): size <= kSmallSize -> kSmallBuffer
 *     (2 MiB); size < kMinLargeAlloc (10 MiB) -> kLargeBuffer (20 MiB);
 *     otherwise the next multiple of kRoundLarge (2 MiB).
 *  6. should_split(): remaining = block size - request; small pool: split
 *     when remaining >= kMinBlockSize (512); large pool: when request <
 *     max_split_size (always) and remaining > kSmallSize (1 MiB). Not split:
 *     the whole block is handed out and counts whole in allocated bytes.
 *  7. alloc_found_block(): a split gives the request the front of the block
 *     (the block's own address) and leaves the remainder, at ptr + size, in
 *     the same segment and pool, back in the free set. allocated_bytes grows
 *     by the handed-out block's size (increase_stat; peak = max(peak,
 *     current)).
 *  8. free() / free_block() / try_merge_blocks(): the freed block merges with
 *     its previous and its next neighbour in the segment when they are free,
 *     then goes back into its pool's free set. allocated_bytes drops by the
 *     block's size. Nothing goes back to the device.
 *  9. alloc_block(): reserved_bytes grows by the segment size (peak =
 *     max(peak, current)). With a memory fraction set
 *     (setMemoryFraction), the cudaMalloc fails when total_allocated_memory +
 *     size > allowed_memory_maximum; malloc() then tries
 *     release_available_cached_blocks() (returns false at once when
 *     max_split_size is unlimited), then release_cached_blocks() and
 *     alloc_block() again; a second failure is the OutOfMemoryError.
 * 10. emptyCache() -> release_cached_blocks() -> release_blocks(): every free
 *     block with no prev and no next (a whole segment, unsplit or merged back
 *     whole) is cudaFree'd (release_block(): reserved_bytes drops by its size).
 * 11. resetPeakStats() -> reset_peak_stat(): peak := current for every stat.
 *
 * What this model adds, since it has no device: segment addresses. A new
 * segment gets the address just above every earlier segment (cudaMalloc's
 * addresses are not known here; they only decide rule 4's tie between free
 * blocks of equal size). Device memory is unlimited unless
 * est__cache_set_limit says otherwise.
 *
 * Data structures: blocks live in one growable array (slots, reused through a
 * free list); a handle names a slot and a generation, so a stale handle is
 * refused. The free blocks' sets keep their links inside the slots, so that
 * no insert or erase allocates. The large pool's is one treap keyed (size,
 * address): insert and erase are O(log n) expected; a slot's treap priority
 * is a hash of its index, computed where compared, so a run is
 * deterministic. The small pool, where most requests of a training step go
 * and few sizes recur, has a pairing heap per size (the 4,096 multiples of
 * 512 up to its 2 MiB segments), ordered by address, and a bitmap of the
 * sizes that have a free block, with a word that says which of its words
 * are not empty: best fit is the first set bit at or above the request's
 * size, then that heap's root.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "caching.h"
#include "estimate.h" /* EST_ALLOC_ROUND */
#include "ir.h"       /* est__prefault_add */

#define K_MIN_BLOCK_SIZE ((uint64_t)EST_ALLOC_ROUND) /* kMinBlockSize */
#define K_SMALL_SIZE ((uint64_t)1048576)            /* kSmallSize: 1 MiB */
#define K_SMALL_BUFFER ((uint64_t)2097152)          /* kSmallBuffer: 2 MiB */
#define K_LARGE_BUFFER ((uint64_t)20971520)         /* kLargeBuffer: 20 MiB */
#define K_MIN_LARGE_ALLOC ((uint64_t)10485760)      /* kMinLargeAlloc: 10 MiB */
#define K_ROUND_LARGE ((uint64_t)2097152)           /* kRoundLarge: 2 MiB */
#define K_ONE_EXA_BYTES ((uint64_t)1152921504606846976ULL) /* allocate()'s cap */

/* A slot's state byte: what it holds, and its block's pool (the small
 * pool's flag; a block never changes pool). */
enum { SLOT_DEAD = 0, SLOT_FREE, SLOT_ALLOC, SLOT_KIND = 3, SLOT_SMALL = 4 };
static inline int slot_kind(uint8_t state) { return state & SLOT_KIND; }
static inline uint8_t pool_flag(bool small) { return small ? SLOT_SMALL : 0; }

/* 40 bytes: the treap priority is computed and the pool is in the state
 * byte, since the replay of a million-node step walks a million blocks that
 * miss the cache. */
typedef struct blk {
    uint64_t addr, size;
    int32_t prev, next;   /* neighbours in the segment (-1: none); a dead
                             slot's next links the list of dead slots */
    int32_t ch[2];        /* while the block is free: in the large pool its
                             treap children (left, right); in the small pool
                             its first child and next sibling in its class's
                             pairing heap */
    int32_t up;           /* small pool, free: its left sibling in the heap,
                             or its parent when it is the first child; -1 at
                             the root */
    uint32_t gen;         /* bumped when a handle to the slot dies */
} blk;

/* The small pool's size classes: a block of s bytes (a multiple of 512, no
 * larger than its 2 MiB segment) is in class s / 512 - 1. */
enum { N_SMALL_CLASSES = (int)(K_SMALL_BUFFER / K_MIN_BLOCK_SIZE), CLASS_WORDS = N_SMALL_CLASSES / 64 };
_Static_assert(CLASS_WORDS <= 64, "small_words has a bit per word of small_nonempty");

struct est_cache {
    blk *b;
    /* per slot its SLOT_* and pool, apart from b: a free tests both
     * neighbours' states, and a byte array of a million slots stays in the
     * cache where the slots themselves miss */
    uint8_t *state;
    int32_t cap, used;    /* slots allocated / slots ever handed out */
    /* Dead slots, reused. While there are fewer than BITMAP_SLOTS slots, a
     * list, the last killed first (free_slot, linked by the slots' next).
     * From then on a bit each (bit i % 64 of dead[i / 64]) and a bit per
     * word of dead that is not zero (dead_words), and a new block takes the
     * lowest: blocks made one after another (a forward's activations) then
     * sit in slots one after another, where the list scatters them over
     * the array, which a large step's walks miss in the cache more at every
     * iteration. */
    int32_t free_slot;    /* head of the list, -1 none */
    uint64_t *dead, *dead_words; /* NULL while the list is used */
    int32_t dead_from;    /* no dead slot lies below word dead_from * 64 of dead */
    int32_t nfree_slots;
    int32_t large_root;   /* the large pool's free blocks; -1 none */
    uint64_t small_nonempty[CLASS_WORDS]; /* bit c: small_root[c] >= 0 */
    uint64_t small_words;  /* bit w: small_nonempty[w] != 0 (a search skips
                              the empty words at once) */
    uint64_t next_addr;   /* address of the next new segment */
    uint64_t limit;       /* 0: none */
    uint64_t reserved, peak_reserved;
    uint64_t allocated, peak_allocated;
    uint64_t segments;
    /* last: est__cache_new zeroes what comes before */
    int32_t small_root[N_SMALL_CLASSES]; /* the small pool's, by class */
};

/* ---- the free-block treaps --------------------------------------------- */

/* Slot x's treap priority (a max-heap): a hash of its index. */
static inline uint32_t treap_prio(int32_t x) {
    uint64_t h = ((uint64_t)x + 1) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    return (uint32_t)(h >> 32);
}

static inline bool key_less(const blk *b, int32_t x, int32_t y) {
    return b[x].size < b[y].size || (b[x].size == b[y].size && b[x].addr < b[y].addr);
}

/* Splits treap t into keys < x (*l) and keys > x (*r); x is not in t. */
static void treap_split(blk *b, int32_t t, int32_t x, int32_t *l, int32_t *r) {
    while (t >= 0) {
        if (key_less(b, t, x)) {
            *l = t;
            l = &b[t].ch[1];
            t = b[t].ch[1];
        } else {
            *r = t;
            r = &b[t].ch[0];
            t = b[t].ch[0];
        }
    }
    *l = -1;
    *r = -1;
}

/* Joins treaps l and r, every key of l below every key of r. */
static int32_t treap_merge(blk *b, int32_t l, int32_t r) {
    int32_t res = -1, *link = &res;
    while (l >= 0 && r >= 0) {
        if (treap_prio(l) >= treap_prio(r)) {
            *link = l;
            link = &b[l].ch[1];
            l = b[l].ch[1];
        } else {
            *link = r;
            link = &b[r].ch[0];
            r = b[r].ch[0];
        }
    }
    *link = l >= 0 ? l : r;
    return res;
}

static void treap_insert(blk *b, int32_t *root, int32_t x) {
    int32_t *link = root;
    uint32_t prio = treap_prio(x);
    while (*link >= 0 && treap_prio(*link) >= prio) link = &b[*link].ch[!key_less(b, x, *link)];
    treap_split(b, *link, x, &b[x].ch[0], &b[x].ch[1]);
    *link = x;
}

static void treap_erase(blk *b, int32_t *root, int32_t x) {
    int32_t *link = root;
    while (*link != x) link = &b[*link].ch[!key_less(b, x, *link)];
    *link = treap_merge(b, b[x].ch[0], b[x].ch[1]);
    b[x].ch[0] = b[x].ch[1] = -1;
}

/* get_free_block's lower_bound, taken out of the treap: the smallest (size,
 * addr) with size >= size; -1 when none. The descent keeps the link to it,
 * so that taking it out needs no second descent. */
static int32_t treap_take_lower_bound(blk *b, int32_t *root, uint64_t size) {
    int32_t *best = NULL;
    for (int32_t *link = root; *link >= 0;) {
        bool fits = b[*link].size >= size;
        if (fits) best = link;
        link = &b[*link].ch[!fits];
    }
    if (!best) return -1;
    int32_t x = *best;
    *best = treap_merge(b, b[x].ch[0], b[x].ch[1]);
    b[x].ch[0] = b[x].ch[1] = -1;
    return x;
}

/* ---- the small pool's pairing heaps ----------------------------------------
 * A class's blocks all have one size, so its best fit is its lowest address:
 * a heap, where an insert is one comparison with the root, and only taking
 * the lowest and erasing a merged neighbour walk the heap (amortised
 * O(log n), two-pass pairing). Links: ch[0] first child, ch[1] next sibling,
 * up left sibling or parent. */

#define CHILD(x) b[x].ch[0]
#define SIBLING(x) b[x].ch[1]

/* One heap of roots x and y (either may be -1): the higher address becomes
 * the first child of the lower. x and y have no siblings. */
static inline int32_t heap_meld(blk *b, int32_t x, int32_t y) {
    if (x < 0) return y;
    if (y < 0) return x;
    if (b[y].addr < b[x].addr) {
        int32_t t = x;
        x = y;
        y = t;
    }
    SIBLING(y) = CHILD(x);
    if (CHILD(x) >= 0) b[CHILD(x)].up = y;
    b[y].up = x;
    CHILD(x) = y;
    return x;
}

/* The heap of a list of siblings (from first on): melded in pairs left to
 * right, then the pairs right to left. */
static int32_t heap_two_pass(blk *b, int32_t first) {
    int32_t pairs = -1; /* the melded pairs, the last first, linked by SIBLING */
    while (first >= 0) {
        int32_t second = SIBLING(first);
        int32_t next = second >= 0 ? SIBLING(second) : -1;
        SIBLING(first) = -1;
        b[first].up = -1;
        if (second >= 0) SIBLING(second) = -1, b[second].up = -1;
        int32_t m = heap_meld(b, first, second);
        SIBLING(m) = pairs;
        pairs = m;
        first = next;
    }
    int32_t root = -1;
    while (pairs >= 0) {
        int32_t next = SIBLING(pairs);
        SIBLING(pairs) = -1;
        root = heap_meld(b, pairs, root);
        pairs = next;
    }
    return root;
}

static inline void heap_insert(blk *b, int32_t *root, int32_t x) {
    CHILD(x) = SIBLING(x) = b[x].up = -1;
    *root = heap_meld(b, *root, x);
}

/* Takes x, anywhere in the heap, out of it. */
static void heap_erase(blk *b, int32_t *root, int32_t x) {
    if (x == *root) {
        *root = heap_two_pass(b, CHILD(x));
    } else {
        int32_t up = b[x].up;
        if (CHILD(up) == x) CHILD(up) = SIBLING(x);
        else SIBLING(up) = SIBLING(x);
        if (SIBLING(x) >= 0) b[SIBLING(x)].up = up;
        *root = heap_meld(b, *root, heap_two_pass(b, CHILD(x)));
    }
    CHILD(x) = SIBLING(x) = b[x].up = -1;
}

#undef CHILD
#undef SIBLING

/* ---- the pools' free sets ------------------------------------------------- */

static inline int small_class(uint64_t size) { return (int)(size / K_MIN_BLOCK_SIZE) - 1; }

/* The treap (large pool) or heap (small pool) free block x belongs in. */
static inline int32_t *free_root(est_cache *c, int32_t x) {
    return c->state[x] & SLOT_SMALL ? &c->small_root[small_class(c->b[x].size)] : &c->large_root;
}

/* Kept out of line: inlined into est__cache_alloc and est__cache_release
 * (GCC 14 does), the replay of a resnet50 step ran 14% slower (bench/
 * bench_estimate --reestimate). */
#if defined(__GNUC__)
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE
#endif

OUT_OF_LINE static void free_insert(est_cache *c, int32_t x) {
    if (!(c->state[x] & SLOT_SMALL)) {
        treap_insert(c->b, &c->large_root, x);
    } else {
        int k = small_class(c->b[x].size);
        heap_insert(c->b, &c->small_root[k], x);
        c->small_nonempty[k / 64] |= (uint64_t)1 << (k % 64);
        c->small_words |= (uint64_t)1 << (k / 64);
    }
}

/* Class k's heap has emptied. */
static inline void small_class_emptied(est_cache *c, int k) {
    uint64_t *word = &c->small_nonempty[k / 64];
    *word &= ~((uint64_t)1 << (k % 64));
    if (!*word) c->small_words &= ~((uint64_t)1 << (k / 64));
}

OUT_OF_LINE static void free_erase(est_cache *c, int32_t x) {
    int32_t *root = free_root(c, x);
    if (!(c->state[x] & SLOT_SMALL)) {
        treap_erase(c->b, root, x);
        return;
    }
    heap_erase(c->b, root, x);
    if (*root < 0) small_class_emptied(c, small_class(c->b[x].size));
}

/* get_free_block's lower_bound in the small pool, taken out of the free
 * set: the lowest address (its heap's root) of the first non-empty class at
 * or above size's; -1 when none. */
static int32_t small_take_best(est_cache *c, uint64_t size) {
    int k = small_class(size);
    int w = k / 64;
    uint64_t bits = c->small_nonempty[w] & (~(uint64_t)0 << (k % 64));
    if (!bits) {
        uint64_t words = w + 1 < CLASS_WORDS ? c->small_words & (~(uint64_t)0 << (w + 1)) : 0;
        if (!words) return -1;
        w = __builtin_ctzll(words);
        bits = c->small_nonempty[w];
    }
    int found = w * 64 + __builtin_ctzll(bits);
    int32_t t = c->small_root[found];
    heap_erase(c->b, &c->small_root[found], t);
    if (c->small_root[found] < 0) small_class_emptied(c, found);
    return t;
}

/* ---- slots --------------------------------------------------------------- */

/* Slots from which dead ones are reused lowest first (est_cache.dead): a
 * smaller cache's slots stay in the processor's cache, where the list costs
 * fewer instructions. */
enum { BITMAP_SLOTS = 1 << 16 };

/* Words of 64 bits that hold n bits. */
static size_t bit_words(size_t n) { return (n + 63) / 64; }

/* The dead-slot bitmaps for want slots, with the list's dead slots moved
 * into them. false: out of host memory (the list stays). */
static bool start_dead_bitmaps(est_cache *c, int32_t want) {
    size_t words = bit_words((size_t)want);
    c->dead = calloc(words, sizeof *c->dead);
    c->dead_words = calloc(bit_words(words), sizeof *c->dead_words);
    if (!c->dead || !c->dead_words) {
        free(c->dead);
        free(c->dead_words);
        c->dead = c->dead_words = NULL;
        return false;
    }
    c->dead_from = 0;
    for (int32_t i = c->free_slot; i >= 0; i = c->b[i].next) {
        c->dead[i / 64] |= (uint64_t)1 << (i % 64);
        c->dead_words[i / 4096] |= (uint64_t)1 << (i / 64 % 64);
    }
    c->free_slot = -1;
    return true;
}

/* Grows the dead-slot bitmaps from cap to want slots, zeroed (started the
 * first time). false: out of host memory (they keep what they held). */
static bool grow_dead_bitmaps(est_cache *c, int32_t want) {
    if (!c->dead) return start_dead_bitmaps(c, want);
    size_t words = bit_words((size_t)c->cap), new_words = bit_words((size_t)want);
    size_t groups = bit_words(words), new_groups = bit_words(new_words);
    uint64_t *nd = realloc(c->dead, new_words * sizeof *nd);
    if (!nd) return false;
    c->dead = nd;
    memset(nd + words, 0, (new_words - words) * sizeof *nd);
    uint64_t *ng = realloc(c->dead_words, new_groups * sizeof *ng);
    if (!ng) return false;
    c->dead_words = ng;
    memset(ng + groups, 0, (new_groups - groups) * sizeof *ng);
    return true;
}

/* Grows the slot arrays to `want` slots (more than cap). false: out of host
 * memory (cap stays). */
static bool grow_slots(est_cache *c, int32_t want) {
    blk *nb = realloc(c->b, (size_t)want * sizeof *nb);
    if (!nb) return false;
    c->b = nb;
    uint8_t *ns = realloc(c->state, (size_t)want);
    if (!ns) return false; /* cap stays: the larger arrays are only room */
    c->state = ns;
    if (want >= BITMAP_SLOTS && !grow_dead_bitmaps(c, want)) return false;
    c->cap = want;
    return true;
}

/* Makes sure `n` slots can be taken without allocating. false: out of host
 * memory (nothing changed). */
static bool reserve_slots(est_cache *c, int32_t n) {
    if (c->nfree_slots + (c->cap - c->used) >= n) return true;
    int64_t want = c->cap < 32 ? 64 : (int64_t)c->cap * 2;
    if (want > INT32_MAX - 1) want = INT32_MAX - 1;
    if (want - c->used + c->nfree_slots < n) return false;
    return grow_slots(c, (int32_t)want);
}

bool est__cache_reserve(est_cache *c, int32_t blocks, est_prefault *pf) {
    if (blocks > INT32_MAX - 1) blocks = INT32_MAX - 1;
    if (blocks > c->cap && !grow_slots(c, blocks)) return false;
    if (pf) est__prefault_add(pf, c->b + c->used, (size_t)(c->cap - c->used) * sizeof *c->b);
    return true;
}

/* Takes the lowest dead slot out of the bitmaps (there is one). */
static int32_t take_lowest_dead(est_cache *c) {
    int32_t g = c->dead_from;
    while (!c->dead_words[g]) g++;
    c->dead_from = g;
    int32_t w = g * 64 + __builtin_ctzll(c->dead_words[g]);
    int32_t i = w * 64 + __builtin_ctzll(c->dead[w]);
    c->dead[w] &= c->dead[w] - 1;
    if (!c->dead[w]) c->dead_words[g] &= ~((uint64_t)1 << (w % 64));
    return i;
}

static int32_t take_slot(est_cache *c) {
    int32_t i;
    if (c->nfree_slots > 0) {
        if (c->dead) {
            i = take_lowest_dead(c);
        } else {
            i = c->free_slot;
            c->free_slot = c->b[i].next;
        }
        c->nfree_slots--;
    } else {
        i = c->used++;
        c->b[i].gen = 0;
    }
    c->b[i].ch[0] = c->b[i].ch[1] = c->b[i].up = -1;
    c->b[i].prev = c->b[i].next = -1;
    return i;
}

/* inline, as GCC left it before the bitmap: a small graph's re-estimate
 * merges blocks all through its replay */
static inline void kill_slot(est_cache *c, int32_t i) {
    c->state[i] = SLOT_DEAD;
    c->b[i].gen++;
    c->nfree_slots++;
    if (!c->dead) {
        c->b[i].next = c->free_slot;
        c->free_slot = i;
        return;
    }
    int32_t w = i / 64, g = w / 64;
    c->dead[w] |= (uint64_t)1 << (i % 64);
    c->dead_words[g] |= (uint64_t)1 << (w % 64);
    if (g < c->dead_from) c->dead_from = g;
}

static int64_t make_handle(const est_cache *c, int32_t i) {
    return (int64_t)(((uint64_t)(c->b[i].gen & 0x7fffffffu) << 32) | (uint64_t)(i + 1));
}

/* ---- the allocator --------------------------------------------------------- */

uint64_t est__cache_round_size(uint64_t bytes) {
    if (bytes < K_MIN_BLOCK_SIZE) return K_MIN_BLOCK_SIZE;
    return K_MIN_BLOCK_SIZE * ((bytes + K_MIN_BLOCK_SIZE - 1) / K_MIN_BLOCK_SIZE);
}

static uint64_t allocation_size(uint64_t size) { /* get_allocation_size */
    if (size <= K_SMALL_SIZE) return K_SMALL_BUFFER;
    if (size < K_MIN_LARGE_ALLOC) return K_LARGE_BUFFER;
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) / K_ROUND_LARGE);
}

est_cache *est__cache_new(void) {
    est_cache *c = malloc(sizeof *c);
    if (!c) return NULL;
    memset(c, 0, offsetof(est_cache, small_root)); /* small_root is set below */
    c->large_root = -1;
    c->free_slot = -1;
    memset(c->small_root, 0xff, sizeof c->small_root); /* every class empty: -1 */
    return c;
}

void est__cache_destroy(est_cache *c) {
    if (!c) return;
    free(c->b);
    free(c->state);
    free(c->dead);
    free(c->dead_words);
    free(c);
}

void est__cache_set_limit(est_cache *c, uint64_t bytes) { c->limit = bytes; }

/* alloc_block's fraction check, plus what no device could hold. */
static bool segment_fits(const est_cache *c, uint64_t size) {
    if (size > UINT64_MAX - c->reserved || size > UINT64_MAX - c->next_addr) return false;
    return c->limit == 0 || c->reserved + size <= c->limit;
}

int64_t est__cache_alloc(est_cache *c, uint64_t bytes) {
    if (bytes == 0) return EST__CACHE_NULL_HANDLE;
    if (bytes >= K_ONE_EXA_BYTES) return EST__CACHE_EDEVICE;
    /* At most two new slots: a new segment and the block split off it. */
    if (!reserve_slots(c, 2)) return EST__CACHE_ENOMEM;

    uint64_t size = est__cache_round_size(bytes);
    int small = size <= K_SMALL_SIZE;
    blk *b = c->b;
    int32_t r = small ? small_take_best(c, size) : treap_take_lower_bound(b, &c->large_root, size);
    if (r < 0) {
        uint64_t seg = allocation_size(size);
        if (!segment_fits(c, seg)) {
            /* release_available_cached_blocks is a no-op with max_split_size
             * unlimited; release_cached_blocks, then the retry. */
            est__cache_empty(c);
            if (!segment_fits(c, seg)) return EST__CACHE_EDEVICE;
        }
        r = take_slot(c);
        b[r].addr = c->next_addr;
        b[r].size = seg;
        c->next_addr += seg;
        c->reserved += seg;
        c->segments++;
        if (c->reserved > c->peak_reserved) c->peak_reserved = c->reserved;
    }

    uint64_t remaining = b[r].size - size;
    bool split = small ? remaining >= K_MIN_BLOCK_SIZE : remaining > K_SMALL_SIZE;
    int32_t a = r;
    if (split) {
        a = take_slot(c);
        b[a].addr = b[r].addr;
        b[a].size = size;
        b[a].prev = b[r].prev;
        if (b[a].prev >= 0) b[b[a].prev].next = a;
        b[a].next = r;
        b[r].prev = a;
        b[r].addr += size;
        b[r].size = remaining;
        c->state[r] = SLOT_FREE | pool_flag(small);
        free_insert(c, r);
    }
    c->state[a] = SLOT_ALLOC | pool_flag(small);
    c->allocated += b[a].size;
    if (c->allocated > c->peak_allocated) c->peak_allocated = c->allocated;
    return make_handle(c, a);
}

/* The slot of a live handle; -1 when the handle is not live. */
static int32_t handle_slot(const est_cache *c, int64_t handle) {
    if (handle <= 0) return -1;
    uint64_t lo = (uint64_t)handle & 0xffffffffu;
    if (lo == 0 || lo > (uint64_t)c->used) return -1;
    int32_t x = (int32_t)(lo - 1);
    if (slot_kind(c->state[x]) != SLOT_ALLOC || (c->b[x].gen & 0x7fffffffu) != (uint64_t)handle >> 32)
        return -1;
    return x;
}

uint64_t est__cache_addr(const est_cache *c, int64_t handle) {
    int32_t x = handle_slot(c, handle);
    return x < 0 ? UINT64_MAX : c->b[x].addr;
}

void est__cache_prefetch(const est_cache *c, int64_t handle) {
    uint64_t lo = (uint64_t)handle & 0xffffffffu;
    if (handle <= 0 || lo == 0 || lo > (uint64_t)c->used) return;
    const char *x = (const char *)&c->b[lo - 1];
    __builtin_prefetch(x);
    __builtin_prefetch(x + sizeof(blk) - 1); /* a block may straddle two lines */
}

int est__cache_release(est_cache *c, int64_t handle) {
    if (handle == EST__CACHE_NULL_HANDLE) return 0;
    int32_t x = handle_slot(c, handle);
    if (x < 0) return -1;
    blk *b = c->b;

    uint8_t *state = c->state;
    state[x] = SLOT_FREE | (state[x] & SLOT_SMALL);
    b[x].gen++;
    c->allocated -= b[x].size;
    int32_t p = b[x].prev;
    if (p >= 0 && slot_kind(state[p]) == SLOT_FREE) { /* [p x] */
        free_erase(c, p);
        b[x].addr = b[p].addr;
        b[x].size += b[p].size;
        b[x].prev = b[p].prev;
        if (b[x].prev >= 0) b[b[x].prev].next = x;
        kill_slot(c, p);
    }
    int32_t n = b[x].next;
    if (n >= 0 && slot_kind(state[n]) == SLOT_FREE) { /* [x n] */
        free_erase(c, n);
        b[x].size += b[n].size;
        b[x].next = b[n].next;
        if (b[x].next >= 0) b[b[x].next].prev = x;
        kill_slot(c, n);
    }
    free_insert(c, x);
    return 0;
}

void est__cache_empty(est_cache *c) {
    blk *b = c->b;
    for (int32_t i = 0; i < c->used; i++) {
        if (slot_kind(c->state[i]) != SLOT_FREE || b[i].prev >= 0 || b[i].next >= 0) continue;
        free_erase(c, i);
        c->reserved -= b[i].size;
        c->segments--;
        kill_slot(c, i);
    }
}

void est__cache_reset_peak(est_cache *c) {
    c->peak_reserved = c->reserved;
    c->peak_allocated = c->allocated;
}

uint64_t est__cache_reserved(const est_cache *c) { return c->reserved; }
uint64_t est__cache_peak_reserved(const est_cache *c) { return c->peak_reserved; }
uint64_t est__cache_allocated(const est_cache *c) { return c->allocated; }
uint64_t est__cache_peak_allocated(const est_cache *c) { return c->peak_allocated; }
uint64_t est__cache_segments(const est_cache *c) { return c->segments; }
