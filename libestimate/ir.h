/*
 * ir.h: the in-memory graph every loader builds and every pass reads.
 *
 * A graph is tensors plus nodes. Tensors are named values: graph inputs,
 * initializers (weights, with dims but no bytes) and node outputs. Nodes refer
 * to tensors by index. After est__graph_finish() the nodes are in topological
 * order and every tensor has exactly one producer (a node, the graph's inputs
 * or an initializer), so passes can walk `nodes` front to back.
 *
 * Internal: not installed. Names with a double underscore are library-private.
 */
#ifndef EST_IR_H
#define EST_IR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "estimate.h"

#define EST_MAX_RANK 12
#define EST_MAX_IO 1024    /* inputs or outputs a single node may have (the dynamo
                              exporter unrolls an RNN into a Concat of every step) */
/* memest's own op domain: ops that say what PyTorch did where ONNX has no op
 * for it (Detach: tensor.detach()). */
#define EST_DOMAIN_MEMEST "ai.memest"

/* Element values of a small tensor known at estimate time. Integer and bool
 * types are held as int64, floating types as double. */
#ifdef __cplusplus /* verify's CUDA sources read the layout, never the count */
#define EST_ATOMIC(T) T
#else
#define EST_ATOMIC(T) _Atomic T
#endif

/* A folded or stored tensor value. Shared by reference count: an estimate's
 * folded values are also kept by the graph's plan (plan.c) without a copy.
 * est__const_new returns one reference, est__const_ref adds one, and
 * est__const_free drops one, freeing the value with the last. */
typedef struct est_const {
    est_dtype dtype;
    int64_t count;
    int64_t *i64;   /* set for integer/bool dtypes */
    double *f64;    /* set for floating dtypes */
    EST_ATOMIC(int32_t) refs;
} est_const;

typedef enum est_tensor_kind {
    EST_T_ACTIVATION = 0, /* produced by a node */
    EST_T_INPUT,          /* graph input */
    EST_T_INITIALIZER,    /* weight or constant stored in the model */
} est_tensor_kind;

/* What an initializer is, decided from how nodes use it. */
typedef enum est_init_role {
    EST_ROLE_NONE = 0,
    EST_ROLE_PARAM,   /* trainable weight */
    EST_ROLE_BUFFER,  /* non-trainable state (BatchNorm running stats) */
    EST_ROLE_CONST,   /* shape constants, scalars, dropout ratios, ... */
} est_init_role;

/* A declared dim: a value, or a symbol (index into graph->symbols), or
 * unknown (value < 0 and sym < 0). */
typedef struct est_dimdecl {
    int64_t value;
    int32_t sym;
} est_dimdecl;

typedef struct est_tensor {
    char *name;             /* in the graph's chunks (est__graph_text) */
    est_tensor_kind kind;
    est_init_role role;
    est_dtype dtype;        /* declared dtype; UNDEFINED when not declared */
    int32_t rank;           /* declared rank; -1 when not declared */
    est_dimdecl *dims;      /* declared dims (rank entries) or NULL; in the
                               graph's chunks (est__graph_dims) */
    est_const *value;       /* small initializer values kept for folding */
    int32_t producer;       /* node index, -1 for inputs and initializers */
    int32_t first_consumer; /* node index, -1 if unused */
    int32_t readers;        /* node inputs and graph outputs that read it */
    char *torch_name;       /* a parameter's named_parameters() name when the
                               exporter renamed it, else NULL (params.c) */
    bool torch_buffer;      /* the model registered it as a buffer (a dynamo
                               export's FX call reads it as one) */
    int32_t frame_held_until; /* set by est__graph_finish (module_calls.c):
                               the last node of the module call whose frame
                               keeps this submodule output (a name, a list),
                               -1 for none */
} est_tensor;

typedef enum est_attr_type {
    EST_ATTR_UNDEFINED = 0,
    EST_ATTR_FLOAT = 1,
    EST_ATTR_INT = 2,
    EST_ATTR_STRING = 3,
    EST_ATTR_TENSOR = 4,
    EST_ATTR_GRAPH = 5,
    EST_ATTR_FLOATS = 6,
    EST_ATTR_INTS = 7,
    EST_ATTR_STRINGS = 8,
    EST_ATTR_TENSORS = 9,
    EST_ATTR_GRAPHS = 10,
    EST_ATTR_SPARSE_TENSOR = 11,
    EST_ATTR_SPARSE_TENSORS = 12,
    EST_ATTR_TYPE_PROTO = 13,
    EST_ATTR_TYPE_PROTOS = 14,
} est_attr_type;

