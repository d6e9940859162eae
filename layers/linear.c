/*
 * linear.c: matrix products (Gemm, MatMul and its quantized forms, Einsum)
 * and the fused Attention of opset 23.
 *
 * FLOPs count 2 per multiply-add, as torch.utils.flop_counter counts
 * aten.mm / addmm / bmm and scaled dot-product attention; bias adds (Gemm's
 * C) and attention's softmax are not counted:
 *   Gemm, MatMul   fwd = 2 * elements(Y) * K
 *   Einsum         fwd = 2 * prod(dims of the labels) per pairwise
 *                  contraction, left to right, as torch.einsum runs it
 *   Attention      fwd = 2 * Skv * (elements(Q) + elements(Y))  (QK^T, PV)
 * Backward: each operand that needs a gradient costs one product of the
 * forward's size (grad_A = grad @ B^T, grad_B = A^T @ grad); attention adds
 * grad_probs = grad @ V^T when Q or K needs a gradient. Integer products
 * (MatMulInteger, QLinearMatMul) have no backward.
 */
#include <stdio.h>
#include <string.h>

#include "registry.h"

/* Writes dims as "[2x3x4]" for error messages. */
static const char *shape_str(char *buf, size_t size, int rank, const int64_t *dims) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < rank && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? "x" : "", (long long)dims[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
    return buf;
}

/* ---- Gemm ----------------------------------------------------------------- */

/* Y = alpha * A' * B' + beta * C: A' (M, K), B' (K, N), C broadcast to (M, N). */
static est_status gemm_infer(est_infer_ctx *ctx) {
    const est_tval *a, *b;
    est_status st;
    if ((st = est_in_req(ctx, 0, &a)) != EST_OK || (st = est_in_req(ctx, 1, &b)) != EST_OK) return st;
    if (a->rank != 2 || b->rank != 2)
        return est_op_fail(ctx, EST_ESHAPE, "A (rank %d) and B (rank %d) must both be 2-D", a->rank, b->rank);
    int64_t trans_a, trans_b;
    if ((st = est_attr_int(ctx, "transA", 0, &trans_a)) != EST_OK ||
        (st = est_attr_int(ctx, "transB", 0, &trans_b)) != EST_OK)
        return st;
    int64_t m = a->dims[trans_a ? 1 : 0], ka = a->dims[trans_a ? 0 : 1];
    int64_t kb = b->dims[trans_b ? 1 : 0], n = b->dims[trans_b ? 0 : 1];
    if (ka != kb) {
        char sa[64], sb[64];
        return est_op_fail(ctx, EST_ESHAPE, "A %s%s and B %s%s disagree on K (%lld vs %lld)",
                           shape_str(sa, sizeof sa, 2, a->dims), trans_a ? " (transposed)" : "",
                           shape_str(sb, sizeof sb, 2, b->dims), trans_b ? " (transposed)" : "",
                           (long long)ka, (long long)kb);
    }
    int64_t out[2] = {m, n};
    const est_tval *c = est_in(ctx, 2);
    if (c && c->rank >= 0) {
        int rank;
        int64_t bc[EST_MAX_RANK];
        if (c->rank > 2 || est_broadcast(ctx, 2, out, c->rank, c->dims, &rank, bc) != EST_OK ||
            bc[0] != m || bc[1] != n) {
            char sc[EST_MAX_RANK * 16];
            return est_op_fail(ctx, EST_ESHAPE, "C %s does not broadcast to (M, N) = (%lld, %lld)",
                               shape_str(sc, sizeof sc, c->rank, c->dims), (long long)m, (long long)n);
        }
    }
    return est_set_out(ctx, 0, a->dtype, 2, out);
}

/* ---- MatMul --------------------------------------------------------------- */

/* numpy.matmul shapes: a 1-D operand gains a unit dim (prepended for A,
 * appended for B) that the result drops; batch dims broadcast. */
static est_status matmul_shape(est_infer_ctx *ctx, const est_tval *a, const est_tval *b, int *rank,
                               int64_t *out) {
    char sa[EST_MAX_RANK * 16], sb[EST_MAX_RANK * 16];
    if (a->rank < 1 || b->rank < 1)
        return est_op_fail(ctx, EST_ESHAPE, "MatMul operands must have rank 1 or more (A rank %d, B rank %d)",
                           a->rank, b->rank);
    int64_t am = a->rank == 1 ? 1 : a->dims[a->rank - 2], ak = a->dims[a->rank - 1];
    int64_t bk = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], bn = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (ak != bk)
        return est_op_fail(ctx, EST_ESHAPE, "A %s and B %s disagree on K (%lld vs %lld)",
                           shape_str(sa, sizeof sa, a->rank, a->dims), shape_str(sb, sizeof sb, b->rank, b->dims),
                           (long long)ak, (long long)bk);
    int a_batch = a->rank > 2 ? a->rank - 2 : 0, b_batch = b->rank > 2 ? b->rank - 2 : 0;
    int r;
    if (est_broadcast(ctx, a_batch, a->dims, b_batch, b->dims, &r, out) != EST_OK)
        return est_op_fail(ctx, EST_ESHAPE, "the batch dims of A %s and B %s do not broadcast",
                           shape_str(sa, sizeof sa, a->rank, a->dims), shape_str(sb, sizeof sb, b->rank, b->dims));
    if (a->rank > 1) out[r++] = am;
    if (b->rank > 1) out[r++] = bn;
    *rank = r;
    return EST_OK;
}

