/* graph.c: building a graph, validating it, ordering it topologically. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "module_names.h"
#include "registry.h"

/* The name map's 32-bit hash of s[0..len): est__str_hash of all but the
 * last byte, the last byte added by a step of FNV-1a, and of that the bits
 * from MAP_TURN up, then the lowest. A name's first slot is the hash's low
 * bits. Names that differ in their last byte only ("mm7", "mm8") differ by
 * a few units there, so that their lookups share a cache line or two:
 * est__str_hash of the whole name loaded the million-node synthetic graph
 * 20% slower, its lookups missing the cache, and FNV-1a's top bits put
 * them a quarter slot apart, in runs that cost ten probes a lookup. */
enum { MAP_TURN = 40 };
static uint32_t name_hash(const char *s, size_t len) {
    uint64_t h = est__str_hash(s, len ? len - 1 : 0);
    if (len) h = (h ^ (unsigned char)s[len - 1]) * 1099511628211ull;
    return (uint32_t)(h >> MAP_TURN | h << (64 - MAP_TURN));
}
static uint32_t hash_name(const char *s) { return name_hash(s, strlen(s)); }
static uint64_t intern_hash(const char *s) { return est__str_hash(s, strlen(s)); }

/* The tensors' and nodes' names and dims, the nodes' input and output lists
 * and their attributes live as long as the graph: they go into its arenas
 * (g->text, g->attr_text), freed together, which spares a million-node graph
 * millions of allocations, their headers and their frees. */
enum { CHUNK = 64 << 10 };

