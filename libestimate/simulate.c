/*
 * simulate.c: one training step (or one inference pass) as PyTorch eager runs
 * it, replayed as a sequence of allocations and frees. The peak is read off
 * that sequence, not summed.
 *
 * Training step, in the order of the reference protocol (docs/memory-model.md):
 *   zero_grad(set_to_none=True)      parameter gradients are gone
 *   y = model(x)                     forward under autograd: each op's outputs
 *                                    are allocated; what its backward needs
 *                                    (registry `saves`) stays alive; the rest
 *                                    is freed after its last use; the previous
 *                                    iteration's y is freed when y is rebound
 *   loss = y.float().mean()          a scalar
 *   loss.backward()                  nodes in reverse: input gradients are
 *                                    allocated, output gradients and saved
 *                                    tensors released; parameter gradients stay
 *   opt.step()                       foreach update, with its temporaries
 * The state is steady: the peak and the totals come from iteration 2, where
 * the optimizer state already exists. Iterations 1 (no optimizer state until
 * its step, no previous y) and 3 run too, for the caching allocator's replay
 * (caching.c), whose segments persist from creating the model onwards: their
 * largest total is totals.reserved_bytes.
 *
 * Checkpointed segments run again in backward (recompute.c); the books of
 * live bytes, the peak and the allocator's replay are sim_memory.c's; the
 * step's arrays are allocated, sized and freed in sim_arrays.c; what lives
 * how long is planned before the step (lifetimes.c); opt.step() and
 * zero_grad are optimizer.c's.
 */
#include <stddef.h>

#include "parallel.h"
#include "verify_kernels.h"

/* ---- the step ---------------------------------------------------------------- */

/* memest verify's executor keeps a constant initializer on the host when
 * it is small and on the device from setup on otherwise (dynamo's folded
 * RoPE tables). */
static bool verify_uploads_constant(const sim *s, int32_t t) {
    return s->r->kernels == EST_KERNELS_VERIFY && s->g->tensors[t].role == EST_ROLE_CONST &&
           est_tval_elements(&s->r->tv[t]) > EST_VERIFY_HOST_MAX;
}

static void upload_initializer(sim *s, int32_t t) {
    const est_tensor *tt = &s->g->tensors[t];
    if (tt->role == EST_ROLE_PARAM) est__sim_alloc(s, EST_CAT_PARAMS, est__par_param_bytes(s, t), KEY(K_STORAGE, t, 0));
    else if (tt->role == EST_ROLE_BUFFER) est__sim_alloc(s, EST_CAT_BUFFERS, tensor_alloc(s, t), KEY(K_STORAGE, t, 0));
    else if (verify_uploads_constant(s, t)) est__sim_alloc(s, EST_CAT_OTHER, tensor_alloc(s, t), KEY(K_STORAGE, t, 0));
}

/* model.cuda(), the data-parallel wrapper, and x.cuda(): parameters and
 * buffers in the order the model declares them, then the input batch (the
 * initializers some node reads and the graph inputs, each in tensor order). */
static void create_model_and_input(sim *s) {
    const est_weights *w = s->weights;
    for (int32_t j = 0; j < w->n_uploaded; j++) upload_initializer(s, w->uploaded[j]);
    est__par_construct(s);
    for (int32_t j = 0; j < w->n_inputs; j++) {
        int32_t t = w->inputs[j];
        est__sim_alloc(s, EST_CAT_INPUTS, tensor_alloc(s, t), KEY(K_STORAGE, t, 0));
        s->allocated[t] = true;
    }
}

/* The common step: no autocast copies, no checkpointed segments, no
 * sharded parameters, PyTorch's kernels. The passes are compiled twice
 * (PASS: always inlined with a constant `plain`), and the copy for it skips
 * each per-node check of those, constant for the whole step. */
#define PASS static inline __attribute__((always_inline))
static bool plain_step(const sim *s) {
    return !s->cast_mask && !s->seg_of && !s->sharded && s->r->kernels != EST_KERNELS_VERIFY;
}

/* Outputs that memest verify's kernel writes though nothing reads them
 * (est_op_def.verify_writes_unread): the executor drops them when the node
 * returns, so they are a transient of the node. */
static uint64_t unread_outputs(sim *s, int32_t i) {
    const est_node *n = &s->g->nodes[i];
    uint64_t bytes = 0;
    if (s->r->kernels != EST_KERNELS_VERIFY || !n->op->verify_writes_unread) return 0;
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t t = n->outputs[k];
        if (t >= 0 && !is_folded(s, t) && s->base[t] == t && !own_output_needed(s, t))
            bytes = sim_add(s, bytes, tensor_alloc(s, t));
    }
    return bytes;
}

/* Allocates node i's outputs and what it saves beyond them, and observes its
 * workspace. */
