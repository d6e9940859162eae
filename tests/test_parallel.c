/*
 * test_parallel: data parallelism (est_options.parallel, libestimate/
 * parallel.c, docs/distributed.md) on a hand-built graph of two blocks and
 * a head, through the public API only.
 *
 *   x [B, 256] -> blocks.0: Gemm W0 [256, 256] -> h0
 *              -> blocks.1: Gemm W1 [256, 256] -> h1
 *              -> head:     Gemm Wh [10, 256]  -> y [B, 10]
 *
 * Every expected figure is derived by hand, one term per tensor, each
 * allocation rounded up to 512 bytes (R()). At B = 1024 float32: x, h0, h1
 * 1 MiB each; y 40960; W0, W1 262144 each; Wh 10240; P = 534528.
 *
 * One GPU, SGD: the peak is fc1's backward: params P, grads dW1 + dWh,
 * activations h0 (fc1 saves it for dW1), temp dh1 + dh0, inputs x, other
 * y + the loss (512).
 *
 * Checks:
 *  1. ddp at world size 1 and 4: the Reducer's first bucket (P, every
 *     gradient) is allocated at construction, the rebuilt ones (P again)
 *     at the second iteration's forward: the same moment, plus P of comm
 *     on one GPU, where the first goes at the rebuild, and 2P on four,
 *     where it is held through that iteration's backward; buckets by size
 *     cap; all-reduce volume.
 *  2. ddp with gradient_as_bucket_view: the buckets are the gradients (P in
 *     grads, no per-parameter .grad), which moves the peak to the head's
 *     backward; on two GPUs the held first bucket is P of comm.
 *  3. zero1 at world size 2: the greedy partition (W0 to rank 0, W1 to
 *     rank 1, Wh to rank 0) and the state of rank 0, the larger.
 *  4. fsdp at world size 4: padded dim-0 shards, the unsharded copies of the
 *     root, the running block and the prefetched one at fc1's backward, the
 *     held all-gather output, the flat gradient shards, Adam's state of the
 *     first rank's shards, and the all-gather and reduce-scatter volumes;
 *     fsdp-grad-op gathers once.
 *  5. hsdp at world size 4 in shard groups of 2.
 *  6. fsdp with CPU offload: nothing of the model states stays on the GPU.
 *  7. the errors: a world size without a strategy, inference, a bad shard
 *     group, options of another strategy, Adafactor under FSDP.
 *  8. est_strategy_name and est_strategy_from_name agree on every strategy.
 * 10. combinations: DDP with a frozen W0 buckets only what trains; FSDP under
 *     checkpointing (of the MLP block of 9.) keeps less, under bf16
 *     autocast its shards and state stay float32.
 *  9. tensor parallelism (--tp 2) of an MLP block, up -> relu -> down plus a
 *     residual: the pair found and named, the split weights, activations and
 *     FLOPs, the all-reduces; with sequence parallelism the residual's
 *     output split too; FSDP over the remaining GPUs; and the errors.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate_util.h"

static const char graph_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"twoblocks\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 256]}],\n"
    " \"initializers\": [{\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
    "  {\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
    "  {\"name\": \"Wh\", \"dtype\": \"float32\", \"dims\": [10, 256]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"fc0\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"W0\"], \"outputs\": [\"h0\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.0\"},\n"
    "  {\"name\": \"fc1\", \"op\": \"Gemm\", \"inputs\": [\"h0\", \"W1\"], \"outputs\": [\"h1\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.1\"},\n"
    "  {\"name\": \"head\", \"op\": \"Gemm\", \"inputs\": [\"h1\", \"Wh\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"head\"}],\n"
    " \"outputs\": [\"y\"]}\n";

/* The sizes at B = 1024, float32. */
static const uint64_t B = 1024;
#define ACT R(B * 256 * 4)          /* x, h0, h1, and their gradients */
#define Y R(B * 10 * 4)
#define LOSS 512
#define W R(256 * 256 * 4)          /* W0, W1 */
#define WH R(10 * 256 * 4)
#define P (W + W + WH)

static est_graph *graph;

static est_report *estimate(est_optimizer o, est_parallel par, const char *what) {
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = o;
    opt.batch = (int64_t)B;
    opt.parallel = par;
    est_error err;
    est_report *r = NULL;
    if (est_estimate(graph, &opt, &r, &err) != EST_OK) {
        CHECK(false, "%s: estimate failed: %s", what, err.message);
        return NULL;
    }
    return r;
}

/* A training step of g on 4 GPUs under strategy, with its timeline; NULL
 * after a failed check. */
static est_report *step_timeline(est_graph *g, est_strategy strategy) {
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = EST_OPT_SGD;
    opt.batch = (int64_t)B;
    opt.timeline = 1;
    opt.parallel = (est_parallel){.world_size = 4, .strategy = strategy};
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, &err) != EST_OK) CHECK(false, "%s: estimate failed: %s", est_strategy_name(strategy),
                                                         err.message);
    return r;
}

static bool is_gathered_param(const est_event *e) { return e->tensor && strcmp(e->what, "gathered parameter") == 0; }

typedef struct expect {
    uint64_t params, grads, optimizer, activations, temp, inputs, comm, other;
    const char *layer;
} expect;