static est_status matmul_infer(est_infer_ctx *ctx) {
    const est_tval *a, *b;
    est_status st;
    if ((st = est_in_req(ctx, 0, &a)) != EST_OK || (st = est_in_req(ctx, 1, &b)) != EST_OK) return st;
    int rank;
    int64_t out[EST_MAX_RANK];
    if ((st = matmul_shape(ctx, a, b, &rank, out)) != EST_OK) return st;
    return est_set_out(ctx, 0, a->dtype, rank, out);
}

/* A, B [, a_zero_point, b_zero_point] -> int32 product. */
static est_status matmul_integer_infer(est_infer_ctx *ctx) {
    const est_tval *a, *b;
    est_status st;
    if ((st = est_in_req(ctx, 0, &a)) != EST_OK || (st = est_in_req(ctx, 1, &b)) != EST_OK) return st;
    int rank;
    int64_t out[EST_MAX_RANK];
    if ((st = matmul_shape(ctx, a, b, &rank, out)) != EST_OK) return st;
    return est_set_out(ctx, 0, EST_DT_INT32, rank, out);
}

/* a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp -> typed like y_zp. */
static est_status qlinear_matmul_infer(est_infer_ctx *ctx) {
    const est_tval *a, *b, *y_zero;
    est_status st;
    if ((st = est_in_req(ctx, 0, &a)) != EST_OK || (st = est_in_req(ctx, 3, &b)) != EST_OK ||
        (st = est_in_req(ctx, 7, &y_zero)) != EST_OK)
        return st;
    int rank;
    int64_t out[EST_MAX_RANK];
    if ((st = matmul_shape(ctx, a, b, &rank, out)) != EST_OK) return st;
    return est_set_out(ctx, 0, y_zero->dtype, rank, out);
}

/* ---- Einsum --------------------------------------------------------------- */

/* Labels are a-z and A-Z; an ellipsis ("...") stands for broadcast dims. */
#define EINSUM_LABELS 52
#define EINSUM_ELLIPSIS (-2)

static int einsum_label(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

/* One term of the equation: its labels in order, the ellipsis as
 * EINSUM_ELLIPSIS. */
typedef struct einsum_term {
    int n;
    int labels[EST_MAX_RANK + 1];
    bool has_ellipsis;
} einsum_term;

typedef enum einsum_parse_error {
    EINSUM_PARSED, EINSUM_BAD_ELLIPSIS, EINSUM_BAD_CHAR, EINSUM_TOO_MANY_LABELS,
} einsum_parse_error;

/* Parses the term in s[0..len), skipping spaces; on EINSUM_BAD_CHAR, *bad is
 * the character. Shared by the shape rule and the FLOPs rule. */
static einsum_parse_error einsum_parse_labels(const char *s, size_t len, einsum_term *t, char *bad) {
    t->n = 0;
    t->has_ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') continue;
        int label = einsum_label(s[i]);
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || t->has_ellipsis) return EINSUM_BAD_ELLIPSIS;
            t->has_ellipsis = true;
            label = EINSUM_ELLIPSIS;
            i += 2;
        } else if (label < 0) {
            *bad = s[i];
            return EINSUM_BAD_CHAR;
        }
        if (t->n > EST_MAX_RANK) return EINSUM_TOO_MANY_LABELS;
        t->labels[t->n++] = label;
    }
    return EINSUM_PARSED;
}

static est_status einsum_parse_term(est_infer_ctx *ctx, const char *s, size_t len, einsum_term *t) {
    char bad = 0;
    switch (einsum_parse_labels(s, len, t, &bad)) {
    case EINSUM_PARSED: return EST_OK;
    case EINSUM_BAD_ELLIPSIS:
        return est_op_fail(ctx, EST_EATTR, "equation: a term has a malformed or repeated ellipsis");
    case EINSUM_BAD_CHAR: return est_op_fail(ctx, EST_EATTR, "equation: unexpected character '%c'", bad);
    case EINSUM_TOO_MANY_LABELS: break;
    }
    return est_op_fail(ctx, EST_ELIMIT, "equation: a term has too many labels");
}

typedef struct einsum_dims {
    int64_t label_dim[EINSUM_LABELS]; /* -1 until seen */
    int label_count[EINSUM_LABELS];   /* occurrences over all inputs */
    int ell_rank;                     /* broadcast rank of the ellipsis dims */
    int64_t ell_dims[EST_MAX_RANK];
} einsum_dims;

/* Records one operand's dims against its term: labels must agree (1
 * broadcasts), ellipsis dims broadcast numpy-style. */
static est_status einsum_bind_operand(est_infer_ctx *ctx, int slot, const einsum_term *t, einsum_dims *ed) {
    const est_tval *x;
    est_status st = est_in_req(ctx, slot, &x);
    if (st != EST_OK) return st;
    int named = t->n - (t->has_ellipsis ? 1 : 0);
    int ell = x->rank - named;
    if (ell < 0 || (!t->has_ellipsis && ell != 0))
        return est_op_fail(ctx, EST_ESHAPE, "input %d has rank %d, but its term names %d dims", slot, x->rank, named);
    int d = 0;
    for (int k = 0; k < t->n; k++) {
        if (t->labels[k] == EINSUM_ELLIPSIS) {
            int64_t merged[EST_MAX_RANK];
            int r;
            if ((st = est_broadcast(ctx, ed->ell_rank, ed->ell_dims, ell, x->dims + d, &r, merged)) != EST_OK)
                return st;
            memcpy(ed->ell_dims, merged, sizeof merged);
            ed->ell_rank = r;
            d += ell;
            continue;
        }
        int64_t *have = &ed->label_dim[t->labels[k]];
        int64_t dim = x->dims[d++];
        ed->label_count[t->labels[k]]++;
        if (*have < 0 || *have == 1) *have = dim;
        else if (dim != 1 && dim != *have)
            return est_op_fail(ctx, EST_ESHAPE, "equation: label '%c' is %lld in one place and %lld in another",
                               t->labels[k] < 26 ? 'a' + t->labels[k] : 'A' + t->labels[k] - 26,
                               (long long)*have, (long long)dim);
    }
    return EST_OK;
}

