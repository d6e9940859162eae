/* graph.c: building a graph, validating it, ordering it topologically. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "module_names.h"
#include "registry.h"

static uint64_t hash_name(const char *s) { return est__fnv1a(EST_FNV_START, s, strlen(s)); }

est_graph *est__graph_new(const char *source) {
    est_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (pthread_mutex_init(&g->plan_lock, NULL) != 0) {
        free(g);
        return NULL;
    }
    g->source = est__strdup(source ? source : "<memory>");
    g->name = est__strdup("");
    g->producer = est__strdup("");
    est__limits_resolve(NULL, &g->limits);
    if (!g->source || !g->name || !g->producer) {
        est_graph_free(g);
        return NULL;
    }
    return g;
}

void est__attr_free(est_attr *a) {
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    if (a->strings)
        for (int64_t i = 0; i < a->n; i++) free(a->strings[i]);
    free(a->strings);
    est__const_free(a->t_value);
}

void est__node_clear(est_node *n) {
    free(n->name);
    free(n->inputs);
    free(n->outputs);
    for (int32_t k = 0; k < n->n_attrs; k++) est__attr_free(&n->attrs[k]);
    free(n->attrs);
    free(n->module);
    free(n->input_held_until);
    memset(n, 0, sizeof *n);
}

int32_t *est__graph_count_reads(const est_graph *g) {
    int32_t *reads = calloc((size_t)g->n_tensors + 1, sizeof *reads);
    if (!reads) return NULL;
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) reads[g->nodes[i].inputs[k]]++;
    for (int32_t k = 0; k < g->n_outputs; k++) reads[g->outputs[k]]++;
    return reads;
}

const est_const *est__graph_known_value(const est_graph *g, int32_t t, int32_t *rank) {
    if (t < 0 || t >= g->n_tensors) return NULL;
    const est_tensor *tt = &g->tensors[t];
    if (tt->value) {
        if (rank) *rank = tt->rank;
        return tt->value;
    }
    const est_node *p = tt->producer >= 0 ? &g->nodes[tt->producer] : NULL;
    if (!p || strcmp(p->op_type, "Constant") != 0 || p->domain[0] != '\0') return NULL;
    for (int32_t k = 0; k < p->n_attrs; k++)
        if (strcmp(p->attrs[k].name, "value") == 0 && p->attrs[k].t_value) {
            if (rank) *rank = p->attrs[k].t_rank;
            return p->attrs[k].t_value;
        }
    return NULL;
}

bool est__graph_readers(const est_graph *g, est_readers *out) {
    size_t total = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) total += (size_t)g->nodes[i].n_inputs;
    int32_t *start = calloc((size_t)g->n_tensors + 2, sizeof *start);
    int32_t *nodes = malloc((total + 1) * sizeof *nodes);
    int32_t *fill = calloc((size_t)g->n_tensors + 1, sizeof *fill);
    if (!start || !nodes || !fill) {
        free(start), free(nodes), free(fill);
        return false;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) start[g->nodes[i].inputs[k] + 1]++;
    for (int32_t t = 0; t < g->n_tensors; t++) start[t + 1] += start[t];
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++) {
            int32_t t = g->nodes[i].inputs[k];
            if (t >= 0) nodes[start[t] + fill[t]++] = i;
        }
    free(fill);
    *out = (est_readers){.start = start, .nodes = nodes};
    return true;
}

void est__readers_free(est_readers *r) {
    free(r->start), free(r->nodes);
    *r = (est_readers){0};
}

bool est__node_is(const est_node *n, const char *op) {
    /* the first-character test spares most calls to strcmp: fuse.c asks often */
    return n->op_type && n->op_type[0] == op[0] && strcmp(n->op_type, op) == 0 && n->domain[0] == '\0';
}

bool est__node_is_recurrent(const est_node *n) {
    return est__node_is(n, "LSTM") || est__node_is(n, "GRU") || est__node_is(n, "RNN");
}

void est__graph_drop_nodes(est_graph *g, const bool *drop) {
    int32_t kept = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (drop[i]) est__node_clear(&g->nodes[i]);
        else g->nodes[kept++] = g->nodes[i];
    }
    g->n_nodes = kept;
}

