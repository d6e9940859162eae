/*
 * sim.h: the state of one step's simulation, shared by the lifetime plan
 * (lifetimes.c: what lives how long, planned before the step), the step
 * itself (simulate.c: allocations and frees in order) and its books
 * (sim_memory.c: live bytes by category, the peak, the caching allocator's
 * replay). Internal.
 */
#ifndef MEMEST_SIM_H
#define MEMEST_SIM_H

#include <stdlib.h>
#include <string.h>

#include "caching.h"
#include "report.h"

/* What a block is, for the caching allocator's replay: one key per live
 * block, so that a free finds the block its allocation made. K_OPT blocks
 * (optimizer state) live past every step: nothing may free or move them
 * (the replay keeps no handle for them). */
enum { K_STORAGE = 1, K_RECOMPUTED, K_GRAD, K_OPT, K_EXTRA, K_CAST, K_PCAST, K_RCAST, K_OTHER, K_TEMP, K_PAR };
/* The slots of K_PAR keys (parallel.c): what a data-parallel block is. */
enum { P_UNSHARDED, P_GATHERED, P_GATHERED_BACKWARD, P_REDUCE_INPUT, P_SHARD_GRADS, P_REDUCED, P_BUCKET, P_FIRST_BUCKET,
       P_COALESCED, P_HOST_COPY };
#define KEY(kind, index, slot) (((uint64_t)(kind) << 56) | ((uint64_t)(uint32_t)(index) << 16) | (uint64_t)(slot))

/* The CUDA stream a block is allocated on. PyTorch's caching allocator
 * gives a freed block only to a request of the stream that made it, so each
 * stream's blocks sit in segments of their own. FSDP2 makes its all-gather
 * outputs on its all-gather stream, and its reduce-scatter input and output
 * (the output becomes the sharded gradient, or is added into it) on its
 * reduce-scatter stream (torch/distributed/fsdp/_fully_shard/
 * _fsdp_collectives.py, foreach_all_gather and foreach_reduce); everything
 * else runs on the compute stream. */
enum { STREAM_COMPUTE, STREAM_ALL_GATHER, STREAM_REDUCE_SCATTER, STREAM_COUNT };
static inline int key_stream(uint64_t key) {
    if (key >> 56 != K_PAR) return STREAM_COMPUTE;
    switch (key & 0xffff) {
    case P_GATHERED: case P_GATHERED_BACKWARD: return STREAM_ALL_GATHER;
    case P_REDUCE_INPUT: case P_SHARD_GRADS: case P_REDUCED: return STREAM_REDUCE_SCATTER;
    default: return STREAM_COMPUTE;
    }
}

/* Live blocks by key: open addressing, linear probing, 0 = empty. */
typedef struct handle_map {
    uint64_t *keys;
    int64_t *handles;
    uint64_t cap, count; /* cap: a power of two */
} handle_map;

/* A fact of the sizes that the planning of the step asked (lifetimes.c):
 * the one thing it reads of the tensors' dims and values besides their
 * dtypes, ranks and which are folded. A plan kept for reuse (plan_reuse.c)
 * holds the facts its planning asked, each with its answer. */
typedef enum est_fact_kind {
    FACT_BIAS_FITS,       /* bias_add_in_place: the sum has the product's elements */
    FACT_ONE_DIRECTION,   /* rnn_output_in_torch_layout: Y is [seq, 1, batch, hidden] */
    FACT_RETURNS_INPUT,   /* the op's returns_input rule */
    FACT_UNREACHED_SAVES, /* an unreached node's saves rule: the inputs it saves */
    FACT_EXPANDS,         /* an Expand broadcasts: its output has more elements */
    FACT_RESHAPE_VIEW,    /* reshape_of_transpose: the strides allow a view */
} est_fact_kind;
typedef struct est_size_fact {
    int32_t node;
    uint8_t kind;         /* est_fact_kind */
    int8_t slot;          /* FACT_BIAS_FITS: the product's input; else 0 */
    uint32_t answer;      /* a bool, or FACT_UNREACHED_SAVES's mask */
} est_size_fact;