static void check_peak(const est_report *r, const expect *e, const char *what) {
    if (!r) return;
    const est_peak *p = est_report_peak(r);
    uint64_t sum = e->params + e->grads + e->optimizer + e->activations + e->temp + e->inputs + e->comm + e->other;
    CHECK(p->bytes == sum, "%s: peak %llu, expected %llu", what, U(p->bytes), U(sum));
    CHECK(p->phase == EST_PHASE_BACKWARD && strcmp(p->layer, e->layer) == 0, "%s: peak in %s at '%s', expected "
          "backward at '%s'", what, est_phase_name(p->phase), p->layer, e->layer);
    CHECK(p->params == e->params, "%s: params %llu, expected %llu", what, U(p->params), U(e->params));
    CHECK(p->grads == e->grads, "%s: grads %llu, expected %llu", what, U(p->grads), U(e->grads));
    CHECK(p->optimizer == e->optimizer, "%s: optimizer %llu, expected %llu", what, U(p->optimizer), U(e->optimizer));
    CHECK(p->activations == e->activations, "%s: activations %llu, expected %llu", what, U(p->activations),
          U(e->activations));
    CHECK(p->temp == e->temp, "%s: temp %llu, expected %llu", what, U(p->temp), U(e->temp));
    CHECK(p->inputs == e->inputs, "%s: inputs %llu, expected %llu", what, U(p->inputs), U(e->inputs));
    CHECK(p->comm == e->comm, "%s: comm %llu, expected %llu", what, U(p->comm), U(e->comm));
    CHECK(p->other == e->other, "%s: other %llu, expected %llu", what, U(p->other), U(e->other));
}

/* One GPU, SGD: fc1's backward, as the header derives it. */
static expect one_gpu(void) {
    return (expect){.params = P, .grads = W + WH, .activations = ACT, .temp = ACT + ACT, .inputs = ACT,
                    .other = Y + LOSS, .layer = "fc1"};
}

static void test_one_gpu(void) {
    CHECK(P == 534528 && ACT == 1048576 && Y == 40960, "derivation: P %llu", U(P));
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){0}, "one GPU");
    expect e = one_gpu();
    check_peak(r, &e, "one GPU");
    const est_parallel *par = est_report_parallel(r);
    CHECK(par && par->world_size == 1 && par->strategy == EST_STRATEGY_NONE, "one GPU: parallel world 1, none");
    est_report_free(r);
}

/* 1. DDP: one bucket of every gradient (P < 1 MiB, the rebuilt first
 * bucket's cap), made with the wrapper and again at the rebuild. */
static void test_ddp(void) {
    for (int64_t world = 1; world <= 4; world += 3) {
        char what[64];
        snprintf(what, sizeof what, "ddp world %lld", (long long)world);
        est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = world, .strategy = EST_STRATEGY_DDP}, what);
        expect e = one_gpu();
        e.comm = world > 1 ? P + P : P;
        check_peak(r, &e, what);
        const est_comm *c = est_report_comm(r);
        CHECK(c && c->buckets == 1, "%s: %llu buckets, expected 1", what, U(c ? c->buckets : 0));
        CHECK(c && c->first_bucket_held_bytes == (world > 1 ? P : 0), "%s: first bucket held %llu", what,
              U(c ? c->first_bucket_held_bytes : 0));
        /* the all-reduce moves every gradient, unrounded: 2 x 65536 + 2560 floats */
        uint64_t grads = (2 * 65536 + 2560) * 4;
        CHECK(c && c->all_reduce_bytes == (world > 1 ? grads : 0), "%s: all-reduce %llu", what,
              U(c ? c->all_reduce_bytes : 0));
        est_report_free(r);
    }
    /* a 256 KiB cap: in reverse order Wh + W1 (272384 >= 262144) close the
     * first bucket, W0 alone the second; the first iteration's one bucket
     * of everything (P) is held besides */
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_DDP,
                                                         .bucket_bytes = 262144}, "ddp 256 KiB buckets");
    CHECK(r && est_report_comm(r)->buckets == 2, "ddp 256 KiB buckets: %llu buckets, expected 2",
          U(r ? est_report_comm(r)->buckets : 0));
    CHECK(r && est_report_peak(r)->comm == R(WH + W) + W + P, "ddp 256 KiB buckets: comm %llu, expected %llu",
          U(r ? est_report_peak(r)->comm : 0), U(R(WH + W) + W + P));
    est_report_free(r);
    /* the held first bucket is gone once the second iteration's backward
     * ends: after the step, comm is the rebuilt bucket alone */
    r = step_timeline(graph, EST_STRATEGY_DDP);
    if (!r) return;
    const est_snapshot *after = est_report_snapshot(r, EST_SNAPSHOT_AFTER);
    const est_snapshot *at_peak = est_report_snapshot(r, EST_SNAPSHOT_PEAK);
    CHECK(after && after->category[EST_CAT_COMM] == P, "ddp after the step: comm %llu, expected %llu",
          U(after ? after->category[EST_CAT_COMM] : 0), U(P));
    CHECK(at_peak && at_peak->category[EST_CAT_COMM] == P + P, "ddp at the peak: comm %llu, expected %llu",
          U(at_peak ? at_peak->category[EST_CAT_COMM] : 0), U(P + P));
    est_report_free(r);
}

static est_report *estimate_on(est_graph *g, est_optimizer o, est_parallel par, est_error *err);

/* 1b. DDP's first bucket is a race (est_first_bucket): either end can be
 * asked for, and every report gives the peak at both. One GPU's peak at
 * fc1 has P of comm (the rebuilt bucket) with the first bucket released,
 * P + P with it held, whatever the world size. */
