/*
 * math_broadcast.c: the math family's broadcasting ops (math_family.h):
 * arithmetic, comparisons and logic, bitwise ops, variadic Max/Min/Sum/Mean
 * and Where, with their folds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "math_family.h"

/* ---- broadcasting -------------------------------------------------------- */

/* Merges t's shape into the running numpy broadcast (rank, dims). Returns the
 * axis of the result that does not broadcast (leaving rank and dims as they
 * were), or -1. */
static int broadcast_merge(int *rank, int64_t *dims, const est_tval *t) {
    int r = *rank > t->rank ? *rank : t->rank;
    int64_t merged[EST_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int ad = d - (r - *rank), td = d - (r - t->rank);
        int64_t a = ad >= 0 ? dims[ad] : 1, b = td >= 0 ? t->dims[td] : 1;
        if (a != b && a != 1 && b != 1) return d;
        merged[d] = a == 1 ? b : a;
    }
    memcpy(dims, merged, (size_t)r * sizeof *dims);
    *rank = r;
    return -1;
}

/* Broadcasts all of the node's inputs together into (rank, dims). */
static est_status broadcast_inputs(est_infer_ctx *ctx, int *rank, int64_t *dims) {
    *rank = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        const est_tval *t;
        est_status st = est_in_req(ctx, i, &t);
        if (st != EST_OK) return st;
        int axis = broadcast_merge(rank, dims, t);
        if (axis >= 0) {
            char have[160], got[160]; /* (rank, dims) still hold the inputs before i */
            return est_op_fail(ctx, EST_ESHAPE, "input %d of shape %s does not broadcast with %s (axis %d)", i,
                               est_dims_str(got, sizeof got, t->rank, t->dims), est_dims_str(have, sizeof have, *rank, dims),
                               axis);
        }
    }
    return EST_OK;
}

/* ---- broadcasting ops ---------------------------------------------------- */

typedef struct ew_op {
    ew_kind kind;
    bool u64;        /* uint64 operands: divide and compare unsigned */
    bool fmod;       /* Mod: the remainder takes the dividend's sign (C fmod) */
    bool shift_left; /* BitShift direction */
} ew_op;

static bool is_logical(ew_kind k) { return k >= EW_AND && k <= EW_XOR; }
static bool has_bool_output(ew_kind k) { return k >= EW_AND && k <= EW_GREATER_EQUAL; }

/* -1, 0 or 1 as a <, ==, > b for two integers (uint64's unsigned). */
static int int_order(int64_t a, int64_t b, bool u64) {
    if (u64) return ((uint64_t)a > (uint64_t)b) - ((uint64_t)a < (uint64_t)b);
    return (a > b) - (a < b);
}

/* -1, 0 or 1 as a <, ==, > b; 2 when unordered (a NaN). */
static int num_cmp(num a, num b, bool u64) {
    if (a.is_f || b.is_f) {
        double x = num_as_f(a), y = num_as_f(b);
        if (isnan(x) || isnan(y)) return 2;
        return (x > y) - (x < y);
    }
    return int_order(a.i, b.i, u64);
}

static bool compare_holds(ew_kind kind, int c) {
    switch (kind) {
    case EW_EQUAL: return c == 0;
    case EW_LESS: return c == -1;
    case EW_GREATER: return c == 1;
    case EW_LESS_EQUAL: return c == -1 || c == 0;
    case EW_GREATER_EQUAL: return c == 1 || c == 0;
    default: return false;
    }
}

/* a ** b for integers, wrapping like the integer type; a negative exponent
 * truncates 1 / a ** -b toward zero. */
static int64_t int_power(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t result = 1, base = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
    }
    return (int64_t)result;
}

/* Integer remainder: with fmod it takes the dividend's sign (C), without it
 * the divisor's (Python, ONNX's default). b is not 0. */
static int64_t int_mod(const ew_op *op, int64_t a, int64_t b) {
    if (op->u64) return (int64_t)((uint64_t)a % (uint64_t)b);
    if (b == -1) return 0; /* INT64_MIN % -1 overflows in C */
    int64_t rem = a % b;
    if (!op->fmod && rem != 0 && (rem < 0) != (b < 0)) rem += b;
    return rem;
}