/* The implicit output: the ellipsis, then labels used exactly once, in
 * alphabetical order (upper case sorts before lower case, as in ASCII). */
static void einsum_implicit_output(const einsum_dims *ed, bool any_ellipsis, einsum_term *out) {
    out->n = 0;
    out->has_ellipsis = any_ellipsis;
    if (any_ellipsis) out->labels[out->n++] = EINSUM_ELLIPSIS;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < 26; k++) {
            int label = pass == 0 ? 26 + k : k;
            if (ed->label_count[label] == 1 && out->n <= EST_MAX_RANK) out->labels[out->n++] = label;
        }
}

static est_status einsum_output_shape(est_infer_ctx *ctx, const einsum_term *out_term, const einsum_dims *ed,
                                      int *rank, int64_t *dims) {
    int r = 0;
    for (int k = 0; k < out_term->n; k++) {
        int label = out_term->labels[k];
        if (label == EINSUM_ELLIPSIS) {
            if (r + ed->ell_rank > EST_MAX_RANK) return est_op_fail(ctx, EST_ELIMIT, "output rank too large");
            for (int e = 0; e < ed->ell_rank; e++) dims[r++] = ed->ell_dims[e];
            continue;
        }
        if (ed->label_dim[label] < 0)
            return est_op_fail(ctx, EST_EATTR, "equation: output label '%c' is not in any input",
                               label < 26 ? 'a' + label : 'A' + label - 26);
        if (r >= EST_MAX_RANK) return est_op_fail(ctx, EST_ELIMIT, "output rank too large");
        dims[r++] = ed->label_dim[label];
    }
    *rank = r;
    return EST_OK;
}

static est_status einsum_infer(est_infer_ctx *ctx) {
    const char *eq;
    est_status st = est_attr_string(ctx, "equation", &eq);
    if (st != EST_OK) return st;
    if (!eq) return est_op_fail(ctx, EST_EATTR, "attribute 'equation' is required");
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    einsum_dims ed = {.ell_rank = 0};
    for (int k = 0; k < EINSUM_LABELS; k++) ed.label_dim[k] = -1;
    bool any_ellipsis = false;
    int slot = 0;
    for (size_t start = 0; start <= lhs_len; slot++) {
        const char *comma = memchr(eq + start, ',', lhs_len - start);
        size_t end = comma ? (size_t)(comma - eq) : lhs_len;
        if (slot >= ctx->n_in)
            return est_op_fail(ctx, EST_EATTR, "equation has more terms than the %d inputs", ctx->n_in);
        einsum_term t;
        if ((st = einsum_parse_term(ctx, eq + start, end - start, &t)) != EST_OK ||
            (st = einsum_bind_operand(ctx, slot, &t, &ed)) != EST_OK)
            return st;
        any_ellipsis |= t.has_ellipsis;
        start = end + 1;
    }
    if (slot != ctx->n_in)
        return est_op_fail(ctx, EST_EATTR, "equation has %d terms for %d inputs", slot, ctx->n_in);
    einsum_term out_term;
    if (arrow) st = einsum_parse_term(ctx, arrow + 2, strlen(arrow + 2), &out_term);
    else einsum_implicit_output(&ed, any_ellipsis, &out_term);
    if (st != EST_OK) return st;
    int rank = 0;
    int64_t dims[EST_MAX_RANK];
    if ((st = einsum_output_shape(ctx, &out_term, &ed, &rank, dims)) != EST_OK) return st;
    return est_set_out(ctx, 0, ctx->in[0]->dtype, rank, dims);
}

/* ---- Attention ------------------------------------------------------------ */

/* The per-head view of Q, K or V: (batch, heads, seq, head_size). */
typedef struct attn_view {
    int64_t batch, heads, seq, head_size;
} attn_view;

/* 4-D inputs are already per head; 3-D ones (batch, seq, hidden) split
 * hidden by the heads attribute. */
static est_status attn_view_of(est_infer_ctx *ctx, int slot, const char *heads_attr, attn_view *v) {
    const est_tval *t;
    est_status st = est_in_req(ctx, slot, &t);
    if (st != EST_OK) return st;
    if (t->rank == 4) {
        *v = (attn_view){t->dims[0], t->dims[1], t->dims[2], t->dims[3]};
        return EST_OK;
    }
    if (t->rank != 3) return est_op_fail(ctx, EST_ESHAPE, "input %d has rank %d; Attention takes 3-D or 4-D", slot, t->rank);
    int64_t heads;
    if ((st = est_attr_int(ctx, heads_attr, 0, &heads)) != EST_OK) return st;
    if (heads <= 0 || t->dims[2] % heads != 0)
        return est_op_fail(ctx, EST_EATTR, "3-D input %d needs '%s' dividing its hidden size %lld", slot,
                           heads_attr, (long long)t->dims[2]);
    *v = (attn_view){t->dims[0], heads, t->dims[1], t->dims[2] / heads};
    return EST_OK;
}