static void test_ddp_first_bucket(void) {
    expect base = one_gpu();
    uint64_t released = base.params + base.grads + base.activations + base.temp + base.inputs + base.other + P;
    const struct {
        int64_t world;
        est_first_bucket asked;
        bool held;
    } cases[] = {{1, EST_FIRST_BUCKET_AUTO, false}, {1, EST_FIRST_BUCKET_HELD, true},
                 {4, EST_FIRST_BUCKET_AUTO, true}, {4, EST_FIRST_BUCKET_RELEASED, false}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char what[64];
        snprintf(what, sizeof what, "ddp world %lld, first bucket %d", (long long)cases[k].world, (int)cases[k].asked);
        est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = cases[k].world,
                                                             .strategy = EST_STRATEGY_DDP,
                                                             .first_bucket = cases[k].asked}, what);
        expect e = base;
        e.comm = cases[k].held ? P + P : P;
        check_peak(r, &e, what);
        const est_comm *c = r ? est_report_comm(r) : NULL;
        CHECK(c && c->first_bucket_bytes == P && c->first_bucket_held_bytes == (cases[k].held ? P : 0),
              "%s: first bucket %llu, held %llu", what, U(c ? c->first_bucket_bytes : 0),
              U(c ? c->first_bucket_held_bytes : 0));
        CHECK(c && c->peak_first_bucket_released_bytes == released && c->peak_first_bucket_held_bytes == released + P,
              "%s: peaks released %llu, held %llu, expected %llu and %llu", what,
              U(c ? c->peak_first_bucket_released_bytes : 0), U(c ? c->peak_first_bucket_held_bytes : 0), U(released),
              U(released + P));
        est_report_free(r);
    }
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP}, "fsdp");
    const est_comm *c = r ? est_report_comm(r) : NULL;
    CHECK(c && !c->first_bucket_bytes && !c->peak_first_bucket_held_bytes && !c->peak_first_bucket_released_bytes,
          "fsdp: no first bucket, got %llu", U(c ? c->first_bucket_bytes : 0));
    est_report_free(r);
    est_error err;
    const est_parallel refused[] = {{.world_size = 4, .strategy = EST_STRATEGY_FSDP, .first_bucket = EST_FIRST_BUCKET_HELD},
                                    {.world_size = 1, .first_bucket = EST_FIRST_BUCKET_RELEASED},
                                    {.world_size = 2, .strategy = EST_STRATEGY_DDP, .first_bucket = (est_first_bucket)7}};
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++) {
        r = estimate_on(graph, EST_OPT_SGD, refused[k], &err);
        CHECK(!r && err.code == EST_EINVAL, "first bucket case %zu: refused with EST_EINVAL", k);
        est_report_free(r);
    }
}

/* 2. gradient_as_bucket_view: the .grad tensors are the bucket, P of grads
 * from the start. At the head's backward: activations h1 and h0 (saved by
 * head and fc1), temp dy + dh1: 3 ACT + Y besides the rest. fc1's moment,
 * the peak on one GPU, has h0, dh1 and dh0: 3 ACT, less by Y. On two GPUs
 * the first iteration's bucket, held, is P of comm at both moments. */
static void test_ddp_view(void) {
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_DDP,
                                                         .grad_as_bucket_view = 1}, "ddp view");
    expect e = {.params = P, .grads = P, .activations = ACT + ACT, .temp = Y + ACT, .inputs = ACT, .comm = P,
                .other = Y + LOSS, .layer = "head"};
    check_peak(r, &e, "ddp view");
    if (r) CHECK(est_report_totals(r)->grads_bytes == P, "ddp view: grads_bytes %llu", U(est_report_totals(r)->grads_bytes));
    est_report_free(r);
}

/* 3. ZeRO-1 on 2 GPUs with Adam: W0 (65536 elements) to rank 0, W1 to rank
 * 1 (the least loaded), Wh to rank 0 (a tie goes to the lower rank). Rank 0
 * holds 68096 elements, rank 1 65536: the estimate is rank 0's. */
static void test_zero1(void) {
    est_report *r = estimate(EST_OPT_ADAM, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_ZERO1}, "zero1");
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    CHECK(t->optimizer_bytes == 2 * (W + WH), "zero1: optimizer %llu, expected %llu", U(t->optimizer_bytes),
          U(2 * (W + WH)));
    CHECK(t->params_bytes == P && t->grads_bytes == P, "zero1: params and grads are whole");
    const est_comm *c = est_report_comm(r);
    CHECK(c->broadcast_bytes == P && c->all_reduce_bytes == P, "zero1: broadcast %llu, all-reduce %llu",
          U(c->broadcast_bytes), U(c->all_reduce_bytes));
    CHECK(est_report_parallel(r)->rank == 0, "zero1: the report names rank 0, the larger partition, got %lld",
          (long long)est_report_parallel(r)->rank);
    est_report_free(r);
    /* --rank: each rank's own partition, rank 1 keeping W1's state alone */
    const uint64_t partition[2] = {2 * (W + WH), 2 * W};
    for (int64_t rank = 0; rank < 2; rank++) {
        r = estimate(EST_OPT_ADAM, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_ZERO1, .by_rank = 1,
                                                  .rank = rank}, "zero1 by rank");
        CHECK(r && est_report_totals(r)->optimizer_bytes == partition[rank] && est_report_parallel(r)->rank == rank,
              "zero1 rank %lld: optimizer %llu, expected %llu", (long long)rank,
              U(r ? est_report_totals(r)->optimizer_bytes : 0), U(partition[rank]));
        est_report_free(r);
    }
    est_error err;
    r = estimate_on(graph, EST_OPT_ADAM, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_ZERO1, .by_rank = 1,
                                                         .rank = 2}, &err);
    CHECK(!r && err.code == EST_EINVAL && strstr(err.message, "ranks 0 to 1"), "zero1 rank 2 of 2: refused");
    est_report_free(r);
}

