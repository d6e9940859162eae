/*
 * math.c: element-wise math. Unary functions, broadcasting arithmetic,
 * comparisons and logic, variadic Max/Min/Sum/Mean, Where, Cast and CastLike.
 *
 * Every rule folds its output when all its inputs are known, because shape
 * arithmetic in exported graphs (Shape -> Gather -> Mul -> Concat -> Reshape)
 * runs through these ops. Folding computes in int64 or double and then
 * converts to the output dtype the way the ONNX kernels do: integers wrap to
 * their width, floats round to their precision.
 *
 * FLOPs per output element (docs/flops.md); backward = 2 x forward when
 * some input needs a gradient and the output is floating:
 *   1  Add Sub Mul Div Mod Neg Abs Reciprocal Where, comparisons, logic,
 *      bitwise ops, IsNaN IsInf; Floor Ceil Round Sign (backward 0: their
 *      gradient is zeros)
 *   4  Exp Log Sqrt Pow Erf and the trigonometric / hyperbolic functions
 *   n-1  Sum Max Min of n inputs;  n  Mean of n inputs
 *   0  Cast CastLike (data movement)
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

/* ---- element values ------------------------------------------------------ */

/* One element of a constant: integer and bool types use i, float types f. */
typedef struct num {
    bool is_f;
    double f;
    int64_t i;
} num;

static num num_of_int(int64_t i) { return (num){.is_f = false, .i = i}; }
static num num_of_float(double f) { return (num){.is_f = true, .f = f}; }
static double num_as_f(num v) { return v.is_f ? v.f : (double)v.i; }
static bool num_truth(num v) { return v.is_f ? v.f != 0 : v.i != 0; }

static num num_get(const est_const *c, int64_t k) {
    return c->f64 ? num_of_float(c->f64[k]) : num_of_int(c->i64[k]);
}

/* Width in bits of an integer dtype (0 for other types), and its signedness. */
static int int_width(est_dtype dt, bool *is_signed) {
    *is_signed = true;
    switch (dt) {
    case EST_DT_INT2: return 2;
    case EST_DT_INT4: return 4;
    case EST_DT_INT8: return 8;
    case EST_DT_INT16: return 16;
    case EST_DT_INT32: return 32;
    case EST_DT_INT64: return 64;
    default: break;
    }
    *is_signed = false;
    switch (dt) {
    case EST_DT_UINT2: return 2;
    case EST_DT_UINT4: return 4;
    case EST_DT_UINT8: return 8;
    case EST_DT_UINT16: return 16;
    case EST_DT_UINT32: return 32;
    case EST_DT_UINT64: return 64;
    default: return 0;
    }
}

/* Reduces v to dt's range the way a C conversion to that integer type wraps.
 * uint64 keeps its bits in the int64. */
static int64_t wrap_int(est_dtype dt, int64_t v) {
    if (dt == EST_DT_BOOL) return v != 0;
    bool is_signed;
    int bits = int_width(dt, &is_signed);
    if (bits == 0 || bits == 64) return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1, u = (uint64_t)v & mask;
    if (is_signed && (u >> (bits - 1)) != 0) u |= ~mask; /* sign-extend */
    return (int64_t)u;
}

/* Rounds f to nearest-even in a float format with `mant` fraction bits, the
 * smallest normal exponent `min_exp` and the largest finite value `max`. */
static double round_to_format(double f, int mant, int min_exp, double max) {
    if (!isfinite(f) || f == 0) return f;
    int e = ilogb(f);
    if (e < min_exp) e = min_exp; /* subnormals share the smallest quantum */
    double quantum = ldexp(1.0, e - mant);
    double r = nearbyint(f / quantum) * quantum;
    return fabs(r) > max ? copysign(INFINITY, f) : r;
}

/* Rounds a value computed in double to the precision of the dtype holding it. */
static double round_to_dtype(est_dtype dt, double f) {
    switch (dt) {
    case EST_DT_FLOAT: return round_to_format(f, 23, -126, FLT_MAX);
    case EST_DT_FLOAT16: return round_to_format(f, 10, -14, 65504.0);
    case EST_DT_BFLOAT16: return round_to_format(f, 7, -126, 0x1.fep127);
    default: return f;
    }
}

/* Stores v as element k of c, converted to c's dtype: floats truncate toward
 * zero into integers, integers wrap, bool is v != 0. */