typedef struct sim {
    est_report *r;
    const est_graph *g;
    bool train;
    uint64_t live[EST_CAT_COUNT];
    uint64_t total;
    uint64_t max_transient;
    uint64_t max_activations; /* the largest set of live activations */
    /* per tensor */
    void *arrays;           /* the allocation most per-tensor and per-node
                               arrays are in (sim_arrays.c) */
    int32_t *base;          /* the tensor whose storage this one uses */
    bool *needs_grad;
    uint64_t *alloc_bytes;  /* what tensor_alloc() says, once the dtypes are known */
    bool *contiguous;       /* while planning (est__sim_compact_for_step frees it) */
    bool *expanded;         /* while planning: a view of an Expand that broadcasts */
    bool *allocated;        /* per storage (indexed by base) */
    int32_t *last_use;      /* per storage: last forward reader, -1 none; while planning */
    int32_t *release_first; /* per node (n + 1): where its storages start in release_order */
    int32_t *release_order; /* storages by last_use: those node i may free after it runs
                               (only activations the step does not keep and no
                               backward saves: keep_forward_releases) */
    int32_t *saved_until;   /* per storage: earliest node that saves it, or INT32_MAX */
    bool *kept;             /* per storage: a graph output, alive after the step */
    /* per tensor: an activation's storage, not folded (is_activation_storage),
     * and a parameter (is_param_storage); read in the step's hot loops: a
     * byte here, where the tensor's and its state's structs are 72 and 120 */
    bool *activation;
    bool *param;
    int32_t *trained;       /* the parameters the optimizer updates, in tensor order */
    int32_t n_trained;
    /* The nodes where the forward (the backward) may do something, in node
     * order: the step passes over the others (est__sim_compact_for_step). */
    int32_t *fwd_nodes, *bwd_nodes;
    int32_t n_fwd_nodes, n_bwd_nodes;
    /* What the forward reads of the layers and the tensors, in arrays of
     * their own (a million nodes' layers and tensor states miss the cache):
     * per entry of fwd_nodes, whether the node runs (is not shape_only); per
     * tensor, whether the forward allocates it when its producer runs (an
     * output that is not folded, not a view, and read, kept or saved). */
    bool *fwd_runs;
    bool *fwd_allocates;
    /* Activation gradients live in blocks that several tensors may share (an
     * Add hands its incoming gradient to both operands): per tensor its
     * block, -1 none (no live gradient); per block its key, bytes and
     * holders. Reset at each backward. */
    int32_t *grad_block;
    struct grad_block *gblocks;
    int32_t n_gblocks, cap_gblocks;
    int32_t free_gblock;    /* the first dropped block, whose entry a new one takes; -1 none */
    int32_t live_gblocks;   /* blocks some tensor holds (0: no tensor has a gradient) */
    bool *grad_key0;        /* per tensor: KEY(K_GRAD, t, 0) names a live block
                               (keys are kept only while handed_on) */
    uint32_t grad_serial;   /* the slot of the next block whose tensor's slot 0 is taken */
    bool *param_has_grad;
    /* per node; ctx and its arrays only while the step is planned
     * (est__sim_compact_for_step frees them: some 78 bytes a node, 56 of
     * them the context, three flag bytes an input) */
    bool *unreached;        /* per node: no gradient reaches it from the loss (mark_unreached) */
    est_cost_ctx *ctx;      /* built once per node */
    uint64_t *ws_forward;   /* per node: its forward's workspace, rounded */
    uint64_t *ws_backward;  /* per node: its backward's workspace, rounded */
    const est_tval **ctx_tv; /* the contexts' in and out arrays, node after node */
    bool *ctx_flags;        /* their flag arrays (est_cost_ctx.in_flags) */
    est_cost_shared ctx_shared; /* what every context shares (they point at it) */
    bool *any_grad;         /* per node: its context's any_grad (backward runs),
                               kept when the contexts are freed */
    est_slot_mask *grad_inputs; /* per node: the inputs (below 32) that take a
                               gradient (input_needs_grad), from its context */
    est_slot_mask *same_size; /* per node: the inputs (below 32) a view or a
                               passed gradient may share output 0's gradient
                               with, as many elements as it (read once, not
                               at every backward: the states miss the cache) */
    /* What each node's backward keeps (its rule's est_saved, in a fifth of
     * the bytes): per node its saved inputs and outputs, and its extras. */
    est_slot_mask *saved_inputs;
    est_slot_mask *saved_outputs;
    int32_t *extra_first;   /* per node (n + 1): where its extras start in extra_alloc */
    uint64_t *extra_alloc;  /* the extras' bytes, node after node: as the rules
                               say while planning, rounded (allocated) from
                               est__sim_compact_for_step on */
    int32_t n_extras, cap_extras;
    /* --amp (docs/memory-model.md, "Mixed precision (--amp)"); all NULL without */
    est_dtype low;          /* the autocast dtype, or EST_DT_UNDEFINED */
    est_dtype *dt;          /* per tensor: the dtype it is stored in */
    est_dtype *cast_to;     /* per node: the dtype its cast inputs are copied to */
    est_slot_mask *cast_mask;  /* per node: inputs autocast copies */
    est_slot_mask *cast_saved; /* per node: the copies its backward keeps */
    int32_t *pcast_until;   /* per parameter: earliest node saving its cached
                               low copy, or INT32_MAX */
    bool *pcast_live;       /* per parameter: its cached low copy exists */
    /* backward release lists, by node: storages whose earliest saver (or the
     * first node of the segment that keeps them as input) is that node */
    int32_t *bwd_first;     /* per node (n + 1) */
    int32_t *bwd_order;
    /* --checkpoint; all NULL without */
    est_segment *segs;
    int32_t n_segs;
    int32_t *seg_of;        /* per node: its segment, or -1 */
    int32_t *seg_last_saver;/* per segment: its last node that saves anything, or -1 */
    bool *seg_done;         /* per segment: recomputed in this backward */
    int32_t *recompute_until; /* per storage: earliest node of its segment that
                                 saves it, or INT32_MAX */
    bool *recomputed;       /* per storage: its recomputed copy is live */
    int32_t *rc_first;      /* per node (n + 1): release lists by recompute_until */
    int32_t *rc_order;
    int32_t *rc_last;       /* per storage: last reader during a recompute, or -1 */
    int8_t *inplace_slot;   /* per node: the input an in-place op writes into
                               (a linear layer's bias add), or -1 */
    int32_t *rc_pcast_until; /* --amp: per parameter, the earliest node of the
                                segment being recomputed that saves its low
                                copy, or INT32_MAX */
    bool *rc_pcast_live;    /* --amp: the recompute's own cached low copy exists */
    /* the caching allocator's replay (totals.reserved_bytes) */
    est_cache *cache;       /* the compute stream's */
    est_cache *side_cache[STREAM_COUNT - 1]; /* the other streams', made at
                               their first block; NULL until then */
    uint64_t peak_reserved; /* with side caches: all streams' together */
    handle_map blocks;      /* live blocks by key, but those below */
    int64_t *by_tensor;     /* per tensor x 3: the live block of its storage,
                               its gradient and its recomputed copy (the keys
                               of nearly every block, looked up directly); 0 none */
    int64_t *by_extra;      /* per saved extra (numbered as extra_alloc): its
                               live block, 0 none */
    bool handed_on;         /* the books hand each allocation and free on (the
                               replay or the timeline is on: cache || tl, set
                               once both are made, before the model is) */
    bool cache_failed;      /* host memory ran out during the replay */
    bool device_oom;        /* the replay hit est_options.memory_limit: PyTorch
                               raises out of memory there; the replay stops */
    bool overflow;          /* a byte count or sum passed 2^64 - 1: the estimate fails */
    uint64_t too_large;     /* the first allocation of 1 EiB or more, 0 none: PyTorch
                               refuses it on any GPU (the estimate fails) */
    const char *too_large_at;
    est_phase at_phase;     /* the moment the step is at, for device_oom */
    const char *at_layer;   /* its label when at_node is -1 (est__sim_at_layer) */
    int32_t at_node;        /* the node running then, or -1 */
    struct est_timeline *tl; /* est_options.timeline (timeline.c); NULL without */
    /* est_options.parallel (parallel.c); NULL and false on one GPU */
    struct est_par *par;
    bool grad_views;        /* DDP's gradient_as_bucket_view: a parameter's
                               .grad is a view of its bucket, no block of its own */
    bool sharded;           /* the FSDP family: parameters are sharded, and
                               each group's gradients are reduce-scattered
                               after its backward */
    /* --tp (tensor_parallel.c); NULL without */
    bool *tp_split;         /* per tensor: each GPU keeps 1/tp of it */
    bool *tp_node;          /* per node: each GPU runs 1/tp of it */
    bool *tp_column_input;  /* per tensor: a column-wise layer's input */
    const est_weights *weights; /* the graph's plan's, or own_weights without a plan */
    est_weights *own_weights;
    bool recording;         /* this pass sets the peak and the totals (the
                               steady-state iteration; the first one only
                               feeds the replay) */
    uint64_t y_freed;       /* the bytes of the previous y and loss that the
                               last iteration's first micro-batch freed */
    /* the facts this estimate's planning asked, in order (NULL when its plan
     * was reused); facts_lost: out of memory logging one (not kept then) */
    est_size_fact *facts;
    int32_t n_facts, cap_facts;
    bool facts_lost;
    est_lifetime_plan *held_plan; /* the kept plan taken, held until the step's
                                     visits are copied from it (plan_reuse.c) */
    est_prefault pages;     /* arrays faulted in on a second thread: the
                               planning's while it runs, then the replay's;
                               waited for before any of them is freed */
} sim;
/* handle_map (sim_memory.c): key -> handle; false when out of memory. */
bool est__map_put(handle_map *m, uint64_t key, int64_t handle);
/* Removes key; returns its handle, or -1 when it is not there. */
int64_t est__map_take(handle_map *m, uint64_t key);