void est_graph_free(est_graph *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_tensors; i++) {
        free(g->tensors[i].name);
        free(g->tensors[i].dims);
        free(g->tensors[i].torch_name);
        est__const_free(g->tensors[i].value);
    }
    for (int32_t i = 0; i < g->n_nodes; i++) est__node_clear(&g->nodes[i]);
    for (int32_t i = 0; i < g->n_symbols; i++) free(g->symbols[i]);
    free(g->symbols);
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->params);
    free(g->names.slots);
    free(g->names.hash);
    for (uint64_t i = 0; i < g->strings.cap; i++) free(g->strings.slots[i]);
    free(g->strings.slots);
    free(g->source);
    free(g->name);
    free(g->producer);
    if (g->plan) g->plan_free(g->plan);
    pthread_mutex_destroy(&g->plan_lock);
    free(g);
}

static bool map_grow(est_graph *g) {
    uint64_t cap = g->names.cap ? g->names.cap * 2 : 64;
    int32_t *slots = malloc(cap * sizeof *slots);
    uint64_t *hash = realloc(g->names.hash, cap / 2 * sizeof *hash); /* a tensor per two slots at most */
    if (hash) g->names.hash = hash;
    if (!slots || !hash) {
        free(slots);
        return false;
    }
    for (uint64_t i = 0; i < cap; i++) slots[i] = -1;
    for (int32_t t = 0; t < g->n_tensors; t++) {
        uint64_t h = hash[t] & (cap - 1);
        while (slots[h] >= 0) h = (h + 1) & (cap - 1);
        slots[h] = t;
    }
    free(g->names.slots);
    g->names.slots = slots;
    g->names.cap = cap;
    return true;
}

static int32_t find_hashed(const est_graph *g, const char *name, uint64_t hash) {
    if (!g->names.cap) return -1;
    uint64_t mask = g->names.cap - 1;
    for (uint64_t h = hash & mask;; h = (h + 1) & mask) {
        int32_t t = g->names.slots[h];
        if (t < 0) return -1;
        if (g->names.hash[t] == hash && strcmp(g->tensors[t].name, name) == 0) return t;
    }
}

int32_t est__graph_find(const est_graph *g, const char *name) { return find_hashed(g, name, hash_name(name)); }