PASS void run_forward_node(sim *s, int32_t i, bool plain) {
    const est_node *n = &s->g->nodes[i];
    bool casts = !plain && s->cast_mask && s->cast_mask[i]; /* is_cast of some input */
    /* autocast's copies of the inputs, read while the op runs */
    for (int k = 0; casts && k < n->n_inputs; k++) {
        if (!is_cast(s, i, k)) continue;
        if (cached_cast(s, i, k)) {
            int32_t b = s->base[n->inputs[k]];
            if (s->pcast_live[b]) continue;
            s->pcast_live[b] = true;
        }
        est__sim_alloc(s, EST_CAT_ACTIVATIONS, cast_bytes(s, i, k), cast_key(s, i, k));
    }
    for (int k = 0; k < n->n_outputs; k++) {
        int32_t t = n->outputs[k];
        if (t < 0 || !s->fwd_allocates[t]) continue;
        est__sim_alloc(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, t), KEY(K_STORAGE, t, 0));
        s->allocated[t] = true;
    }
    /* masks and statistics made for backward; a checkpointed op drops them */
    uint64_t dropped = 0;
    for (int32_t e = s->extra_first[i]; e < s->extra_first[i + 1]; e++)
        if (!plain && segment_of(s, i) >= 0) dropped = sim_add(s, dropped, s->extra_alloc[e]);
        else est__sim_alloc(s, EST_CAT_ACTIVATIONS, s->extra_alloc[e], KEY(K_EXTRA, i, e - s->extra_first[i]));
    uint64_t ws = plain ? s->ws_forward[i] : sim_add(s, s->ws_forward[i], unread_outputs(s, i));
    if (s->recording) s->r->layers[i].temp_bytes = ws;
    est__sim_observe_transient(s, EST_PHASE_FORWARD, n->name, ws + dropped);
    /* copies no backward keeps die with the op */
    for (int k = 0; casts && k < n->n_inputs; k++)
        if (is_cast(s, i, k) && !cached_cast(s, i, k) &&
            (!(s->cast_saved[i] & EST_SLOT(k)) || segment_of(s, i) >= 0))
            est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, i, k), cast_key(s, i, k));
}

/* Leaving autocast clears its weight cache: the low copies of parameters that
 * no backward keeps are freed. */
static void amp_exit(sim *s) {
    if (!s->dt) return;
    for (int32_t t = 0; t < s->g->n_tensors; t++)
        if (s->pcast_live[t] && s->pcast_until[t] == INT32_MAX) {
            est__sim_release(s, EST_CAT_ACTIVATIONS, round_alloc(est__dtype_bytes(s->low, local_elements(s, t))),
                    KEY(K_PCAST, t, 0));
            s->pcast_live[t] = false;
        }
}

/* How many nodes ahead the step's passes fetch a node: its struct misses the
 * cache in a large graph, and the hardware's prefetch stops at each page. */
enum { NODE_PREFETCH = 4 };
/* Graphs of fewer nodes keep them in the cache: none is fetched. */
enum { PREFETCH_NODES_FROM = 4096 };
static inline void prefetch_node(const est_graph *g, int32_t i) {
    const char *n = (const char *)&g->nodes[i];
    __builtin_prefetch(n);
    __builtin_prefetch(n + offsetof(est_node, outputs)); /* the fields the passes read end there */
}

/* Fetches the replay's blocks of the activations and extras node i's
 * backward frees: made in the forward, long before, they miss the cache in
 * a graph of PREFETCH_BLOCKS_FROM tensors or more (in a smaller one they
 * stay in it, and fetching cost resnet50's re-estimate 2%). */
enum { PREFETCH_BLOCKS_FROM = 1 << 16 };
static void prefetch_saved_blocks(const sim *s, int32_t i) {
    for (int32_t e = s->extra_first[i]; e < s->extra_first[i + 1]; e++)
        est__sim_prefetch_block(s, KEY(K_EXTRA, i, e - s->extra_first[i]));
    for (int32_t e = s->bwd_first[i]; e < s->bwd_first[i + 1]; e++)
        est__sim_prefetch_block(s, KEY(K_STORAGE, s->bwd_order[e], 0));
}