/* Integer arithmetic; false when undefined (division by zero), so the output
 * stays unfolded. Sums and products wrap (unsigned arithmetic avoids UB). */
__attribute__((always_inline)) static inline bool int_arith(const ew_op *op, int64_t a, int64_t b, num *r) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int64_t v;
    switch (op->kind) {
    case EW_ADD: case EW_MEAN: v = (int64_t)(ua + ub); break;
    case EW_SUB: v = (int64_t)(ua - ub); break;
    case EW_MUL: v = (int64_t)(ua * ub); break;
    case EW_DIV: /* C semantics: truncates toward zero */
        if (b == 0 || (!op->u64 && a == INT64_MIN && b == -1)) return false;
        v = op->u64 ? (int64_t)(ua / ub) : a / b;
        break;
    case EW_MOD:
        if (b == 0) return false;
        v = int_mod(op, a, b);
        break;
    case EW_POW:
        if (a == 0 && b < 0) return false;
        v = int_power(a, b);
        break;
    case EW_BITSHIFT: v = ub >= 64 ? 0 : (int64_t)(op->shift_left ? ua << ub : ua >> ub); break;
    case EW_BIT_AND: v = a & b; break;
    case EW_BIT_OR: v = a | b; break;
    case EW_BIT_XOR: v = a ^ b; break;
    default: return false;
    }
    *r = num_of_int(v);
    return true;
}

/* ew_apply's result for two floats (IEEE: x / 0 is inf, which folds fine).
 * Of two NaN operands x86 returns its instruction's first: for + and * the
 * compiler may put either there, so this says which (b for Add and Mul, a
 * for Sub and Div, as folds have always given), and a folded NaN keeps its
 * bits whatever the compiler makes of the loops that call this. */
__attribute__((always_inline)) static inline double float_value(ew_kind kind, double a, double b) {
    switch (kind) {
    case EW_MAX: case EW_MIN:
        if (isnan(a) || isnan(b)) return NAN; /* NaN propagates, as in numpy */
        return (kind == EW_MAX ? a >= b : a <= b) ? a : b;
    case EW_POW: return pow(a, b);
    case EW_MOD: return fmod(a, b);
    default: break;
    }
    if (isnan(a) && isnan(b)) return (kind == EW_ADD || kind == EW_MUL ? b : a) + 0.0; /* + 0.0 quiets it */
    switch (kind) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    default: return a / b; /* EW_DIV */
    }
}

static bool float_arith(const ew_op *op, double a, double b, num *r) {
    if (op->kind > EW_MOD && op->kind != EW_MEAN) return false; /* bitwise ops have no float form */
    *r = num_of_float(float_value(op->kind == EW_MEAN ? EW_ADD : op->kind, a, b)); /* floats' Mod is fmod=1 */
    return true;
}

/* Combines two elements under op; false when the result is undefined. */
static bool ew_apply(const ew_op *op, num a, num b, num *r) {
    if (is_logical(op->kind)) {
        bool x = num_truth(a), y = num_truth(b);
        *r = num_of_int(op->kind == EW_AND ? x && y : op->kind == EW_OR ? x || y : x != y);
        return true;
    }
    if (has_bool_output(op->kind)) {
        *r = num_of_int(compare_holds(op->kind, num_cmp(a, b, op->u64)));
        return true;
    }
    if (op->kind == EW_MAX || op->kind == EW_MIN) {
        int c = num_cmp(a, b, op->u64);
        if (c == 2) *r = num_of_float(NAN); /* NaN propagates, as in numpy */
        else *r = (op->kind == EW_MAX ? c >= 0 : c <= 0) ? a : b;
        return true;
    }
    if (a.is_f || b.is_f) return float_arith(op, num_as_f(a), num_as_f(b), r);
    return int_arith(op, a.i, b.i, r);
}

/* Where each input's elements for a row of the output are: an odometer over
 * the output's coordinates but the last, which moves every input's flat
 * index by its own strides (0 along a broadcast dim), so a fold over a
 * broadcast needs no division per element. Dims that every input steps
 * through alike are merged first, so that a row is as long as it can be:
 * the whole output when the inputs have its shape or are scalars. Up to
 * CURSOR_LOCAL inputs the strides live in the cursor; a variadic op with
 * more takes them from the heap. */