/* The block size of `bytes`; UINT64_MAX (a count too large to be exact)
 * stays UINT64_MAX. */
static inline uint64_t round_alloc(uint64_t bytes) {
    if (bytes == 0) return 0;
    if (bytes > UINT64_MAX - (EST_ALLOC_ROUND - 1)) return UINT64_MAX;
    return (bytes + EST_ALLOC_ROUND - 1) / EST_ALLOC_ROUND * EST_ALLOC_ROUND;
}
static inline bool is_folded(const sim *s, int32_t t) { return s->r->tv[t].value != NULL; }
/* The dtype tensor t is stored in: autocast's (--amp), else the step's
 * dtype for a floating tensor, else its own. */
static inline est_dtype stored_dtype(const sim *s, int32_t t) {
    if (s->dt) return s->dt[t];
    return est__stored_dtype(s->r, s->r->tv[t].dtype);
}
static inline bool is_param_storage(const sim *s, int32_t b) { return s->param[b]; }
/* Elements of tensor t one GPU holds: 1/tp of a tensor --tp splits. */
static inline uint64_t local_elements(const sim *s, int32_t t) {
    uint64_t e = est_tval_elements(&s->r->tv[t]);
    if (!s->tp_split || !s->tp_split[t]) return e;
    uint64_t tp = (uint64_t)s->r->parallel.tp;
    return e / tp + (e % tp != 0);
}
/* Bytes of the autocast copy node i makes of its input k. */
static inline uint64_t cast_bytes(const sim *s, int32_t i, int k) {
    return round_alloc(est__dtype_bytes(s->cast_to[i], local_elements(s, s->g->nodes[i].inputs[k])));
}
/* A low copy of a parameter, which autocast caches until it exits; only of
 * one that requires grad (autocast_mode.cpp, cached_cast): a frozen weight
 * is cast again at every use. */
