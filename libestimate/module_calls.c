/*
 * module_calls.c: which PyTorch module call each node ran in, and the
 * references a call's frame keeps.
 *
 * PyTorch eager keeps a module's arguments referenced (by the caller's frame
 * and the call's argument tuple) until the module returns, even after its
 * forward has read them for the last time. The exporters name the module each
 * node ran in (est_node.scope); one call of a module is a maximal run of
 * consecutive nodes inside its scope. Nodes of unknown scope neither extend
 * nor end a run.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "registry.h"

static int32_t scope_depth(const char *s) {
    if (!*s) return 0;
    int32_t depth = 1;
    for (; *s; s++) depth += *s == '/';
    return depth;
}

/* The last node of the innermost block call around node n (last_of[d]: the
 * end of n's depth-d call), or -1 when n runs in no block. */
static int32_t innermost_block_end(const est_node *n, const int32_t *last_of) {
    int32_t end = -1, d = 0;
    for (const char *c = n->scope ? n->scope : ""; *c; d++) {
        size_t len = strcspn(c, "/");
        if (est__is_block_name(c, len)) end = last_of[d];
        c += len;
        if (*c == '/') c++;
    }
    return end;
}

/* Component d of node i's scope: len[offset[i] + d] characters at
 * scope + start[offset[i] + d]. */
typedef struct scope_parts {
    const int32_t *offset; /* node i's components: [offset[i], offset[i + 1]) */
    const int32_t *start;
    const int32_t *len;
    const bool *outside;   /* node i takes no part in calls (find_outside) */
} scope_parts;

/* How many leading components the scopes of nodes a and b share (an empty
 * component ends the match). */
static int32_t common_depth(const est_graph *g, const scope_parts *sp, int32_t a, int32_t b) {
    int32_t da = sp->offset[a + 1] - sp->offset[a], db = sp->offset[b + 1] - sp->offset[b];
    int32_t depth = 0;
    for (int32_t oa = sp->offset[a], ob = sp->offset[b]; depth < da && depth < db; depth++) {
        int32_t la = sp->len[oa + depth];
        if (la == 0 || la != sp->len[ob + depth] ||
            memcmp(g->nodes[a].scope + sp->start[oa + depth], g->nodes[b].scope + sp->start[ob + depth],
                   (size_t)la) != 0)
            break;
    }
    return depth;
}

/* A unit of a call: a run of consecutive nodes that ran in the same
 * submodule, or one op of the module's own. */
typedef struct call_unit {
    const char *key;
    size_t len;
    bool own_op;
    int32_t first;
} call_unit;

static bool same_unit(const call_unit *a, const call_unit *b) {
    return a->own_op == b->own_op && a->len == b->len && memcmp(a->key, b->key, a->len) == 0;
}

/* Node j's unit inside a depth-d run: its component d + 1, or its op. */
static call_unit unit_of(const est_graph *g, const scope_parts *sp, int32_t j, int32_t d) {
    const est_node *n = &g->nodes[j];
    int32_t depth = sp->offset[j + 1] - sp->offset[j];
    if (depth <= d + 1) return (call_unit){n->op_type, strlen(n->op_type), true, j};
    int32_t o = sp->offset[j] + d + 1;
    return (call_unit){n->scope + sp->start[o], (size_t)sp->len[o], false, j};
}

/* The scopes name a module, not a call: a module called several times in a
 * row (ALBERT's one shared layer, a loop over one block) gives one run for
 * all its calls in the dynamo exporter's scopes. Every call visits the
 * module's submodules in the same order, so a run whose sequence of units is
 * k > 1 repeats of one period that enters a submodule holds k calls; mark
 * the first node of each later call: break_at[i] = the shallowest depth at
 * which node i starts a new call. */