PASS void forward_nodes(sim *s, bool plain) {
    const est_graph *g = s->g;
    int32_t fetch_until = g->n_nodes >= PREFETCH_NODES_FROM ? s->n_fwd_nodes - NODE_PREFETCH : 0;
    for (int32_t j = 0; j < s->n_fwd_nodes; j++) {
        int32_t i = s->fwd_nodes[j];
        if (j < fetch_until) prefetch_node(g, s->fwd_nodes[j + NODE_PREFETCH]);
        est__sim_moment(s, EST_PHASE_FORWARD, i, NULL);
        if (!plain && s->sharded) est__par_forward_node(s, i, false);
        if (s->fwd_runs[j]) run_forward_node(s, i, plain);
        /* free what no later op reads, no module call still holds and no
         * backward needs */
        for (int32_t e = s->release_first[i]; e < s->release_first[i + 1]; e++) {
            int32_t b = s->release_order[e];
            if (s->allocated[b]) { /* an activation no backward saves (keep_forward_releases) */
                est__sim_release(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, b), KEY(K_STORAGE, b, 0));
                s->allocated[b] = false;
            }
        }
        if (!plain && s->sharded) est__par_forward_node(s, i, true);
    }
}

static void forward(sim *s) {
    if (plain_step(s)) forward_nodes(s, true);
    else forward_nodes(s, false);
    /* the moment of the last node, passed over or not */
    if (s->g->n_nodes > 0) est__sim_moment(s, EST_PHASE_FORWARD, s->g->n_nodes - 1, NULL);
}

/* ---- activation gradients ------------------------------------------------ */

typedef struct grad_block {
    uint64_t key, bytes;
    int32_t holders;
    int32_t next_free;  /* a dropped block: the next one dropped, -1 none */
} grad_block;

static inline bool has_grad(const sim *s, int32_t t) { return s->grad_block[t] >= 0; }

/* The key of a new block of t's gradient. Only the replay and the timeline
 * read keys: without them (!handed_on) every block is 0 and grad_key0 stays
 * false. */
static inline uint64_t grad_key(sim *s, int32_t t) {
    if (!s->handed_on) return 0;
    if (s->grad_key0[t]) return KEY(K_GRAD, t, 1 + s->grad_serial++ % 0xfffe); /* t's first block is still held */
    s->grad_key0[t] = true;
    return KEY(K_GRAD, t, 0);
}

/* A new block of `bytes` for t's gradient (t held none). false: out of host
 * memory (the replay fails). */
static bool grad_new(sim *s, int32_t t, uint64_t bytes) {
    if (s->free_gblock < 0 && s->n_gblocks == s->cap_gblocks) {
        int32_t cap = s->cap_gblocks ? s->cap_gblocks * 2 : 256;
        grad_block *b = realloc(s->gblocks, (size_t)cap * sizeof *b);
        if (!b) {
            s->cache_failed = true;
            return false;
        }
        s->gblocks = b;
        s->cap_gblocks = cap;
    }
    uint64_t key = grad_key(s, t);
    est__sim_alloc(s, EST_CAT_TEMP, bytes, key);
    int32_t b = s->free_gblock; /* a dropped block's entry is reused */
    if (b >= 0) s->free_gblock = s->gblocks[b].next_free;
    else b = s->n_gblocks++;
    s->gblocks[b] = (grad_block){key, bytes, 1, -1};
    s->grad_block[t] = b;
    s->live_gblocks++;
    return true;
}

/* t's gradient is from's, the same tensor. */
static void grad_share(sim *s, int32_t t, int32_t from) {
    int32_t b = s->grad_block[from];
    s->gblocks[b].holders++;
    s->grad_block[t] = b;
}

/* t lets go of its gradient; the block goes with its last holder. */
static inline void grad_drop(sim *s, int32_t t) {
    int32_t b = s->grad_block[t];
    s->grad_block[t] = -1;
    if (b < 0 || --s->gblocks[b].holders > 0) return;
    uint64_t key = s->gblocks[b].key;
    est__sim_release(s, EST_CAT_TEMP, s->gblocks[b].bytes, key);
    if (s->handed_on && (key & 0xffff) == 0) s->grad_key0[(key >> 16) & 0xffffffffu] = false;
    s->gblocks[b].next_free = s->free_gblock;
    s->free_gblock = b;
    s->live_gblocks--;
}

static bool grad_is_shared(const sim *s, int32_t t) { return s->gblocks[s->grad_block[t]].holders > 1; }

/* The gradient of view input t is out's, moved over: the block is renamed
 * for t when out held it alone (a rename only keys show). */
static void grad_move(sim *s, int32_t t, int32_t out) {
    int32_t b = s->grad_block[out];
    grad_block *B = &s->gblocks[b];
    if (s->handed_on && B->holders == 1 && !s->grad_key0[t] && (B->key & 0xffff) == 0) {
        uint64_t key = KEY(K_GRAD, t, 0);
        est__sim_move(s, EST_CAT_TEMP, EST_CAT_TEMP, B->bytes, B->key, key);
        s->grad_key0[(B->key >> 16) & 0xffffffffu] = false;
        s->grad_key0[t] = true;
        B->key = key;
    }
    grad_share(s, t, out);
    grad_drop(s, out);
}

