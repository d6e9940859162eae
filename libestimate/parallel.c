/*
 * parallel.c: what one GPU holds under data parallelism, as PyTorch's
 * wrappers allocate it (docs/distributed.md has the formulas and sources).
 *
 *   ddp     DistributedDataParallel: the Reducer's buckets (one flat tensor
 *           per bucket, as large as the gradients: one bucket of everything
 *           from construction, rebuilt at the second iteration's forward,
 *           the first kept through that forward and backward when the job
 *           has more than one GPU), the coalesced broadcasts of the module's state
 *           at construction and of its buffers before each forward
 *   zero1   the same, and ZeroRedundancyOptimizer: each GPU keeps the
 *           optimizer state of its partition (the largest parameters first,
 *           each to the GPU with the fewest elements so far); the estimate
 *           is of the GPU with the most
 *   fsdp    FSDP2: each block, then the model (the root), is a group whose
 *           parameters are sharded on dim 0, padded to a multiple of the
 *           shard count. Before a group runs, its shards are all-gathered
 *           into a flat buffer and copied out to one unsharded tensor per
 *           parameter; after its forward (reshard_after_forward) and after
 *           its backward, those are freed. After a group's backward its
 *           gradients are copied into a flat reduce-scatter input, kept
 *           until the next group's, and reduced into a flat shard that is
 *           the sharded .grad. The root is not resharded after forward;
 *           backward gathers the next group ahead (the default prefetch).
 *   hsdp    fsdp over shard groups, the gradient shards all-reduced in place
 */
#include "parallel.h"

#define DDP_DEFAULT_BUCKET (25ull << 20)   /* bucket_cap_mb=25 */
#define DDP_FIRST_BUCKET (1ull << 20)      /* dist._DEFAULT_FIRST_BUCKET_BYTES */
#define BROADCAST_BUCKET (250ull << 20)    /* DDP's broadcast_bucket_size */
#define EST_MAX_WORLD_SIZE (1 << 20)


typedef struct group {
    int32_t first, last;        /* the block's nodes; -1 for the root */
    uint64_t shard_bytes;       /* its parameters' padded shards, summed */
    uint64_t grad_shard_bytes;  /* the same over those that train */
    bool unsharded;
    bool pending;               /* prefetched: its all-gather output awaits the copy-out */
    bool has_grads;             /* its flat gradient shard exists */
} group;

struct est_par {
    int64_t shards;             /* GPUs a parameter is sharded over */
    int64_t replicas;           /* copies of each shard */
    bool reshard_after_forward;
    int32_t n_groups;
    group *groups;              /* [0] the root, then the blocks in order */
    int32_t *group_of;          /* per tensor: its parameter group, or -1 */
    int32_t *member_start;      /* per group (n_groups + 1): where its
                                   parameters start in members */
    int32_t *members;           /* the parameters, group after group */
    int32_t *starts, *ends;     /* per node: the block whose call starts or
                                   ends there, or -1 */
    uint64_t *param_bytes;      /* per tensor: kept on this GPU */
    uint64_t *unsharded_bytes;  /* per tensor: its gathered copy */
    uint64_t *state_bytes;      /* per tensor: one optimizer-state tensor */
    int32_t n_buckets;
    uint64_t *buckets;          /* DDP's, rounded, as rebuilt */
    uint64_t first_bucket;      /* DDP's one bucket of everything, the first iteration's */
    bool rebuilt;               /* the second iteration rebuilt the buckets */
    bool first_held;            /* the first bucket outlives the rebuild until the next zero_grad */
    int32_t iteration;          /* of the protocol, from 1 */
    uint64_t broadcast_states;  /* DDP's construction broadcast, its largest flat buffer */
    uint64_t broadcast_buffers; /* the same of the buffers, before each forward */
    int32_t held_gather;        /* the group whose gathered flat is kept, or -1 */
    int32_t held_reduce;        /* the group whose reduce-scatter input is kept, or -1 */
};

static bool is_fsdp(est_strategy st) {
    return st == EST_STRATEGY_FSDP || st == EST_STRATEGY_FSDP_GRAD_OP || st == EST_STRATEGY_HSDP;
}
static bool is_ddp(est_strategy st) { return st == EST_STRATEGY_DDP || st == EST_STRATEGY_ZERO1; }

/* ---- options ---------------------------------------------------------------- */