static void split_repeated_calls(const est_graph *g, const scope_parts *sp, const int32_t *first,
                                 const int32_t *last, call_unit *units, int32_t *prefix, int32_t *break_at) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (sp->outside[i]) continue;
        for (int32_t d = 0; d < sp->offset[i + 1] - sp->offset[i]; d++) {
            if (first[sp->offset[i] + d] != i) continue; /* not the start of a run */
            int32_t m = 0;
            for (int32_t j = i; j <= last[sp->offset[i] + d]; j++) {
                if (sp->outside[j]) continue;
                call_unit u = unit_of(g, sp, j, d);
                if (m == 0 || !same_unit(&units[m - 1], &u)) units[m++] = u;
            }
            /* the shortest period: m - the longest proper border (KMP) */
            prefix[0] = 0;
            for (int32_t q = 1, k = 0; q < m; q++) {
                while (k > 0 && !same_unit(&units[q], &units[k])) k = prefix[k - 1];
                if (same_unit(&units[q], &units[k])) k++;
                prefix[q] = k;
            }
            int32_t period = m > 0 ? m - prefix[m - 1] : 0;
            if (m < 2 || period == m || m % period != 0) continue;
            bool enters_submodule = false;
            for (int32_t q = 0; q < period; q++) enters_submodule |= !units[q].own_op;
            if (!enters_submodule) continue;
            for (int32_t q = period; q < m; q += period)
                if (break_at[units[q].first] > d) break_at[units[q].first] = d;
        }
    }
}

/* first/last[offset[i] + d]: the first and last node of the call that node i
 * runs in at depth d; a call ends where the scopes part or break_at says a
 * new call starts. */
static void find_calls(const est_graph *g, const scope_parts *sp, const int32_t *break_at, int32_t *first,
                       int32_t *last) {
    int32_t nn = g->n_nodes;
    const int32_t *offset = sp->offset;
    for (int32_t i = 0, prev = -1; i < nn; i++) {
        if (sp->outside[i]) continue;
        int32_t depth = offset[i + 1] - offset[i];
        int32_t shared = prev >= 0 ? common_depth(g, sp, prev, i) : 0;
        if (shared > break_at[i]) shared = break_at[i];
        for (int32_t d = 0; d < depth; d++) first[offset[i] + d] = d < shared ? first[offset[prev] + d] : i;
        prev = i;
    }
    for (int32_t i = nn - 1, next = -1; i >= 0; i--) {
        if (sp->outside[i]) continue;
        int32_t depth = offset[i + 1] - offset[i];
        int32_t shared = next >= 0 ? common_depth(g, sp, next, i) : 0;
        if (next >= 0 && shared > break_at[next]) shared = break_at[next];
        for (int32_t d = 0; d < depth; d++) last[offset[i] + d] = d < shared ? last[offset[next] + d] : i;
        next = i;
    }
}

/* The length of component c of len characters without a TorchScript call
 * count ("attention_1" -> 9), or len when it ends in no "_<digits>". */
static int32_t without_count(const char *c, int32_t len) {
    int32_t k = len;
    while (k > 0 && c[k - 1] >= '0' && c[k - 1] <= '9') k--;
    return k < len && k > 1 && c[k - 1] == '_' ? k - 1 : len;
}

typedef struct component_set {
    uint64_t cap; /* a power of two */
    int32_t *cell;  /* a cell of that component, -1 empty */
} component_set;

static bool same_text(const est_graph *g, const scope_parts *sp, const int32_t *node_of, int32_t cell, const char *c,
                      int32_t len) {
    return sp->len[cell] == len && memcmp(g->nodes[node_of[cell]].scope + sp->start[cell], c, (size_t)len) == 0;
}

/* The slot of the text c[0..len) in the set: where it is, or the empty
 * slot where it would go. */
static uint64_t component_slot(const est_graph *g, const scope_parts *sp, const int32_t *node_of,
                               const component_set *set, const char *c, int32_t len) {
    uint64_t h = est__str_hash(c, (size_t)len) & (set->cap - 1);
    while (set->cell[h] >= 0 && !same_text(g, sp, node_of, set->cell[h], c, len)) h = (h + 1) & (set->cap - 1);
    return h;
}

/* TorchScript tells the calls of one module apart by a count: the second
 * call of "attention" runs in ".../attention_1", its children in
 * ".../attention/query_1", the module's own ops in "layer.0_1". A component
 * "X_<digits>" is taken as X wherever X is itself a component of some
 * scope, so that every call of a module has one scope, as in the dynamo
 * exporter's names, and split_repeated_calls finds the calls. (Sibling
 * modules named both "fc" and "fc_1" are taken as one.) Shortens len[] in
 * place; false when out of memory. */