static inline bool cached_cast(const sim *s, int32_t i, int k) {
    int32_t b = s->base[s->g->nodes[i].inputs[k]];
    return s->cast_to[i] == s->low && is_param_storage(s, b) && (!s->train || s->r->trains[b]);
}
static inline bool is_cast(const sim *s, int32_t i, int k) {
    return s->cast_mask && k < 32 && (s->cast_mask[i] & EST_SLOT(k));
}
/* Whether input k of node i takes a gradient (its cost context's grad flag,
 * which the step reads after the contexts are freed). */
/* Whether input slot k takes a gradient: a differentiable slot (not in
 * nondiff; slots past the mask's 32 are) of a tensor that needs one. */
static inline bool slot_needs_grad(est_slot_mask nondiff, int k, bool tensor_needs_grad) {
    return (k >= 32 || !(nondiff & EST_SLOT(k))) && tensor_needs_grad;
}
static inline bool input_needs_grad(const sim *s, int32_t i, int k) {
    const est_node *n = &s->g->nodes[i];
    int32_t t = n->inputs[k];
    return t >= 0 && slot_needs_grad(n->op->nondiff_inputs, k, s->needs_grad[t]);
}
/* The slots below n (all 32 from n = 32 on). */
static inline est_slot_mask slots_below(int n) { return n >= 32 ? ~(est_slot_mask)0 : ~EST_SLOTS_FROM(n); }
static inline bool is_activation_storage(const sim *s, int32_t b) { return s->activation[b]; }
/* Whether the step needs node output t, a storage of its own (base[t] ==
 * t): a node reads it, the step keeps it or a backward saves it. */