est_status est_check_parallel(const est_options *opt, est_error *err) {
    const est_parallel *p = &opt->parallel;
    const char *name = est_strategy_name(p->strategy);
    if ((unsigned)p->strategy >= EST_STRATEGY_COUNT)
        return est__fail(err, EST_EINVAL, "est_estimate: invalid parallel.strategy %d", (int)p->strategy);
    if (p->world_size < 0 || p->world_size > EST_MAX_WORLD_SIZE)
        return est__fail(err, EST_EINVAL, "world size %lld: must be between 1 and %d", (long long)p->world_size,
                         EST_MAX_WORLD_SIZE);
    if (p->tp < 0 || p->tp > EST_MAX_WORLD_SIZE)
        return est__fail(err, EST_EINVAL, "tensor parallelism %lld: must be between 1 and %d", (long long)p->tp,
                         EST_MAX_WORLD_SIZE);
    int64_t tp = p->tp > 1 ? p->tp : 1, world = p->world_size ? p->world_size : tp;
    if (world % tp)
        return est__fail(err, EST_EINVAL, "tensor parallelism %lld does not divide the world size %lld", (long long)tp,
                         (long long)world);
    int64_t dp = world / tp; /* the data-parallel GPUs */
    if (p->sequence_parallel && tp == 1)
        return est__fail(err, EST_EINVAL, "sequence parallelism needs tensor parallelism (tp of 2 or more)");
    if (tp > 1 && opt->optimizer == EST_OPT_ADAFACTOR && opt->mode == EST_MODE_TRAIN)
        return est__fail(err, EST_EINVAL, "tensor parallelism: Adafactor's factored state of split matrices is not "
                         "modelled; use adam, adamw, sgd or momentum");
    if (p->strategy == EST_STRATEGY_NONE) {
        if (dp > 1)
            return est__fail(err, EST_EINVAL, "world size %lld%s needs a strategy: ddp, zero1, fsdp, fsdp-grad-op or "
                             "hsdp", (long long)world, tp > 1 ? " over tensor parallelism" : "");
        if (p->shard_group || p->bucket_bytes || p->grad_as_bucket_view || p->first_bucket || p->offload)
            return est__fail(err, EST_EINVAL, "shard group, buckets and offload need a strategy");
        return EST_OK;
    }
    if (opt->mode != EST_MODE_TRAIN)
        return est__fail(err, EST_EINVAL, "strategy %s: data parallelism is for training; an inference pass on each "
                         "GPU is the one-GPU estimate", name);
    if (p->strategy == EST_STRATEGY_HSDP) {
        if (p->shard_group < 1 || p->shard_group > dp || dp % p->shard_group)
            return est__fail(err, EST_EINVAL, "strategy hsdp: the shard group (%lld GPUs) must divide the world size "
                             "(%lld)%s", (long long)p->shard_group, (long long)dp,
                             tp > 1 ? " over tensor parallelism" : "");
    } else if (p->shard_group) {
        return est__fail(err, EST_EINVAL, "strategy %s: a shard group is hsdp's", name);
    }
    if (p->by_rank && (p->rank < 0 || p->rank >= dp))
        return est__fail(err, EST_EINVAL, "rank %lld: the data-parallel GPUs are ranks 0 to %lld", (long long)p->rank,
                         (long long)dp - 1);
    if (p->first_bucket < EST_FIRST_BUCKET_AUTO || p->first_bucket > EST_FIRST_BUCKET_RELEASED)
        return est__fail(err, EST_EINVAL, "DDP's first bucket: %d is neither auto, held nor released",
                         (int)p->first_bucket);
    if (!is_ddp(p->strategy) && (p->bucket_bytes || p->grad_as_bucket_view || p->first_bucket))
        return est__fail(err, EST_EINVAL, "strategy %s: buckets are DDP's (ddp, zero1)", name);
    if (!is_fsdp(p->strategy) && p->offload)
        return est__fail(err, EST_EINVAL, "strategy %s: CPU offload is FSDP's CPUOffloadPolicy (fsdp, fsdp-grad-op, "
                         "hsdp); under DDP the optimizer state stays on the GPU", name);
    if (is_fsdp(p->strategy) && opt->optimizer == EST_OPT_ADAFACTOR)
        return est__fail(err, EST_EINVAL, "strategy %s: Adafactor's factored state of sharded parameters is not "
                         "modelled; use adam, adamw, sgd or momentum", name);
    return EST_OK;
}

/* ---- the plan --------------------------------------------------------------- */

static bool is_param(const sim *s, int32_t t) { return is_param_storage(s, t) && s->g->tensors[t].first_consumer >= 0; }

/* Elements of parameter t's shard, padded (FSDP2 chunks dim 0 into `n`
 * equal parts), and of the first GPU's unpadded part. */
static void shard_elements(const sim *s, int32_t t, int64_t n, uint64_t *padded, uint64_t *local) {
    const est_tval *v = &s->r->tv[t];
    uint64_t elements = local_elements(s, t); /* --tp's part, sharded on dim 0 */
    uint64_t rows = v->rank >= 1 && v->dims[0] > 0 ? (uint64_t)v->dims[0] : 1;
    if (rows > elements) rows = elements ? elements : 1;
    uint64_t rest = elements / rows;
    uint64_t shard_rows = (rows + (uint64_t)n - 1) / (uint64_t)n;
    *padded = est_mul_sat(shard_rows, rest);
    *local = est_mul_sat(shard_rows < rows ? shard_rows : rows, rest);
}