/* An attribute's name and arrays live in its graph's arena for attributes
 * (est__graph_attrs, est__graph_attr_text, est__graph_attr_copy), freed with
 * the graph; its tensor value is shared by reference count (est__attr_free). */
typedef struct est_attr {
    char *name;
    est_attr_type type;
    int64_t i;
    double f;
    char *s;             /* STRING (NUL-terminated copy) */
    int64_t n;           /* element count of ints/floats/strings */
    int64_t *ints;
    double *floats;
    char **strings;
    /* TENSOR: dtype and dims always; values only when small (for folding). */
    est_dtype t_dtype;
    int32_t t_rank;
    int64_t *t_dims;     /* t_rank entries (at least one allocated); an
                            array of EST_MAX_RANK here made every attribute,
                            most of them ints, twice as large */
    est_const *t_value;
} est_attr;

struct est_op_def;

/* What the dynamo exporter says of the FX call a node came from. */
typedef enum est_fx_args {
    EST_FX_UNKNOWN = 0,  /* not a dynamo export, or it does not say */
    EST_FX_NO_PARAM,     /* the call reads no parameter */
    EST_FX_READS_PARAM,  /* one of its arguments is a parameter */
} est_fx_args;

/* INT attributes the loader sets on each LSTM, GRU and RNN node of a stacked
 * PyTorch module (onnx/rnn_weights.c), which size the module's one cuDNN
 * call's workspace (layers/recurrent.c): how many layers the call runs, */
#define EST_RNN_CALL_LAYERS "memest.call_layers"
/* And the input size of the call's first layer, where its W gives it. */
#define EST_RNN_CALL_INPUT "memest.call_input"
/* INT attribute, 1 on an Attention node that fuse.c made from a chain with
 * a Dropout of the probabilities (SDPA's dropout_p > 0): its math kernel
 * then keeps the dropped probabilities and the mask (layers/linear.c). */
#define EST_ATTENTION_DROPOUT "memest.dropout"

typedef struct est_node {
    char *name;         /* never NULL: "<op>_<index>" when the model has none;
                           in the graph's chunks (est__graph_text) */
    /* op_type, domain and scope are interned: the graph owns one copy of each
     * distinct string (est__graph_intern), shared by every node naming it. */
    const char *op_type;
    const char *domain; /* "" for the standard domain */
    const struct est_op_def *op; /* registry entry, NULL if unsupported */
    /* the counts side by side, and the bools below, leave no padding (a
     * million nodes: 16 MB) */
    int32_t n_inputs;
    int32_t n_outputs;
    int32_t *inputs;    /* tensor indices; -1 for an omitted optional input;
                           in the graph's chunks (est__graph_ids) */
    int32_t *outputs;   /* tensor indices; -1 for an omitted optional output;
                           in the graph's chunks */
    int32_t n_attrs;
    /* Set by est__graph_finish for an op marked held_by_block (registry.h):
     * the last node of the innermost block call around it; -1 for none. */
    int32_t output_held_until;
    est_attr *attrs;
    int64_t opset;      /* opset of the node's domain */
    /* The PyTorch module call the node ran in, as a '/'-separated module path
     * ("layer1/layer1.0/conv1"; "" for the model's own forward), or NULL when
     * the file does not say. */
    const char *scope;
    /* Set by est__graph_finish (module_names.c): the named_modules() name of
     * the scope's innermost module ("layer1.0.conv1"; "" for the model's own
     * forward; NULL without a scope; interned), and what reports show for
     * the node: the module when the exporter made the name up, else the
     * name. */
    const char *module;
    const char *label;  /* n->name or n->module */
    uint64_t fx_arg0;   /* a hash of the FX value the call takes first
                           ("%getitem_38" in a dynamo export's "aten.linear(
                           %getitem_38, ...)"), 0 when the file does not say */
    /* Per input, set by est__graph_finish: the last node of the outermost
     * module call that reads the input but did not produce it (the caller's
     * reference keeps a module's arguments alive until it returns); -1 when
     * there is none, and NULL when no input has one. */
    int32_t *input_held_until;
    est_fx_args fx_args;
    bool fx_sdpa;       /* the dynamo exporter says the node came from an
                           FX call of aten.scaled_dot_product_attention */
    bool fx_sdpa_dropout; /* ...whose dropout_p is above 0, which the
                             exporter's decomposition drops */
} est_node;