/* A gradient of t arriving when t holds one, summed as autograd's
 * InputBuffer::accumulate does: into the held one in place when t holds it
 * alone, else into the arriving one when the op made it for t alone (it
 * becomes t's), else into a new one. `passed`: the arriving gradient is
 * another tensor's (an Add passing its own on), else the op made it. */
static void grad_accumulate(sim *s, int32_t t, uint64_t bytes, bool passed, uint64_t *transient) {
    if (!grad_is_shared(s, t)) {
        if (!passed) *transient = sim_add(s, *transient, bytes); /* made, added in, freed */
        return;
    }
    s->gblocks[s->grad_block[t]].holders--; /* others still hold it */
    s->grad_block[t] = -1;
    grad_new(s, t, bytes);
}

/* Whether node i hands its incoming gradient itself to input k (Add's
 * operands). PyTorch does (bench/accuracy/probe_residual.py finds nothing
 * allocated at a residual Add's backward), and so does verify's executor,
 * but only the --kernels verify estimate follows it: with it, the PyTorch
 * estimate moves 25 zoo rows, 21 of them away from the measurement, and
 * names a max batch of vit_b_16 that fails (docs/memory-model.md, "Add's
 * gradient"); the extra tensor offsets something not yet found. */
static bool passes_gradient(const sim *s, int32_t i, int k) {
    const est_op_def *op = s->g->nodes[i].op;
    return s->r->kernels == EST_KERNELS_VERIFY && k < 32 && (op->grad_passes_to & EST_SLOT(k));
}

/* The gradient of input k of node i: a new tensor; for a view op, a view
 * of the output's gradient; for an op that passes its gradient on (Add),
 * that gradient itself. Adds what is only summed in to *transient. */
PASS void grad_of_input(sim *s, int32_t i, int k, bool plain, uint64_t *transient) {
    const est_node *n = &s->g->nodes[i];
    int32_t t = n->inputs[k];
    uint64_t bytes = tensor_alloc(s, t);
    if (is_param_storage(s, t)) {
        if (s->param_has_grad[t]) *transient = sim_add(s, *transient, bytes); /* accumulated into the existing .grad */
        else {
            if (!s->grad_views) est__sim_alloc(s, EST_CAT_GRADS, bytes, KEY(K_GRAD, t, 0));
            s->param_has_grad[t] = true;
        }
        return;
    }
    int32_t out = n->outputs[0];
    bool view = (k == 0 && n->op->view != EST_VIEW_NONE) || s->inplace_slot[i] == k;
    bool passing = !plain && passes_gradient(s, i, k);
    bool same_size = k < 32 ? (s->same_size[i] & EST_SLOT(k)) != 0
                            : out >= 0 && s->r->tv[out].elements == s->r->tv[t].elements;
    bool passes = passing && same_size && has_grad(s, out) && tensor_alloc(s, out) == bytes;
    if (view && same_size && has_grad(s, out) && !has_grad(s, t)) {
        grad_move(s, t, out);
        return;
    }
    if (has_grad(s, t)) grad_accumulate(s, t, bytes, passes, transient);
    else if (passes) grad_share(s, t, out);
    else grad_new(s, t, bytes);
}

/* Node i's gradients of its autocast copies (low bytes in all) cast back
 * one by one (ToCopyBackward) once its output gradients are gone: each
 * input's gradient is made while the copies' not yet cast back are alive. */
static void cast_gradients_back(sim *s, int32_t i, uint64_t low) {
    const est_node *n = &s->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
        if (!input_needs_grad(s, i, k) || !is_cast(s, i, k)) continue;
        uint64_t transient = 0;
        grad_of_input(s, i, k, false, &transient);
        est__sim_observe_transient(s, EST_PHASE_BACKWARD, n->name, sim_add(s, transient, low));
        low -= cast_bytes(s, i, k);
    }
}

/* Input k's gradient, which node i's backward computes: the autocast
 * copy's bytes are added to *low, and, unless verify's executor casts it
 * back after the kernel (after), the gradient is made (grad_of_input). */
PASS void input_gradient(sim *s, int32_t i, int k, bool plain, bool after, uint64_t *transient, uint64_t *low) {
    if (!plain && is_cast(s, i, k)) *low = sim_add(s, *low, cast_bytes(s, i, k));
    if (plain || !after || !is_cast(s, i, k)) grad_of_input(s, i, k, plain, transient);
}

static inline bool receives_grad(const sim *s, int32_t i) {
    const est_node *n = &s->g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && has_grad(s, n->outputs[k])) return true;
    return false;
}