static inline bool own_output_needed(const sim *s, int32_t t) {
    return s->g->tensors[t].first_consumer >= 0 || s->kept[t] || s->saved_until[t] != INT32_MAX;
}
static inline int32_t segment_of(const sim *s, int32_t i) { return s->seg_of ? s->seg_of[i] : -1; }
/* The key of node i's autocast copy of input k: a parameter's cached copy is
 * one block however many ops read it. */
static inline uint64_t cast_key(const sim *s, int32_t i, int k) {
    return cached_cast(s, i, k) ? KEY(K_PCAST, s->base[s->g->nodes[i].inputs[k]], 0) : KEY(K_CAST, i, k);
}
/* Bytes tensor t takes as the step stores and allocates it (its stored dtype,
 * rounded): set for every tensor before the step runs. */
static inline uint64_t tensor_alloc(const sim *s, int32_t t) { return s->alloc_bytes[t]; }
static inline bool replaying(const sim *s) { return s->cache && !s->cache_failed && !s->device_oom; }

/* sim_arrays.c: the step's per-tensor and per-node arrays. */
bool est__sim_alloc_arrays(sim *s);         /* before the planning (with --amp's), and the graph's
                                               weights; false: out of memory */
void est__sim_size(sim *s);                 /* each tensor's allocated bytes, each node's workspaces */
void est__sim_free(sim *s);                 /* every array the step made, once its pages are faulted in */

/* lifetimes.c: the tensor-lifetime table, planned before the step runs. */
bool est__sim_build_contexts(sim *s);       /* cost contexts; needs_grad, activation, param */
/* est__sim_build_contexts where the caller copies what it classifies (the
 * step's needs_grad, activation, param and grad_inputs, and the contexts'
 * flags): the contexts alone, on this estimate's tensor states, with each
 * node's any_grad; false: out of memory. */
bool est__sim_point_contexts(sim *s, const bool *any_grad);
bool est__sim_mark_unreached(sim *s);       /* backwards the loss never reaches; false: out of memory */
void est__sim_assign_storage(sim *s);       /* which tensors share a storage (views, in-place ops) */
void est__sim_assign_amp_dtypes(sim *s);    /* --amp: each tensor's dtype, each op's casts */
bool est__sim_plan_lifetimes(sim *s);       /* strided inputs, last uses, saves, release lists;
                                               false: out of memory */