static void num_put(est_const *c, int64_t k, num v) {
    if (c->f64) {
        c->f64[k] = round_to_dtype(c->dtype, num_as_f(v));
        return;
    }
    est_const_set(c, k, v.f, v.i, v.is_f);
    c->i64[k] = wrap_int(c->dtype, c->i64[k]);
}

/* Folds only to dtypes whose values a double or int64 can hold exactly once
 * rounded: integers and the four common float types (not float8 / float4). */
static est_const *fold_out(est_infer_ctx *ctx, est_dtype dt) {
    bool foldable = est__dtype_is_int(dt) || dt == EST_DT_FLOAT || dt == EST_DT_DOUBLE ||
                    dt == EST_DT_FLOAT16 || dt == EST_DT_BFLOAT16;
    return foldable ? est_fold_out(ctx, 0, dt) : NULL;
}

/* True when t's contents are known in full. */
static bool known(const est_tval *t) {
    return t && t->value && t->value->count == t->elements;
}

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

typedef enum ew_kind {
    EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_POW, EW_MOD,
    EW_BITSHIFT, EW_BIT_AND, EW_BIT_OR, EW_BIT_XOR,
    EW_AND, EW_OR, EW_XOR,                                        /* bool -> bool */
    EW_EQUAL, EW_LESS, EW_GREATER, EW_LESS_EQUAL, EW_GREATER_EQUAL, /* T -> bool */
    EW_MAX, EW_MIN, EW_MEAN, EW_WHERE,
} ew_kind;

typedef struct ew_op {
    ew_kind kind;
    bool u64;        /* uint64 operands: divide and compare unsigned */
    bool fmod;       /* Mod: the remainder takes the dividend's sign (C fmod) */
    bool shift_left; /* BitShift direction */
} ew_op;

static bool is_logical(ew_kind k) { return k >= EW_AND && k <= EW_XOR; }
static bool has_bool_output(ew_kind k) { return k >= EW_AND && k <= EW_GREATER_EQUAL; }