PASS void release_saved(sim *s, int32_t i, bool plain) {
    const est_node *n = &s->g->nodes[i];
    int32_t seg = plain ? -1 : segment_of(s, i);
    if (seg < 0 || s->seg_done[seg])
        for (int32_t e = s->extra_first[i]; e < s->extra_first[i + 1]; e++)
            est__sim_release(s, EST_CAT_ACTIVATIONS, s->extra_alloc[e], KEY(K_EXTRA, i, e - s->extra_first[i]));
    bool casts = !plain && s->cast_saved && s->cast_saved[i] && (seg < 0 || s->seg_done[seg]);
    for (int k = 0; casts && k < n->n_inputs; k++) {
        if (!(k < 32 && (s->cast_saved[i] & EST_SLOT(k)))) continue;
        int32_t b = s->base[n->inputs[k]];
        if (!cached_cast(s, i, k)) est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, i, k), cast_key(s, i, k));
        else if (seg >= 0) {
            if (s->rc_pcast_live[b] && s->rc_pcast_until[b] == i) {
                est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, i, k), KEY(K_RCAST, b, 0));
                s->rc_pcast_live[b] = false;
            }
        } else if (s->pcast_live[b] && s->pcast_until[b] == i) {
            est__sim_release(s, EST_CAT_ACTIVATIONS, cast_bytes(s, i, k), cast_key(s, i, k));
            s->pcast_live[b] = false;
        }
    }
    for (int32_t e = s->bwd_first[i]; e < s->bwd_first[i + 1]; e++) {
        int32_t b = s->bwd_order[e];
        if (s->allocated[b] && is_activation_storage(s, b) && !s->kept[b]) {
            est__sim_release(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, b), KEY(K_STORAGE, b, 0));
            s->allocated[b] = false;
        }
    }
    for (int32_t e = !plain && s->segs ? s->rc_first[i] : 0; !plain && s->segs && e < s->rc_first[i + 1]; e++) {
        int32_t b = s->rc_order[e];
        if (s->recomputed[b]) {
            est__sim_release(s, EST_CAT_ACTIVATIONS, tensor_alloc(s, b), KEY(K_RECOMPUTED, b, 0));
            s->recomputed[b] = false;
        }
    }
}

/* y.float() of a half-precision y (under --amp, or with --dtype bfloat16 or
 * float16): a float32 copy while the loss is computed. */
static uint64_t loss_upcast_bytes(sim *s) {
    uint64_t sum = 0;
    for (int32_t k = 0; k < s->g->n_outputs; k++) {
        int32_t y = s->g->outputs[k];
        est_dtype stored = stored_dtype(s, y);
        if (stored != EST_DT_FLOAT && stored != EST_DT_DOUBLE && est__dtype_is_float(stored))
            sum = sim_add(s, sum, round_alloc(est__dtype_bytes(EST_DT_FLOAT, est_tval_elements(&s->r->tv[y]))));
    }
    return sum;
}

/* The nodes in reverse: each one's input gradients and workspace, then
 * its output gradients and what it saved released. */
PASS void backward_nodes(sim *s, bool plain) {
    const est_graph *g = s->g;
    bool fetch_blocks = replaying(s) && s->g->n_tensors >= PREFETCH_BLOCKS_FROM;
    int32_t fetch_from = fetch_blocks || g->n_nodes >= PREFETCH_NODES_FROM ? NODE_PREFETCH : INT32_MAX;
    for (int32_t j = s->n_bwd_nodes - 1; j >= 0; j--) {
        int32_t i = s->bwd_nodes[j];
        if (j >= fetch_from) {
            prefetch_node(g, s->bwd_nodes[j - NODE_PREFETCH]);
            if (fetch_blocks) prefetch_saved_blocks(s, s->bwd_nodes[j - NODE_PREFETCH]);
        }
        const est_node *n = &g->nodes[i];
        est_layer *L = &s->r->layers[i];
        est__sim_moment(s, EST_PHASE_BACKWARD, i, NULL);
        if (!plain && s->sharded) est__par_backward_node(s, i, false);
        if (s->any_grad[i] && receives_grad(s, i)) {
            int32_t seg = plain ? -1 : segment_of(s, i);
            if (seg >= 0 && !s->seg_done[seg] && i <= s->seg_last_saver[seg]) est__sim_recompute_segment(s, seg);
            /* the kernel makes an autocast copy's gradient in the copy's
             * dtype; verify's executor casts it back to the input's after
             * the kernel. The PyTorch estimate keeps the input's gradient
             * beside the kernel's (docs/memory-model.md, "Mixed precision"). */
            bool after = !plain && s->r->kernels == EST_KERNELS_VERIFY;
            uint64_t transient = 0, low = 0;
            /* the inputs that take a gradient, in slot order: those below 32
             * from their mask, the rest asked one by one */
            for (est_slot_mask m = s->grad_inputs[i]; m; m &= m - 1)
                input_gradient(s, i, __builtin_ctz(m), plain, after, &transient, &low);
            for (int k = 32; k < n->n_inputs; k++)
                if (input_needs_grad(s, i, k)) input_gradient(s, i, k, plain, after, &transient, &low);
            uint64_t ws = s->ws_backward[i];
            if (s->recording && ws > L->temp_bytes) L->temp_bytes = ws;
            est__sim_observe_transient(s, EST_PHASE_BACKWARD, n->name, sim_add(s, transient + ws, low));
            for (int k = 0; k < n->n_outputs; k++) {
                int32_t t = n->outputs[k];
                if (t >= 0 && has_grad(s, t)) grad_drop(s, t);
            }
            if (after && low) cast_gradients_back(s, i, low);
        }
        release_saved(s, i, plain);
        if (!plain && s->sharded) est__par_backward_node(s, i, true);
    }
}