/* FSDP's groups: the blocks (checkpoint.c's block calls) and the root. */
static est_status plan_groups(sim *s, struct est_par *p, est_error *err) {
    const est_graph *g = s->g;
    est_segment *blocks = NULL;
    int32_t n_blocks = 0;
    est_error ignored;
    est_checkpoint every = {.every = 1};
    est_status st = est__plan_checkpoint(g, &every, &blocks, &n_blocks, &ignored);
    if (st == EST_ENOMEM) return est__fail(err, EST_ENOMEM, "out of memory planning FSDP's groups");
    /* no blocks (EST_EINVAL): the model is one group, the root */
    p->groups = calloc((size_t)n_blocks + 1, sizeof *p->groups);
    if (!p->groups) {
        free(blocks);
        return est__fail(err, EST_ENOMEM, "out of memory planning FSDP's groups");
    }
    p->n_groups = n_blocks + 1;
    p->groups[0] = (group){.first = -1, .last = -1};
    for (int32_t b = 0; b < n_blocks; b++) {
        p->groups[b + 1] = (group){.first = blocks[b].first, .last = blocks[b].last};
        p->starts[blocks[b].first] = b + 1;
        p->ends[blocks[b].last] = b + 1;
    }
    free(blocks);
    return EST_OK;
}

/* The group of the node that first reads parameter t. */
static int32_t group_of_node(const struct est_par *p, int32_t node) {
    for (int32_t k = 1; k < p->n_groups; k++)
        if (node >= p->groups[k].first && node <= p->groups[k].last) return k;
    return 0;
}

/* Lists each group's parameters (counting sort by group). */
static bool list_members(sim *s, struct est_par *p) {
    p->member_start = calloc((size_t)p->n_groups + 2, sizeof *p->member_start);
    p->members = malloc(((size_t)s->g->n_tensors + 1) * sizeof *p->members);
    int32_t *fill = calloc((size_t)p->n_groups + 1, sizeof *fill);
    bool ok = p->member_start && p->members && fill;
    for (int32_t t = 0; ok && t < s->g->n_tensors; t++)
        if (p->group_of[t] >= 0) p->member_start[p->group_of[t] + 1]++;
    for (int32_t k = 0; ok && k < p->n_groups; k++) p->member_start[k + 1] += p->member_start[k];
    for (int32_t t = 0; ok && t < s->g->n_tensors; t++)
        if (p->group_of[t] >= 0) p->members[p->member_start[p->group_of[t]] + fill[p->group_of[t]]++] = t;
    free(fill);
    return ok;
}

static bool plan_fsdp(sim *s, struct est_par *p) {
    for (int32_t t = 0; t < s->g->n_tensors; t++) {
        if (!is_param(s, t)) continue;
        est_dtype dt = stored_dtype(s, t);
        uint64_t padded, local;
        shard_elements(s, t, p->shards, &padded, &local);
        int32_t k = group_of_node(p, s->g->tensors[t].first_consumer);
        p->group_of[t] = k;
        bool offload = s->r->parallel.offload != 0;
        p->param_bytes[t] = offload ? 0 : round_alloc(est__dtype_bytes(dt, padded));
        p->unsharded_bytes[t] = round_alloc(est__dtype_bytes(dt, est_mul_sat(padded, (uint64_t)p->shards)));
        p->state_bytes[t] = offload ? 0 : round_alloc(est__dtype_bytes(dt, local));
        p->groups[k].shard_bytes = sim_add(s, p->groups[k].shard_bytes, est__dtype_bytes(dt, padded));
        if (s->r->trains[t])
            p->groups[k].grad_shard_bytes = sim_add(s, p->groups[k].grad_shard_bytes, est__dtype_bytes(dt, padded));
    }
    return list_members(s, p);
}

/* A parameter to place: its elements, and its index for a stable order. */
typedef struct sized {
    uint64_t elements;
    int32_t t;
} sized;

/* Largest first; equal sizes keep the file's order (Python's sorted). */
static int largest_first(const void *a, const void *b) {
    const sized *x = a, *y = b;
    if (x->elements != y->elements) return x->elements < y->elements ? 1 : -1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* A min-heap of the GPUs by (load, rank): the least loaded, the lowest rank
 * on a tie, at its top. */
static bool lighter(const uint64_t *load, int64_t a, int64_t b) { return load[a] < load[b] || (load[a] == load[b] && a < b); }

static void sift_down(int64_t *heap, int64_t n, const uint64_t *load, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && lighter(load, heap[l], heap[m])) m = l;
        if (r < n && lighter(load, heap[r], heap[m])) m = r;
        if (m == i) return;
        int64_t tmp = heap[i];
        heap[i] = heap[m];
        heap[m] = tmp;
        i = m;
    }
}