/* The past key/value's sequence length, 0 without a cache. */
static est_status attn_past_seq(est_infer_ctx *ctx, const attn_view *k, int64_t *past) {
    const est_tval *pk = est_in(ctx, 4), *pv = est_in(ctx, 5);
    *past = 0;
    if (!pk && !pv) return EST_OK;
    if (!pk || !pv) return est_op_fail(ctx, EST_EGRAPH, "past_key and past_value must be given together");
    if (pk->rank != 4 || pv->rank != 4 || pk->dims[2] != pv->dims[2] || pk->dims[1] != k->heads)
        return est_op_fail(ctx, EST_ESHAPE, "past_key and past_value must be (batch, kv_num_heads, past_seq, size)");
    *past = pk->dims[2];
    return EST_OK;
}

/* Y like Q (with V's head size), present key/value with past + new
 * positions, qk_matmul_output (batch, q_heads, q_seq, total_seq). */
static est_status attention_infer(est_infer_ctx *ctx) {
    attn_view q, k, v;
    int64_t past;
    est_status st;
    if ((st = attn_view_of(ctx, 0, "q_num_heads", &q)) != EST_OK ||
        (st = attn_view_of(ctx, 1, "kv_num_heads", &k)) != EST_OK ||
        (st = attn_view_of(ctx, 2, "kv_num_heads", &v)) != EST_OK || (st = attn_past_seq(ctx, &k, &past)) != EST_OK)
        return st;
    if (q.head_size != k.head_size || k.seq != v.seq || k.heads != v.heads || q.heads % k.heads != 0)
        return est_op_fail(ctx, EST_ESHAPE, "Q, K and V disagree: head sizes %lld/%lld, kv lengths %lld/%lld, "
                           "heads %lld/%lld/%lld", (long long)q.head_size, (long long)k.head_size, (long long)k.seq,
                           (long long)v.seq, (long long)q.heads, (long long)k.heads, (long long)v.heads);
    const est_tval *qt = ctx->in[0], *kt = ctx->in[1], *vt = ctx->in[2];
    int64_t total = past + k.seq;
    int64_t y3[3] = {q.batch, q.seq, q.heads * v.head_size}, y4[4] = {q.batch, q.heads, q.seq, v.head_size};
    int64_t pk[4] = {k.batch, k.heads, total, k.head_size}, pv[4] = {v.batch, v.heads, total, v.head_size};
    int64_t qk[4] = {q.batch, q.heads, q.seq, total};
    if ((st = est_set_out(ctx, 0, qt->dtype, qt->rank, qt->rank == 3 ? y3 : y4)) != EST_OK ||
        (st = est_set_out(ctx, 1, kt->dtype, 4, pk)) != EST_OK || (st = est_set_out(ctx, 2, vt->dtype, 4, pv)) != EST_OK)
        return st;
    return est_set_out(ctx, 3, qt->dtype, 4, qk);
}

/* ---- training-step rules ------------------------------------------------- */

/* The forward of a product: 2 * elements(Y) * K. */
static uint64_t product_flops(const est_cost_ctx *c, uint64_t k) {
    return est_mul_sat(2, est_mul_sat(est_tval_elements(est_cost_out(c, 0)), k));
}

/* One product of the forward's size per operand (slots 0 and 1) that needs
 * a gradient; none for integer products. */
static uint64_t two_operand_backward(const est_cost_ctx *c, uint64_t fwd) {
    if (!est_backward_runs(c)) return 0;
    return est_mul_sat(fwd, (uint64_t)est_needs_grad(c, 0) + (uint64_t)est_needs_grad(c, 1));
}

static void gemm_flops(const est_cost_ctx *c, est_flops *f) {
    const est_tval *a = est_cost_in(c, 0);
    bool trans_a = est_node_attr_int(c->node, "transA", 0) != 0;
    uint64_t k = a && a->rank == 2 ? (uint64_t)a->dims[trans_a ? 0 : 1] : 0;
    f->fwd = product_flops(c, k);
    f->bwd = two_operand_backward(c, f->fwd);
}

/* MatMul and its integer forms: K is A's last dim (A is slot 0 in all). */
static void matmul_flops(const est_cost_ctx *c, est_flops *f) {
    const est_tval *a = est_cost_in(c, 0);
    uint64_t k = a && a->rank >= 1 ? (uint64_t)a->dims[a->rank - 1] : 0;
    f->fwd = product_flops(c, k);
    f->bwd = two_operand_backward(c, f->fwd);
}

/* mm / addmm: "mat1: mm_mat1_backward(grad, mat2, ...)", "mat2:
 * mm_mat2_backward(grad, mat1, ...)": each operand is kept only for the
 * other's gradient. Gemm's C needs nothing (its gradient is grad). */
/* Operand i's bytes expanded to the product's batch dims, when both are
 * batched (rank 3 or more) and i's batch dims broadcast or i is a view of
 * an Expand that broadcasts; 0 otherwise.
 * aten::matmul expands such an operand and reshapes it for bmm, which
 * materializes it whole (stride-0 dims cannot be viewed as a batch), and
 * bmm's backward keeps that copy, not the operand (Falcon's multi-query
 * attention: q [B, H, S, D] @ k^T [B, 1, D, S]; per-op probe, H100,
 * 2026-11-27, bench/accuracy/data/blind4/: clones of k and v at H heads,
 * kept for backward). */