int32_t est__graph_tensor(est_graph *g, const char *name) {
    uint64_t hash = hash_name(name);
    int32_t t = find_hashed(g, name, hash);
    if (t >= 0) return t;
    if ((uint64_t)(g->n_tensors + 1) * 2 > g->names.cap && !map_grow(g)) return -1;
    if (g->n_tensors == g->cap_tensors) {
        int32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
        est_tensor *nt = realloc(g->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        g->tensors = nt;
        g->cap_tensors = cap;
    }
    char *copy = est__strdup(name);
    if (!copy) return -1;
    t = g->n_tensors++;
    g->tensors[t] = (est_tensor){.name = copy, .rank = -1, .producer = -1, .first_consumer = -1};
    g->names.hash[t] = hash;
    uint64_t mask = g->names.cap - 1;
    uint64_t h = hash & mask;
    while (g->names.slots[h] >= 0) h = (h + 1) & mask;
    g->names.slots[h] = t;
    return t;
}

static bool intern_grow(est_intern *in) {
    uint64_t cap = in->cap ? in->cap * 2 : 64;
    char **slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (uint64_t i = 0; i < in->cap; i++) {
        char *s = in->slots[i];
        if (!s) continue;
        uint64_t h = hash_name(s) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = s;
    }
    free(in->slots);
    in->slots = slots;
    in->cap = cap;
    return true;
}

const char *est__graph_intern_n(est_graph *g, const char *s, size_t len) {
    est_intern *in = &g->strings;
    if ((in->count + 1) * 2 > in->cap && !intern_grow(in)) return NULL;
    uint64_t h = est__fnv1a(EST_FNV_START, s, len) & (in->cap - 1);
    for (; in->slots[h]; h = (h + 1) & (in->cap - 1))
        if (strncmp(in->slots[h], s, len) == 0 && in->slots[h][len] == '\0') return in->slots[h];
    char *copy = est__strndup(s, len);
    if (!copy) return NULL;
    in->count++;
    return in->slots[h] = copy;
}

const char *est__graph_intern(est_graph *g, const char *s) { return est__graph_intern_n(g, s, strlen(s)); }

int32_t est__graph_symbol(est_graph *g, const char *name) {
    for (int32_t i = 0; i < g->n_symbols; i++)
        if (strcmp(g->symbols[i], name) == 0) return i;
    if ((uint64_t)g->n_symbols >= g->limits.max_symbols) return -2;
    char **ns = realloc(g->symbols, (size_t)(g->n_symbols + 1) * sizeof *ns);
    if (!ns) return -1;
    g->symbols = ns;
    if (!(ns[g->n_symbols] = est__strdup(name))) return -1;
    return g->n_symbols++;
}

est_node *est__graph_add_node(est_graph *g) {
    if (g->n_nodes == g->cap_nodes) {
        int32_t cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        est_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return NULL;
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    est_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    return n;
}

/* ---- finishing ------------------------------------------------------------ */

static const char *tensor_origin(const est_tensor *t) {
    return t->kind == EST_T_INPUT ? "graph input" : "initializer";
}

static est_status assign_producers(est_graph *g, est_error *err) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_outputs; k++) {
            int32_t t = n->outputs[k];
            if (t < 0) continue;
            est_tensor *tt = &g->tensors[t];
            if (tt->kind != EST_T_ACTIVATION)
                return est__fail(err, EST_EGRAPH, "%s: node '%s' (%s): output '%s' redefines a %s",
                                 g->source, n->name, n->op_type, tt->name, tensor_origin(tt));
            if (tt->producer >= 0)
                return est__fail(err, EST_EGRAPH,
                                 "%s: node '%s' (%s): output '%s' is already produced by node '%s'",
                                 g->source, n->name, n->op_type, tt->name,
                                 g->nodes[tt->producer].name);
            tt->producer = i;
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_inputs; k++) {
            int32_t t = n->inputs[k];
            if (t < 0) continue;
            est_tensor *tt = &g->tensors[t];
            if (tt->kind == EST_T_ACTIVATION && tt->producer < 0)
                return est__fail(err, EST_EGRAPH,
                                 "%s: node '%s' (%s): input '%s' is not produced by any node, "
                                 "graph input or initializer",
                                 g->source, n->name, n->op_type, tt->name);
        }
    }
    for (int32_t k = 0; k < g->n_outputs; k++) {
        est_tensor *tt = &g->tensors[g->outputs[k]];
        if (tt->kind == EST_T_ACTIVATION && tt->producer < 0)
            return est__fail(err, EST_EGRAPH, "%s: graph output '%s' is not produced by any node",
                             g->source, tt->name);
    }
    return EST_OK;
}

static bool already_sorted(const est_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && g->tensors[n->inputs[k]].producer >= i) return false;
    }
    return true;
}