/* -1, 0 or 1 as a <, ==, > b; 2 when unordered (a NaN). */
static int num_cmp(num a, num b, bool u64) {
    if (a.is_f || b.is_f) {
        double x = num_as_f(a), y = num_as_f(b);
        if (isnan(x) || isnan(y)) return 2;
        return (x > y) - (x < y);
    }
    if (u64) {
        uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
        return (x > y) - (x < y);
    }
    return (a.i > b.i) - (a.i < b.i);
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
static bool int_arith(const ew_op *op, int64_t a, int64_t b, num *r) {
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

/* Float arithmetic (IEEE: x / 0 is inf, which folds fine). */
static bool float_arith(const ew_op *op, double a, double b, num *r) {
    double v;
    switch (op->kind) {
    case EW_ADD: case EW_MEAN: v = a + b; break;
    case EW_SUB: v = a - b; break;
    case EW_MUL: v = a * b; break;
    case EW_DIV: v = a / b; break;
    case EW_POW: v = pow(a, b); break;
    case EW_MOD: v = fmod(a, b); break; /* floats require fmod=1 */
    default: return false;              /* bitwise ops have no float form */
    }
    *r = num_of_float(v);
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

/* Where each input's element for the current output element is: an
 * odometer over the output's coordinates that moves every input's flat
 * index by its own strides (0 along a broadcast dim), so a fold over a
 * broadcast needs no division per element. Up to CURSOR_LOCAL inputs the
 * strides live in the cursor; a variadic op with more takes them from the
 * heap. */
enum { CURSOR_LOCAL = 8 };
typedef struct ew_cursor {
    int rank, n_in;
    int64_t coord[EST_MAX_RANK];
    int64_t *stride;  /* n_in x EST_MAX_RANK */
    int64_t *index;   /* n_in */
    int64_t local[CURSOR_LOCAL * (EST_MAX_RANK + 1)];
} ew_cursor;

/* false when out of host memory */
static bool cursor_start(ew_cursor *cur, const est_infer_ctx *ctx, const est_tval *out) {
    size_t slots = (size_t)ctx->n_in * (EST_MAX_RANK + 1);
    int64_t *mem = ctx->n_in <= CURSOR_LOCAL ? cur->local : malloc(slots * sizeof *mem);
    if (!mem) return false;
    cur->stride = mem;
    cur->index = mem + (size_t)ctx->n_in * EST_MAX_RANK;
    cur->rank = out->rank;
    cur->n_in = ctx->n_in;
    for (int d = 0; d < out->rank; d++) cur->coord[d] = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        const est_tval *t = ctx->in[i];
        int64_t stride = 1, *st = cur->stride + (size_t)i * EST_MAX_RANK;
        cur->index[i] = 0;
        for (int d = out->rank - 1, td = t->rank - 1; d >= 0; d--, td--) {
            bool broadcast = td < 0 || t->dims[td] == 1;
            st[d] = broadcast ? 0 : stride;
            if (td >= 0) stride *= t->dims[td];
        }
    }
    return true;
}

static void cursor_free(ew_cursor *cur) {
    if (cur->stride != cur->local) free(cur->stride);
}

static void cursor_next(ew_cursor *cur, const int64_t *dims) {
    for (int d = cur->rank - 1; d >= 0; d--) {
        bool wrap = ++cur->coord[d] == dims[d];
        for (int i = 0; i < cur->n_in; i++) {
            int64_t st = cur->stride[(size_t)i * EST_MAX_RANK + d];
            cur->index[i] += wrap ? -st * (dims[d] - 1) : st;
        }
        if (!wrap) return;
        cur->coord[d] = 0;
    }
}

static num input_elem(const est_infer_ctx *ctx, const ew_cursor *cur, int i) {
    return num_get(ctx->in[i]->value, cur->index[i]);
}

/* The current output element: Where selects, the others fold their inputs
 * left to right (a binary op is the two-input case of Max/Min/Sum/Mean). */
static bool fold_element(const est_infer_ctx *ctx, const ew_op *op, const ew_cursor *cur, num *r) {
    if (op->kind == EW_WHERE) {
        *r = input_elem(ctx, cur, num_truth(input_elem(ctx, cur, 0)) ? 1 : 2);
        return true;
    }
    *r = input_elem(ctx, cur, 0);
    for (int i = 1; i < ctx->n_in; i++)
        if (!ew_apply(op, *r, input_elem(ctx, cur, i), r)) return false;
    if (op->kind == EW_MEAN) *r = num_of_float(num_as_f(*r) / ctx->n_in);
    return true;
}

/* One loop over the output for every broadcasting op. */
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
    for (int64_t k = 0; k < out->elements; k++, cursor_next(&cur, out->dims)) {
        num r;
        if (!fold_element(ctx, op, &cur, &r)) {
            out->value = NULL; /* the constant stays owned by the run */
            break;
        }
        num_put(c, k, r);
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
static est_status elementwise_infer(est_infer_ctx *ctx, ew_kind kind) {
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

#define ELEMENTWISE_RULE(fn, kind) \
    static est_status fn(est_infer_ctx *ctx) { return elementwise_infer(ctx, kind); }

ELEMENTWISE_RULE(add_infer, EW_ADD)
ELEMENTWISE_RULE(sub_infer, EW_SUB)
ELEMENTWISE_RULE(mul_infer, EW_MUL)
ELEMENTWISE_RULE(div_infer, EW_DIV)
ELEMENTWISE_RULE(pow_infer, EW_POW)
ELEMENTWISE_RULE(mod_infer, EW_MOD)
ELEMENTWISE_RULE(bitshift_infer, EW_BITSHIFT)
ELEMENTWISE_RULE(bitwise_and_infer, EW_BIT_AND)
ELEMENTWISE_RULE(bitwise_or_infer, EW_BIT_OR)
ELEMENTWISE_RULE(bitwise_xor_infer, EW_BIT_XOR)
ELEMENTWISE_RULE(and_infer, EW_AND)
ELEMENTWISE_RULE(or_infer, EW_OR)
ELEMENTWISE_RULE(xor_infer, EW_XOR)
ELEMENTWISE_RULE(equal_infer, EW_EQUAL)
ELEMENTWISE_RULE(less_infer, EW_LESS)
ELEMENTWISE_RULE(greater_infer, EW_GREATER)
ELEMENTWISE_RULE(less_equal_infer, EW_LESS_EQUAL)
ELEMENTWISE_RULE(greater_equal_infer, EW_GREATER_EQUAL)
ELEMENTWISE_RULE(max_infer, EW_MAX)
ELEMENTWISE_RULE(min_infer, EW_MIN)
ELEMENTWISE_RULE(sum_infer, EW_ADD)
ELEMENTWISE_RULE(mean_infer, EW_MEAN)
ELEMENTWISE_RULE(where_infer, EW_WHERE)

/* ---- unary ops ----------------------------------------------------------- */

typedef enum un_kind {
    UN_FUNC, /* a float function of one value: exp, sqrt, floor, ... */
    UN_ABS, UN_NEG, UN_SIGN, UN_BIT_NOT, UN_NOT, UN_ISNAN, UN_ISINF,
} un_kind;

typedef struct un_op {
    un_kind kind;
    double (*fn)(double);       /* UN_FUNC */
    bool u64;                   /* uint64 input: Abs and Sign see it unsigned */
    bool detect_neg, detect_pos; /* IsInf */
} un_op;

static double reciprocal(double x) { return 1.0 / x; }

static num unary_apply(const un_op *op, num a) {
    switch (op->kind) {
    case UN_ABS:
        if (a.is_f) return num_of_float(fabs(a.f));
        return num_of_int(a.i < 0 && !op->u64 ? (int64_t)(0 - (uint64_t)a.i) : a.i);
    case UN_NEG: return a.is_f ? num_of_float(-a.f) : num_of_int((int64_t)(0 - (uint64_t)a.i));
    case UN_SIGN:
        if (a.is_f) return num_of_float(isnan(a.f) ? a.f : (a.f > 0) - (a.f < 0));
        return num_of_int(op->u64 ? a.i != 0 : (a.i > 0) - (a.i < 0));
    case UN_BIT_NOT: return num_of_int(~a.i);
    case UN_NOT: return num_of_int(!num_truth(a));
    case UN_ISNAN: return num_of_int(a.is_f && isnan(a.f));
    case UN_ISINF: return num_of_int(a.is_f && isinf(a.f) && (a.f > 0 ? op->detect_pos : op->detect_neg));
    case UN_FUNC: break;
    }
    return num_of_float(op->fn(num_as_f(a)));
}

/* IsInf's detect_negative / detect_positive (both default on). */
static est_status read_isinf_attrs(est_infer_ctx *ctx, un_op *op) {
    int64_t neg, pos;
    est_status st;
    if ((st = est_attr_int(ctx, "detect_negative", 1, &neg)) != EST_OK ||
        (st = est_attr_int(ctx, "detect_positive", 1, &pos)) != EST_OK)
        return st;
    op->detect_neg = neg != 0;
    op->detect_pos = pos != 0;
    return EST_OK;
}

/* Unary ops keep the input's shape; IsNaN and IsInf give bool. */
static est_status unary_infer(est_infer_ctx *ctx, un_kind kind, double (*fn)(double)) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    un_op op = {.kind = kind, .fn = fn, .u64 = x->dtype == EST_DT_UINT64};
    if (kind == UN_ISINF && (st = read_isinf_attrs(ctx, &op)) != EST_OK) return st;
    est_dtype dt = kind == UN_ISNAN || kind == UN_ISINF ? EST_DT_BOOL : x->dtype;
    if ((st = est_set_out(ctx, 0, dt, x->rank, x->dims)) != EST_OK) return st;
    est_const *c = known(x) ? fold_out(ctx, dt) : NULL;
    for (int64_t k = 0; c && k < c->count; k++) num_put(c, k, unary_apply(&op, num_get(x->value, k)));
    return EST_OK;
}

#define UNARY_RULE(fn, kind) \
    static est_status fn(est_infer_ctx *ctx) { return unary_infer(ctx, kind, NULL); }
#define UNARY_FUNC_RULE(fn, func) \
    static est_status fn(est_infer_ctx *ctx) { return unary_infer(ctx, UN_FUNC, func); }

UNARY_RULE(abs_infer, UN_ABS)
UNARY_RULE(neg_infer, UN_NEG)
UNARY_RULE(sign_infer, UN_SIGN)
UNARY_RULE(bitwise_not_infer, UN_BIT_NOT)
UNARY_RULE(not_infer, UN_NOT)
UNARY_RULE(isnan_infer, UN_ISNAN)
UNARY_RULE(isinf_infer, UN_ISINF)
UNARY_FUNC_RULE(exp_infer, exp)
UNARY_FUNC_RULE(log_infer, log)
UNARY_FUNC_RULE(sqrt_infer, sqrt)
UNARY_FUNC_RULE(reciprocal_infer, reciprocal)
UNARY_FUNC_RULE(floor_infer, floor)
UNARY_FUNC_RULE(ceil_infer, ceil)
UNARY_FUNC_RULE(round_infer, nearbyint) /* halves to even, like ONNX Round */
UNARY_FUNC_RULE(sin_infer, sin)
UNARY_FUNC_RULE(cos_infer, cos)
UNARY_FUNC_RULE(tan_infer, tan)
UNARY_FUNC_RULE(asin_infer, asin)
UNARY_FUNC_RULE(acos_infer, acos)
UNARY_FUNC_RULE(atan_infer, atan)
UNARY_FUNC_RULE(sinh_infer, sinh)
UNARY_FUNC_RULE(cosh_infer, cosh)
UNARY_FUNC_RULE(asinh_infer, asinh)
UNARY_FUNC_RULE(acosh_infer, acosh)
UNARY_FUNC_RULE(atanh_infer, atanh)
UNARY_FUNC_RULE(erf_infer, erf)

/* ---- Cast and CastLike --------------------------------------------------- */

/* Converts X to `to`: floats truncate toward zero into integers, integers
 * wrap, anything nonzero is true. */
static est_status cast_to(est_infer_ctx *ctx, est_dtype to) {
    const est_tval *x;
    est_status st = est_in_req(ctx, 0, &x);
    if (st != EST_OK) return st;
    if (to == EST_DT_STRING)
        return est_op_fail(ctx, EST_EUNSUPPORTED, "casting to string: string tensors have no static size");
    if ((st = est_set_out(ctx, 0, to, x->rank, x->dims)) != EST_OK) return st;
    est_const *c = known(x) ? fold_out(ctx, to) : NULL;
    for (int64_t k = 0; c && k < c->count; k++) num_put(c, k, num_get(x->value, k));
    return EST_OK;
}

/* Cast: the target type is attribute `to` (opset 19's `saturate` only
 * matters for float8 values, which are never folded). */
static est_status cast_infer(est_infer_ctx *ctx) {
    if (!est_attr_get(ctx->node, "to")) return est_op_fail(ctx, EST_EATTR, "attribute 'to' is required");
    int64_t to;
    est_status st = est_attr_int(ctx, "to", 0, &to);
    if (st != EST_OK) return st;
    if (to <= EST_DT_UNDEFINED || to >= EST_DT_COUNT)
        return est_op_fail(ctx, EST_EATTR, "attribute 'to' is %lld, which is no ONNX element type", (long long)to);
    return cast_to(ctx, (est_dtype)to);
}

/* memest verify's Cast to the dtype its input has already is that input
 * (verify/ops_elementwise.cu, cast_fwd: a view). */
static bool cast_returns_input(const est_cost_ctx *c) {
    const est_tval *x = est_cost_in(c, 0), *y = est_cost_out(c, 0);
    return c->kernels == EST_KERNELS_VERIFY && x && y && x->dtype == y->dtype;
}

/* CastLike: the target type is input 1's. */
static est_status cast_like_infer(est_infer_ctx *ctx) {
    const est_tval *like;
    est_status st = est_in_req(ctx, 1, &like);
    if (st != EST_OK) return st;
    return cast_to(ctx, like->dtype);
}

/* ---- training-step rules ------------------------------------------------- */

#define SIMPLE_FLOPS 1          /* one arithmetic, compare or select */
#define TRANSCENDENTAL_FLOPS 4  /* exp, log, sqrt, erf, pow, trigonometry */

static uint64_t out_elements(const est_cost_ctx *c) { return est_tval_elements(est_cost_out(c, 0)); }

static void simple_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, SIMPLE_FLOPS, out_elements(c), f);
}

static void transcendental_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, TRANSCENDENTAL_FLOPS, out_elements(c), f);
}