static uint64_t expanded_operand_bytes(const est_cost_ctx *c, int i) {
    const est_tval *a = est_cost_in(c, 0), *b = est_cost_in(c, 1), *y = est_cost_out(c, 0), *t = est_cost_in(c, i);
    if (!a || !b || !y || a->rank < 3 || b->rank < 3 || y->rank < 3 || est_cost_kernels(c) == EST_KERNELS_VERIFY)
        return 0;
    /* a view of an Expand that broadcasts (GPT-BigCode's key and value,
     * expanded to every head and viewed as [B, H, S, D]): reshaped for bmm,
     * it is copied whole, and bmm keeps the copy (per-op probe, H100,
     * 2026-11-27, bench/accuracy/data/blind5/) */
    if (est_cost_expanded(c, i)) return est_cost_bytes(c, t);
    uint64_t batch = 1, own = 1;
    for (int d = 0; d < y->rank - 2; d++) batch = est_mul_sat(batch, (uint64_t)y->dims[d]);
    for (int d = 0; d < t->rank - 2; d++) own = est_mul_sat(own, (uint64_t)t->dims[d]);
    if (own == 0 || own >= batch) return 0;
    return est_mul_sat(est_cost_bytes(c, t) / own, batch);
}

static void matmul_saves(const est_cost_ctx *c, est_saved *s) {
    for (int i = 0; i < 2; i++) {
        if (!est_needs_grad(c, 1 - i)) continue; /* operand i is kept for the other's gradient */
        uint64_t expanded = expanded_operand_bytes(c, i);
        if (expanded) est_save_extra(s, expanded);
        else est_save_input(c, s, i);
    }
}

/* aten::matmul on batched operands reshapes them for bmm; a transposed view
 * (attention's q @ k^T after a Transpose) cannot be reshaped in place, so it
 * is copied to a contiguous tensor for the call. Seen in the H200 probe of
 * BERT: one clone per strided operand around each bmm. 2-D products pass
 * the transpose to cuBLAS instead and copy nothing. An expanded operand's
 * copy (expanded_operand_bytes) is a workspace only where no backward keeps
 * it. */
static uint64_t matmul_workspace(const est_cost_ctx *c) {
    uint64_t bytes = 0;
    for (int i = 0; i < 2; i++) {
        const est_tval *t = est_cost_in(c, i);
        uint64_t expanded = expanded_operand_bytes(c, i);
        /* a broadcast operand's copy: kept as a saved extra when the other
         * operand takes a gradient, else only for the call */
        if (expanded) bytes = est_add_sat(bytes, est_backward_runs(c) && est_needs_grad(c, 1 - i) ? 0 : expanded);
        else if (t && t->rank > 2 && est_cost_strided(c, i)) bytes = est_add_sat(bytes, est_cost_bytes(c, t));
    }
    return bytes;
}

/* memest verify's executor (verify/ops_gemm.cu, matmul_backward) runs the
 * backward on contiguous copies of the strided operands, unless A is
 * contiguous and B is the transposed weight of x @ W.t(), which cuBLAS reads
 * as it is. */
static uint64_t matmul_backward_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) != EST_KERNELS_VERIFY) return 0;
    const est_tval *b = est_cost_in(c, 1);
    bool b_is_weight_t = b && b->rank == 2 && est_cost_strided(c, 1);
    if (!est_cost_strided(c, 0) && (!est_cost_strided(c, 1) || b_is_weight_t)) return 0;
    uint64_t bytes = 0;
    for (int i = 0; i < 2; i++)
        if (est_cost_strided(c, i)) bytes = est_add_sat(bytes, est_cost_bytes(c, est_cost_in(c, i)));
    return bytes;
}

/* Gemm's bias gradient (addmm's "self: maybe_multiply(grad, beta)",
 * summed down to C's shape): a column sum over the rows when C is one row
 * broadcast (sum_to.c). */
static uint64_t gemm_backward_workspace(const est_cost_ctx *c) {
    return est_needs_grad(c, 2) ? est_sum_to_workspace(c, 2) : 0;
}

/* ---- Einsum's cost ----- */

/* The label sets of an einsum, with each label's size. */
typedef struct einsum_sets {
    int n;                          /* operands */
    uint64_t in[EST_MAX_IO];        /* label bits of each operand */
    bool ell[EST_MAX_IO];           /* the operand has an ellipsis */
    uint64_t out;                   /* label bits of the output */
    uint64_t dim[EINSUM_LABELS];    /* size of each label */
    uint64_t ell_elements;          /* elements of the broadcast ellipsis dims */
} einsum_sets;

/* Records one operand's labels and sizes; false when it does not fit. */
static bool einsum_collect(const est_tval *x, const einsum_term *t, int *count, int64_t *ell_dims, int *ell_rank,
                           uint64_t *bits, einsum_sets *es) {
    int named = t->n - (t->has_ellipsis ? 1 : 0), ell = x->rank - named, d = 0;
    if (ell < 0) return false;
    for (int k = 0; k < t->n; k++) {
        if (t->labels[k] == EINSUM_ELLIPSIS) {
            for (int e = 0; e < ell; e++) { /* right-aligned numpy broadcast */
                int slot = EST_MAX_RANK - ell + e;
                if (ell_dims[slot] < x->dims[d + e]) ell_dims[slot] = x->dims[d + e];
            }
            if (ell > *ell_rank) *ell_rank = ell;
            d += ell;
            continue;
        }
        int label = t->labels[k];
        *bits |= (uint64_t)1 << label;
        count[label]++;
        if (es->dim[label] < (uint64_t)x->dims[d]) es->dim[label] = (uint64_t)x->dims[d];
        d++;
    }
    return true;
}