/* ZeroRedundancyOptimizer._partition_parameters: largest first, each to the
 * GPU with the fewest elements so far (the lowest rank on a tie). The
 * estimate keeps the state of the rank asked for, else of the GPU that ends
 * with the most, and names it in the report. */
static bool plan_zero1(sim *s, struct est_par *p, int64_t world) {
    const est_graph *g = s->g;
    int32_t n = 0;
    sized *order = malloc(((size_t)g->n_tensors + 1) * sizeof *order);
    uint64_t *load = calloc((size_t)world, sizeof *load);
    int64_t *heap = malloc((size_t)world * sizeof *heap);
    int32_t *owner = malloc(((size_t)g->n_tensors + 1) * sizeof *owner);
    bool ok = order && load && heap && owner;
    for (int32_t t = 0; ok && t < g->n_tensors; t++)
        if (is_param(s, t) && s->r->trains[t]) order[n++] = (sized){local_elements(s, t), t};
    if (ok) qsort(order, (size_t)n, sizeof *order, largest_first);
    for (int64_t r = 0; ok && r < world; r++) heap[r] = r; /* all at 0: already a heap */
    for (int32_t i = 0; ok && i < n; i++) {
        int64_t least = heap[0];
        owner[order[i].t] = (int32_t)least;
        load[least] = est_add_sat(load[least], order[i].elements);
        sift_down(heap, world, load, 0);
    }
    est_parallel *par = &s->r->parallel;
    int64_t mine = 0;
    for (int64_t r = 1; ok && r < world; r++)
        if (load[r] > load[mine]) mine = r;
    if (par->by_rank) mine = par->rank;
    else par->rank = mine;
    for (int32_t i = 0; ok && i < n; i++)
        if (owner[order[i].t] != mine) p->state_bytes[order[i].t] = 0;
    free(order);
    free(load);
    free(heap);
    free(owner);
    return ok;
}

/* The Reducer's buckets as the steady state has them, rebuilt after the
 * first iteration (DDP starts with one bucket of everything): parameters
 * that train, in reverse order, a bucket closing once it holds its cap or
 * more (compute_bucket_assignment_by_size); the first bucket's cap is 1 MiB
 * unless bucket_cap_mb is given. */
static bool plan_buckets(sim *s, struct est_par *p) {
    const est_graph *g = s->g;
    uint64_t later = s->r->parallel.bucket_bytes ? s->r->parallel.bucket_bytes : DDP_DEFAULT_BUCKET;
    uint64_t cap = s->r->parallel.bucket_bytes ? later : DDP_FIRST_BUCKET;
    p->buckets = calloc((size_t)g->n_tensors + 1, sizeof *p->buckets);
    if (!p->buckets) return false;
    uint64_t open = 0, all = 0;
    for (int32_t t = g->n_tensors - 1; t >= 0; t--) {
        if (!is_param(s, t) || !s->r->trains[t]) continue;
        uint64_t bytes = est__dtype_bytes(stored_dtype(s, t), local_elements(s, t));
        open = sim_add(s, open, bytes);
        all = sim_add(s, all, bytes);
        if (open >= cap) {
            p->buckets[p->n_buckets++] = round_alloc(open);
            open = 0;
            cap = later;
        }
    }
    if (open) p->buckets[p->n_buckets++] = round_alloc(open);
    p->first_bucket = all ? round_alloc(all) : 0;
    return true;
}

/* Whether DDP's first bucket outlives the rebuild: as asked, else where
 * some GPU of the job likely holds it. */
static bool first_bucket_held(const est_parallel *o, int64_t dp) {
    if (o->first_bucket == EST_FIRST_BUCKET_AUTO) return dp > 1;
    return o->first_bucket == EST_FIRST_BUCKET_HELD;
}