/* The answer to fact f of this estimate's sizes. */
uint32_t est__sim_fact_answer(const sim *s, const est_size_fact *f);
/* plan_lifetimes' asking of the nodes' saves rules alone, without noting
 * the saves on the storages: saved_inputs, saved_outputs, extra_first and
 * the extras as it sets them (unreached must be set); false: out of memory. */
bool est__sim_ask_saves(sim *s);
/* Once the step is planned: lists the parameters that train (trained),
 * keeps what the step reads of the contexts (any_grad), rounds the extras,
 * lists the step's visits, frees the rest and the other arrays only
 * planning reads (last_use, contiguous); false: out of memory. */
bool est__sim_compact_for_step(sim *s);

/* What est__sim_compact_for_step lists from the planned step alone: the
 * parameters the optimizer updates (those that train of the graph's
 * parameters that some node reads: an unread one is never created on the
 * GPU), in tensor order; the nodes each pass visits; which outputs the
 * forward allocates (fwd_allocates zeroed by the caller). */
typedef struct est_step_visits {
    int32_t *trained, *fwd_nodes, *bwd_nodes;
    bool *fwd_runs, *fwd_allocates;
    int32_t n_trained, n_fwd, n_bwd;
} est_step_visits;
/* Into v's arrays, from each node's any_grad; all (--fsdp): every node. */
void est__sim_list_visits(const sim *s, const bool *any_grad, bool all, est_step_visits *v);

/* plan_reuse.c: the whole planning above, or the plan of an earlier
 * estimate of the graph whose planning asked the same (then held,
 * held_plan); false: out of memory. */
bool est__sim_plan_step(sim *s);
/* The held plan's visits copied into v's arrays, where they apply (held,
 * not --fsdp); false: v is to be listed. */
bool est__sim_visits_as_kept(sim *s, est_step_visits *v);
/* Lets go of the held plan, if any. */
void est__sim_let_go_of_plan(sim *s);

/* a + b, saturating (est_add_sat); a saturated sum, or UINT64_MAX in
 * either (already a count too large to be exact), flags the step's overflow. */
static inline uint64_t sim_add(sim *s, uint64_t a, uint64_t b) {
    uint64_t r = est_add_sat(a, b);
    if (r == UINT64_MAX) s->overflow = true;
    return r;
}

/* sim_memory.c: the books of the step. A block is named by a key (KEY());
 * bytes are already rounded (round_alloc). */
/* Where the step is (node, or -1 with a label such as "loss"), for an
 * out-of-memory and the timeline. */
static inline void est__sim_moment(sim *s, est_phase phase, int32_t node, const char *layer) {
    s->at_phase = phase;
    s->at_node = node;
    s->at_layer = layer;
}
/* The layer the step is at: the node's name, or the moment's label. Looked
 * up only when asked: the step passes a moment per node. */
static inline const char *est__sim_at_layer(const sim *s) {
    return s->at_node >= 0 ? s->g->nodes[s->at_node].name : s->at_layer;
}
/* PyTorch's allocate() refuses a request of 1 EiB or more, on any device. */
static inline void est__sim_check_request(sim *s, uint64_t bytes) {
    if (bytes >= ((uint64_t)1 << 60) && !s->too_large) {
        s->too_large = bytes;
        s->too_large_at = est__sim_at_layer(s);
    }
}
/* An allocation's (a free's) block in the replay and event in the
 * timeline: what the books below hand on when either is on. */
void est__sim_replay_alloc(sim *s, est_category c, uint64_t bytes, uint64_t key);
void est__sim_replay_release(sim *s, est_category c, uint64_t bytes, uint64_t key);
/* Fetches the replay's block of a storage's key into the processor's cache
 * ahead of its free (only when replaying). */
void est__sim_prefetch_block(const sim *s, uint64_t key);
static inline void est__sim_alloc(sim *s, est_category c, uint64_t bytes, uint64_t key) {
    est__sim_check_request(s, bytes);
    s->total = sim_add(s, s->total, bytes);
    if (s->overflow) return; /* the estimate fails; the books stop */
    s->live[c] += bytes; /* no more than total, the sum of live, which did not saturate */
    if (s->handed_on) est__sim_replay_alloc(s, c, bytes, key);
}
/* Blocks no one names (neither the replay nor the timeline is on), `sum`
 * bytes of them in category c, into the books at once; the caller checked
 * each one's request (est__sim_check_request), as est__sim_alloc would. */