/* Labels used exactly once: the implicit output's. */
static uint64_t einsum_single_use(const int *count) {
    uint64_t bits = 0;
    for (int k = 0; k < EINSUM_LABELS; k++)
        if (count[k] == 1) bits |= (uint64_t)1 << k;
    return bits;
}

/* Parses the equation against the operands; false when it cannot (inference
 * reports why). */
static bool einsum_sets_of(const est_cost_ctx *c, einsum_sets *es) {
    const char *eq = est_node_attr_string(c->node, "equation", NULL);
    if (!eq) return false;
    memset(es, 0, sizeof *es);
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int count[EINSUM_LABELS] = {0}, ell_rank = 0;
    int64_t ell_dims[EST_MAX_RANK];
    for (int e = 0; e < EST_MAX_RANK; e++) ell_dims[e] = 1;
    char bad;
    einsum_term t;
    for (size_t start = 0; start <= lhs_len; es->n++) {
        const char *comma = memchr(eq + start, ',', lhs_len - start);
        size_t end = comma ? (size_t)(comma - eq) : lhs_len;
        const est_tval *x = est_cost_in(c, es->n);
        if (es->n >= c->n_in || !x || x->rank < 0 ||
            einsum_parse_labels(eq + start, end - start, &t, &bad) != EINSUM_PARSED ||
            !einsum_collect(x, &t, count, ell_dims, &ell_rank, &es->in[es->n], es))
            return false;
        es->ell[es->n] = t.has_ellipsis;
        start = end + 1;
    }
    if (arrow && einsum_parse_labels(arrow + 2, strlen(arrow + 2), &t, &bad) != EINSUM_PARSED) return false;
    es->out = arrow ? 0 : einsum_single_use(count);
    for (int k = 0; arrow && k < t.n; k++)
        if (t.labels[k] != EINSUM_ELLIPSIS) es->out |= (uint64_t)1 << t.labels[k];
    es->ell_elements = 1;
    for (int e = EST_MAX_RANK - ell_rank; e < EST_MAX_RANK; e++)
        es->ell_elements = est_mul_sat(es->ell_elements, (uint64_t)ell_dims[e]);
    return true;
}

static uint64_t einsum_label_product(const einsum_sets *es, uint64_t bits) {
    uint64_t p = 1;
    for (int k = 0; k < EINSUM_LABELS; k++)
        if (bits >> k & 1) p = est_mul_sat(p, es->dim[k]);
    return p;
}

/* Contracts left to right as torch.einsum does: labels no later term needs
 * are summed away first (not counted), then each pair is one bmm costing 2
 * FLOPs per element of its full label space. */
static uint64_t einsum_pairwise_flops(const einsum_sets *es) {
    uint64_t total = 0, cur = es->in[0];
    bool cur_ell = es->ell[0];
    for (int i = 1; i < es->n; i++) {
        uint64_t later = es->out;
        for (int j = i + 1; j < es->n; j++) later |= es->in[j];
        cur &= es->in[i] | later;
        uint64_t both = cur | (es->in[i] & (cur | later));
        cur_ell = cur_ell || es->ell[i];
        uint64_t space = est_mul_sat(einsum_label_product(es, both), cur_ell ? es->ell_elements : 1);
        total = est_add_sat(total, est_mul_sat(2, space));
        cur = both & later;
    }
    return total;
}

/* Einsum: pairwise products (backward: one per operand needing a gradient);
 * a single operand is a sum (1 per input element when a label is summed
 * away) or a permutation or diagonal (0). */
static void einsum_flops(const est_cost_ctx *c, est_flops *f) {
    einsum_sets es;
    f->fwd = f->bwd = 0;
    if (!einsum_sets_of(c, &es)) return;
    if (es.n == 1) {
        bool sums = (es.in[0] & ~es.out) != 0;
        est_flops_per_element(c, sums ? 1 : 0, est_tval_elements(est_cost_in(c, 0)), f);
        return;
    }
    f->fwd = einsum_pairwise_flops(&es);
    uint64_t grads = 0;
    for (int i = 0; i < es.n; i++) grads += est_needs_grad(c, i);
    f->bwd = est_backward_runs(c) ? est_mul_sat(grads, f->fwd) : 0;
}

/* torch.einsum lowers to bmm, whose backward keeps each operand for the
 * others' gradients (bmm: "self: grad.bmm(mat2.transpose(1, 2))"). With more
 * than two operands the intermediate products are kept too; not counted. */
static void einsum_saves(const est_cost_ctx *c, est_saved *s) {
    if (c->n_in < 2) return;
    for (int i = 0; i < c->n_in; i++) {
        bool other_needs_grad = false;
        for (int j = 0; j < c->n_in; j++) other_needs_grad |= j != i && est_needs_grad(c, j);
        if (other_needs_grad) est_save_input(c, s, i);
    }
}

/* ---- Attention's cost ----- */

/* Key positions attended to: past plus new. */
static uint64_t attention_kv_len(const est_cost_ctx *c) {
    const est_tval *k = est_cost_in(c, 1), *past = est_cost_in(c, 4);
    uint64_t len = k && k->rank >= 3 ? (uint64_t)k->dims[k->rank == 4 ? 2 : 1] : 0;
    if (past && past->rank == 4) len = est_add_sat(len, (uint64_t)past->dims[2]);
    return len;
}