/* Per-step communication (est_comm), from the plan. */
static void count_comm(sim *s, const struct est_par *p) {
    const est_parallel *o = &s->r->parallel;
    est_comm *c = &s->r->comm;
    uint64_t m = (uint64_t)s->r->grad_accum, trained = 0;
    for (int32_t t = 0; t < s->g->n_tensors; t++)
        if (is_param(s, t) && s->r->trains[t])
            trained = sim_add(s, trained, est__dtype_bytes(stored_dtype(s, t), local_elements(s, t)));
    if (is_ddp(o->strategy)) {
        int64_t dp = o->world_size / o->tp;
        c->buckets = (uint64_t)p->n_buckets;
        c->first_bucket_bytes = p->first_bucket;
        if (first_bucket_held(o, dp)) c->first_bucket_held_bytes = p->first_bucket;
        if (dp > 1) c->all_reduce_bytes = est_add_sat(c->all_reduce_bytes, est_mul_sat(trained, m));
        if (dp > 1 && o->strategy == EST_STRATEGY_ZERO1) c->broadcast_bytes = est_add_sat(c->broadcast_bytes, trained);
        return;
    }
    c->groups = (uint64_t)p->n_groups;
    uint64_t gathered = 0, reduced = 0, shards = 0;
    for (int32_t k = 0; k < p->n_groups; k++) {
        uint64_t full = est_mul_sat(p->groups[k].shard_bytes, (uint64_t)p->shards);
        gathered = sim_add(s, gathered, full); /* forward */
        if (p->reshard_after_forward) gathered = sim_add(s, gathered, full); /* backward, again */
        reduced = sim_add(s, reduced, est_mul_sat(p->groups[k].grad_shard_bytes, (uint64_t)p->shards));
        shards = sim_add(s, shards, p->groups[k].grad_shard_bytes);
    }
    if (p->shards > 1) { /* added to --tp's */
        c->all_gather_bytes = est_add_sat(c->all_gather_bytes, est_mul_sat(gathered, m));
        c->reduce_scatter_bytes = est_add_sat(c->reduce_scatter_bytes, est_mul_sat(reduced, m));
    }
    if (p->replicas > 1) c->all_reduce_bytes = est_add_sat(c->all_reduce_bytes, est_mul_sat(shards, m));
}

/* DDP's _broadcast_coalesced: tensors flattened into buckets that close at
 * 250 MiB or more; the largest bucket is the transient. */
static uint64_t coalesced_bytes(const sim *s, bool params, bool buffers) {
    uint64_t largest = 0, open = 0;
    for (int32_t t = 0; t < s->g->n_tensors; t++) {
        const est_tensor *tt = &s->g->tensors[t];
        if (tt->kind != EST_T_INITIALIZER || tt->first_consumer < 0) continue;
        if (!((params && tt->role == EST_ROLE_PARAM) || (buffers && tt->role == EST_ROLE_BUFFER))) continue;
        open = est_add_sat(open, est__dtype_bytes(stored_dtype(s, t), local_elements(s, t)));
        if (open >= BROADCAST_BUCKET) {
            if (open > largest) largest = open;
            open = 0;
        }
    }
    if (open > largest) largest = open;
    return round_alloc(largest);
}

est_status est__par_plan(sim *s, est_error *err) {
    const est_parallel *o = &s->r->parallel;
    if (o->strategy == EST_STRATEGY_NONE) return EST_OK;
    const est_graph *g = s->g;
    int64_t dp = o->world_size / o->tp; /* data parallelism runs over these */
    size_t nt = (size_t)g->n_tensors + 1, nn = (size_t)g->n_nodes + 1;
    struct est_par *p = calloc(1, sizeof *p);
    if (!p) return est__fail(err, EST_ENOMEM, "out of memory planning the data parallelism");
    s->par = p;
    p->group_of = malloc(nt * sizeof *p->group_of);
    p->starts = malloc(nn * sizeof *p->starts);
    p->ends = malloc(nn * sizeof *p->ends);
    p->param_bytes = calloc(nt, sizeof *p->param_bytes);
    p->unsharded_bytes = calloc(nt, sizeof *p->unsharded_bytes);
    p->state_bytes = calloc(nt, sizeof *p->state_bytes);
    if (!p->group_of || !p->starts || !p->ends || !p->param_bytes || !p->unsharded_bytes || !p->state_bytes)
        return est__fail(err, EST_ENOMEM, "out of memory planning the data parallelism");
    for (size_t t = 0; t < nt; t++) p->group_of[t] = -1;
    for (size_t i = 0; i < nn; i++) p->starts[i] = p->ends[i] = -1;
    for (int32_t t = 0; t < g->n_tensors; t++) p->param_bytes[t] = p->state_bytes[t] = tensor_alloc(s, t);
    p->held_gather = p->held_reduce = -1;
    p->shards = o->strategy == EST_STRATEGY_HSDP ? o->shard_group : dp;
    p->replicas = dp / p->shards;
    p->reshard_after_forward = o->strategy != EST_STRATEGY_FSDP_GRAD_OP;
    s->sharded = is_fsdp(o->strategy);
    s->grad_views = is_ddp(o->strategy) && o->grad_as_bucket_view;
    if (s->sharded) {
        est_status st = plan_groups(s, p, err);
        if (st != EST_OK) return st;
        if (!plan_fsdp(s, p)) return est__fail(err, EST_ENOMEM, "out of memory planning the data parallelism");
    } else if (!plan_buckets(s, p) || (o->strategy == EST_STRATEGY_ZERO1 && !plan_zero1(s, p, dp))) {
        return est__fail(err, EST_ENOMEM, "out of memory planning the data parallelism");
    } else {
        p->broadcast_states = coalesced_bytes(s, true, true);
        p->broadcast_buffers = coalesced_bytes(s, false, true);
    }
    count_comm(s, p);
    return EST_OK;
}