static bool drop_call_counts(const est_graph *g, const scope_parts *sp, int32_t *len) {
    int32_t nn = g->n_nodes, cells = sp->offset[nn];
    component_set set = {.cap = 16};
    while (set.cap < 2 * (uint64_t)cells) set.cap *= 2;
    int32_t *node_of = malloc(((size_t)cells + 1) * sizeof *node_of);
    set.cell = malloc(set.cap * sizeof *set.cell);
    if (!node_of || !set.cell) {
        free(node_of), free(set.cell);
        return false;
    }
    memset(set.cell, 0xff, set.cap * sizeof *set.cell);
    for (int32_t i = 0, last_scope = -1; i < nn; i++) {
        if (sp->offset[i + 1] == sp->offset[i]) continue;
        bool repeat = last_scope >= 0 && g->nodes[i].scope == g->nodes[last_scope].scope; /* interned: same text */
        last_scope = i;
        for (int32_t o = sp->offset[i]; o < sp->offset[i + 1]; o++) {
            node_of[o] = i;
            if (repeat) continue;
            uint64_t h = component_slot(g, sp, node_of, &set, g->nodes[i].scope + sp->start[o], len[o]);
            if (set.cell[h] < 0) set.cell[h] = o;
        }
    }
    for (int32_t o = 0; o < cells; o++) {
        const char *c = g->nodes[node_of[o]].scope + sp->start[o];
        int32_t base = without_count(c, len[o]);
        /* X_<digits> is a count where X is a component of some scope */
        if (base < len[o] && set.cell[component_slot(g, sp, node_of, &set, c, base)] >= 0) len[o] = base;
    }
    free(node_of), free(set.cell);
    return true;
}

/* ---- a frame's locals --------------------------------------------------------
 * A forward names what its submodules return ("skip = self.down(x)",
 * "skips.append(x)"), and the name, or the list, keeps the tensor until the
 * forward returns or rebinds it. The graph has no names. What it does show:
 * an output of a child call that stays unread while another child call of
 * the same forward runs, and is read after it, was kept by something in that
 * forward's frame. Such an output is held until the forward returns (a
 * U-Net keeps its encoder's outputs in a list until its forward returns). An
 * output that every later child call reads, as in "x = self.block(x)", may
 * be rebound after its last read, and is not held. */

/* Scanning a gap between two reads stops after this many nodes of the
 * parent's own (one op each) or calls (skipped whole): the pass stays linear,
 * and a gap that long is taken as not holding a call. */
enum { MAX_GAP_STEPS = 256 };

/* Whether a whole depth-d call runs strictly between nodes a and b, both in
 * the same depth-(d - 1) call (or at the top). */
static bool call_between(const scope_parts *sp, const int32_t *first, const int32_t *last, int32_t a, int32_t b,
                         int32_t d) {
    const int32_t *offset = sp->offset;
    for (int32_t k = a + 1, steps = 0; k < b && steps < MAX_GAP_STEPS; steps++) {
        if (sp->outside[k] || offset[k + 1] - offset[k] <= d) { /* the parent's own op */
            k++;
            continue;
        }
        int32_t call_first = first[offset[k] + d], call_last = last[offset[k] + d];
        if (call_first <= a) { /* began at or before a: the call that read t at a */
            k = call_last + 1;
            continue;
        }
        return call_last < b; /* else it runs into b, which reads t */
    }
    return false;
}

/* Sets every tensor's frame_held_until: the end of the outermost call that
 * kept a child's output unread across another child call. One walk over the
 * reads in node order, each checked against the gap since the tensor's
 * previous read, at each depth of its producer's scope the read lies
 * outside of. False when out of memory. */
static bool plan_frame_holds(est_graph *g, const scope_parts *sp, const int32_t *first, const int32_t *last) {
    const int32_t *offset = sp->offset;
    int32_t *prev_read = malloc(((size_t)g->n_tensors + 1) * sizeof *prev_read);
    if (!prev_read) return false;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        prev_read[t] = -1;
        g->tensors[t].frame_held_until = -1;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_inputs; k++) {
            int32_t t = n->inputs[k], p = t >= 0 ? g->tensors[t].producer : -1;
            if (p < 0 || sp->outside[p]) continue;
            int32_t *held = &g->tensors[t].frame_held_until;
            for (int32_t d = offset[p + 1] - offset[p] - 1; d >= 0; d--) {
                int32_t end_call = last[offset[p] + d];
                int32_t end_parent = d > 0 ? last[offset[p] + d - 1] : g->n_nodes - 1;
                if (i <= end_call) break; /* read inside this call, so inside the outer ones too */
                if (i > end_parent || *held >= end_parent) continue;
                int32_t gap_start = prev_read[t] > end_call ? prev_read[t] : end_call;
                if (call_between(sp, first, last, gap_start, i, d)) *held = end_parent;
            }
            prev_read[t] = i;
        }
    }
    for (int32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].frame_held_until <= prev_read[t]) g->tensors[t].frame_held_until = -1;
    free(prev_read);
    return true;
}