/* As FlopCounterMode's sdpa rules: forward QK^T and PV; backward grad_v and
 * grad_probs (PV-sized), grad_q and grad_k (QK^T-sized), each only when
 * needed. */
static void attention_flops(const est_cost_ctx *c, est_flops *f) {
    uint64_t kv = attention_kv_len(c);
    uint64_t qk = est_mul_sat(2, est_mul_sat(est_tval_elements(est_cost_in(c, 0)), kv));
    uint64_t pv = est_mul_sat(2, est_mul_sat(est_tval_elements(est_cost_out(c, 0)), kv));
    f->fwd = est_add_sat(qk, pv);
    f->bwd = 0;
    if (!est_backward_runs(c)) return;
    bool grad_q = est_needs_grad(c, 0), grad_k = est_needs_grad(c, 1) || est_needs_grad(c, 4);
    bool grad_v = est_needs_grad(c, 2) || est_needs_grad(c, 5);
    if (grad_v) f->bwd = est_add_sat(f->bwd, pv);
    if (grad_q || grad_k) f->bwd = est_add_sat(f->bwd, pv);
    if (grad_q) f->bwd = est_add_sat(f->bwd, qk);
    if (grad_k) f->bwd = est_add_sat(f->bwd, qk);
}

/* Rows of the softmax: batch * q_heads * q_seq. */
static uint64_t attention_rows(const est_cost_ctx *c) {
    const est_tval *q = est_cost_in(c, 0);
    if (!q || q->rank < 3) return 0;
    if (q->rank == 4) return est_mul_sat((uint64_t)q->dims[0], est_mul_sat((uint64_t)q->dims[1], (uint64_t)q->dims[2]));
    int64_t heads = est_node_attr_int(c->node, "q_num_heads", 1);
    return est_mul_sat(est_mul_sat((uint64_t)q->dims[0], (uint64_t)q->dims[1]), heads > 0 ? (uint64_t)heads : 1);
}

/* The math kernel of SDPA runs grouped-query attention in float32: PyTorch
 * picks the kernel by its inputs (aten/src/ATen/native/transformers/
 * sdp_utils_cpp.h), the memory-efficient kernel refuses K and V with fewer
 * heads than Q ("both fused kernels require query, key and value to have
 * the same num_heads") and flash and cuDNN take half precision only.
 * transformers calls SDPA with enable_gqa=True; an H100 probe of its Llama
 * and Qwen2 shapes ran _safe_softmax in float32 and the cuDNN kernel in
 * bfloat16 (bench/accuracy/probe_sdpa.py, probe_finetune.py). A mask that
 * takes a gradient (T5's relative position bias, a trainable table) sends
 * it to the math kernel too: the H100 probe of t5_encdec (bench/accuracy/
 * data/blind/) ran _safe_softmax in all 8 self-attentions, whose bias
 * trains, and the memory-efficient kernel in the 4 cross-attentions, whose
 * mask does not. */
static bool attention_runs_math(const est_cost_ctx *c) {
    const est_tval *q = est_cost_in(c, 0), *k = est_cost_in(c, 1);
    if (est_cost_kernels(c) != EST_KERNELS_PYTORCH || !q || !k || q->rank != 4 || k->rank != 4) return false;
    if (est_needs_grad(c, 3)) return true;
    bool grouped = k->dims[1] > 0 && k->dims[1] < q->dims[1];
    return grouped && (c->float_dtype == EST_DT_FLOAT || c->float_dtype == EST_DT_DOUBLE);
}

/* Bytes of the attention probabilities, batch x q_heads x q_seq x kv_len. */
static uint64_t attention_probs_bytes(const est_cost_ctx *c) {
    uint64_t elem = est__dtype_bytes(c->float_dtype, 1);
    return est_mul_sat(est_mul_sat(attention_rows(c), attention_kv_len(c)), elem ? elem : 4);
}

/* How many times the math kernel repeats each key and value head. */
static uint64_t kv_repeats(const est_cost_ctx *c) {
    const est_tval *q = est_cost_in(c, 0), *k = est_cost_in(c, 1);
    return (uint64_t)(q->dims[1] / k->dims[1]);
}

/* _scaled_dot_product_attention_math: key and value repeated to Q's heads
 * (repeat_interleave), q and k scaled by sqrt(scale), then bmm, the mask
 * added, _safe_softmax, [dropout,] bmm. Its autograd keeps the scaled q and
 * k, the repeated v and the probabilities ("self: _softmax_backward_data(
 * grad, result, ...)"; bmm keeps each operand for the other's gradient).
 * With dropout (the fused chain had a Dropout, EST_ATTENTION_DROPOUT) it
 * keeps the dropped probabilities that the second bmm reads and the bool
 * mask too ("native_dropout_backward(grad, mask, scale)"): the H100 probe of
 * t5_encdec's self-attentions (bench/accuracy/data/blind/) leaves 4 and 5
 * MiB at softmax and dropout, [8, 8, 128, 128] at batch 8. The extras
 * count at most EST_MAX_EXTRA tensors: the two dropout ones are summed. */
static void attention_math_saves(const est_cost_ctx *c, est_saved *s) {
    uint64_t rep = kv_repeats(c), probs = attention_probs_bytes(c);
    est_save_extra(s, est_cost_bytes(c, est_cost_in(c, 0)));
    est_save_extra(s, est_mul_sat(rep, est_cost_bytes(c, est_cost_in(c, 1))));
    est_save_extra(s, est_mul_sat(rep, est_cost_bytes(c, est_cost_in(c, 2))));
    uint64_t dropped = 0;
    if (est_node_attr_int(c->node, EST_ATTENTION_DROPOUT, 0)) {
        uint64_t elements = est_mul_sat(attention_rows(c), attention_kv_len(c));
        dropped = est_add_sat(probs, elements); /* and a bool mask, a byte each */
    }
    est_save_extra(s, est_add_sat(probs, dropped));
}