enum { CURSOR_LOCAL = 8 };
typedef struct ew_cursor {
    int rank, n_in;                 /* rank: of the merged dims */
    int64_t dims[EST_MAX_RANK];     /* the merged dims; a row is the last */
    int64_t coord[EST_MAX_RANK];
    int64_t *stride;  /* n_in x EST_MAX_RANK */
    int64_t *index;   /* n_in: where the row starts */
    int64_t local[CURSOR_LOCAL * (EST_MAX_RANK + 1)];
} ew_cursor;

static int64_t *input_strides(const ew_cursor *cur, int i) { return cur->stride + (size_t)i * EST_MAX_RANK; }

/* Merges each output dim into the one before where every input's stride
 * over the pair is one stride (contiguous, or 0 for both). */
static void merge_dims(ew_cursor *cur, const est_tval *out) {
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        bool merge = r > 0;
        for (int i = 0; merge && i < cur->n_in; i++)
            merge = input_strides(cur, i)[r - 1] == input_strides(cur, i)[d] * out->dims[d];
        if (merge) cur->dims[r - 1] *= out->dims[d];
        else cur->dims[r++] = out->dims[d];
        for (int i = 0; i < cur->n_in; i++) input_strides(cur, i)[r - 1] = input_strides(cur, i)[d];
    }
    cur->rank = r;
}

/* false when out of host memory */
static bool cursor_start(ew_cursor *cur, const est_infer_ctx *ctx, const est_tval *out) {
    size_t slots = (size_t)ctx->n_in * (EST_MAX_RANK + 1);
    int64_t *mem = ctx->n_in <= CURSOR_LOCAL ? cur->local : malloc(slots * sizeof *mem);
    if (!mem) return false;
    cur->stride = mem;
    cur->index = mem + (size_t)ctx->n_in * EST_MAX_RANK;
    cur->n_in = ctx->n_in;
    for (int d = 0; d < out->rank; d++) cur->coord[d] = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        const est_tval *t = ctx->in[i];
        int64_t stride = 1, *st = input_strides(cur, i);
        cur->index[i] = 0;
        for (int d = out->rank - 1, td = t->rank - 1; d >= 0; d--, td--) {
            bool broadcast = td < 0 || t->dims[td] == 1;
            st[d] = broadcast ? 0 : stride;
            if (td >= 0) stride *= t->dims[td];
        }
    }
    merge_dims(cur, out);
    return true;
}

static void cursor_free(ew_cursor *cur) {
    if (cur->stride != cur->local) free(cur->stride);
}

static int64_t row_length(const ew_cursor *cur) { return cur->rank ? cur->dims[cur->rank - 1] : 1; }

/* Input i's step along a row. */
static int64_t row_step(const ew_cursor *cur, int i) {
    return cur->rank ? input_strides(cur, i)[cur->rank - 1] : 0;
}

static void cursor_next_row(ew_cursor *cur) {
    for (int d = cur->rank - 2; d >= 0; d--) {
        bool wrap = ++cur->coord[d] == cur->dims[d];
        for (int i = 0; i < cur->n_in; i++) {
            int64_t st = input_strides(cur, i)[d];
            cur->index[i] += wrap ? -st * (cur->dims[d] - 1) : st;
        }
        if (!wrap) return;
        cur->coord[d] = 0;
    }
}

/* Input i's element j of the current row. */
static num input_elem(const est_infer_ctx *ctx, const ew_cursor *cur, int i, int64_t j) {
    return num_get(ctx->in[i]->value, cur->index[i] + j * row_step(cur, i));
}

/* Element j of the current row: Where selects, the others fold their inputs
 * left to right (a binary op is the two-input case of Max/Min/Sum/Mean). */