/* Floor, Ceil, Round, Sign: "self: zeros_like(grad)", no backward work. */
static void piecewise_constant_flops(const est_cost_ctx *c, est_flops *f) {
    f->fwd = est_mul_sat(SIMPLE_FLOPS, out_elements(c));
    f->bwd = 0;
}

/* Sum, Max, Min of n inputs: n - 1 combines per element. */
static void variadic_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, c->n_in > 1 ? (uint64_t)(c->n_in - 1) : 0, out_elements(c), f);
}

/* Mean: n - 1 adds and a divide. */
static void mean_flops(const est_cost_ctx *c, est_flops *f) {
    est_flops_per_element(c, (uint64_t)c->n_in, out_elements(c), f);
}

/* abs ("grad * self.sgn()"), log ("grad.div(self.conj())"), sin, cos, asin,
 * acos, atan, sinh, cosh, asinh, acosh, atanh, erf: the formula reads self. */
static void saves_input(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* exp ("grad * result"), sqrt ("grad / (2 * result)"), reciprocal
 * ("-grad * (result * result)"), tan ("grad * (1 + result.pow(2))"). */
static void saves_output(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_output(c, s, 0);
}

/* mul: "self: mul_tensor_backward(grad, other, ...)", "other:
 * mul_tensor_backward(grad, self, ...)": each operand only for the other's
 * gradient. */
static void mul_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    if (est_needs_grad(c, 1)) est_save_input(c, s, 0);
    if (est_needs_grad(c, 0)) est_save_input(c, s, 1);
}