/* Kahn's algorithm over node -> consumer edges; reports a node on a cycle. */
static est_status sort_nodes(est_graph *g, est_error *err) {
    if (already_sorted(g)) return EST_OK;
    int32_t nn = g->n_nodes;
    int64_t n_edges = 0;
    for (int32_t i = 0; i < nn; i++) n_edges += g->nodes[i].n_inputs;
    int32_t *indeg = calloc((size_t)nn + 1, sizeof *indeg);
    int32_t *start = calloc((size_t)nn + 1, sizeof *start);
    int32_t *edges = malloc((size_t)(n_edges ? n_edges : 1) * sizeof *edges);
    int32_t *order = malloc((size_t)(nn ? nn : 1) * sizeof *order);
    est_node *sorted = malloc((size_t)(nn ? nn : 1) * sizeof *sorted);
    est_status st = EST_OK;
    if (!indeg || !start || !edges || !order || !sorted) {
        st = est__fail(err, EST_ENOMEM, "%s: out of memory sorting nodes", g->source);
        goto out;
    }
    for (int32_t i = 0; i < nn; i++)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++) {
            int32_t t = g->nodes[i].inputs[k];
            if (t >= 0 && g->tensors[t].producer >= 0) {
                start[g->tensors[t].producer + 1]++;
                indeg[i]++;
            }
        }
    for (int32_t i = 0; i < nn; i++) start[i + 1] += start[i];
    {
        int32_t *fill = calloc((size_t)nn + 1, sizeof *fill);
        if (!fill) {
            st = est__fail(err, EST_ENOMEM, "%s: out of memory sorting nodes", g->source);
            goto out;
        }
        for (int32_t i = 0; i < nn; i++)
            for (int32_t k = 0; k < g->nodes[i].n_inputs; k++) {
                int32_t t = g->nodes[i].inputs[k];
                if (t >= 0 && g->tensors[t].producer >= 0) {
                    int32_t p = g->tensors[t].producer;
                    edges[start[p] + fill[p]++] = i;
                }
            }
        free(fill);
    }
    int32_t head = 0, tail = 0;
    for (int32_t i = 0; i < nn; i++)
        if (indeg[i] == 0) order[tail++] = i;
    while (head < tail) {
        int32_t p = order[head++];
        for (int32_t e = start[p]; e < start[p + 1]; e++)
            if (--indeg[edges[e]] == 0) order[tail++] = edges[e];
    }
    if (tail < nn) {
        int32_t bad = 0;
        while (bad < nn && indeg[bad] == 0) bad++;
        st = est__fail(err, EST_EGRAPH, "%s: node '%s' (%s): the graph has a cycle through this node",
                       g->source, g->nodes[bad].name, g->nodes[bad].op_type);
        goto out;
    }
    for (int32_t i = 0; i < nn; i++) sorted[i] = g->nodes[order[i]];
    free(g->nodes);
    g->nodes = sorted;
    g->cap_nodes = nn;
    sorted = NULL;
    for (int32_t t = 0; t < g->n_tensors; t++) g->tensors[t].producer = -1;
    for (int32_t i = 0; i < nn; i++)
        for (int32_t k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) g->tensors[g->nodes[i].outputs[k]].producer = i;
out:
    free(indeg);
    free(start);
    free(edges);
    free(order);
    free(sorted);
    return st;
}

/* A table the dynamo exporter computed ahead of time (its constant folding:
 * rotary position tables from a buffer, masks) and that element-wise ops
 * apply to activations is no parameter: the FX calls that read it read no
 * parameter (est_node.fx_args). A parameter viewed for broadcasting (a per-
 * channel scale, weight[:, None, None]) is folded the same way, so the rule
 * also asks for two or more dims above 1, which a per-channel view has not. */
static bool reads_as_folded_table(const est_node *n) {
    static const char *const elementwise[] = {"Mul", "Div", "Add", "Sub"};
    if (n->fx_args != EST_FX_NO_PARAM || n->domain[0]) return false;
    for (size_t k = 0; k < sizeof elementwise / sizeof *elementwise; k++)
        if (strcmp(n->op_type, elementwise[k]) == 0) return true;
    return false;
}

static bool spans_two_dims(const est_tensor *t) {
    int wide = 0;
    for (int32_t d = 0; t->dims && d < t->rank; d++) wide += t->dims[d].value > 1;
    return wide >= 2;
}

/* An initializer is a parameter when a node may differentiate through it
 * (unless it reads as a folded table), a buffer when it feeds running-
 * statistics slots, a constant otherwise. */