static void backward(sim *s) {
    const est_graph *g = s->g;
    s->n_gblocks = s->live_gblocks = 0; /* the last backward dropped every gradient */
    s->free_gblock = -1;
    /* loss.backward(): d loss = 1, then MeanBackward fills dy */
    est__sim_moment(s, EST_PHASE_BACKWARD, -1, "loss");
    est__sim_alloc(s, EST_CAT_TEMP, EST_ALLOC_ROUND, KEY(K_TEMP, 1, 0));
    for (int32_t k = 0; k < g->n_outputs; k++) {
        int32_t y = g->outputs[k];
        if (!s->needs_grad[y] || has_grad(s, y)) continue;
        grad_new(s, y, tensor_alloc(s, y));
    }
    /* under --amp, MeanBackward's float32 gradient of y.float() is cast down */
    est__sim_observe_transient(s, EST_PHASE_BACKWARD, "loss", loss_upcast_bytes(s));
    est__sim_release(s, EST_CAT_TEMP, EST_ALLOC_ROUND, KEY(K_TEMP, 1, 0));
    est__par_backward_begin(s);
    if (plain_step(s)) backward_nodes(s, true);
    else backward_nodes(s, false);
    /* the moment of the first node, passed over or not */
    if (g->n_nodes > 0) est__sim_moment(s, EST_PHASE_BACKWARD, 0, NULL);
    /* gradients that reached no producer (graph inputs) are dropped; the
     * walk ends with the last of them */
    for (int32_t t = 0; s->live_gblocks > 0 && t < g->n_tensors; t++)
        if (has_grad(s, t)) grad_drop(s, t);
    est__par_backward_end(s);
}

/* One micro-batch: y = model(x); loss = y.float().mean(); loss.backward().
 * previous_y: a y of an earlier micro-batch is still bound. Returns the
 * bytes of the previous y and loss freed. */
static uint64_t forward_backward(sim *s, bool previous_y) {
    const est_graph *g = s->g;
    est_totals *tot = &s->r->totals;
    if (s->seg_done) memset(s->seg_done, 0, ((size_t)s->n_segs + 1) * sizeof *s->seg_done);
    est__par_forward_begin(s);
    est__sim_observe(s, EST_PHASE_FORWARD, g->n_nodes ? g->nodes[0].name : "", 0);
    forward(s);
    if (s->recording && s->live[EST_CAT_ACTIVATIONS] > tot->activations_bytes) tot->activations_bytes = s->live[EST_CAT_ACTIVATIONS];
    /* y is rebound: the previous y and loss are freed, the new y lives on
     * past the step (a y that is an input or a weight is no allocation of
     * its own) */
    uint64_t freed = previous_y ? EST_ALLOC_ROUND : 0;
    if (previous_y) est__sim_release(s, EST_CAT_OTHER, EST_ALLOC_ROUND, KEY(K_OTHER, g->n_outputs, 0));
    for (int32_t k = 0; k < g->n_outputs; k++) {
        int32_t b = s->base[g->outputs[k]];
        if (!s->allocated[b] || !is_activation_storage(s, b)) continue;
        if (previous_y) {
            est__sim_release(s, EST_CAT_OTHER, tensor_alloc(s, b), KEY(K_OTHER, k, 0));
            freed = est_add_sat(freed, tensor_alloc(s, b));
        }
        est__sim_move(s, EST_CAT_ACTIVATIONS, EST_CAT_OTHER, tensor_alloc(s, b), KEY(K_STORAGE, b, 0), KEY(K_OTHER, k, 0));
        s->allocated[b] = false;
    }
    est__sim_moment(s, EST_PHASE_FORWARD, -1, "loss");
    est__sim_alloc(s, EST_CAT_OTHER, EST_ALLOC_ROUND, KEY(K_OTHER, g->n_outputs, 0));
    /* loss = y.float().mean() under autocast; then autocast exits */
    est__sim_observe_transient(s, EST_PHASE_FORWARD, "loss", loss_upcast_bytes(s));
    amp_exit(s);
    backward(s);
    return freed;
}