/* The backward of a broadcasting Add, Sub, Mul or Div: autograd sums each
 * broadcast input's gradient down to its shape (sum_to.c), and for Mul and
 * Div ("self: mul_tensor_backward(grad, other, ...)", "other: ...(grad,
 * self, ...)") and Sub's subtrahend ("other: -grad * alpha") that gradient
 * is first a new tensor of the output's size. The inputs' gradients are
 * taken one after the other: the larger of the two. `full` has bit i set
 * where input i's gradient is such a new tensor. */
static uint64_t broadcast_backward_workspace(const est_cost_ctx *c, est_slot_mask full) {
    uint64_t most = 0;
    for (int i = 0; i < 2; i++) {
        if (!est_needs_grad(c, i)) continue;
        uint64_t sum = est_sum_to_workspace(c, i);
        if (sum == 0) continue;
        uint64_t bytes = est_add_sat(sum, (full & EST_SLOT(i)) ? est_cost_bytes(c, est_cost_out(c, 0)) : 0);
        if (bytes > most) most = bytes;
    }
    return most;
}

static uint64_t add_backward_workspace(const est_cost_ctx *c) { return broadcast_backward_workspace(c, 0); }
static uint64_t sub_backward_workspace(const est_cost_ctx *c) { return broadcast_backward_workspace(c, EST_SLOT(1)); }
static uint64_t mul_div_backward_workspace(const est_cost_ctx *c) {
    return broadcast_backward_workspace(c, EST_SLOT(0) | EST_SLOT(1));
}