void est__par_free(sim *s) {
    struct est_par *p = s->par;
    if (!p) return;
    free(p->groups);
    free(p->group_of);
    free(p->member_start);
    free(p->members);
    free(p->starts);
    free(p->ends);
    free(p->param_bytes);
    free(p->unsharded_bytes);
    free(p->state_bytes);
    free(p->buckets);
    free(p);
    s->par = NULL;
}

uint64_t est__par_param_bytes(const sim *s, int32_t t) { return s->par ? s->par->param_bytes[t] : tensor_alloc(s, t); }
uint64_t est__par_state_bytes(const sim *s, int32_t t) { return s->par ? s->par->state_bytes[t] : tensor_alloc(s, t); }

/* ---- the step --------------------------------------------------------------- */

/* A block allocated, observed as a peak candidate, and freed. */
static void transient(sim *s, uint64_t bytes, uint64_t key, est_phase phase, const char *layer) {
    if (!bytes) return;
    est__sim_alloc(s, EST_CAT_COMM, bytes, key);
    est__sim_observe(s, phase, layer, 0);
    est__sim_release(s, EST_CAT_COMM, bytes, key);
}

/* fully_shard moves a group's parameters to the GPU whole, then replaces
 * each with its padded shard: one group whole at a time. */
static void construct_fsdp(sim *s, struct est_par *p) {
    for (int32_t j = 1; j <= p->n_groups; j++) { /* the blocks in order, the root last */
        int32_t k = j % p->n_groups;
        uint64_t whole = 0;
        for (int32_t m = p->member_start[k]; m < p->member_start[k + 1]; m++)
            whole = sim_add(s, whole, tensor_alloc(s, p->members[m]));
        transient(s, whole, KEY(K_PAR, k, P_COALESCED), EST_PHASE_FORWARD, "");
    }
}

/* Under --grad-as-bucket-view the .grad tensors are views of the buckets:
 * the buckets are the gradients. */
static est_category bucket_category(const sim *s) { return s->grad_views ? EST_CAT_GRADS : EST_CAT_COMM; }

void est__par_construct(sim *s) {
    struct est_par *p = s->par;
    if (!p) return;
    if (s->sharded) {
        construct_fsdp(s, p);
        return;
    }
    /* _sync_module_states' broadcast comes first, then the Reducer */
    transient(s, p->broadcast_states, KEY(K_PAR, 0, P_COALESCED), EST_PHASE_FORWARD, "");
    est__sim_alloc(s, bucket_category(s), p->first_bucket, KEY(K_PAR, 0, P_FIRST_BUCKET));
}

/* The second iteration's forward rebuilds DDP's buckets in the order the
 * first iteration's gradients came. The first bucket goes when its last
 * all-reduce's work object does: the process group's watchdog thread reaps
 * it after it completes. Measured, it outlived the rebuild on at least one
 * GPU in most jobs of 2 and 4 GPUs and in a few of one, and was gone by
 * the end of that iteration's backward in most (docs/distributed.md,
 * "DDP's first bucket"): where it is counted as held (first_bucket_held),
 * it is kept, in comm, until the second iteration's backward ends. */
static void rebuild_buckets(sim *s, struct est_par *p) {
    est_category c = bucket_category(s);
    for (int32_t b = 0; b < p->n_buckets; b++) est__sim_alloc(s, c, p->buckets[b], KEY(K_PAR, b, P_BUCKET));
    if (s->r->comm.first_bucket_held_bytes) {
        if (c != EST_CAT_COMM) est__sim_move(s, c, EST_CAT_COMM, p->first_bucket, KEY(K_PAR, 0, P_FIRST_BUCKET),
                                             KEY(K_PAR, 0, P_FIRST_BUCKET));
        p->first_held = true;
    } else {
        est__sim_release(s, c, p->first_bucket, KEY(K_PAR, 0, P_FIRST_BUCKET));
    }
}

/* Group k's flat all-gather output: every GPU's shards (none with one GPU:
 * the shards are the parameters). */
static uint64_t gathered_bytes(const struct est_par *p, int32_t k) {
    return p->shards > 1 ? round_alloc(est_mul_sat(p->groups[k].shard_bytes, (uint64_t)p->shards)) : 0;
}

/* Group k's flat reduce-scatter input: every GPU's gradient shards. */
static uint64_t reduce_input_bytes(const struct est_par *p, int32_t k) {
    return round_alloc(est_mul_sat(p->groups[k].grad_shard_bytes, (uint64_t)p->shards));
}