/* memest verify's executor (verify/ops_attention.cu) runs the math per
 * head on Q, K and V as they are (grouped-query heads read their key head,
 * no repeat): it keeps Q, K, V and the probabilities (in Q's dtype: float32,
 * or bfloat16 / float16 under --dtype), with dropout also the bool mask and
 * the dropped probabilities; in inference the probabilities are its
 * forward's workspace; its backward takes one buffer of their size for the
 * scores' gradient when Q, K or the mask needs a gradient. */
static uint64_t attention_verify_probs(const est_cost_ctx *c) {
    const est_tval *q = est_cost_in(c, 0);
    est_dtype dt = q ? est__step_dtype(q->dtype, est_cost_export_dtype(c), c->float_dtype) : EST_DT_FLOAT;
    return est__dtype_bytes(dt, est_mul_sat(attention_rows(c), attention_kv_len(c)));
}

static void attention_verify_saves(const est_cost_ctx *c, est_saved *s) {
    for (int i = 0; i <= 2; i++) est_save_input(c, s, i);
    uint64_t probs = attention_verify_probs(c);
    est_save_extra(s, probs);
    if (est_node_attr_int(c->node, EST_ATTENTION_DROPOUT, 0)) {
        est_save_extra(s, est_mul_sat(attention_rows(c), attention_kv_len(c)));
        est_save_extra(s, probs);
    }
}

static uint64_t attention_verify_backward(const est_cost_ctx *c) {
    bool scores = est_needs_grad(c, 0) || est_needs_grad(c, 1) || est_needs_grad(c, 3);
    return scores ? attention_verify_probs(c) : 0;
}

/* The math kernel's forward: the masked scores beside the probabilities,
 * and the repeated key, held until the call returns. */
static uint64_t attention_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) return est_cost_train(c) ? 0 : attention_verify_probs(c);
    if (!attention_runs_math(c)) return 0;
    return est_add_sat(attention_probs_bytes(c), est_mul_sat(kv_repeats(c), est_cost_bytes(c, est_cost_in(c, 1))));
}

/* The math kernel's backward: the probabilities' gradient, then
 * _softmax_backward_data's result and its temporary (three of the
 * probabilities' size, measured). */
static uint64_t attention_backward_workspace(const est_cost_ctx *c) {
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) return attention_verify_backward(c);
    return attention_runs_math(c) ? est_mul_sat(3, attention_probs_bytes(c)) : 0;
}

/* Flash / memory-efficient SDPA ("query, key, value:
 * _scaled_dot_product_flash_attention_backward(grad, query, key, value,
 * output, logsumexp, ...)"): Q, K, V, the output and a float32 logsumexp per
 * softmax row; the efficient kernel also keeps the mask (attn_bias). With a
 * cache, K and V are the concatenated present_key / present_value. */
static void attention_saves(const est_cost_ctx *c, est_saved *s) {
    if (!est_backward_runs(c)) return;
    if (est_cost_kernels(c) == EST_KERNELS_VERIFY) {
        attention_verify_saves(c, s);
        return;
    }
    if (attention_runs_math(c)) {
        attention_math_saves(c, s);
        return;
    }
    est_save_input(c, s, 0);
    est_save_input(c, s, 3);
    if (est_cost_in(c, 4) && est_cost_out(c, 1) && est_cost_out(c, 2)) {
        est_save_output(c, s, 1);
        est_save_output(c, s, 2);
    } else {
        for (int i = 1; i <= 5; i++)
            if (i != 3) est_save_input(c, s, i);
    }
    est_save_output(c, s, 0);
    est_save_extra(s, est_mul_sat(attention_rows(c), 4));
}

EST_FAMILY(linear,
    {.name = "Gemm", .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
     .infer = gemm_infer, .flops = gemm_flops, .saves = matmul_saves, .backward_workspace = gemm_backward_workspace},
    {.name = "MatMul", .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
     .infer = matmul_infer, .flops = matmul_flops, .saves = matmul_saves, .workspace = matmul_workspace,
     .backward_workspace = matmul_backward_workspace},
    /* zero points are quantization constants */
    {.name = "MatMulInteger", .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
     .infer = matmul_integer_infer, .nondiff_inputs = EST_SLOT(2) | EST_SLOT(3), .flops = matmul_flops},
    /* scales and zero points are quantization constants */
    {.name = "QLinearMatMul", .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
     .infer = qlinear_matmul_infer,
     .nondiff_inputs = EST_SLOT(1) | EST_SLOT(2) | EST_SLOT(4) | EST_SLOT(5) | EST_SLOT(6) | EST_SLOT(7),
     .flops = matmul_flops},
    {.name = "Einsum", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
     .infer = einsum_infer, .flops = einsum_flops, .saves = einsum_saves},
    /* the mask and the per-sample lengths take no gradient */
    {.name = "Attention", .min_inputs = 3, .max_inputs = 7, .min_outputs = 1, .max_outputs = 4,
     .infer = attention_infer, .nondiff_inputs = EST_SLOT(6), .nonparam_inputs = EST_SLOT(3), .flops = attention_flops,
     .saves = attention_saves, .workspace = attention_workspace,
     .backward_workspace = attention_backward_workspace},
);