/* Interned strings: a set, open addressing; the graph owns every string. */
typedef struct est_intern {
    uint64_t cap, count; /* cap: a power of two */
    char **slots;        /* NULL: empty */
} est_intern;

/* A bump allocator over malloc'd chunks (arena.c), for what dies together:
 * a graph's names and id lists, one unpacked ONNX item. Nothing is freed
 * one by one; est__arena_reset frees all at once. A request over a quarter
 * of `chunk` gets a chunk of its own. Zero-initialise, then set chunk. */
#define EST_ARENA_ALIGN 16 /* the largest alignment est__arena_alloc gives */
typedef struct est_arena_chunk est_arena_chunk;
typedef struct est_arena {
    est_arena_chunk *head;
    size_t chunk; /* an ordinary chunk's size */
} est_arena;
/* size bytes aligned to align (a power of two, at most EST_ARENA_ALIGN);
 * NULL when out of memory. */
void *est__arena_alloc(est_arena *a, size_t size, size_t align);
/* Frees every chunk, or, with keep_one, all but one ordinary chunk, emptied
 * for the next allocations to reuse. */
void est__arena_reset(est_arena *a, bool keep_one);

/* Large arrays' pages faulted in on a second thread while the caller goes
 * on (prefault.c): a page's fault costs more than writing it, and a
 * million-node graph and its estimate write arrays of a hundred megabytes.
 * The contents are kept, so the caller may write the arrays meanwhile; it
 * waits before freeing or moving any of them. Zero-initialise, add the
 * ranges (arrays under 4 MB are left out; the last added is populated
 * first), start; nothing is started where the kernel cannot populate
 * pages. */
#define EST_PREFAULT_RANGES 16
typedef struct est_prefault {
    uintptr_t lo[EST_PREFAULT_RANGES], hi[EST_PREFAULT_RANGES]; /* page-aligned */
    int n;
    bool started;
    pthread_t thread;
} est_prefault;
void est__prefault_add(est_prefault *pf, void *p, size_t bytes);
void est__prefault_start(est_prefault *pf);
void est__prefault_wait(est_prefault *pf);

typedef struct est_name_map {
    uint64_t cap;       /* power of two, at most 2^32 */
    uint64_t *slots;    /* 0 when empty, else the name's 32-bit hash (graph.c),
                           whose low bits pick its first slot, then its tensor
                           index + 1: a probe compares hashes before it reads
                           a name, and growing reads none */
} est_name_map;

struct est_graph {
    char *source;        /* file path or "<memory>" */
    char *name;          /* graph name from the model */
    char *producer;      /* producer_name, e.g. "pytorch" */
    int64_t ir_version;
    int64_t opset;       /* default-domain opset */
    int32_t n_tensors, cap_tensors;
    est_tensor *tensors;
    int32_t n_nodes, cap_nodes;
    est_node *nodes;     /* topological order after finish */
    int32_t n_inputs;
    int32_t *inputs;     /* graph inputs that are not initializers */
    int32_t n_outputs;
    int32_t *outputs;
    int32_t n_symbols;
    char **symbols;      /* distinct dim_param names */
    est_name_map names;
    est_arena text;      /* names, node inputs and outputs (est__graph_text,
                            est__graph_ids), freed with the graph */
    est_arena attr_text; /* the nodes' attributes (est__graph_attrs) */
    est_intern strings;  /* the nodes' op types, domains and scopes */
    int32_t unfolded_batchnorms; /* BatchNorms the loader restored after a Conv */
    int32_t fused_nodes;         /* exporter-expanded sequences folded back (fuse.c) */
    est_limits limits;           /* the caps it was loaded under, all fields set */
    int32_t n_params;
    int32_t *params;             /* the parameters nodes read, in file order */
    est_dtype dtype;             /* the float dtype most parameter elements
                                    have in the file (est_graph_dtype) */
    /* What every estimate of the graph shares, made by the first one
     * (plan.c); the graph owns it and frees it with plan_free. */
    struct est_plan *plan;
    void (*plan_free)(struct est_plan *plan);
    pthread_mutex_t plan_lock;
};

/* ---- building (used by the loaders) ----------------------------------- */

est_graph *est__graph_new(const char *source);
/* Returns the tensor index for `name`, creating an activation tensor if new;
 * -1 on allocation failure. */