static inline void est__sim_alloc_unnamed(sim *s, est_category c, uint64_t sum) {
    s->total = sim_add(s, s->total, sum);
    if (!s->overflow) s->live[c] += sum;
}
static inline void est__sim_release(sim *s, est_category c, uint64_t bytes, uint64_t key) {
    if (s->overflow) return;
    s->live[c] -= bytes;
    s->total -= bytes;
    if (s->handed_on) est__sim_replay_release(s, c, bytes, key);
}
/* The same block under another key and category (the step's output, kept
 * as the next step's "other"). */
void est__sim_move(sim *s, est_category from, est_category to, uint64_t bytes, uint64_t from_key, uint64_t to_key);
/* A peak candidate: what is live plus a transient of `extra` bytes. */
void est__sim_observe(sim *s, est_phase phase, const char *layer, uint64_t extra);
/* A block only the replay sees (its bytes counted by est__sim_observe's
 * extra): its handle, or 0 when the replay is off or has stopped. */
int64_t est__sim_block_alloc(sim *s, uint64_t bytes);
void est__sim_block_release(sim *s, int64_t handle);
/* The running op's moment with a transient of `bytes` (a workspace,
 * gradients summed into existing ones): one block, allocated, observed and
 * freed at once; without the replay, only the request's check and the
 * observation. */
static inline void est__sim_observe_transient(sim *s, est_phase phase, const char *layer, uint64_t bytes) {
    if (!s->cache) {
        est__sim_check_request(s, bytes);
        est__sim_observe(s, phase, layer, bytes);
        return;
    }
    int64_t h = est__sim_block_alloc(s, bytes);
    est__sim_observe(s, phase, layer, bytes);
    est__sim_block_release(s, h);
}
/* The replay's reserved bytes, all streams' together (memory_reserved()),
 * and their peak (max_memory_reserved()). */
uint64_t est__sim_reserved(const sim *s);
uint64_t est__sim_peak_reserved(const sim *s);

/* optimizer.c: opt.step() (the first creates the state) and
 * zero_grad(set_to_none=True). */
void est__sim_optimizer_step(sim *s, bool first);
void est__sim_create_optimizer_state(sim *s); /* what the first step creates */
void est__sim_zero_grad(sim *s);

/* steady_state.c: the state the first training iteration leaves, derived
 * without running it where that is checked to be exact. */
struct est_steady;
/* Sets up the derived state; NULL (nothing changed) where the shortcut
 * does not apply or the host ran out of memory: run the first iteration. */
struct est_steady *est__steady_begin(sim *s);
/* After the recorded iteration: true when the derived state is shown to be
 * the first iteration's; else the state before est__steady_begin is back
 * and the recorded iteration's marks on the report are undone. Frees st. */
bool est__steady_confirm(sim *s, struct est_steady *st);

/* timeline.c: the step's events (est_options.timeline). */
bool est__tl_new(sim *s);                       /* before the model is made; false: out of memory */
void est__tl_start(sim *s);                     /* the recorded step begins */
void est__tl_push(sim *s, est_event_kind kind, est_category c, uint64_t bytes, uint64_t key);
void est__tl_transient(sim *s, uint64_t bytes); /* an observed transient: alloc, then free */
void est__tl_end(sim *s);                       /* the recorded step ends */
/* Moves the events, the live list at the peak and the snapshots into the
 * report; frees the rest. EST_ENOMEM when the host runs out. */
est_status est__tl_finish(sim *s, est_error *err);

/* recompute.c: activation checkpointing. */
est_status est__sim_plan_segments(sim *s, size_t nt, size_t nn, est_error *err); /* the segments; their state */
void est__sim_recompute_segment(sim *s, int32_t seg); /* backward first needs segment seg's saves */

#endif