static char *text_copy(est_graph *g, const char *s, size_t len) {
    char *p = est__arena_alloc(&g->text, len + 1, 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *est__graph_text(est_graph *g, const char *s) { return text_copy(g, s, strlen(s)); }

/* An attribute's parts go into an arena of their own: among the names and
 * the id lists, they spread the lists that every pass over the nodes reads,
 * and the million-node graph's estimate ran 5% slower. */
char *est__graph_attr_text(est_graph *g, const char *s, size_t len) {
    char *p = est__arena_alloc(&g->attr_text, len + 1, 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, len); /* s may be NULL when empty */
    p[len] = '\0';
    return p;
}

void *est__graph_attr_room(est_graph *g, size_t bytes) {
    return est__arena_alloc(&g->attr_text, bytes ? bytes : 1, EST_ARENA_ALIGN);
}

void *est__graph_attr_copy(est_graph *g, const void *p, size_t bytes) {
    void *copy = est__graph_attr_room(g, bytes);
    if (copy && bytes) memcpy(copy, p, bytes);
    return copy;
}

est_attr *est__graph_attrs(est_graph *g, size_t n) {
    if (n > SIZE_MAX / sizeof(est_attr)) return NULL;
    est_attr *a = est__arena_alloc(&g->attr_text, (n ? n : 1) * sizeof *a, _Alignof(est_attr));
    if (a) memset(a, 0, (n ? n : 1) * sizeof *a);
    return a;
}

int32_t *est__graph_ids(est_graph *g, size_t n) {
    return est__arena_alloc(&g->text, (n ? n : 1) * sizeof(int32_t), sizeof(int32_t));
}

est_dimdecl *est__graph_dims(est_graph *g, size_t n) {
    if (n > SIZE_MAX / sizeof(est_dimdecl)) return NULL;
    est_dimdecl *d = est__arena_alloc(&g->text, (n ? n : 1) * sizeof *d, _Alignof(est_dimdecl));
    if (d) memset(d, 0, (n ? n : 1) * sizeof *d);
    return d;
}

est_graph *est__graph_new(const char *source) {
    est_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->text.chunk = CHUNK;
    g->attr_text.chunk = CHUNK;
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

void est__attr_free(est_attr *a) { est__const_free(a->t_value); }

/* Frees what node n owns (not its name, inputs, outputs and attributes, in
 * the graph's chunks), leaving n as it is. */
static void node_free(est_node *n) {
    for (int32_t k = 0; k < n->n_attrs; k++) est__attr_free(&n->attrs[k]);
    free(n->input_held_until);
}

void est__node_clear(est_node *n) {
    node_free(n);
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
        free(g->tensors[i].torch_name);
        est__const_free(g->tensors[i].value);
    }
    for (int32_t i = 0; i < g->n_nodes; i++) node_free(&g->nodes[i]);
    for (int32_t i = 0; i < g->n_symbols; i++) free(g->symbols[i]);
    free(g->symbols);
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->params);
    free(g->names.slots);
    for (uint64_t i = 0; i < g->strings.cap; i++) free(g->strings.slots[i]);
    free(g->strings.slots);
    est__arena_reset(&g->text, false);
    est__arena_reset(&g->attr_text, false);
    free(g->source);
    free(g->name);
    free(g->producer);
    if (g->plan) g->plan_free(g->plan);
    pthread_mutex_destroy(&g->plan_lock);
    free(g);
}

enum { MAP_FIRST_CAP = 64 };

static uint64_t map_slot(uint32_t hash, int32_t t) { return (uint64_t)hash << 32 | ((uint64_t)t + 1); }

/* Grows the name map to at least `want` slots, in one step: each step
 * allocates a table and moves every name. */
static bool map_grow(est_graph *g, uint64_t want) {
    est_name_map *m = &g->names;
    uint64_t cap = m->cap ? m->cap * 2 : MAP_FIRST_CAP;
    while (cap < want) cap *= 2;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->slots[i]) continue;
        uint64_t h = (m->slots[i] >> 32) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

static int32_t find_hashed(const est_graph *g, const char *name, uint32_t hash) {
    const est_name_map *m = &g->names;
    if (!m->cap) return -1;
    uint64_t mask = m->cap - 1;
    for (uint64_t h = hash & mask;; h = (h + 1) & mask) {
        uint64_t slot = m->slots[h];
        if (!slot) return -1;
        int32_t t = (int32_t)((uint32_t)slot - 1);
        if ((uint32_t)(slot >> 32) == hash && strcmp(g->tensors[t].name, name) == 0) return t;
    }
}

int32_t est__graph_find(const est_graph *g, const char *name) { return find_hashed(g, name, hash_name(name)); }

int32_t est__graph_tensor(est_graph *g, const char *name) {
    size_t len = strlen(name);
    uint32_t hash = name_hash(name, len);
    int32_t t = find_hashed(g, name, hash);
    if (t >= 0) return t;
    if ((uint64_t)(g->n_tensors + 1) * 2 > g->names.cap && !map_grow(g, 0)) return -1;
    if (g->n_tensors == g->cap_tensors) {
        int32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
        est_tensor *nt = realloc(g->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        g->tensors = nt;
        g->cap_tensors = cap;
    }
    char *copy = text_copy(g, name, len);
    if (!copy) return -1;
    t = g->n_tensors++;
    g->tensors[t] = (est_tensor){.name = copy, .rank = -1, .producer = -1, .first_consumer = -1, .frame_held_until = -1};
    uint64_t mask = g->names.cap - 1, h = hash & mask;
    while (g->names.slots[h]) h = (h + 1) & mask;
    g->names.slots[h] = map_slot(hash, t);
    return t;
}

static bool intern_grow(est_intern *in) {
    uint64_t cap = in->cap ? in->cap * 2 : 64;
    char **slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (uint64_t i = 0; i < in->cap; i++) {
        char *s = in->slots[i];
        if (!s) continue;
        uint64_t h = intern_hash(s) & (cap - 1);
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
    uint64_t h = est__str_hash(s, len) & (in->cap - 1);
    for (; in->slots[h]; h = (h + 1) & (in->cap - 1))
        if (strncmp(in->slots[h], s, len) == 0 && in->slots[h][len] == '\0') return in->slots[h];
    char *copy = est__strndup(s, len);
    if (!copy) return NULL;
    in->count++;
    return in->slots[h] = copy;
}

const char *est__graph_intern(est_graph *g, const char *s) { return est__graph_intern_n(g, s, strlen(s)); }

bool est__graph_interned(const est_graph *g, const char *s) {
    const est_intern *in = &g->strings;
    if (!in->cap) return false;
    for (uint64_t h = intern_hash(s) & (in->cap - 1); in->slots[h]; h = (h + 1) & (in->cap - 1))
        if (strcmp(in->slots[h], s) == 0) return true;
    return false;
}

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

bool est__graph_reserve(est_graph *g, size_t nodes, size_t tensors) {
    if (nodes > (size_t)(INT32_MAX / 2 - g->n_nodes) || tensors > (size_t)(INT32_MAX / 2 - g->n_tensors))
        return true; /* beyond what a graph holds: growing fails in time */
    int32_t want_nodes = g->n_nodes + (int32_t)nodes, want_tensors = g->n_tensors + (int32_t)tensors;
    if (want_nodes > g->cap_nodes) {
        est_node *nn = realloc(g->nodes, (size_t)want_nodes * sizeof *nn);
        if (!nn) return false;
        g->nodes = nn;
        g->cap_nodes = want_nodes;
    }
    if (want_tensors > g->cap_tensors) {
        est_tensor *nt = realloc(g->tensors, (size_t)want_tensors * sizeof *nt);
        if (!nt) return false;
        g->tensors = nt;
        g->cap_tensors = want_tensors;
    }
    if ((uint64_t)want_tensors * 2 > g->names.cap && !map_grow(g, (uint64_t)want_tensors * 2)) return false;
    return true;
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

/* Each activation's producing node; checks that every activation a node
 * reads has one. *in_order: every node follows the producers of its inputs
 * (the walk that checks them reads what sort_nodes would read again). */
static est_status assign_producers(est_graph *g, est_error *err, bool *in_order) {
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
    bool sorted = true;
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
            sorted &= tt->producer < i;
        }
    }
    *in_order = sorted;
    for (int32_t k = 0; k < g->n_outputs; k++) {
        est_tensor *tt = &g->tensors[g->outputs[k]];
        if (tt->kind == EST_T_ACTIVATION && tt->producer < 0)
            return est__fail(err, EST_EGRAPH, "%s: graph output '%s' is not produced by any node",
                             g->source, tt->name);
    }
    return EST_OK;
}

/* Orders the nodes so that every node follows the producers of its inputs,
 * keeping the file's order otherwise: a node out of place (one a rewrite
 * appended, or one the file lists late) moves up to just before its first
 * reader, and nothing else moves. The order is the execution order that the
 * simulation and the module calls (module_calls.c) read. A depth-first
 * walk, without recursion; reports a node on a cycle. */
static est_status sort_nodes(est_graph *g, est_error *err) {
    int32_t nn = g->n_nodes;
    enum { UNSEEN = 0, OPEN, DONE };
    uint8_t *state = calloc((size_t)nn + 1, 1);
    int32_t *stack = malloc(((size_t)nn + 1) * sizeof *stack);
    int32_t *cursor = calloc((size_t)nn + 1, sizeof *cursor); /* the next input to look at */
    int32_t *order = malloc(((size_t)nn + 1) * sizeof *order);
    est_node *sorted = malloc(((size_t)nn + 1) * sizeof *sorted);
    est_status st = EST_OK;
    if (!state || !stack || !cursor || !order || !sorted) {
        st = est__fail(err, EST_ENOMEM, "%s: out of memory sorting nodes", g->source);
        goto out;
    }
    int32_t n_order = 0;
    for (int32_t root = 0; root < nn && st == EST_OK; root++) {
        if (state[root] != UNSEEN) continue;
        int32_t top = 0;
        stack[top++] = root;
        state[root] = OPEN;
        while (top > 0) {
            int32_t x = stack[top - 1];
            const est_node *n = &g->nodes[x];
            int32_t next = -1;
            while (cursor[x] < n->n_inputs && next < 0) {
                int32_t t = n->inputs[cursor[x]++];
                int32_t p = t >= 0 ? g->tensors[t].producer : -1;
                if (p < 0 || state[p] == DONE) continue;
                if (state[p] == OPEN) {
                    st = est__fail(err, EST_EGRAPH, "%s: node '%s' (%s): the graph has a cycle through this node",
                                   g->source, g->nodes[p].name, g->nodes[p].op_type);
                    goto out;
                }
                next = p;
            }
            if (next >= 0) {
                state[next] = OPEN;
                stack[top++] = next;
                continue;
            }
            state[x] = DONE;
            order[n_order++] = x;
            top--;
        }
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
    free(state);
    free(stack);
    free(cursor);
    free(order);
    free(sorted);
    return st;
}

/* A table the dynamo exporter computed ahead of time (its constant folding:
 * rotary position tables from a buffer, masks) and that element-wise ops
 * apply to activations is no parameter: the FX calls that read it read no
 * parameter (est_node.fx_args). A parameter viewed for broadcasting (a per-
 * channel scale, weight[:, None, None]) is folded the same way, so the rule
 * also asks for two or more dims above 1, which a per-channel view has not.
 * Where counts among those ops: T5's cross-attention bias, torch.zeros
 * filled by masked_fill, reaches the file as a zeros table read by a Where. */
static bool reads_as_folded_table(const est_node *n) {
    static const char *const elementwise[] = {"Mul", "Div", "Add", "Sub", "Where"};
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

enum { USE_DIFF = 1, USE_BUFFER = 2, USE_NOT_TABLE = 4 };

/* How node n's input k uses the initializer it reads (USE_ bits). */
static uint8_t initializer_use(const est_node *n, int32_t k) {
    est_slot_mask bit = k < 32 ? EST_SLOT(k) : 0;
    uint8_t use = 0;
    if (n->op && (n->op->buffer_inputs & bit)) use |= USE_BUFFER;
    else if (!n->op || (!(n->op->nondiff_inputs & bit) &&
                            (!(n->op->nonparam_inputs & bit) || n->fx_args == EST_FX_READS_PARAM)))
        use |= USE_DIFF; /* a mask the FX call names as a parameter trains */
    if (!reads_as_folded_table(n)) use |= USE_NOT_TABLE;
    return use;
}

/* An initializer is a parameter when a node may differentiate through it
 * (unless it reads as a folded table), a buffer when it feeds running-
 * statistics slots, a constant otherwise; use[t]: how nodes read it
 * (count_readers). */
static void classify_initializers(est_graph *g, const uint8_t *use) {
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
}

/* Resolves every node's registry entry. Nodes share a few op types and
 * domains, interned: the last lookups, found by the strings' addresses,
 * spare hashing each node's names. */
static void resolve_ops(est_graph *g) {
    enum { SEEN = 64 };
    struct { const char *op_type, *domain; const est_op_def *op; } seen[SEEN] = {{0}};
    for (int32_t i = 0; i < g->n_nodes; i++) {
        est_node *n = &g->nodes[i];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") == 0) n->domain = ""; /* the same domain */
        size_t h = (((uintptr_t)n->op_type ^ (uintptr_t)n->domain * 31) >> 3) % SEEN;
        if (seen[h].op_type != n->op_type || seen[h].domain != n->domain) {
            seen[h].op_type = n->op_type, seen[h].domain = n->domain;
            seen[h].op = est__op_lookup(n->domain, n->op_type);
        }
        n->op = seen[h].op;
    }
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

/* Each tensor's readers and first consumer, and how nodes read each
 * initializer (use), in one walk back over the nodes. A graph is finished
 * once, and est__graph_tensor starts each tensor with no readers and no
 * first consumer. */
static void count_readers(est_graph *g, uint8_t *use) {
    for (int32_t i = g->n_nodes - 1; i >= 0; i--)
        for (int32_t k = 0; k < g->nodes[i].n_inputs; k++) {
            int32_t t = g->nodes[i].inputs[k];
            if (t < 0) continue;
            est_tensor *tt = &g->tensors[t];
            tt->readers++, tt->first_consumer = i;
            if (tt->kind == EST_T_INITIALIZER) use[t] |= initializer_use(&g->nodes[i], k);
        }
    for (int32_t k = 0; k < g->n_outputs; k++) g->tensors[g->outputs[k]].readers++;
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
    bool in_order;
    est_status st = assign_producers(g, err, &in_order);
    for (size_t p = 0; st == EST_OK && p < sizeof rewrite_passes / sizeof *rewrite_passes; p++) {
        int32_t changed = rewrite_passes[p](g);
        if (changed < 0) return est__fail(err, EST_ENOMEM, "%s: out of memory rewriting the graph", g->source);
        if (changed == 0) continue;
        for (int32_t t = 0; t < g->n_tensors; t++) g->tensors[t].producer = -1;
        resolve_ops(g);
        st = assign_producers(g, err, &in_order);
    }
    if (st == EST_OK && !in_order) st = sort_nodes(g, err);
    if (st != EST_OK) return st;
    uint8_t *use = calloc((size_t)g->n_tensors + 1, 1);
    if (!use) return est__fail(err, EST_ENOMEM, "%s: out of memory", g->source);
    count_readers(g, use);
    classify_initializers(g, use);
    free(use);
    st = est__graph_list_params(g, err);
    if (st == EST_OK) st = est__plan_module_calls(g, err);
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