int32_t est__graph_tensor(est_graph *g, const char *name);
/* Zeroed room for a tensor's n declared dims, freed with the graph; NULL
 * when out of memory. */
est_dimdecl *est__graph_dims(est_graph *g, size_t n);
/* The graph's one copy of s (of s[0..len)), owned by the graph and alive
 * until it is freed; NULL when out of memory. For node op types, domains and
 * scopes. */
const char *est__graph_intern(est_graph *g, const char *s);
const char *est__graph_intern_n(est_graph *g, const char *s, size_t len);
/* Whether s was interned: false says that no node has op type s, so a pass
 * that rewrites such nodes can skip the walk over the nodes. */
bool est__graph_interned(const est_graph *g, const char *s);
/* Returns the index of an existing tensor or -1. */
int32_t est__graph_find(const est_graph *g, const char *name);
/* Interns a dim_param name; returns its index, -1 on allocation failure or -2
 * past g->limits.max_symbols. */
int32_t est__graph_symbol(est_graph *g, const char *name);
/* The graph's copy of s, alive until the graph is freed: for tensor and
 * node names. NULL when out of memory. */
char *est__graph_text(est_graph *g, const char *s);
/* An array of n (at least 1) tensor indices that the graph owns, alive until
 * it is freed: for node inputs and outputs. NULL when out of memory. */
int32_t *est__graph_ids(est_graph *g, size_t n);
/* An attribute's parts, alive until the graph is freed; NULL when out of
 * memory: a copy of s[0..len) and a NUL (names, strings), */
char *est__graph_attr_text(est_graph *g, const char *s, size_t len);
/* room for bytes (at least one), aligned for any type (lists), */
void *est__graph_attr_room(est_graph *g, size_t bytes);
/* a copy of p[0..bytes) in such room, */
void *est__graph_attr_copy(est_graph *g, const void *p, size_t bytes);
/* and zeroed room for a node's n (at least 1) attributes. */
est_attr *est__graph_attrs(est_graph *g, size_t n);
/* Appends a zeroed node; returns it or NULL on allocation failure. */
est_node *est__graph_add_node(est_graph *g);
/* Makes room for that many more nodes and tensors, so that a loader that
 * knows its counts spares the arrays and the name map their regrowth;
 * false when out of memory. */
bool est__graph_reserve(est_graph *g, size_t nodes, size_t tensors);
/* Validates structure (unique producers, no cycles, every input produced),
 * sorts nodes topologically, resolves ops and classifies initializers. */
est_status est__graph_finish(est_graph *g, est_error *err);
/* module_calls.c: sets each node's input_held_until and output_held_until
 * and each tensor's frame_held_until from the scopes (graph.c runs it last
 * but one in est__graph_finish). */
est_status est__plan_module_calls(est_graph *g, est_error *err);
/* Lets go of what an attribute holds outside its graph's arena: its tensor
 * value. */
void est__attr_free(est_attr *a);
/* common.c: node n's attribute called name, NULL when absent. */
const est_attr *est_attr_get(const est_node *n, const char *name);
/* Attribute values for passes and training-step rules. Inference has
 * already checked them, so these only fall back to dflt when absent or of
 * another type. */
int64_t est_node_attr_int(const est_node *n, const char *name, int64_t dflt);
double est_node_attr_float(const est_node *n, const char *name, double dflt);
const char *est_node_attr_string(const est_node *n, const char *name, const char *dflt);
/* An ints attribute, NULL (and *count 0) when absent. */
const int64_t *est_node_attr_ints(const est_node *n, const char *name, int64_t *count);
/* common.c: a * b and a + b, saturating at UINT64_MAX so hostile shapes
 * cannot wrap. */
static inline uint64_t est_mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t est_add_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
/* common.c: bits per element of each dtype, 0 for those without a size. */
extern const uint8_t est__dtype_bits[EST_DT_COUNT];
/* est_dtype_bytes, inline where a whole byte holds whole elements (every
 * dtype but the sub-byte ones): the step calls it for every tensor. */
static inline uint64_t est__dtype_bytes(est_dtype dt, uint64_t count) {
    unsigned bits = (unsigned)dt < EST_DT_COUNT ? est__dtype_bits[dt] : 0;
    uint64_t bytes;
    if (bits % 8 != 0) return est_dtype_bytes(dt, count);
    return __builtin_mul_overflow(count, bits / 8, &bytes) ? UINT64_MAX : bytes;
}
/* Frees what a node owns and zeroes it. */
void est__node_clear(est_node *n);
/* Per tensor, how many node inputs and graph outputs read it (n_tensors
 * entries, caller frees); NULL when out of memory. */