/* Tensor t stays referenced at least until node end. */
static void hold_until(est_graph *g, int32_t t, int32_t end) {
    if (t >= 0 && g->tensors[t].frame_held_until < end) g->tensors[t].frame_held_until = end;
}

/* Hugging Face's model stacks begin with "inputs_embeds =
 * self.<table>(input_ids)" and keep that name while every layer runs,
 * whatever they bind the hidden states to next: embed_tokens (LlamaModel,
 * Qwen2Model, MistralModel, OPTDecoder, the BART, Marian and T5 encoders
 * and decoders), word_embeddings (BloomModel, FalconModel), wte (GPT2Model)
 * and embed_in (GPTNeoXModel). The first layer reads the embedding right
 * away, so the frame rule above cannot see the name; the module name can:
 * what a call of a module of one of these names returns is held until the
 * call around it returns. Where the table sits in an embeddings module
 * (BERT's word_embeddings), that module's call is the one around it, and
 * its own local lives as long. Per-op probe of bloom_4l in inference (H100,
 * 2026-11-27, bench/accuracy/data/blind3/): the embedding output is live at
 * the last layer's MLP. */
static const char *const embedding_tables[] = {"embed_tokens", "word_embeddings", "wte", "embed_in"};

/* The component (len characters at c) names one of embedding_tables, whole
 * or as the last part of a dotted path. */
static bool names_embedding_table(const char *c, size_t len) {
    for (size_t k = 0; k < sizeof embedding_tables / sizeof *embedding_tables; k++) {
        size_t n = strlen(embedding_tables[k]);
        if (len >= n && memcmp(c + len - n, embedding_tables[k], n) == 0 && (len == n || c[len - n - 1] == '.'))
            return true;
    }
    return false;
}

static void hold_inputs_embeds(est_graph *g, const scope_parts *sp, const int32_t *last) {
    for (int32_t p = 0; p < g->n_nodes; p++) {
        const est_node *node = &g->nodes[p];
        int32_t depth = sp->offset[p + 1] - sp->offset[p];
        if (depth == 0) continue; /* no scope, or a shape computation */
        int32_t o = sp->offset[p] + depth - 1;
        if (!names_embedding_table(node->scope + sp->start[o], (size_t)sp->len[o])) continue;
        int32_t end_call = last[o], end_parent = depth > 1 ? last[o - 1] : g->n_nodes - 1;
        if (p != end_call) continue; /* what the call returns: its last node's outputs */
        for (int k = 0; end_parent > end_call && k < node->n_outputs; k++) hold_until(g, node->outputs[k], end_parent);
    }
}

/* How many nodes the walk back from a Softmax to its scores' MatMuls
 * visits at most, and how far it looks forward to the values' MatMul. */
enum { SCORE_NODES = 32, SCORE_STEPS = 6 };

/* Ops the scores pass through between their MatMuls and the Softmax: scales,
 * mask adds and fills, casts, views, and the index gathers of relative
 * positions (DeBERTa's c2p and p2c). */