static bool fold_element(const est_infer_ctx *ctx, const ew_op *op, const ew_cursor *cur, int64_t j, num *r) {
    if (op->kind == EW_WHERE) {
        *r = input_elem(ctx, cur, num_truth(input_elem(ctx, cur, 0, j)) ? 1 : 2, j);
        return true;
    }
    *r = input_elem(ctx, cur, 0, j);
    for (int i = 1; i < ctx->n_in; i++)
        if (!ew_apply(op, *r, input_elem(ctx, cur, i, j), r)) return false;
    if (op->kind == EW_MEAN) *r = num_of_float(num_as_f(*r) / ctx->n_in);
    return true;
}

/* ---- rows of one storage --------------------------------------------------- */

/* The common folds get a loop of their own, with no conversion per element:
 * two inputs of one storage (doubles, or int64) and an output that keeps
 * what the operation gives (its own dtype's, or bool), or a Where choosing
 * between two such inputs. Each stores what the general loop would. */
typedef enum row_form {
    ROW_GENERAL,
    ROW_FLOAT_ARITH,   /* arithmetic, Max and Min of floats */
    ROW_INT_ARITH,     /* arithmetic, bitwise ops, Max and Min of integers */
    ROW_FLOAT_COMPARE, /* comparisons of floats: NaN compares false */
    ROW_INT_COMPARE,
    ROW_SELECT,        /* Where */
} row_form;

static row_form row_form_of(const est_infer_ctx *ctx, const ew_op *op, const est_const *c) {
    if (op->kind == EW_WHERE) {
        const est_const *x = ctx->in[1]->value, *y = ctx->in[2]->value;
        bool same = (x->f64 && y->f64 && c->f64) || (x->i64 && y->i64 && c->i64);
        return ctx->in[0]->value->i64 && same ? ROW_SELECT : ROW_GENERAL;
    }
    if (ctx->n_in != 2) return ROW_GENERAL;
    const est_const *a = ctx->in[0]->value, *b = ctx->in[1]->value;
    ew_kind k = op->kind;
    bool compare = has_bool_output(k) && !is_logical(k), max_min = k == EW_MAX || k == EW_MIN;
    if (a->f64 && b->f64) {
        if (compare && c->i64) return ROW_FLOAT_COMPARE;
        if ((k <= EW_MOD || max_min) && c->f64) return ROW_FLOAT_ARITH; /* bitwise ops have no float form */
    } else if (a->i64 && b->i64 && c->i64) {
        if (compare) return ROW_INT_COMPARE;
        if (k <= EW_BIT_XOR || max_min) return ROW_INT_ARITH;
    }
    return ROW_GENERAL;
}

/* ew_apply's result for two integers; false when undefined. */
static bool int_value(const ew_op *op, int64_t a, int64_t b, int64_t *v) {
    if (op->kind == EW_MAX || op->kind == EW_MIN) {
        int c = int_order(a, b, op->u64);
        *v = (op->kind == EW_MAX ? c >= 0 : c <= 0) ? a : b;
        return true;
    }
    num r;
    if (!int_arith(op, a, b, &r)) return false;
    *v = r.i;
    return true;
}

/* C's comparisons are false with a NaN, as compare_holds is when unordered. */
static bool float_compare(ew_kind kind, double a, double b) {
    switch (kind) {
    case EW_EQUAL: return a == b;
    case EW_LESS: return a < b;
    case EW_GREATER: return a > b;
    case EW_LESS_EQUAL: return a <= b;
    default: return a >= b; /* EW_GREATER_EQUAL */
    }
}

/* Element j of the row of input i: its doubles or its integers. */
static const double *row_f64(const est_infer_ctx *ctx, const ew_cursor *cur, int i) {
    return ctx->in[i]->value->f64 + cur->index[i];
}
static const int64_t *row_i64(const est_infer_ctx *ctx, const ew_cursor *cur, int i) {
    return ctx->in[i]->value->i64 + cur->index[i];
}

/* The loops below keep c's dtype and arrays in locals: the project builds
 * with -fno-strict-aliasing, so a store through c->f64 would otherwise make
 * the compiler reload them for every element. */