int32_t *est__graph_count_reads(const est_graph *g);
/* What the ONNX loader appends to a Conv's name to name the BatchNorm it
 * restores after it. */
#define EST_UNFOLDED_BN_SUFFIX "/unfolded_BatchNormalization"
/* checkpoint.c: a module name whose last part is an index in its container
 * ("3", "layer.3", "encoder_layer_3"): a block. */
bool est__is_block_name(const char *name, size_t len);
/* Who reads each tensor: tensor t's readers are nodes[start[t] ..
 * start[t + 1]), in node order, one entry per input read (graph outputs are
 * not readers here). It describes the graph when it was made. */
typedef struct est_readers {
    int32_t *start;      /* n_tensors + 1 entries */
    int32_t *nodes;
} est_readers;
/* Indexes g's readers into *out; false when out of memory (nothing to free). */
bool est__graph_readers(const est_graph *g, est_readers *out);
void est__readers_free(est_readers *r);
/* Whether node n is op `op` of the standard domain. Inline: the passes ask
 * it of every node, several ops each, and the first character mostly
 * answers. */
static inline bool est__node_is(const est_node *n, const char *op) {
    return n->op_type && n->op_type[0] == op[0] && strcmp(n->op_type, op) == 0 && n->domain[0] == '\0';
}
/* Whether node n is an LSTM, GRU or RNN of the standard domain. */
bool est__node_is_recurrent(const est_node *n);

/* Clears the nodes marked in drop[] and closes the gaps, keeping the order. */
void est__graph_drop_nodes(est_graph *g, const bool *drop);
/* fuse.c: folds op sequences that an exporter expanded from one PyTorch op
 * back into that op, and splits a Dropout the exporter merged from several
 * (needs producers assigned). Returns how many nodes it changed or added;
 * the caller then re-assigns producers. */
int32_t est__fuse_exporter_patterns(est_graph *g);

/* The values of tensor t when the file gives them: an initializer's kept
 * values, or a Constant node's `value` (needs producers assigned); NULL
 * otherwise. *rank (if not NULL) gets the tensor's rank. */
const est_const *est__graph_known_value(const est_graph *g, int32_t t, int32_t *rank);
/* sequences.c: lowers SplitToSequence read by SequenceAt into Slices (needs
 * producers assigned). Returns how many splits it lowered, -1 when out of
 * memory; the caller then re-assigns producers. */
int32_t est__lower_sequences(est_graph *g);

/* params.c: lists the parameters into g->params (after classification). */
est_status est__graph_list_params(est_graph *g, est_error *err);
/* params.c: whether parameter t trains under filter f. */
bool est__param_trains(const est_tensor *t, const est_param_filter *f);

void est__const_free(est_const *c);
/* Whether a value of count elements of dt is kept (est__const_new makes it):
 * numeric, and at most EST_FOLD_MAX_ELEMENTS. */
bool est__const_foldable(est_dtype dt, int64_t count);
/* NULL when not foldable, or out of memory (then foldable says which). */
est_const *est__const_new(est_dtype dt, int64_t count);
/* est__const_new with the elements unset, for a caller that writes them all. */
est_const *est__const_new_unset(est_dtype dt, int64_t count);
est_const *est__const_ref(est_const *c);
/* Whether node n is an Add of input k to the product of a MatMul (its other
 * input): how both exporters write a linear layer's bias add. Inline, as the
 * next: the step's planning asks them of every node and tensor. */
static inline bool est__adds_to_matmul(const est_graph *g, const est_node *n, int k) {
    /* the first character spares most strcmp calls */
    if (n->op_type[0] != 'A' || strcmp(n->op_type, "Add") != 0 || n->domain[0] || n->n_inputs != 2 || k < 0 || k > 1)
        return false;
    int32_t product = n->inputs[1 - k];
    int32_t p = product >= 0 ? g->tensors[product].producer : -1;
    return p >= 0 && g->nodes[p].op_type[0] == 'M' && strcmp(g->nodes[p].op_type, "MatMul") == 0;
}
static inline bool est__dtype_is_float(est_dtype dt) {
    switch (dt) {
    case EST_DT_FLOAT: case EST_DT_FLOAT16: case EST_DT_DOUBLE: case EST_DT_BFLOAT16:
    case EST_DT_FLOAT8E4M3FN: case EST_DT_FLOAT8E4M3FNUZ: case EST_DT_FLOAT8E5M2:
    case EST_DT_FLOAT8E5M2FNUZ: case EST_DT_FLOAT4E2M1: case EST_DT_FLOAT8E8M0:
        return true;
    default:
        return false;
    }
}
bool est__dtype_is_integer(est_dtype dt); /* 8 to 64 bits, signed or not */
bool est__dtype_is_int(est_dtype dt); /* integers and bool */