static bool scores_pass_through(const est_node *n) {
    static const char *const ops[] = {"Add",   "Sub",     "Mul",       "Div",       "Where",  "Cast",
                                      "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Gather",
                                      "GatherElements", "Clip"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (est__node_is(n, ops[k])) return true;
    return false;
}

/* Holds until `end` the operands of every MatMul the scores of Softmax s
 * come from, through scores_pass_through ops, among the nodes from `from`
 * on (the attention call's). */
static void hold_score_operands(est_graph *g, int32_t s, int32_t from, int32_t end) {
    int32_t stack[SCORE_NODES], top = 0, visited = 0;
    int32_t p0 = g->tensors[g->nodes[s].inputs[0]].producer;
    if (p0 >= from) stack[top++] = p0;
    while (top > 0 && visited < SCORE_NODES) {
        const est_node *n = &g->nodes[stack[--top]];
        visited++;
        if (est__node_is(n, "MatMul")) {
            for (int k = 0; k < n->n_inputs; k++) hold_until(g, n->inputs[k], end);
            continue;
        }
        if (!scores_pass_through(n)) continue;
        for (int k = 0; k < n->n_inputs && top < SCORE_NODES; k++) {
            int32_t t = n->inputs[k], p = t >= 0 ? g->tensors[t].producer : -1;
            if (p >= from && p < s) stack[top++] = p;
        }
    }
}

/* The MatMul that reads node s's output, through a Dropout, Cast or view,
 * and its input other than the probabilities; -1 when there is none. */
static int32_t values_of(const est_graph *g, const est_readers *rd, int32_t s) {
    int32_t t = g->nodes[s].outputs[0];
    for (int step = 0; step < SCORE_STEPS && t >= 0; step++) {
        if (rd->start[t + 1] - rd->start[t] != 1) return -1;
        const est_node *n = &g->nodes[rd->nodes[rd->start[t]]];
        if (est__node_is(n, "MatMul")) return n->n_inputs == 2 && n->inputs[0] == t ? n->inputs[1] : -1;
        if (!(est__node_is(n, "Dropout") || est__node_is(n, "Cast") || est__node_is(n, "Reshape"))) return -1;
        t = n->outputs[0];
    }
    return -1;
}

/* Attention written out (Hugging Face's eager attention, torchvision's
 * windowed attention) binds its queries, keys and values to locals of the
 * call that computes it: they stay referenced until that call returns,
 * after their MatMuls have read them for the last time. Per-op probe of
 * Whisper's encoder in inference (H100, 2026-11-27, bench/accuracy/data/
 * blind3/): q, k and v are all live through the out_proj; of DeBERTa's:
 * the relative-position keys and queries too. The call is the innermost
 * module call around the Softmax; q, k (and DeBERTa's position terms) are
 * the operands of the MatMuls the scores come from, v the other operand of
 * the MatMul that reads the probabilities. Fused attention (SDPA) has no
 * Softmax and is not touched. */
static void hold_attention_operands(est_graph *g, const scope_parts *sp, const int32_t *first, const int32_t *last,
                                    const est_readers *rd) {
    for (int32_t s = 0; s < g->n_nodes; s++) {
        const est_node *n = &g->nodes[s];
        int32_t depth = sp->offset[s + 1] - sp->offset[s];
        if (!n->op || !n->op->held_by_block || sp->outside[s] || depth == 0 || n->n_inputs < 1 || n->inputs[0] < 0 ||
            n->n_outputs < 1 || n->outputs[0] < 0)
            continue;
        int32_t o = sp->offset[s] + depth - 1, end = last[o];
        hold_score_operands(g, s, first[o], end);
        hold_until(g, values_of(g, rd, s), end);
    }
}

/* est_node.input_held_until of node i's input k: the last node of the
 * outermost call that reads it without having produced it, when after i;
 * -1 otherwise. */
static int32_t input_held(const est_graph *g, const int32_t *offset, const int32_t *first, const int32_t *last,
                          int32_t i, int32_t k) {
    int32_t t = g->nodes[i].inputs[k], producer = t >= 0 ? g->tensors[t].producer : -1;
    for (int32_t d = 0; producer >= 0 && d < offset[i + 1] - offset[i]; d++)
        if (first[offset[i] + d] > producer) return last[offset[i] + d] > i ? last[offset[i] + d] : -1;
    return -1;
}

/* The nodes that take no part in module calls: those of unknown scope, and
 * shape computations (Shape, Size, and what reads only them and integer or
 * constant values), which the TorchScript exporter hoists out of the call
 * they belong to (BART's decoder computes every layer's cross-attention
 * shapes inside the first layer's). Neither extends nor ends a call. NULL
 * when out of memory. */
static bool *find_outside(const est_graph *g) {
    size_t n_nodes = (size_t)g->n_nodes + 1;
    bool *outside = calloc(n_nodes, sizeof *outside), *shape = calloc(n_nodes, sizeof *shape);
    if (!outside || !shape) {
        free(outside), free(shape);
        return NULL;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        shape[i] = true; /* a Constant, which reads nothing, too */
        if (!est__node_is(n, "Shape") && !est__node_is(n, "Size"))
            for (int k = 0; k < n->n_inputs && shape[i]; k++) {
                int32_t t = n->inputs[k], p = t >= 0 ? g->tensors[t].producer : -1;
                if (t < 0) continue;
                shape[i] = p >= 0 ? shape[p]
                                  : g->tensors[t].kind == EST_T_INITIALIZER && !est__dtype_is_float(g->tensors[t].dtype);
            }
        outside[i] = !n->scope || shape[i];
    }
    free(shape);
    return outside;
}

/* Whether some node ran inside a module: has a scope that names one. */
static bool any_module_scope(const est_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].scope && g->nodes[i].scope[0]) return true;
    return false;
}