/* 4. FSDP on 4 GPUs: W0 and W1 shard to 64 rows (65536 bytes), Wh to
 * ceil(10 / 4) = 3 rows (3072); unsharded, Wh is padded to 12 rows (12288).
 * At fc1's backward: the shards, the root's Wh (resharded after forward and
 * gathered again by the root's pre-backward) and blocks.1 (running)
 * unsharded, and blocks.0's all-gather output (4 x 65536), prefetched by
 * blocks.1's pre-backward and copied out at its own. Forward's last output,
 * blocks.1's, went when the root's forward ended. */
#define SHARD_W R(64 * 256 * 4)
#define SHARD_WH R(3 * 256 * 4)
static void test_fsdp(void) {
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP}, "fsdp");
    uint64_t shards = SHARD_W + SHARD_W + SHARD_WH;
    expect e = one_gpu();
    e.params = shards + R(12 * 256 * 4) + W;
    e.comm = 4 * SHARD_W;
    check_peak(r, &e, "fsdp");
    if (r) {
        const est_comm *c = est_report_comm(r);
        CHECK(c->groups == 3, "fsdp: %llu groups, expected 3 (the root and two blocks)", U(c->groups));
        /* forward gathers every group, backward every group again */
        uint64_t gathered = 2 * 4 * (SHARD_W + SHARD_W + SHARD_WH);
        CHECK(c->all_gather_bytes == gathered, "fsdp: all-gather %llu, expected %llu", U(c->all_gather_bytes),
              U(gathered));
        CHECK(c->reduce_scatter_bytes == 4 * shards, "fsdp: reduce-scatter %llu", U(c->reduce_scatter_bytes));
    }
    est_report_free(r);
    r = estimate(EST_OPT_ADAM, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP}, "fsdp adam");
    if (r) {
        const est_totals *t = est_report_totals(r);
        CHECK(t->params_bytes == shards, "fsdp adam: params %llu, expected the shards %llu", U(t->params_bytes),
              U(shards));
        CHECK(t->grads_bytes == shards, "fsdp adam: grads %llu, expected the flat shards %llu", U(t->grads_bytes),
              U(shards));
        /* the first rank's shards are whole: 64 of 256 rows, 3 of 10 */
        CHECK(t->optimizer_bytes == 2 * shards, "fsdp adam: optimizer %llu, expected %llu", U(t->optimizer_bytes),
              U(2 * shards));
    }
    est_report_free(r);
    r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP_GRAD_OP}, "grad-op");
    if (r) {
        uint64_t once = 4 * (SHARD_W + SHARD_W + SHARD_WH);
        CHECK(est_report_comm(r)->all_gather_bytes == once, "grad-op: all-gather %llu, expected %llu",
              U(est_report_comm(r)->all_gather_bytes), U(once));
        /* nothing is resharded before backward: blocks.0 is still gathered */
        e.params = shards + R(12 * 256 * 4) + W + W;
        e.comm = 0;
        check_peak(r, &e, "grad-op");
    }
    est_report_free(r);
}

/* 4b. The root's gathered Wh over the step. fully_shard(model,
 * reshard_after_forward=True), as fsdp is given, reshards the root too
 * (torch's _lazy_init keeps the root gathered only when the flag was left
 * to its default): freed when forward ends, gathered again by the root's
 * pre-backward, freed after its backward. fsdp-grad-op keeps it gathered
 * from the forward to the end of backward. */
static void root_gathers(est_strategy strategy, est_phase *phases, est_event_kind *kinds, int *n) {
    est_report *r = step_timeline(graph, strategy);
    *n = 0;
    for (size_t k = 0; r && k < est_report_event_count(r) && *n < 8; k++) {
        const est_event *e = est_report_event(r, k);
        if (is_gathered_param(e) && strcmp(e->tensor, "Wh") == 0) {
            phases[*n] = e->phase;
            kinds[(*n)++] = e->kind;
        }
    }
    est_report_free(r);
}

static void test_fsdp_root(void) {
    est_phase ph[8];
    est_event_kind kind[8];
    int n;
    root_gathers(EST_STRATEGY_FSDP, ph, kind, &n);
    CHECK(n == 4 && kind[0] == EST_EVENT_ALLOC && ph[0] == EST_PHASE_FORWARD && kind[1] == EST_EVENT_FREE &&
              ph[1] == EST_PHASE_BACKWARD && kind[2] == EST_EVENT_ALLOC && ph[2] == EST_PHASE_BACKWARD &&
              kind[3] == EST_EVENT_FREE && ph[3] == EST_PHASE_BACKWARD,
          "fsdp: the root's Wh gathered in forward, freed, gathered again and freed in backward (%d events)", n);
    root_gathers(EST_STRATEGY_FSDP_GRAD_OP, ph, kind, &n);
    CHECK(n == 2 && kind[0] == EST_EVENT_ALLOC && ph[0] == EST_PHASE_FORWARD && kind[1] == EST_EVENT_FREE &&
              ph[1] == EST_PHASE_BACKWARD,
          "fsdp-grad-op: the root's Wh gathered once, freed after backward (%d events)", n);
}

/* 4c. Pre-backward hooks run in the order they were registered on a
 * tensor. Where the last block's output is the model's (tail_json: nothing
 * after blocks.1), its hook, registered first, copies blocks.1 out before
 * the root's gathers Wi; where the root's head runs after it
 * (graph_json), the root's Wh comes first. */