/* Frees the all-gather output forward keeps, if any. */
static void release_held_gather(sim *s) {
    struct est_par *p = s->par;
    int32_t h = p->held_gather;
    if (h < 0) return;
    est__sim_release(s, EST_CAT_COMM, gathered_bytes(p, h), KEY(K_PAR, h, P_GATHERED));
    p->held_gather = -1;
}

/* How a group is gathered: in forward (its flat output kept for the next
 * group's copy-out), in its pre-backward (copied out, the flat output freed
 * at once), or prefetched by the group after it in backward (the
 * all-gather alone; its copy-out waits for the group's own pre-backward). */
typedef enum { GATHER_FORWARD, GATHER_BACKWARD, GATHER_PREFETCH } gather_mode;

/* All-gathers group k: its flat output, then one unsharded tensor per
 * parameter (wait_for_unshard's copy-out). In forward the flat output is
 * kept until the next group's copy-out, the last group's until the root's
 * forward ends; otherwise it goes once copied out. */
static void unshard(sim *s, int32_t k, gather_mode mode, est_phase phase, const char *layer) {
    struct est_par *p = s->par;
    group *G = &p->groups[k];
    if (G->unsharded) return;
    uint64_t flat = gathered_bytes(p, k);
    /* forward's output is kept, backward's freed at once: two keys, since
     * forward's may still be held when backward gathers the group again */
    uint64_t flat_key = KEY(K_PAR, k, mode == GATHER_FORWARD ? P_GATHERED : P_GATHERED_BACKWARD);
    if (!G->pending) {
        uint64_t host = s->r->parallel.offload ? round_alloc(G->shard_bytes) : 0; /* the shards, copied in */
        if (host) est__sim_alloc(s, EST_CAT_COMM, host, KEY(K_PAR, k, P_HOST_COPY));
        if (flat) est__sim_alloc(s, EST_CAT_COMM, flat, flat_key);
        if (host) {
            est__sim_observe(s, phase, layer, 0);
            est__sim_release(s, EST_CAT_COMM, host, KEY(K_PAR, k, P_HOST_COPY));
        }
    }
    if (mode == GATHER_PREFETCH) {
        G->pending = true;
        est__sim_observe(s, phase, layer, 0);
        return;
    }
    G->pending = false;
    if (mode == GATHER_FORWARD) release_held_gather(s);
    for (int32_t m = p->member_start[k]; m < p->member_start[k + 1]; m++) {
        int32_t t = p->members[m];
        est__sim_alloc(s, EST_CAT_PARAMS, p->unsharded_bytes[t], KEY(K_PAR, t, P_UNSHARDED));
    }
    est__sim_observe(s, phase, layer, 0);
    if (flat && mode == GATHER_FORWARD) p->held_gather = k;
    else if (flat) est__sim_release(s, EST_CAT_COMM, flat, flat_key);
    G->unsharded = true;
}

/* A block's pre-backward: its copy-out (or its whole all-gather, when not
 * prefetched), then the prefetch of the block before it (_backward_prefetch;
 * the first block prefetches nothing: the root is gathered already). */
static void pre_backward(sim *s, int32_t k, const char *layer) {
    unshard(s, k, GATHER_BACKWARD, EST_PHASE_BACKWARD, layer);
    if (k > 1) unshard(s, k - 1, GATHER_PREFETCH, EST_PHASE_BACKWARD, layer);
}

/* Whether the last block's output is the model's: no node after the block
 * carries a gradient. Its pre-backward hook, registered on that tensor
 * before the root's, then runs first. */
static bool last_block_ends_model(const sim *s, const struct est_par *p) {
    int32_t last = p->groups[p->n_groups - 1].last;
    for (int32_t i = last + 1; i < s->g->n_nodes; i++)
        if (s->any_grad[i]) return false;
    return true;
}

static void reshard(sim *s, int32_t k) {
    struct est_par *p = s->par;
    if (!p->groups[k].unsharded) return;
    for (int32_t m = p->member_start[k]; m < p->member_start[k + 1]; m++) {
        int32_t t = p->members[m];
        est__sim_release(s, EST_CAT_PARAMS, p->unsharded_bytes[t], KEY(K_PAR, t, P_UNSHARDED));
    }
    p->groups[k].unsharded = false;
}

static void release_held_reduce(sim *s) {
    struct est_par *p = s->par;
    int32_t h = p->held_reduce;
    if (h < 0) return;
    est__sim_release(s, EST_CAT_COMM, reduce_input_bytes(p, h), KEY(K_PAR, h, P_REDUCE_INPUT));
    p->held_reduce = -1;
}