/* One iteration of the protocol: zero_grad, then each micro-batch's forward
 * and backward (with gradient accumulation, the later ones run with the
 * .grad tensors of the earlier ones allocated, and add into them), then the
 * optimizer step. The first iteration only feeds the allocator's replay: it
 * has no optimizer state until its step and no previous y. */
static void training_iteration(sim *s, bool first) {
    est_totals *tot = &s->r->totals;
    est__sim_moment(s, EST_PHASE_FORWARD, -1, "zero_grad"); /* the step begins */
    est__sim_zero_grad(s);
    if (s->recording) {
        tot->params_bytes = s->live[EST_CAT_PARAMS];
        tot->buffers_bytes = s->live[EST_CAT_BUFFERS];
        tot->optimizer_bytes = s->live[EST_CAT_OPTIMIZER];
        tot->activations_bytes = 0;
    }
    for (int64_t micro = 0; micro < s->r->grad_accum; micro++) {
        uint64_t freed = forward_backward(s, !first || micro > 0);
        if (micro == 0) s->y_freed = freed;
    }
    if (s->recording) tot->grads_bytes = s->live[EST_CAT_GRADS];
    est__sim_optimizer_step(s, first);
}

static void recorded_iteration(sim *s) {
    s->recording = true;
    est__tl_start(s);
    training_iteration(s, false);
    est__tl_end(s);
    s->recording = false;
}

/* The protocol's iterations: the first, or the state it leaves where
 * steady_state.c derives it exactly; the recorded second; the third for the
 * replay (segments may still grow). */
static void train(sim *s) {
    struct est_steady *steady = est__steady_begin(s);
    if (steady) {
        recorded_iteration(s);
        if (est__steady_confirm(s, steady)) return;
    }
    training_iteration(s, true);
    recorded_iteration(s);
    if (s->cache) training_iteration(s, false);
}


/* Layer i's FLOPs (added to the totals) and saved bytes. */
static void fill_layer_cost(sim *s, int32_t i) {
    const est_node *n = &s->g->nodes[i];
    est_layer *L = &s->r->layers[i];
    est_totals *tot = &s->r->totals;
    est_flops f = {0, 0};
    if (n->op->flops && !L->shape_only) n->op->flops(&s->ctx[i], &f);
    if (s->tp_node && s->tp_node[i]) { /* --tp: one GPU's share */
        f.fwd /= (uint64_t)s->r->parallel.tp;
        f.bwd /= (uint64_t)s->r->parallel.tp;
    }
    L->flops_forward = f.fwd;
    L->flops_backward = s->train && s->ctx[i].any_grad && !s->unreached[i] ? f.bwd : 0;
    tot->flops_forward = est_add_sat(tot->flops_forward, L->flops_forward); /* FLOPs saturate */
    tot->flops_backward = est_add_sat(tot->flops_backward, L->flops_backward);
    uint64_t saved = 0;
    for (int32_t e = s->extra_first[i]; e < s->extra_first[i + 1]; e++)
        saved = sim_add(s, saved, round_alloc(s->extra_alloc[e]));
    /* the saved slots in order, those of the node's inputs and outputs */
    for (est_slot_mask m = s->saved_inputs[i] & slots_below(n->n_inputs); m; m &= m - 1) {
        int k = __builtin_ctz(m);
        if (n->inputs[k] < 0) continue;
        if (is_cast(s, i, k)) saved = sim_add(s, saved, cast_bytes(s, i, k));
        else if (is_activation_storage(s, s->base[n->inputs[k]])) saved = sim_add(s, saved, tensor_alloc(s, n->inputs[k]));
    }
    for (est_slot_mask m = s->saved_outputs[i] & slots_below(n->n_outputs); m; m &= m - 1) {
        int k = __builtin_ctz(m);
        if (n->outputs[k] >= 0) saved = sim_add(s, saved, tensor_alloc(s, n->outputs[k]));
    }
    L->saved_bytes = saved;
}

static void fill_layer_costs(sim *s) {
    const est_layer *layers = s->r->layers;
    const est_slot_mask *saved_inputs = s->saved_inputs, *saved_outputs = s->saved_outputs;
    const int32_t *extra_first = s->extra_first;
    for (int32_t i = 0; i < s->g->n_nodes; i++) {
        /* a shape-only node that saves nothing keeps build_layers' zeros */
        if (layers[i].shape_only && !saved_inputs[i] && !saved_outputs[i] && extra_first[i] == extra_first[i + 1])
            continue;
        fill_layer_cost(s, i);
    }
}