static const char tail_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"tail\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 256]}],\n"
    " \"initializers\": [{\"name\": \"Wi\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
    "  {\"name\": \"W0\", \"dtype\": \"float32\", \"dims\": [256, 256]},\n"
    "  {\"name\": \"W1\", \"dtype\": \"float32\", \"dims\": [256, 256]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"inp\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"Wi\"], \"outputs\": [\"h\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"inp\"},\n"
    "  {\"name\": \"fc0\", \"op\": \"Gemm\", \"inputs\": [\"h\", \"W0\"], \"outputs\": [\"h0\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.0\"},\n"
    "  {\"name\": \"fc1\", \"op\": \"Gemm\", \"inputs\": [\"h0\", \"W1\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.1\"}],\n"
    " \"outputs\": [\"y\"]}\n";

/* The first parameter backward gathers on g under fsdp on 4 GPUs. */
static const char *first_backward_gather(est_graph *g) {
    static char name[16];
    est_report *r = step_timeline(g, EST_STRATEGY_FSDP);
    name[0] = 0;
    for (size_t k = 0; r && k < est_report_event_count(r) && !name[0]; k++) {
        const est_event *e = est_report_event(r, k);
        if (e->phase == EST_PHASE_BACKWARD && e->kind == EST_EVENT_ALLOC && is_gathered_param(e))
            snprintf(name, sizeof name, "%s", e->tensor);
    }
    est_report_free(r);
    return name;
}

static void test_fsdp_hook_order(void) {
    est_graph *tail = NULL;
    est_error err;
    if (est_load_json_buffer(tail_json, strlen(tail_json), "tail", &tail, &err) != EST_OK) {
        CHECK(false, "tail graph: %s", err.message);
        return;
    }
    const char *first = first_backward_gather(tail);
    CHECK(strcmp(first, "W1") == 0, "tail: backward gathers blocks.1's W1 first, got '%s'", first);
    first = first_backward_gather(graph);
    CHECK(strcmp(first, "Wh") == 0, "twoblocks: backward gathers the root's Wh first, got '%s'", first);
    est_graph_free(tail);
}

/* 5. HSDP: 4 GPUs in shard groups of 2: W0 and W1 shard to 128 rows, Wh to
 * 5 (5120, and 10 rows unsharded); the shards are all-reduced across the 2
 * groups. */
static void test_hsdp(void) {
    est_report *r = estimate(EST_OPT_SGD, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_HSDP,
                                                         .shard_group = 2}, "hsdp");
    uint64_t shards = 2 * R(128 * 256 * 4) + R(5 * 256 * 4);
    expect e = one_gpu();
    e.params = shards + WH + W;
    e.comm = 2 * R(128 * 256 * 4); /* blocks.0 prefetched */
    check_peak(r, &e, "hsdp");
    if (r) {
        const est_comm *c = est_report_comm(r);
        CHECK(c->all_reduce_bytes == shards, "hsdp: all-reduce %llu, expected the shards %llu", U(c->all_reduce_bytes),
              U(shards));
        CHECK(c->reduce_scatter_bytes == 2 * shards, "hsdp: reduce-scatter %llu", U(c->reduce_scatter_bytes));
    }
    est_report_free(r);
}

/* 6. CPUOffloadPolicy: shards, their gradients and the optimizer state on
 * the host. */
static void test_offload(void) {
    est_report *r = estimate(EST_OPT_ADAM, (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP, .offload = 1},
                             "offload");
    if (!r) return;
    const est_totals *t = est_report_totals(r);
    CHECK(t->params_bytes == 0 && t->grads_bytes == 0 && t->optimizer_bytes == 0,
          "offload: params %llu, grads %llu, optimizer %llu on the GPU, expected none", U(t->params_bytes),
          U(t->grads_bytes), U(t->optimizer_bytes));
    est_report_free(r);
}

static void expect_error(est_mode mode, est_optimizer o, est_parallel par, const char *part, const char *what) {
    est_options opt;
    est_options_init(&opt);
    opt.mode = mode;
    opt.optimizer = o;
    opt.batch = 8;
    opt.parallel = par;
    est_error err;
    est_report *r = NULL;
    est_status st = est_estimate(graph, &opt, &r, &err);
    CHECK(st == EST_EINVAL && !r, "%s: status %d, expected EST_EINVAL", what, (int)st);
    if (st != EST_OK) CHECK(strstr(err.message, part), "%s: message '%s' lacks '%s'", what, err.message, part);
    est_report_free(r);
}

/* 7. */
static void test_errors(void) {
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM, (est_parallel){.world_size = 8}, "needs a strategy", "no strategy");
    expect_error(EST_MODE_INFER, EST_OPT_ADAM, (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_FSDP},
                 "for training", "inference");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM, (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_HSDP},
                 "must divide", "hsdp without a group");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM,
                 (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_HSDP, .shard_group = 3}, "must divide",
                 "hsdp group 3 of 8");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM,
                 (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_FSDP, .shard_group = 2}, "hsdp's",
                 "fsdp with a group");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM,
                 (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_DDP, .offload = 1}, "CPUOffloadPolicy",
                 "ddp offload");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM,
                 (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_FSDP, .bucket_bytes = 1 << 20}, "DDP's",
                 "fsdp buckets");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAFACTOR, (est_parallel){.world_size = 8, .strategy = EST_STRATEGY_FSDP},
                 "Adafactor", "fsdp adafactor");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM, (est_parallel){.world_size = -1, .strategy = EST_STRATEGY_DDP},
                 "world size", "negative world");
    expect_error(EST_MODE_TRAIN, EST_OPT_ADAM, (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_COUNT},
                 "strategy", "strategy out of range");
}