static void select_row(const est_infer_ctx *ctx, const ew_cursor *cur, est_const *c, int64_t k, int64_t n) {
    const int64_t *cond = row_i64(ctx, cur, 0), sc = row_step(cur, 0), sx = row_step(cur, 1), sy = row_step(cur, 2);
    est_dtype dt = c->dtype;
    if (c->f64) {
        const double *x = row_f64(ctx, cur, 1), *y = row_f64(ctx, cur, 2);
        double *out = c->f64 + k;
        for (int64_t j = 0; j < n; j++) out[j] = round_to_dtype(dt, cond[j * sc] ? x[j * sx] : y[j * sy]);
        return;
    }
    const int64_t *x = row_i64(ctx, cur, 1), *y = row_i64(ctx, cur, 2);
    int64_t *out = c->i64 + k;
    for (int64_t j = 0; j < n; j++) out[j] = wrap_int(dt, cond[j * sc] ? x[j * sx] : y[j * sy]);
}

static void float_row(const ew_op *op, row_form form, const double *a, int64_t sa, const double *b, int64_t sb,
                      est_const *c, int64_t k, int64_t n) {
    ew_kind kind = op->kind;
    est_dtype dt = c->dtype;
    if (form == ROW_FLOAT_COMPARE) {
        int64_t *out = c->i64 + k;
        for (int64_t j = 0; j < n; j++) out[j] = float_compare(kind, a[j * sa], b[j * sb]);
        return;
    }
    double *out = c->f64 + k;
    for (int64_t j = 0; j < n; j++) out[j] = round_to_dtype(dt, float_value(kind, a[j * sa], b[j * sb]));
}

static bool int_row(const ew_op *op, row_form form, const int64_t *a, int64_t sa, const int64_t *b, int64_t sb,
                    est_const *c, int64_t k, int64_t n) {
    ew_kind kind = op->kind;
    est_dtype dt = c->dtype;
    int64_t *out = c->i64 + k;
    if (form == ROW_INT_COMPARE) {
        for (int64_t j = 0; j < n; j++) out[j] = compare_holds(kind, int_order(a[j * sa], b[j * sb], op->u64));
        return true;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t v;
        if (!int_value(op, a[j * sa], b[j * sb], &v)) return false;
        out[j] = wrap_int(dt, v);
    }
    return true;
}

/* Elements k to k + n - 1 of c, the current row, in the loop of `form`;
 * false when one is undefined (an integer division by zero). */
static bool typed_row(const est_infer_ctx *ctx, const ew_op *op, row_form form, const ew_cursor *cur, est_const *c,
                      int64_t k, int64_t n) {
    int64_t sa = row_step(cur, 0), sb = row_step(cur, 1);
    if (form == ROW_SELECT)
        select_row(ctx, cur, c, k, n);
    else if (form == ROW_FLOAT_ARITH || form == ROW_FLOAT_COMPARE)
        float_row(op, form, row_f64(ctx, cur, 0), sa, row_f64(ctx, cur, 1), sb, c, k, n);
    else
        return int_row(op, form, row_i64(ctx, cur, 0), sa, row_i64(ctx, cur, 1), sb, c, k, n);
    return true;
}

/* Elements k to k + n - 1 of c, the current row; false when one is
 * undefined (a division by zero). */
static bool fold_row(const est_infer_ctx *ctx, const ew_op *op, row_form form, const ew_cursor *cur, est_const *c,
                     int64_t k, int64_t n) {
    if (form != ROW_GENERAL) return typed_row(ctx, op, form, cur, c, k, n);
    for (int64_t j = 0; j < n; j++) {
        num r;
        if (!fold_element(ctx, op, cur, j, &r)) return false;
        num_put(c, k + j, r);
    }
    return true;
}

/* One loop over the output's rows for every broadcasting op. */
static void fold_elementwise(est_infer_ctx *ctx, const ew_op *op) {
    for (int i = 0; i < ctx->n_in; i++)
        if (!known(ctx->in[i])) return;
    est_tval *out = ctx->out[0];
    est_const *c = out ? fold_out(ctx, out->dtype) : NULL;
    if (!c) return;
    ew_cursor cur;
    if (!cursor_start(&cur, ctx, out)) {
        ctx->out_of_memory = true;
        out->value = NULL;
        return;
    }
    row_form form = row_form_of(ctx, op, c);
    int64_t n = row_length(&cur);
    for (int64_t k = 0; k < out->elements; k += n, cursor_next_row(&cur)) {
        if (!fold_row(ctx, op, form, &cur, c, k, n)) {
            out->value = NULL; /* the constant stays owned by the run */
            break;
        }
    }
    cursor_free(&cur);
}