/* The dtype a tensor declared (or inferred) as `declared` is stored in
 * when the export's dtype `export_dtype` becomes `step` (est_options.dtype,
 * or the node's dtype under --amp): `step` for a tensor of the export's
 * dtype, else its own (a float32 island of a bfloat16 export stays
 * float32); its own when step is UNDEFINED. */
static inline est_dtype est__step_dtype(est_dtype declared, est_dtype export_dtype, est_dtype step) {
    return declared == export_dtype && step != EST_DT_UNDEFINED ? step : declared;
}

/* device.c: the device an estimate runs on when est_options.device is NULL. */
const est_device *est__default_device(void);

/* ---- errors -------------------------------------------------------------- */

/* Fills err (if not NULL) with code and a formatted message; returns code. */
est_status est__fail(est_error *err, est_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Checked arithmetic for element counts and bytes. */
static inline bool est__mul_overflow(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

char *est__strdup(const char *s);
/* The first len bytes of s, NUL-terminated; NULL when out of memory. */
char *est__strndup(const char *s, size_t len);
/* FNV-1a of s[0..len), continuing from h (EST_FNV_START to begin): the
 * string hash of the op table and the FX argument names. */
#define EST_FNV_START 1469598103934665603ull
static inline uint64_t est__fnv1a(uint64_t h, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The hash of the interned strings, the scope components, the FX call a
 * node came from and (but their last byte) the tensor names, eight bytes a
 * step: these run to dozens of bytes, and a byte a step cost as much as the
 * rest of a lookup. Its low bits mix every byte. */
static inline uint64_t est__str_hash(const char *s, size_t len) {
    const uint64_t k = UINT64_C(0x9e3779b97f4a7c15);
    uint64_t h = len * k, w;
    for (; len >= 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    w = 0;
    for (size_t i = 0; i < len; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ w) * k;
    h ^= h >> 29;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    return h ^ (h >> 32);
}

/* Copies *lim (NULL: the defaults) with every 0 field set to its default and
 * max_rank, max_nesting clamped to what the library can hold. */
void est__limits_resolve(const est_limits *lim, est_limits *out);
/* The loaders behind the public ones; `lim` NULL means the defaults. With
 * is_path, `name` is the model's path and external-data locations are
 * resolved against its folder. */
est_status est__load_onnx(const void *data, size_t size, const char *name, bool is_path, const est_limits *lim,
                          est_graph **out, est_error *err);
est_status est__load_json(const char *text, size_t size, const char *name, const est_limits *lim,
                          est_graph **out, est_error *err);

/* Values that bound work on hostile input; see docs/robustness.md. The
 * defaults of est_limits are below; EST_MAX_RANK sizes arrays. */
#define EST_DEFAULT_MAX_FILE_BYTES ((uint64_t)4 << 30)
#define EST_DEFAULT_MAX_NODES ((uint64_t)1 << 20)
#define EST_DEFAULT_MAX_TENSORS ((uint64_t)1 << 22)
#define EST_DEFAULT_MAX_SYMBOLS 4096
#define EST_DEFAULT_MAX_ATTR_ELEMENTS ((uint64_t)1 << 20)
#define EST_DEFAULT_MAX_NESTING 64
#define EST_MAX_NESTING_CAP 1000   /* protobuf-c and cJSON recurse once per level */
#define EST_DEFAULT_MAX_WORK ((uint64_t)1 << 26)
#define EST_FOLD_MAX_ELEMENTS 65536   /* largest tensor folded to a constant */
#define EST_FOLD_MAX_FLOAT_VALUES 64  /* largest floating initializer whose values are kept */
#define EST_MAX_DIM_VALUE ((int64_t)1 << 40)
#define EST_MAX_GRAD_ACCUM 1024   /* micro-batches per step: each is simulated */

#endif