/* 8. */
static void test_names(void) {
    for (int s = 0; s < EST_STRATEGY_COUNT; s++)
        CHECK(est_strategy_from_name(est_strategy_name((est_strategy)s)) == s, "strategy %d: name '%s' round trip", s,
              est_strategy_name((est_strategy)s));
    CHECK(strcmp(est_strategy_name(EST_STRATEGY_FSDP_GRAD_OP), "fsdp-grad-op") == 0, "fsdp-grad-op's name");
    CHECK(est_strategy_from_name("fsdp2") == -1 && est_strategy_from_name(NULL) == -1, "unknown names are -1");
    CHECK(strcmp(est_strategy_name(EST_STRATEGY_COUNT), "unknown") == 0, "out of range is 'unknown'");
    CHECK(strcmp(est_category_name(EST_CAT_COMM), "comm") == 0, "the comm category's name");
}

/* 9. x [B, 256] -> blocks.0: up (Gemm Wu [512, 256]) -> h -> relu -> a ->
 * down (Gemm Wd [256, 512]) -> o; y0 = o + x -> head (Gemm Wh [10, 256]) -> y */
static const char mlp_block_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"mlpblock\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 256]}],\n"
    " \"initializers\": [{\"name\": \"Wu\", \"dtype\": \"float32\", \"dims\": [512, 256]},\n"
    "  {\"name\": \"Wd\", \"dtype\": \"float32\", \"dims\": [256, 512]},\n"
    "  {\"name\": \"Wh\", \"dtype\": \"float32\", \"dims\": [10, 256]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"up\", \"op\": \"Gemm\", \"inputs\": [\"x\", \"Wu\"], \"outputs\": [\"h\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.0/up\"},\n"
    "  {\"name\": \"relu\", \"op\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"a\"], \"scope\": \"blocks/blocks.0/act\"},\n"
    "  {\"name\": \"down\", \"op\": \"Gemm\", \"inputs\": [\"a\", \"Wd\"], \"outputs\": [\"o\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"blocks/blocks.0/down\"},\n"
    "  {\"name\": \"res\", \"op\": \"Add\", \"inputs\": [\"o\", \"x\"], \"outputs\": [\"y0\"], \"scope\": \"blocks/blocks.0\"},\n"
    "  {\"name\": \"head\", \"op\": \"Gemm\", \"inputs\": [\"y0\", \"Wh\"], \"outputs\": [\"y\"],\n"
    "   \"attributes\": {\"transB\": {\"int\": 1}}, \"scope\": \"head\"}],\n"
    " \"outputs\": [\"y\"]}\n";

static est_report *estimate_on(est_graph *g, est_optimizer o, est_parallel par, est_error *err) {
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = o;
    opt.batch = (int64_t)B;
    opt.parallel = par;
    est_report *r = NULL;
    if (est_estimate(g, &opt, &r, err) != EST_OK) return NULL;
    return r;
}

static const est_layer *layer(const est_report *r, const char *name) {
    for (size_t i = 0; i < est_report_layer_count(r); i++)
        if (strcmp(est_report_layer(r, i)->name, name) == 0) return est_report_layer(r, i);
    return NULL;
}

/* 10. FSDP with checkpointing and with autocast, on the MLP block. */
static void fsdp_combinations(est_graph *g) {
    est_options opt;
    est_options_init(&opt);
    opt.batch = (int64_t)B;
    opt.parallel = (est_parallel){.world_size = 4, .strategy = EST_STRATEGY_FSDP};
    est_error err;
    est_report *plain = NULL, *ckpt = NULL, *amp = NULL;
    CHECK(est_estimate(g, &opt, &plain, &err) == EST_OK, "fsdp: %s", err.message);
    opt.checkpoint = (est_checkpoint){.every = 1};
    CHECK(est_estimate(g, &opt, &ckpt, &err) == EST_OK, "fsdp checkpoint: %s", err.message);
    opt.checkpoint = (est_checkpoint){0};
    opt.amp = EST_AMP_BF16;
    CHECK(est_estimate(g, &opt, &amp, &err) == EST_OK, "fsdp amp: %s", err.message);
    if (plain && ckpt) /* the block keeps x only, not relu's a */
        CHECK(est_report_totals(ckpt)->activations_bytes + R(B * 512 * 4) ==
                  est_report_totals(plain)->activations_bytes &&
              est_report_totals(ckpt)->params_bytes == est_report_totals(plain)->params_bytes,
              "fsdp checkpoint: activations %llu, without %llu", U(est_report_totals(ckpt)->activations_bytes),
              U(est_report_totals(plain)->activations_bytes));
    if (plain && amp)
        CHECK(est_report_totals(amp)->params_bytes == est_report_totals(plain)->params_bytes &&
              est_report_totals(amp)->optimizer_bytes == est_report_totals(plain)->optimizer_bytes,
              "fsdp amp: params or optimizer state changed");
    est_report_free(plain);
    est_report_free(ckpt);
    est_report_free(amp);
}

/* A column whose output a Reshape views as heads: up's 32 features are 2
 * heads of 16. tp 2 splits whole heads; tp 4 would leave 8 features a GPU,
 * half a head, which PyTorch's view refuses: the estimate is refused, and
 * names the node. */