/* Finds the checkpointed segments and sets up their per-node and per-storage
 * state. */
est_status est__simulate(est_report *r, est_error *err) {
    const est_graph *g = r->graph;
    size_t nt = (size_t)g->n_tensors + 1, nn = (size_t)g->n_nodes + 1;
    sim s = {.r = r, .g = g, .train = r->mode == EST_MODE_TRAIN};
    if (!est__sim_alloc_arrays(&s)) {
        est__sim_free(&s);
        return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    }
    if (s.train && (r->checkpoint.every || r->checkpoint.n_prefixes)) {
        est_status st = est__sim_plan_segments(&s, nt, nn, err);
        if (st != EST_OK) {
            est__sim_free(&s);
            return st;
        }
    }
    r->peak = (est_peak){.phase = EST_PHASE_FORWARD, .layer = ""};
    if (!est__sim_plan_step(&s)) {
        est__sim_free(&s);
        return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    }
    est_status tp_st = est__tp_plan(&s, err);
    if (tp_st != EST_OK) {
        est__sim_free(&s);
        return tp_st;
    }
    est__sim_size(&s);
    fill_layer_costs(&s);
    est_status par_st = est__par_plan(&s, err);
    if (par_st != EST_OK) {
        est__sim_free(&s);
        return par_st;
    }

    est_totals *tot = &r->totals;
    est__prefault_wait(&s.pages);
    if (!r->skip_reserved) { /* the caching allocator's replay */
        s.cache = est__cache_new();
        s.by_tensor = calloc(((size_t)g->n_tensors + 1) * 3, sizeof *s.by_tensor);
        s.by_extra = calloc((size_t)s.extra_first[g->n_nodes] + 1, sizeof *s.by_extra);
        est__prefault_add(&s.pages, s.by_tensor, ((size_t)g->n_tensors + 1) * 3 * sizeof *s.by_tensor);
        est__prefault_start(&s.pages);
    }
    /* compacted after the step's arrays are allocated: freed below them, the
     * planning's arrays leave glibc no heap top to trim and grow again at
     * every estimate */
    if ((!r->skip_reserved && (!s.cache || !s.by_tensor || !s.by_extra)) || !est__sim_compact_for_step(&s)) {
        est__sim_free(&s);
        return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    }
    if (s.cache) {
        /* a step's blocks have been fewer than its tensors: room for them,
         * faulted in meanwhile; not before the planning's arrays are freed,
         * where the process holds the most (only room: the cache grows past
         * it, or as it goes where it is refused) */
        est__prefault_wait(&s.pages);
        (void)est__cache_reserve(s.cache, g->n_tensors + 1, &s.pages);
        est__prefault_start(&s.pages);
    }
    if (s.cache && r->memory_limit) est__cache_set_limit(s.cache, r->memory_limit);
    if (r->timeline && !est__tl_new(&s)) {
        est__sim_free(&s);
        return est__fail(err, EST_ENOMEM, "out of memory simulating the step");
    }
    s.handed_on = s.cache || s.tl;
    est__sim_moment(&s, EST_PHASE_FORWARD, -1, "");
    create_model_and_input(&s);
    if (s.train) {
        train(&s);
    } else {
        s.recording = true;
        est__tl_start(&s);
        tot->params_bytes = s.live[EST_CAT_PARAMS];
        tot->buffers_bytes = s.live[EST_CAT_BUFFERS];
        est__sim_observe(&s, EST_PHASE_FORWARD, g->n_nodes ? g->nodes[0].name : "", 0);
        forward(&s);
        tot->activations_bytes = s.max_activations; /* the largest set alive at once */
        amp_exit(&s);
        est__tl_end(&s);
    }
    if (s.cache_failed) {
        est__sim_free(&s);
        return est__fail(err, EST_ENOMEM, "out of memory replaying the caching allocator");
    }
    est_status st = EST_OK;
    if (s.too_large)
        st = est__fail(err, EST_EOVERFLOW,
                       "%s: at %s, one allocation of %llu bytes: PyTorch's caching allocator refuses 1 EiB or more "
                       "on any GPU; the batch or the dims are too large", g->source,
                       s.too_large_at && s.too_large_at[0] ? s.too_large_at : "the model's creation",
                       (unsigned long long)s.too_large);
    else if (s.overflow)
        st = est__fail(err, EST_EOVERFLOW,
                       "%s: the step's byte counts pass 2^64 - 1 (16 EiB); the model, the batch or the dims are "
                       "too large", g->source);
    tot->reserved_bytes = est__sim_peak_reserved(&s);
    tot->temp_bytes = s.max_transient;
    tot->peak_bytes = r->peak.bytes;
    if (st == EST_OK && s.tl) st = est__tl_finish(&s, err);
    est__sim_free(&s);
    return st;
}