/* div: "self: div_tensor_self_backward(grad, other, ...)", "other:
 * div_tensor_other_backward(grad, self, other)". */
static void div_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 1);
    if (est_needs_grad(c, 1)) est_save_input(c, s, 0);
}

/* pow: "self: pow_backward_self(grad, self, exponent)", "exponent:
 * pow_backward_exponent(grad, self, exponent, result)". */
static void pow_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
    if (est_needs_grad(c, 1)) est_save_output(c, s, 0);
}

/* fmod / remainder: "self: grad", "other: -grad * self.div(other, 'trunc')". */
static void mod_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c) || !est_needs_grad(c, 1)) return;
    est_save_input(c, s, 0);
    est_save_input(c, s, 1);
}

/* maximum / minimum: "self: at::where(self == other, grad / 2, grad)
 * .masked_fill_(self < other, 0)": both operands. n inputs chain n - 1 of
 * them, so the n - 2 intermediate results are kept too (one extra). */
static void max_min_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c) || c->n_in < 2) return;
    for (int i = 0; i < c->n_in; i++) est_save_input(c, s, i);
    if (c->n_in > 2)
        est_save_extra(s, est_mul_sat((uint64_t)(c->n_in - 2), est_tval_bytes(est_cost_out(c, 0))));
}

/* where: "self: where(condition, grad, 0)": the condition. */
static void where_saves(const est_cost_ctx *c, est_saved *s) {
    if (est_backward_runs(c)) est_save_input(c, s, 0);
}