static const char heads_json[] =
    "{\"format\": \"memest-graph\", \"version\": 1, \"name\": \"heads\", \"opset_import\": {\"\": 17},\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", \"dims\": [\"batch\", 16, 64]}],\n"
    " \"initializers\": [{\"name\": \"Wu\", \"dtype\": \"float32\", \"dims\": [64, 32]},\n"
    "  {\"name\": \"Wd\", \"dtype\": \"float32\", \"dims\": [32, 64]},\n"
    "  {\"name\": \"split_heads\", \"dtype\": \"int64\", \"dims\": [4], \"values\": [0, 16, -1, 16]},\n"
    "  {\"name\": \"merge_heads\", \"dtype\": \"int64\", \"dims\": [3], \"values\": [0, 16, -1]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"up\", \"op\": \"MatMul\", \"inputs\": [\"x\", \"Wu\"], \"outputs\": [\"h\"]},\n"
    "  {\"name\": \"view\", \"op\": \"Reshape\", \"inputs\": [\"h\", \"split_heads\"], \"outputs\": [\"hh\"]},\n"
    "  {\"name\": \"act\", \"op\": \"Relu\", \"inputs\": [\"hh\"], \"outputs\": [\"a\"]},\n"
    "  {\"name\": \"merge\", \"op\": \"Reshape\", \"inputs\": [\"a\", \"merge_heads\"], \"outputs\": [\"m\"]},\n"
    "  {\"name\": \"down\", \"op\": \"MatMul\", \"inputs\": [\"m\", \"Wd\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static void tp_whole_heads(void) {
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(heads_json, strlen(heads_json), "heads", &g, &err) != EST_OK) {
        CHECK(false, "heads: %s", err.message);
        return;
    }
    est_report *r = estimate_on(g, EST_OPT_SGD, (est_parallel){.tp = 2}, &err);
    CHECK(r && est_report_tp_pair_count(r) == 1, "heads tp 2: whole heads split (%s)", r ? "" : err.message);
    est_report_free(r);
    r = estimate_on(g, EST_OPT_SGD, (est_parallel){.tp = 4}, &err);
    CHECK(!r && err.code == EST_EINVAL && strstr(err.message, "node 'up'") && strstr(err.message, "views as 2 x 16") &&
              strstr(err.message, "parts of 8"),
          "heads tp 4: refused, naming up and its heads: %s", r ? "(estimated)" : err.message);
    est_report_free(r);
    est_graph_free(g);
}

/* Adam under --tp alone steps two parameter groups, the split Wu and Wd
 * (halves: 512 x 256 x 4 bytes together), then the plain Wh (10 x 256 x 4):
 * each group's foreach temporaries, one state tensor's worth, go before the
 * next group's are made. On one GPU, one group of all three. */
static void tp_optimizer_groups(est_graph *g) {
    const uint64_t split = R(512 * 256 * 4 / 2) * 2, plain = R(10 * 256 * 4);
    const struct {
        int64_t tp;
        uint64_t want[2];
        size_t n;
    } cases[] = {{2, {split, plain}, 2}, {1, {2 * split + plain, 0}, 1}};
    for (size_t c = 0; c < 2; c++) {
        est_options opt;
        est_options_init(&opt);
        opt.batch = (int64_t)B;
        opt.timeline = 1;
        opt.parallel = (est_parallel){.tp = cases[c].tp};
        est_error err;
        est_report *r = NULL;
        CHECK(est_estimate(g, &opt, &r, &err) == EST_OK, "tp %lld optimizer groups: %s", (long long)cases[c].tp,
              err.message);
        size_t seen = 0; /* the optimizer's transients, in order, in the timeline's iteration */
        for (size_t i = 0; r && i < est_report_event_count(r); i++) {
            const est_event *e = est_report_event(r, i);
            if (e->phase != EST_PHASE_OPTIMIZER || e->kind != EST_EVENT_ALLOC || e->block || e->category != EST_CAT_TEMP)
                continue;
            uint64_t want = seen < cases[c].n ? cases[c].want[seen] : 0;
            CHECK(e->bytes == want, "tp %lld: optimizer temporaries %llu, expected %llu", (long long)cases[c].tp,
                  U(e->bytes), U(want));
            seen++;
        }
        CHECK(seen == cases[c].n, "tp %lld: %zu optimizer transients, expected %zu", (long long)cases[c].tp, seen,
              cases[c].n);
        est_report_free(r);
    }
}