static bool classify_initializers(est_graph *g) {
    enum { USE_DIFF = 1, USE_BUFFER = 2, USE_NOT_TABLE = 4 };
    uint8_t *use = calloc((size_t)g->n_tensors + 1, 1);
    if (!use) return false; /* not a graph without parameters: the load fails */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_inputs; k++) {
            int32_t t = n->inputs[k];
            if (t < 0 || g->tensors[t].kind != EST_T_INITIALIZER) continue;
            est_slot_mask bit = k < 32 ? EST_SLOT(k) : 0;
            if (n->op && (n->op->buffer_inputs & bit)) use[t] |= USE_BUFFER;
            else if (!n->op || !(n->op->nondiff_inputs & bit)) use[t] |= USE_DIFF;
            if (!reads_as_folded_table(n)) use[t] |= USE_NOT_TABLE;
        }
    }
    for (int32_t t = 0; t < g->n_tensors; t++) {
        est_tensor *tt = &g->tensors[t];
        if (tt->kind != EST_T_INITIALIZER) continue;
        bool table = !(use[t] & USE_NOT_TABLE) && spans_two_dims(tt);
        if ((use[t] & USE_BUFFER) || tt->torch_buffer) tt->role = EST_ROLE_BUFFER;
        /* A 0-d float initializer is a folded scalar (a scale, an epsilon),
         * not a module's weight. */
        else if ((use[t] & USE_DIFF) && !table && est__dtype_is_float(tt->dtype) && tt->rank > 0)
            tt->role = EST_ROLE_PARAM;
        else tt->role = EST_ROLE_CONST;
    }
    free(use);
    return true;
}

/* Resolves every node's registry entry. */
static void resolve_ops(est_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node *n = &g->nodes[i];
        if (strcmp(n->domain, "ai.onnx") == 0) n->domain = ""; /* the same domain */
        n->op = est__op_lookup(n->domain, n->op_type);
    }
}

/* ---- module calls ------------------------------------------------------------
 * PyTorch eager keeps a module's arguments referenced (by the caller's frame
 * and the call's argument tuple) until the module returns, even after its
 * forward has read them for the last time. The exporters name the module each
 * node ran in (est_node.scope); one call of a module is a maximal run of
 * consecutive nodes inside its scope. Nodes of unknown scope neither extend
 * nor end a run. */

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
        if (!g->nodes[i].scope) continue;
        for (int32_t d = 0; d < sp->offset[i + 1] - sp->offset[i]; d++) {
            if (first[sp->offset[i] + d] != i) continue; /* not the start of a run */
            int32_t m = 0;
            for (int32_t j = i; j <= last[sp->offset[i] + d]; j++) {
                if (!g->nodes[j].scope) continue;
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
        if (!g->nodes[i].scope) continue;
        int32_t depth = offset[i + 1] - offset[i];
        int32_t shared = prev >= 0 ? common_depth(g, sp, prev, i) : 0;
        if (shared > break_at[i]) shared = break_at[i];
        for (int32_t d = 0; d < depth; d++) first[offset[i] + d] = d < shared ? first[offset[prev] + d] : i;
        prev = i;
    }
    for (int32_t i = nn - 1, next = -1; i >= 0; i--) {
        if (!g->nodes[i].scope) continue;
        int32_t depth = offset[i + 1] - offset[i];
        int32_t shared = next >= 0 ? common_depth(g, sp, next, i) : 0;
        if (next >= 0 && shared > break_at[next]) shared = break_at[next];
        for (int32_t d = 0; d < depth; d++) last[offset[i] + d] = d < shared ? last[offset[next] + d] : i;
        next = i;
    }
}