/* ---- the table ----------------------------------------------------------- */

#define UNARY(op_name, rule, ...)                                                                      \
    {.name = op_name, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define BINARY(op_name, rule, ...)                                                                     \
    {.name = op_name, .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define VARIADIC(op_name, rule, ...)                                                                    \
    {.name = op_name, .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1, .infer = rule, \
     __VA_ARGS__}
#define SIMPLE .flops = simple_flops
#define TRANSCENDENTAL .flops = transcendental_flops

EST_FAMILY(math,
    UNARY("Abs", abs_infer, SIMPLE, .saves = saves_input),
    UNARY("Neg", neg_infer, SIMPLE),
    UNARY("Exp", exp_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Log", log_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Sqrt", sqrt_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Reciprocal", reciprocal_infer, SIMPLE, .saves = saves_output),
    UNARY("Floor", floor_infer, .flops = piecewise_constant_flops),
    UNARY("Ceil", ceil_infer, .flops = piecewise_constant_flops),
    UNARY("Round", round_infer, .flops = piecewise_constant_flops),
    UNARY("Sign", sign_infer, .flops = piecewise_constant_flops),
    UNARY("Sin", sin_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Cos", cos_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Tan", tan_infer, TRANSCENDENTAL, .saves = saves_output),
    UNARY("Asin", asin_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Acos", acos_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Atan", atan_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Sinh", sinh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Cosh", cosh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Asinh", asinh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Acosh", acosh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Atanh", atanh_infer, TRANSCENDENTAL, .saves = saves_input),
    UNARY("Not", not_infer, SIMPLE),
    UNARY("IsNaN", isnan_infer, SIMPLE),
    UNARY("IsInf", isinf_infer, SIMPLE),
    UNARY("BitwiseNot", bitwise_not_infer, SIMPLE),
    UNARY("Erf", erf_infer, TRANSCENDENTAL, .saves = saves_input),
    BINARY("Add", add_infer, SIMPLE, .backward_workspace = add_backward_workspace,
           .grad_passes_to = EST_SLOT(0) | EST_SLOT(1)),
    BINARY("Sub", sub_infer, SIMPLE, .backward_workspace = sub_backward_workspace),
    BINARY("Mul", mul_infer, SIMPLE, .saves = mul_saves, .backward_workspace = mul_div_backward_workspace),
    BINARY("Div", div_infer, SIMPLE, .saves = div_saves, .backward_workspace = mul_div_backward_workspace),
    BINARY("Pow", pow_infer, TRANSCENDENTAL, .saves = pow_saves),
    BINARY("Mod", mod_infer, SIMPLE, .saves = mod_saves),
    BINARY("BitShift", bitshift_infer, SIMPLE),
    BINARY("BitwiseAnd", bitwise_and_infer, SIMPLE),
    BINARY("BitwiseOr", bitwise_or_infer, SIMPLE),
    BINARY("BitwiseXor", bitwise_xor_infer, SIMPLE),
    BINARY("And", and_infer, SIMPLE),
    BINARY("Or", or_infer, SIMPLE),
    BINARY("Xor", xor_infer, SIMPLE),
    BINARY("Equal", equal_infer, SIMPLE),
    BINARY("Less", less_infer, SIMPLE),
    BINARY("Greater", greater_infer, SIMPLE),
    BINARY("LessOrEqual", less_equal_infer, SIMPLE),
    BINARY("GreaterOrEqual", greater_equal_infer, SIMPLE),
    VARIADIC("Max", max_infer, .flops = variadic_flops, .saves = max_min_saves),
    VARIADIC("Min", min_infer, .flops = variadic_flops, .saves = max_min_saves),
    VARIADIC("Sum", sum_infer, .flops = variadic_flops),
    VARIADIC("Mean", mean_infer, .flops = mean_flops),
    {.name = "Where", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = where_infer, .nondiff_inputs = EST_SLOT(0), .flops = simple_flops, .saves = where_saves},
    /* _to_copy: "self: _to_copy_backward(grad, self.options())" keeps nothing. */
    {.name = "Cast", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
     .infer = cast_infer, .returns_input = cast_returns_input},
    /* Only input 1's dtype matters: no gradient flows into it. */
    {.name = "CastLike", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = cast_like_infer, .nondiff_inputs = EST_SLOT(1)},
);