/* post_backward: reshard, then reduce-scatter the group's gradients: the
 * unsharded ones are copied into a flat input and freed, the output is the
 * flat shard of .grad (added into it when it exists: gradient accumulation). */
static void post_backward(sim *s, int32_t k, const char *layer) {
    struct est_par *p = s->par;
    group *G = &p->groups[k];
    reshard(s, k);
    release_held_reduce(s);
    bool any = false;
    for (int32_t m = p->member_start[k]; m < p->member_start[k + 1]; m++) any |= s->param_has_grad[p->members[m]];
    if (!any) return;
    uint64_t input = reduce_input_bytes(p, k);
    est__sim_alloc(s, EST_CAT_COMM, input, KEY(K_PAR, k, P_REDUCE_INPUT));
    est__sim_observe(s, EST_PHASE_BACKWARD, layer, 0);
    for (int32_t m = p->member_start[k]; m < p->member_start[k + 1]; m++) {
        int32_t t = p->members[m];
        if (s->param_has_grad[t]) {
            est__sim_release(s, EST_CAT_GRADS, tensor_alloc(s, t), KEY(K_GRAD, t, 0));
            s->param_has_grad[t] = false;
        }
    }
    uint64_t shard = round_alloc(G->grad_shard_bytes);
    if (G->has_grads || s->r->parallel.offload) { /* added in, or copied to the host */
        transient(s, shard, KEY(K_PAR, k, P_REDUCED), EST_PHASE_BACKWARD, layer);
    } else {
        est__sim_alloc(s, EST_CAT_GRADS, shard, KEY(K_PAR, k, P_SHARD_GRADS));
        est__sim_observe(s, EST_PHASE_BACKWARD, layer, 0);
        G->has_grads = true;
    }
    p->held_reduce = k;
}

void est__par_forward_begin(sim *s) {
    struct est_par *p = s->par;
    if (!p) return;
    if (s->sharded) {
        unshard(s, 0, GATHER_FORWARD, EST_PHASE_FORWARD, "");
        return;
    }
    if (p->iteration == 2 && !p->rebuilt) {
        rebuild_buckets(s, p);
        p->rebuilt = true;
    }
    transient(s, p->broadcast_buffers, KEY(K_PAR, 0, P_COALESCED), EST_PHASE_FORWARD, "");
}

void est__par_forward_node(sim *s, int32_t i, bool after) {
    struct est_par *p = s->par;
    if (!p || !s->sharded) return;
    if (!after && p->starts[i] >= 0) unshard(s, p->starts[i], GATHER_FORWARD, EST_PHASE_FORWARD, s->g->nodes[i].name);
    if (after && p->ends[i] >= 0 && p->reshard_after_forward) reshard(s, p->ends[i]);
}

void est__par_backward_begin(sim *s) {
    struct est_par *p = s->par;
    if (!p || !s->sharded) return;
    /* the root's post-forward frees the last group's all-gather output,
     * kept for the copy-out overlap, and reshards the root like a block */
    release_held_gather(s);
    if (p->reshard_after_forward) reshard(s, 0);
    int32_t last = p->n_groups - 1;
    if (last > 0 && last_block_ends_model(s, p)) pre_backward(s, last, "loss");
    /* the root's pre-backward gathers it and prefetches the last block */
    unshard(s, 0, GATHER_BACKWARD, EST_PHASE_BACKWARD, "loss");
    if (last > 0) unshard(s, last, GATHER_PREFETCH, EST_PHASE_BACKWARD, "loss");
}

void est__par_backward_node(sim *s, int32_t i, bool after) {
    struct est_par *p = s->par;
    if (!p || !s->sharded) return;
    const char *layer = s->g->nodes[i].name;
    if (!after && p->ends[i] >= 0) pre_backward(s, p->ends[i], layer);
    if (after && p->starts[i] >= 0) post_backward(s, p->starts[i], layer);
}

void est__par_backward_end(sim *s) {
    struct est_par *p = s->par;
    if (p && p->first_held) {
        est__sim_release(s, EST_CAT_COMM, p->first_bucket, KEY(K_PAR, 0, P_FIRST_BUCKET));
        p->first_held = false;
    }
    if (!p || !s->sharded) return;
    post_backward(s, 0, "");
    release_held_reduce(s);
    release_held_gather(s);
}

void est__par_zero_grad(sim *s) {
    struct est_par *p = s->par;
    if (!p) return;
    p->iteration++;
    if (!s->sharded) return;
    for (int32_t k = 0; k < p->n_groups; k++)
        if (p->groups[k].has_grads) {
            est__sim_release(s, EST_CAT_GRADS, round_alloc(p->groups[k].grad_shard_bytes),
                             KEY(K_PAR, k, P_SHARD_GRADS));
            p->groups[k].has_grads = false;
        }
}