/* Checks element types: Where takes a bool condition and two equal types,
 * And/Or/Xor take bools, Pow any pair, every other op one type throughout. */
static est_status check_input_types(est_infer_ctx *ctx, ew_kind kind) {
    if (kind == EW_POW) return EST_OK;
    int first = kind == EW_WHERE ? 1 : 0;
    est_dtype want = ctx->in[first]->dtype;
    if (kind == EW_WHERE && ctx->in[0]->dtype != EST_DT_BOOL && ctx->in[0]->dtype != EST_DT_UNDEFINED)
        return est_op_fail(ctx, EST_EGRAPH, "condition (input 0) is %s, expected bool",
                           est_dtype_name(ctx->in[0]->dtype));
    for (int i = first; i < ctx->n_in; i++) {
        est_dtype dt = ctx->in[i]->dtype;
        if (dt == EST_DT_UNDEFINED || want == EST_DT_UNDEFINED) continue;
        if (is_logical(kind) && dt != EST_DT_BOOL)
            return est_op_fail(ctx, EST_EGRAPH, "input %d is %s, expected bool", i, est_dtype_name(dt));
        if (dt != want)
            return est_op_fail(ctx, EST_EGRAPH, "input %d is %s but input %d is %s; the types must match", i,
                               est_dtype_name(dt), first, est_dtype_name(want));
    }
    return EST_OK;
}

/* Reads Mod's `fmod` and BitShift's `direction`. */
static est_status read_op_attrs(est_infer_ctx *ctx, ew_op *op) {
    est_status st;
    if (op->kind == EW_MOD) {
        int64_t fmod_attr;
        if ((st = est_attr_int(ctx, "fmod", 0, &fmod_attr)) != EST_OK) return st;
        if (fmod_attr != 0 && fmod_attr != 1)
            return est_op_fail(ctx, EST_EATTR, "attribute 'fmod' is %lld, expected 0 or 1", (long long)fmod_attr);
        if (!fmod_attr && est__dtype_is_float(ctx->in[0]->dtype))
            return est_op_fail(ctx, EST_EATTR, "Mod of %s inputs needs fmod=1",
                               est_dtype_name(ctx->in[0]->dtype));
        op->fmod = fmod_attr == 1;
    } else if (op->kind == EW_BITSHIFT) {
        const char *dir;
        if ((st = est_attr_string(ctx, "direction", &dir)) != EST_OK) return st;
        if (!dir) return est_op_fail(ctx, EST_EATTR, "attribute 'direction' (LEFT or RIGHT) is required");
        if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
            return est_op_fail(ctx, EST_EATTR, "attribute 'direction' is '%s', expected LEFT or RIGHT", dir);
        op->shift_left = strcmp(dir, "LEFT") == 0;
    }
    return EST_OK;
}

/* Every broadcasting op: the output takes the broadcast of all inputs' shapes;
 * its dtype is bool for comparisons and logic, X's for Where, else input 0's. */
est_status est__elementwise_infer(est_infer_ctx *ctx, ew_kind kind) {
    int rank;
    int64_t dims[EST_MAX_RANK];
    est_status st = broadcast_inputs(ctx, &rank, dims);
    if (st != EST_OK) return st;
    ew_op op = {.kind = kind, .u64 = ctx->in[0]->dtype == EST_DT_UINT64};
    if ((st = check_input_types(ctx, kind)) != EST_OK || (st = read_op_attrs(ctx, &op)) != EST_OK) return st;
    est_dtype dt = has_bool_output(kind) ? EST_DT_BOOL : ctx->in[kind == EW_WHERE ? 1 : 0]->dtype;
    if ((st = est_set_out(ctx, 0, dt, rank, dims)) != EST_OK) return st;
    fold_elementwise(ctx, &op);
    return EST_OK;
}