static void test_tensor_parallel(void) {
    tp_whole_heads();
    est_error err;
    est_graph *g = NULL;
    if (est_load_json_buffer(mlp_block_json, strlen(mlp_block_json), "mlpblock", &g, &err) != EST_OK) {
        CHECK(false, "mlpblock: %s", err.message);
        return;
    }
    est_report *one = estimate_on(g, EST_OPT_ADAM, (est_parallel){0}, &err);
    est_report *tp = estimate_on(g, EST_OPT_ADAM, (est_parallel){.tp = 2}, &err);
    CHECK(one && tp, "mlpblock tp 2: %s", err.message);
    if (one && tp) {
        const uint64_t WU = R(512 * 256 * 4), WHB = R(10 * 256 * 4), HID = R(B * 512 * 4), RES = R(B * 256 * 4);
        CHECK(est_report_tp_pair_count(tp) == 1, "tp: %zu pairs, expected 1", est_report_tp_pair_count(tp));
        const est_tp_pair *p = est_report_tp_pair(tp, 0);
        CHECK(p && strcmp(p->block, "blocks.0") == 0 && p->n_columns == 1 && strcmp(p->columns[0], "blocks.0.up") == 0 &&
              strcmp(p->row, "blocks.0.down") == 0, "tp: the pair is blocks.0: up -> down");
        CHECK(est_report_parallel(tp)->world_size == 2, "tp 2 alone: world size 2");
        /* Wu and Wd halve; Wh stays whole */
        uint64_t params = WU / 2 + WU / 2 + WHB;
        const est_totals *t = est_report_totals(tp), *t1 = est_report_totals(one);
        CHECK(t->params_bytes == params && t->grads_bytes == params && t->optimizer_bytes == 2 * params,
              "tp: params %llu grads %llu optimizer %llu, expected %llu, %llu, %llu", U(t->params_bytes),
              U(t->grads_bytes), U(t->optimizer_bytes), U(params), U(params), U(2 * params));
        /* saved at the end of the forward: a (relu's output, half), y0 (head's
         * input, whole) and y */
        CHECK(t1->activations_bytes == HID + RES + Y && t->activations_bytes == HID / 2 + RES + Y,
              "tp: activations %llu (one GPU %llu), expected %llu", U(t->activations_bytes), U(t1->activations_bytes),
              U(HID / 2 + RES + Y));
        const est_layer *up1 = layer(one, "up"), *up2 = layer(tp, "up"), *head2 = layer(tp, "head");
        CHECK(up1 && up2 && up2->flops_forward * 2 == up1->flops_forward && head2 &&
              head2->flops_forward == layer(one, "head")->flops_forward, "tp: up's FLOPs halve, head's do not");
        /* down's output all-reduced forward, up's input gradient backward */
        CHECK(est_report_comm(tp)->all_reduce_bytes == 2 * B * 256 * 4, "tp: all-reduce %llu",
              U(est_report_comm(tp)->all_reduce_bytes));
    }
    est_report_free(tp);
    tp_optimizer_groups(g);
    tp = estimate_on(g, EST_OPT_SGD, (est_parallel){.tp = 2, .sequence_parallel = 1}, &err);
    if (tp && one) {
        const uint64_t HID = R(B * 512 * 4), RES = R(B * 256 * 4);
        CHECK(est_report_totals(tp)->activations_bytes == HID / 2 + RES / 2 + Y,
              "sequence parallel: activations %llu, expected the residual's output split too %llu",
              U(est_report_totals(tp)->activations_bytes), U(HID / 2 + RES / 2 + Y));
        CHECK(est_report_comm(tp)->all_gather_bytes && est_report_comm(tp)->reduce_scatter_bytes &&
              !est_report_comm(tp)->all_reduce_bytes, "sequence parallel: all-gathers and reduce-scatters");
    }
    est_report_free(tp);
    /* 8 GPUs: tp 2, FSDP over 4: the split weights' shards are a quarter of their halves */
    tp = estimate_on(g, EST_OPT_SGD, (est_parallel){.world_size = 8, .tp = 2, .strategy = EST_STRATEGY_FSDP}, &err);
    CHECK(tp != NULL, "fsdp x tp: %s", err.message);
    if (tp) {
        uint64_t shards = R(512 * 256 * 4 / 2 / 4) * 2 + R(3 * 256 * 4);
        CHECK(est_report_totals(tp)->params_bytes == shards, "fsdp x tp: params %llu, expected %llu",
              U(est_report_totals(tp)->params_bytes), U(shards));
    }
    est_report_free(tp);
    est_report_free(one);
    fsdp_combinations(g);
    est_options opt;
    est_options_init(&opt);
    opt.batch = 8;
    opt.parallel = (est_parallel){.tp = 3};
    est_report *r = NULL;
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && strstr(err.message, "no block has a pair"),
          "tp 3 divides nothing: %s", err.message);
    opt.parallel = (est_parallel){.world_size = 4, .tp = 2};
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && strstr(err.message, "needs a strategy"),
          "tp 2 of 4 without a strategy: %s", err.message);
    opt.parallel = (est_parallel){.world_size = 6, .tp = 4, .strategy = EST_STRATEGY_DDP};
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && strstr(err.message, "does not divide"),
          "tp 4 of 6: %s", err.message);
    opt.parallel = (est_parallel){.sequence_parallel = 1};
    CHECK(est_estimate(g, &opt, &r, &err) == EST_EINVAL && strstr(err.message, "needs tensor parallelism"),
          "sequence parallel alone: %s", err.message);
    est_graph_free(g);
}

/* 10. */
static void test_combinations(void) {
    est_options opt;
    est_options_init(&opt);
    opt.optimizer = EST_OPT_SGD;
    opt.batch = (int64_t)B;
    const char *frozen[] = {"W0"};
    opt.params = (est_param_filter){.frozen = frozen, .n_frozen = 1};
    opt.parallel = (est_parallel){.world_size = 2, .strategy = EST_STRATEGY_DDP};
    est_error err;
    est_report *r = NULL;
    CHECK(est_estimate(graph, &opt, &r, &err) == EST_OK, "ddp frozen W0: %s", err.message);
    if (r) {
        /* one bucket of W1 + Wh, rebuilt, and the first iteration's, held */
        CHECK(est_report_peak(r)->comm == 2 * R(W + WH), "ddp frozen W0: comm %llu, expected %llu",
              U(est_report_peak(r)->comm), U(2 * R(W + WH)));
        CHECK(est_report_comm(r)->all_reduce_bytes == (65536 + 2560) * 4, "ddp frozen W0: all-reduce %llu",
              U(est_report_comm(r)->all_reduce_bytes));
    }
    est_report_free(r);
}

int main(void) {
    est_error err;
    if (est_load_json_buffer(graph_json, strlen(graph_json), "twoblocks", &graph, &err) != EST_OK) {
        printf("test_parallel: load failed: %s\n", err.message);
        return 1;
    }
    test_one_gpu();
    test_ddp();
    test_ddp_first_bucket();
    test_ddp_view();
    test_zero1();
    test_fsdp();
    test_fsdp_root();
    test_fsdp_hook_order();
    test_hsdp();
    test_offload();
    test_errors();
    test_names();
    test_combinations();
    test_tensor_parallel();
    est_graph_free(graph);
    return test_result("test_parallel");
}