/* What the plan below comes to when no node ran inside a module: no call
 * keeps any reference. */
static void plan_no_calls(est_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].input_held_until);
        g->nodes[i].input_held_until = NULL;
        g->nodes[i].output_held_until = -1;
    }
    for (int32_t t = 0; t < g->n_tensors; t++) g->tensors[t].frame_held_until = -1;
}

est_status est__plan_module_calls(est_graph *g, est_error *err) {
    if (!any_module_scope(g)) { /* files that name no modules */
        plan_no_calls(g);
        return EST_OK;
    }
    int32_t nn = g->n_nodes;
    int64_t total = 0;
    bool *outside = find_outside(g);
    int32_t *offset = malloc(((size_t)nn + 1) * sizeof *offset);
    if (!offset || !outside) {
        free(offset), free(outside);
        return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    }
    const char *last_scope = NULL; /* interned: the nodes of a call share one */
    int32_t last_depth = 0;
    for (int32_t i = 0; i < nn; i++) {
        offset[i] = (int32_t)total;
        if (outside[i]) continue;
        if (g->nodes[i].scope != last_scope) last_scope = g->nodes[i].scope, last_depth = scope_depth(last_scope);
        total += last_depth;
    }
    offset[nn] = (int32_t)total;
    size_t cells = (size_t)(total ? total : 1), nodes = (size_t)(nn ? nn : 1);
    int32_t *first = malloc(cells * sizeof *first), *last = malloc(cells * sizeof *last);
    int32_t *start = malloc(cells * sizeof *start), *len = malloc(cells * sizeof *len);
    int32_t *break_at = calloc(nodes, sizeof *break_at);
    int32_t *prefix = malloc(nodes * sizeof *prefix);
    call_unit *units = malloc(nodes * sizeof *units);
    est_status st = EST_OK;
    if (!first || !last || !start || !len || !break_at || !prefix || !units) {
        st = est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
        goto out;
    }
    for (int32_t i = 0; i < nn; i++) {
        break_at[i] = INT32_MAX;
        const char *s = g->nodes[i].scope;
        for (int32_t d = 0, pos = 0; s && d < offset[i + 1] - offset[i]; d++) {
            start[offset[i] + d] = pos;
            len[offset[i] + d] = (int32_t)strcspn(s + pos, "/");
            pos += len[offset[i] + d] + 1;
        }
    }
    scope_parts sp = {offset, start, len, outside};
    if (!drop_call_counts(g, &sp, len)) {
        st = est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
        goto out;
    }
    find_calls(g, &sp, break_at, first, last);
    split_repeated_calls(g, &sp, first, last, units, prefix, break_at);
    find_calls(g, &sp, break_at, first, last);
    for (int32_t i = 0; i < nn; i++) {
        est_node *n = &g->nodes[i];
        free(n->input_held_until);
        n->input_held_until = NULL;
        int32_t k = 0;
        while (k < n->n_inputs && input_held(g, offset, first, last, i, k) < 0) k++;
        if (k < n->n_inputs) { /* most nodes hold nothing and need no array */
            if (!(n->input_held_until = malloc((size_t)n->n_inputs * sizeof(int32_t)))) {
                st = est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
                goto out;
            }
            for (k = 0; k < n->n_inputs; k++) n->input_held_until[k] = input_held(g, offset, first, last, i, k);
        }
        n->output_held_until =
            n->op && n->op->held_by_block && !outside[i] ? innermost_block_end(n, &last[offset[i]]) : -1;
        if (n->output_held_until <= i) n->output_held_until = -1;
    }
    /* who reads what, for the attention holds only: most graphs have no
     * Softmax to index the readers for */
    bool softmax = false;
    for (int32_t i = 0; i < nn && !softmax; i++) softmax = g->nodes[i].op && g->nodes[i].op->held_by_block;
    est_readers readers = {0};
    if (!plan_frame_holds(g, &sp, first, last) || (softmax && !est__graph_readers(g, &readers))) {
        st = est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    } else {
        hold_inputs_embeds(g, &sp, last);
        if (softmax) hold_attention_operands(g, &sp, first, last, &readers);
        est__readers_free(&readers);
    }
out:
    free(outside);
    free(offset);
    free(first);
    free(last);
    free(start);
    free(len);
    free(break_at);
    free(prefix);
    free(units);
    return st;
}