static est_status plan_module_calls(est_graph *g, est_error *err) {
    int32_t nn = g->n_nodes;
    int64_t total = 0;
    int32_t *offset = malloc(((size_t)nn + 1) * sizeof *offset);
    if (!offset) return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    for (int32_t i = 0; i < nn; i++) {
        offset[i] = (int32_t)total;
        total += g->nodes[i].scope ? scope_depth(g->nodes[i].scope) : 0;
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
    scope_parts sp = {offset, start, len};
    find_calls(g, &sp, break_at, first, last);
    split_repeated_calls(g, &sp, first, last, units, prefix, break_at);
    find_calls(g, &sp, break_at, first, last);
    for (int32_t i = 0; i < nn; i++) {
        est_node *n = &g->nodes[i];
        free(n->input_held_until);
        if (!(n->input_held_until = malloc((size_t)(n->n_inputs ? n->n_inputs : 1) * sizeof(int32_t)))) {
            st = est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
            goto out;
        }
        for (int32_t k = 0; k < n->n_inputs; k++) {
            int32_t t = n->inputs[k], producer = t >= 0 ? g->tensors[t].producer : -1, held = -1;
            /* the outermost call that reads t without having produced it */
            for (int32_t d = 0; producer >= 0 && d < offset[i + 1] - offset[i]; d++)
                if (first[offset[i] + d] > producer) {
                    held = last[offset[i] + d];
                    break;
                }
            n->input_held_until[k] = held > i ? held : -1;
        }
        n->output_held_until = n->op && n->op->held_by_block ? innermost_block_end(n, &last[offset[i]]) : -1;
        if (n->output_held_until <= i) n->output_held_until = -1;
    }
out:
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

/* Caps that both loaders share; checked on the built graph, so the nodes the
 * ONNX loader adds (unfolded BatchNorms) count too. */
static est_status check_limits(const est_graph *g, est_error *err) {
    const est_limits *lim = &g->limits;
    if ((uint64_t)g->n_nodes > lim->max_nodes)
        return est__fail(err, EST_ELIMIT, "%s: %d nodes, above the limit of %llu (est_limits.max_nodes)",
                         g->source, (int)g->n_nodes, (unsigned long long)lim->max_nodes);
    if ((uint64_t)g->n_tensors > lim->max_tensors)
        return est__fail(err, EST_ELIMIT, "%s: %d named tensors, above the limit of %llu (est_limits.max_tensors)",
                         g->source, (int)g->n_tensors, (unsigned long long)lim->max_tensors);
    return EST_OK;
}

/* Passes that rewrite nodes before the graph is sorted, in order; each needs
 * producers assigned and returns how many nodes it changed, -1 when out of
 * memory. */
static int32_t (*const rewrite_passes[])(est_graph *g) = {
    est__lower_sequences,        /* sequences.c */
    est__fuse_exporter_patterns, /* fuse.c */
};

est_status est__graph_finish(est_graph *g, est_error *err) {
    est_status lst = check_limits(g, err);
    if (lst != EST_OK) return lst;
    resolve_ops(g);
    est_status st = assign_producers(g, err);
    for (size_t p = 0; st == EST_OK && p < sizeof rewrite_passes / sizeof *rewrite_passes; p++) {
        int32_t changed = rewrite_passes[p](g);
        if (changed < 0) return est__fail(err, EST_ENOMEM, "%s: out of memory rewriting the graph", g->source);
        if (changed == 0) continue;
        for (int32_t t = 0; t < g->n_tensors; t++) g->tensors[t].producer = -1;
        resolve_ops(g);
        st = assign_producers(g, err);
    }
    if (st == EST_OK) st = sort_nodes(g, err);
    if (st != EST_OK) return st;
    int32_t *reads = est__graph_count_reads(g);
    if (!reads) return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    for (int32_t t = 0; t < g->n_tensors; t++) g->tensors[t].readers = reads[t];
    free(reads);
    for (int32_t i = g->n_nodes - 1; i >= 0; i--)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) g->tensors[g->nodes[i].inputs[k]].first_consumer = i;
    if (!classify_initializers(g)) return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    st = est__graph_list_params(g, err);
    if (st == EST_OK) st = plan_module_calls(g, err);
    return st == EST_OK ? est__name_modules(g, err) : st;
}

/* ---- public accessors ------------------------------------------------------ */

const char *est_graph_name(const est_graph *g) { return g ? g->source : ""; }
size_t est_graph_node_count(const est_graph *g) { return g ? (size_t)g->n_nodes : 0; }
int64_t est_graph_opset(const est_graph *g) { return g ? g->opset : 0; }
size_t est_graph_unfolded_batchnorms(const est_graph *g) { return g ? (size_t)g->unfolded_batchnorms : 0; }
size_t est_graph_fused_sequences(const est_graph *g) { return g ? (size_t)g->fused_nodes : 0; }
size_t est_graph_input_count(const est_graph *g) { return g ? (size_t)g->n_inputs : 0; }
const char *est_graph_input_name(const est_graph *g, size_t i) {
    if (!g || i >= (size_t)g->n_inputs) return NULL;
    return g->tensors[g->inputs[i]].name;
}
