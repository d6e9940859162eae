/* ops_shape.c: Identity, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Slice,
 * Transpose (views, as PyTorch makes them: Reshape and Flatten copy a strided
 * input they cannot view, as torch.reshape does), Concat (a copy), Shape,
 * ConstantOfShape, Range; and the
 * host-side evaluators for shape arithmetic (every input host-only: Shape,
 * Gather, Concat of dims, Equal, Where...), whose results take no device
 * memory, like the Python ints PyTorch computes them with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "vx_internal.h"

vx_status vx_k_broadcast_copy(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
vx_status vx_k_reduce_to(vx_ctx *ctx, const vx_tensor *src, vx_tensor *dst);
vx_status vx_k_slice(vx_ctx *ctx, vx_tensor *src, vx_tensor *dst, const int64_t *starts, const int64_t *steps,
                     int scatter);

/* ---- reading small integer inputs ---------------------------------------------------- */

/* Integer input k as a list (host copy); *n = -1 when absent. */
static vx_status in_ints(vx_ctx *ctx, vx_run *run, int k, int64_t *vals, int64_t *n, int64_t max) {
    *n = -1;
    if (k >= run->n_in || !run->in[k]) return VX_OK;
    vx_tensor *t = run->in[k];
    if (t->numel > max) return vx_fail(ctx, VX_EUNSUPPORTED, "input %d has %lld values", k, (long long)t->numel);
    vx_status st = vx_tensor_to_host(ctx, t);
    if (st) return st;
    for (int64_t i = 0; i < t->numel; i++) vals[i] = vx_dtype_is_float(t->dtype) ? (int64_t)t->host_f32[i] : t->host_i64[i];
    *n = t->numel;
    return VX_OK;
}

static vx_status attr_or_input_ints(vx_ctx *ctx, vx_run *run, const char *attr, int k, int64_t *vals, int64_t *n) {
    int64_t cnt = 0;
    const int64_t *a = est_node_attr_ints(run->node, attr, &cnt);
    if (a) {
        if (cnt > VX_MAX_RANK * 4) return vx_fail(ctx, VX_EUNSUPPORTED, "%s too long", attr);
        memcpy(vals, a, sizeof(int64_t) * (size_t)cnt);
        *n = cnt;
        return VX_OK;
    }
    return in_ints(ctx, run, k, vals, n, VX_MAX_RANK * 4);
}

static int norm_axis(int64_t a, int rank) {
    return (int)(a < 0 ? a + rank : a);
}

/* ---- views ------------------------------------------------------------------------- */

static vx_status view_out(vx_ctx *ctx, vx_run *run, int rank, const int64_t *dims) {
    vx_tensor *x = run->in[0];
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (n != x->numel) return vx_fail(ctx, VX_ESHAPE, "cannot view %lld elements as %lld", (long long)x->numel, (long long)n);
    /* a view, or (strided input that no strides can express) a copy */
    run->out[0] = vx_tensor_reshape(ctx, x, rank, dims, run->out_cat[0]);
    return run->out[0] ? VX_OK : VX_EOOM;
}

/* grad.reshape(input's shape): a view, or a copy of a strided gradient. */
static vx_status view_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0], *x = run->in[0];
    if (!g || !run->need_grad[0]) return VX_OK;
    run->grad_in[0] = vx_tensor_reshape(ctx, g, x->rank, x->dims, run->grad_cat[0]);
    return run->grad_in[0] ? VX_OK : VX_EOOM;
}

static vx_status identity_fwd(vx_ctx *ctx, vx_run *run) {
    return view_out(ctx, run, run->in[0]->rank, run->in[0]->dims);
}

static vx_status reshape_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t shape[VX_MAX_RANK * 4], n;
    vx_status st = attr_or_input_ints(ctx, run, "shape", 1, shape, &n);
    if (st) return st;
    if (n < 0 || n > VX_MAX_RANK) return vx_fail(ctx, VX_ESHAPE, "bad shape input");
    bool allowzero = est_node_attr_int(run->node, "allowzero", 0) != 0;
    int64_t known = 1;
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (shape[i] == 0 && !allowzero) shape[i] = i < x->rank ? x->dims[i] : 1;
        if (shape[i] == -1) infer = i;
        else known *= shape[i];
    }
    if (infer >= 0) shape[infer] = known ? x->numel / known : 0;
    return view_out(ctx, run, (int)n, shape);
}

static vx_status flatten_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int axis = norm_axis(est_node_attr_int(run->node, "axis", 1), x->rank);
    int64_t d[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) d[i < axis ? 0 : 1] *= x->dims[i];
    return view_out(ctx, run, 2, d);
}

static vx_status squeeze_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t axes[VX_MAX_RANK * 4], n;
    vx_status st = attr_or_input_ints(ctx, run, "axes", 1, axes, &n);
    if (st) return st;
    bool drop[VX_MAX_RANK] = {false};
    if (n < 0) {
        for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
    } else {
        for (int i = 0; i < n; i++) {
            int a = norm_axis(axes[i], x->rank);
            if (a < 0 || a >= x->rank) return vx_fail(ctx, VX_ESHAPE, "axis out of range");
            drop[a] = true;
        }
    }
    int64_t d[VX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) d[r++] = x->dims[i];
    return view_out(ctx, run, r, d);
}

static vx_status unsqueeze_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t axes[VX_MAX_RANK * 4], n;
    vx_status st = attr_or_input_ints(ctx, run, "axes", 1, axes, &n);
    if (st) return st;
    if (n < 0) return vx_fail(ctx, VX_ESHAPE, "no axes");
    int r = x->rank + (int)n;
    if (r > VX_MAX_RANK) return vx_fail(ctx, VX_EUNSUPPORTED, "rank %d", r);
    bool ins[VX_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a = norm_axis(axes[i], r);
        if (a < 0 || a >= r) return vx_fail(ctx, VX_ESHAPE, "axis out of range");
        ins[a] = true;
    }
    int64_t d[VX_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[j++];
    return view_out(ctx, run, r, d);
}

/* ---- Expand ------------------------------------------------------------------------ */

static vx_status expand_dims(vx_ctx *ctx, vx_run *run, int *rank, int64_t *dims) {
    vx_tensor *x = run->in[0];
    int64_t shape[VX_MAX_RANK * 4], n;
    vx_status st = in_ints(ctx, run, 1, shape, &n, VX_MAX_RANK);
    if (st) return st;
    if (n < 0) return vx_fail(ctx, VX_ESHAPE, "no shape");
    int r = (int)n > x->rank ? (int)n : x->rank;
    for (int i = 0; i < r; i++) {
        int ix = i - (r - x->rank), is = i - (r - (int)n);
        int64_t a = ix >= 0 ? x->dims[ix] : 1, b = is >= 0 ? shape[is] : 1;
        if (a != b && a != 1 && b != 1) return vx_fail(ctx, VX_ESHAPE, "shapes do not broadcast");
        dims[i] = a == 1 ? b : a;
    }
    *rank = r;
    return VX_OK;
}

/* A view: stride 0 along the expanded dims (Tensor.expand). */
static vx_status expand_fwd(vx_ctx *ctx, vx_run *run) {
    int rank;
    int64_t dims[VX_MAX_RANK], xst[VX_MAX_RANK], st_[VX_MAX_RANK];
    vx_status st = expand_dims(ctx, run, &rank, dims);
    if (st) return st;
    vx_tensor *x = run->in[0];
    vx_tensor_get_strides(x, xst);
    for (int i = 0; i < rank; i++) {
        int ix = i - (rank - x->rank);
        st_[i] = ix >= 0 && x->dims[ix] == dims[i] ? xst[ix] : 0;
    }
    run->out[0] = vx_tensor_strided_view(ctx, x, rank, dims, st_, 0);
    return run->out[0] ? VX_OK : VX_EOOM;
}

static vx_status expand_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g || !run->need_grad[0]) return VX_OK;
    vx_tensor *gi = vx_grad_new(ctx, run, 0);
    if (!gi) return VX_EOOM;
    return vx_k_reduce_to(ctx, g, gi);
}

/* ---- Concat ------------------------------------------------------------------------ */

static vx_status concat_dims(vx_ctx *ctx, vx_run *run, int *axis_out, int64_t *dims) {
    vx_tensor *x0 = NULL;
    for (int k = 0; k < run->n_in; k++)
        if (run->in[k]) {
            x0 = run->in[k];
            break;
        }
    if (!x0) return vx_fail(ctx, VX_ESHAPE, "no inputs");
    int axis = norm_axis(est_node_attr_int(run->node, "axis", 0), x0->rank);
    if (axis < 0 || axis >= x0->rank) return vx_fail(ctx, VX_ESHAPE, "axis out of range");
    memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
    dims[axis] = 0;
    for (int k = 0; k < run->n_in; k++)
        if (run->in[k]) {
            if (run->in[k]->rank != x0->rank || run->in[k]->dtype != x0->dtype)
                return vx_fail(ctx, VX_ESHAPE, "inputs of different ranks or dtypes");
            dims[axis] += run->in[k]->dims[axis];
        }
    *axis_out = axis;
    return VX_OK;
}

/* Copies between the concatenated tensor and its parts (to_parts: split). */
static vx_status concat_copy(vx_ctx *ctx, vx_tensor *whole, vx_tensor **parts, int n, int axis, bool to_parts) {
    size_t es = vx_dtype_size(whole->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= whole->dims[i];
    for (int i = axis + 1; i < whole->rank; i++) inner *= whole->dims[i];
    size_t wpitch = (size_t)(whole->dims[axis] * inner) * es, off = 0;
    for (int k = 0; k < n; k++) {
        vx_tensor *p = parts[k];
        if (!p) continue;
        size_t w = (size_t)(p->dims[axis] * inner) * es;
        if (w && outer && p->data) {
            cudaError_t e = to_parts
                ? cudaMemcpy2DAsync(p->data, w, (char *)whole->data + off, wpitch, w, (size_t)outer,
                                    cudaMemcpyDeviceToDevice, (cudaStream_t)vx_stream(ctx))
                : cudaMemcpy2DAsync((char *)whole->data + off, wpitch, p->data, w, w, (size_t)outer,
                                    cudaMemcpyDeviceToDevice, (cudaStream_t)vx_stream(ctx));
            if (e != cudaSuccess) return vx_cuda_status(ctx, e, "Concat");
        }
        off += w;
    }
    return VX_OK;
}

static vx_status concat_fwd(vx_ctx *ctx, vx_run *run) {
    int axis;
    int64_t dims[VX_MAX_RANK];
    vx_status st = concat_dims(ctx, run, &axis, dims);
    if (st) return st;
    vx_tensor *x0 = run->in[0] ? run->in[0] : run->in[1];
    vx_tensor *o = vx_out_new(ctx, run, 0, x0->dtype, x0->rank, dims);
    if (!o) return VX_EOOM;
    return concat_copy(ctx, o, run->in, run->n_in, axis, false);
}

static vx_status concat_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0];
    if (!g) return VX_OK;
    int axis = norm_axis(est_node_attr_int(run->node, "axis", 0), g->rank);
    vx_tensor *parts[VX_MAX_IO] = {NULL};
    /* every part's slot in the split, even those that need no gradient */
    vx_tensor *tmp[VX_MAX_IO] = {NULL};
    for (int k = 0; k < run->n_in; k++) {
        if (!run->in[k]) continue;
        if (run->need_grad[k]) {
            if (!vx_grad_new(ctx, run, k)) return VX_EOOM;
            parts[k] = run->grad_in[k];
        } else {
            /* a shape-only stand-in: skipped by the copy (data NULL) */
            tmp[k] = run->in[k];
            parts[k] = tmp[k];
        }
    }
    return concat_copy(ctx, g, parts, run->n_in, axis, true);
}

/* ---- Slice ------------------------------------------------------------------------- */

static vx_status slice_params(vx_ctx *ctx, vx_run *run, const vx_tensor *x, int64_t *start, int64_t *step,
                              int64_t *dims) {
    int64_t st_[VX_MAX_RANK * 4], en[VX_MAX_RANK * 4], ax[VX_MAX_RANK * 4], sp[VX_MAX_RANK * 4];
    int64_t ns, ne, na, np;
    vx_status s;
    if (run->opset < 10) {
        if ((s = attr_or_input_ints(ctx, run, "starts", 99, st_, &ns)) || (s = attr_or_input_ints(ctx, run, "ends", 99, en, &ne)) ||
            (s = attr_or_input_ints(ctx, run, "axes", 99, ax, &na)))
            return s;
        np = -1;
    } else {
        if ((s = in_ints(ctx, run, 1, st_, &ns, VX_MAX_RANK * 4)) || (s = in_ints(ctx, run, 2, en, &ne, VX_MAX_RANK * 4)) ||
            (s = in_ints(ctx, run, 3, ax, &na, VX_MAX_RANK * 4)) || (s = in_ints(ctx, run, 4, sp, &np, VX_MAX_RANK * 4)))
            return s;
    }
    if (ns < 0 || ne != ns) return vx_fail(ctx, VX_ESHAPE, "starts and ends differ in length");
    for (int i = 0; i < x->rank; i++) {
        start[i] = 0;
        step[i] = 1;
        dims[i] = x->dims[i];
    }
    for (int64_t i = 0; i < ns; i++) {
        int a = na >= 0 ? norm_axis(ax[i], x->rank) : (int)i;
        if (a < 0 || a >= x->rank) return vx_fail(ctx, VX_ESHAPE, "axis out of range");
        int64_t d = x->dims[a], stp = np >= 0 ? sp[i] : 1, b = st_[i], e = en[i];
        if (stp == 0) return vx_fail(ctx, VX_ESHAPE, "step 0");
        if (b < 0) b += d;
        if (e < 0) e += d;
        if (stp > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            e = e < 0 ? 0 : e > d ? d : e;
            dims[a] = e > b ? (e - b + stp - 1) / stp : 0;
        } else {
            b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            dims[a] = b > e ? (b - e - stp - 1) / -stp : 0;
        }
        start[a] = b;
        step[a] = stp;
    }
    return VX_OK;
}

/* A view (basic indexing): offset at the starts, strides times the steps. */
static vx_status slice_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t start[VX_MAX_RANK], step[VX_MAX_RANK], dims[VX_MAX_RANK], xst[VX_MAX_RANK], st_[VX_MAX_RANK];
    vx_status st = slice_params(ctx, run, x, start, step, dims);
    if (st) return st;
    vx_tensor_get_strides(x, xst);
    int64_t off = 0, n = 1;
    for (int i = 0; i < x->rank; i++) n *= dims[i];
    for (int i = 0; i < x->rank; i++) {
        st_[i] = xst[i] * step[i];
        if (n) off += start[i] * xst[i];
    }
    run->out[0] = vx_tensor_strided_view(ctx, x, x->rank, dims, st_, off);
    return run->out[0] ? VX_OK : VX_EOOM;
}

static vx_status slice_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0], *x = run->in[0];
    if (!g || !run->need_grad[0]) return VX_OK;
    int64_t start[VX_MAX_RANK], step[VX_MAX_RANK], dims[VX_MAX_RANK];
    vx_status st = slice_params(ctx, run, x, start, step, dims);
    if (st) return st;
    vx_tensor *gi = vx_grad_new(ctx, run, 0);
    if (!gi) return VX_EOOM;
    if ((st = vx_tensor_zero(ctx, gi))) return st;
    return vx_k_slice(ctx, gi, g, start, step, 1);
}

/* ---- Transpose ------------------------------------------------------------------------- */

/* perm (default: reversed); false when invalid. */
static bool transpose_perm(const vx_run *run, int rank, int *perm) {
    int64_t n = 0;
    const int64_t *p = est_node_attr_ints(run->node, "perm", &n);
    if (p && n != rank) return false;
    bool seen[VX_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        int64_t v = p ? p[i] : rank - 1 - i;
        if (v < 0) v += rank;
        if (v < 0 || v >= rank || seen[v]) return false;
        seen[v] = true;
        perm[i] = (int)v;
    }
    return true;
}

/* A view with permuted strides (Tensor.permute); ops_gather.cu keeps a
 * copying kernel that the gradient test exercises. */
static vx_status transpose_fwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int perm[VX_MAX_RANK];
    if (!transpose_perm(run, x->rank, perm)) return vx_fail(ctx, VX_ESHAPE, "Transpose: bad perm");
    int64_t xst[VX_MAX_RANK], dims[VX_MAX_RANK], st_[VX_MAX_RANK];
    vx_tensor_get_strides(x, xst);
    for (int i = 0; i < x->rank; i++) {
        dims[i] = x->dims[perm[i]];
        st_[i] = xst[perm[i]];
    }
    run->out[0] = vx_tensor_strided_view(ctx, x, x->rank, dims, st_, 0);
    return run->out[0] ? VX_OK : VX_EOOM;
}

/* The gradient is the inverse permutation of the incoming one: a view too. */
static vx_status transpose_bwd(vx_ctx *ctx, vx_run *run) {
    vx_tensor *g = run->grad_out[0], *x = run->in[0];
    if (!g || !run->need_grad[0]) return VX_OK;
    int perm[VX_MAX_RANK];
    if (!transpose_perm(run, x->rank, perm)) return vx_fail(ctx, VX_ESHAPE, "Transpose: bad perm");
    int64_t gst[VX_MAX_RANK], st_[VX_MAX_RANK];
    vx_tensor_get_strides(g, gst);
    for (int i = 0; i < x->rank; i++) st_[perm[i]] = gst[i];
    run->grad_in[0] = vx_tensor_strided_view(ctx, g, x->rank, x->dims, st_, 0);
    return run->grad_in[0] ? VX_OK : VX_EOOM;
}

/* ---- host-side evaluators --------------------------------------------------------------- */

static double hget(const vx_tensor *t, int64_t k) {
    return vx_dtype_is_float(t->dtype) ? (double)t->host_f32[k] : (double)t->host_i64[k];
}
static int64_t hgeti(const vx_tensor *t, int64_t k) {
    return vx_dtype_is_float(t->dtype) ? (int64_t)t->host_f32[k] : t->host_i64[k];
}

static vx_tensor *host_out(vx_ctx *ctx, vx_run *run, int k, vx_dtype dt, int rank, const int64_t *dims) {
    vx_tensor *t = vx_tensor_new_host(ctx, dt, rank, dims);
    run->out[k] = t;
    return t;
}

static vx_status need_host(vx_ctx *ctx, vx_run *run) {
    for (int k = 0; k < run->n_in; k++)
        if (run->in[k]) {
            vx_status st = vx_tensor_to_host(ctx, run->in[k]);
            if (st) return st;
        }
    return VX_OK;
}

/* Broadcast offsets of operand t at output index i. */
static int64_t bc_off(const vx_tensor *t, int rank, const int64_t *dims, int64_t i) {
    int64_t off = 0, s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int64_t c = i % dims[d];
        i /= dims[d];
        int td = d - (rank - t->rank);
        if (td >= 0) {
            if (t->dims[td] != 1) off += c * s;
            s *= t->dims[td];
        }
    }
    return off;
}

static vx_status host_bshape(vx_ctx *ctx, vx_run *run, int n, int *rank, int64_t *dims) {
    int r = 0;
    for (int k = 0; k < n; k++)
        if (run->in[k]->rank > r) r = run->in[k]->rank;
    for (int d = 0; d < r; d++) {
        int64_t v = 1;
        for (int k = 0; k < n; k++) {
            int td = d - (r - run->in[k]->rank);
            if (td < 0) continue;
            int64_t e = run->in[k]->dims[td];
            if (e == v || e == 1) continue;
            if (v != 1) return vx_fail(ctx, VX_ESHAPE, "shapes do not broadcast");
            v = e;
        }
        dims[d] = v;
    }
    *rank = r;
    return VX_OK;
}

static vx_status h_binary(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    vx_tensor *a = run->in[0], *b = run->in[1];
    int rank;
    int64_t dims[VX_MAX_RANK];
    if ((st = host_bshape(ctx, run, 2, &rank, dims))) return st;
    const char *op = run->node->op_type;
    bool cmp = !strcmp(op, "Equal") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "Less") || !strcmp(op, "Greater");
    vx_dtype dt = cmp ? VX_BOOL : a->dtype;
    vx_tensor *o = host_out(ctx, run, 0, dt, rank, dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    for (int64_t i = 0; i < o->numel; i++) {
        int64_t ia = bc_off(a, rank, dims, i), ib = bc_off(b, rank, dims, i);
        if (vx_dtype_is_float(dt)) {
            double x = hget(a, ia), y = hget(b, ib), r;
            r = !strcmp(op, "Add") ? x + y : !strcmp(op, "Sub") ? x - y : !strcmp(op, "Mul") ? x * y : x / y;
            o->host_f32[i] = (float)r;
        } else if (cmp) {
            double x = hget(a, ia), y = hget(b, ib);
            o->host_i64[i] = !strcmp(op, "Equal") ? x == y : !strcmp(op, "GreaterOrEqual") ? x >= y
                           : !strcmp(op, "Less") ? x < y : x > y;
        } else {
            int64_t x = hgeti(a, ia), y = hgeti(b, ib), r;
            if (!strcmp(op, "Div")) {
                if (!y) return vx_fail(ctx, VX_ESHAPE, "integer division by zero");
                r = x / y;
            } else {
                r = !strcmp(op, "Add") ? x + y : !strcmp(op, "Sub") ? x - y : x * y;
            }
            o->host_i64[i] = r;
        }
    }
    return VX_OK;
}

static vx_status h_where(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    int rank;
    int64_t dims[VX_MAX_RANK];
    if ((st = host_bshape(ctx, run, 3, &rank, dims))) return st;
    vx_tensor *c = run->in[0], *x = run->in[1], *y = run->in[2];
    vx_tensor *o = host_out(ctx, run, 0, x->dtype, rank, dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    for (int64_t i = 0; i < o->numel; i++) {
        bool take = c->host_i64[bc_off(c, rank, dims, i)] != 0;
        const vx_tensor *s = take ? x : y;
        int64_t k = bc_off(s, rank, dims, i);
        if (vx_dtype_is_float(o->dtype)) o->host_f32[i] = (float)hget(s, k);
        else o->host_i64[i] = hgeti(s, k);
    }
    return VX_OK;
}

static vx_status h_cast(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    vx_tensor *x = run->in[0];
    int64_t to = est_node_attr_int(run->node, "to", 1);
    vx_dtype dt = (to == 1 || to == 10 || to == 11 || to == 16) ? vx_float_dtype(ctx) : to == 9 ? VX_BOOL : VX_I64;
    vx_tensor *o = host_out(ctx, run, 0, dt, x->rank, x->dims);
    if (!o) return VX_EOOM;
    for (int64_t i = 0; i < x->numel; i++) {
        if (vx_dtype_is_float(dt)) o->host_f32[i] = (float)hget(x, i);
        else if (dt == VX_BOOL) o->host_i64[i] = hget(x, i) != 0;
        else o->host_i64[i] = hgeti(x, i);
    }
    return VX_OK;
}

static vx_status h_shape(vx_ctx *ctx, vx_run *run) {
    vx_tensor *x = run->in[0];
    int64_t s = est_node_attr_int(run->node, "start", 0), e = est_node_attr_int(run->node, "end", x->rank);
    if (s < 0) s += x->rank;
    if (e < 0) e += x->rank;
    if (s < 0) s = 0;
    if (e > x->rank) e = x->rank;
    int64_t n = e > s ? e - s : 0;
    vx_tensor *o = host_out(ctx, run, 0, VX_I64, 1, &n);
    if (!o) return VX_EOOM;
    for (int64_t i = 0; i < n; i++) o->host_i64[i] = x->dims[s + i];
    return VX_OK;
}

/* Size: the input's element count as an int64 scalar (x.numel(), a Python
 * int in PyTorch: no device memory). */
static vx_status h_size(vx_ctx *ctx, vx_run *run) {
    vx_tensor *o = host_out(ctx, run, 0, VX_I64, 0, run->in[0]->dims); /* rank 0: a scalar */
    if (!o) return VX_EOOM;
    o->host_i64[0] = run->in[0]->numel;
    return VX_OK;
}

static vx_status h_gather(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    vx_tensor *d = run->in[0], *ix = run->in[1];
    int axis = norm_axis(est_node_attr_int(run->node, "axis", 0), d->rank);
    if (axis < 0 || axis >= d->rank || d->rank + ix->rank - 1 > VX_MAX_RANK)
        return vx_fail(ctx, VX_ESHAPE, "bad axis or rank");
    int64_t dims[VX_MAX_RANK];
    int r = 0;
    for (int i = 0; i < axis; i++) dims[r++] = d->dims[i];
    for (int i = 0; i < ix->rank; i++) dims[r++] = ix->dims[i];
    for (int i = axis + 1; i < d->rank; i++) dims[r++] = d->dims[i];
    vx_tensor *o = host_out(ctx, run, 0, d->dtype, r, dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    int64_t outer = 1, inner = 1, ax = d->dims[axis];
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = axis + 1; i < d->rank; i++) inner *= d->dims[i];
    int64_t k = 0;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < ix->numel; j++) {
            int64_t id = ix->host_i64[j];
            if (id < 0) id += ax;
            if (id < 0 || id >= ax) return vx_fail(ctx, VX_ESHAPE, "index %lld out of range", (long long)id);
            for (int64_t b = 0; b < inner; b++, k++) {
                int64_t src = (a * ax + id) * inner + b;
                if (vx_dtype_is_float(o->dtype)) o->host_f32[k] = d->host_f32[src];
                else o->host_i64[k] = d->host_i64[src];
            }
        }
    return VX_OK;
}

/* GatherElements on host tensors (BERT's token-type / position buffers). */
static vx_status h_gather_elements(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    vx_tensor *d = run->in[0], *ix = run->in[1];
    if (d->rank != ix->rank) return vx_fail(ctx, VX_ESHAPE, "ranks differ");
    int axis = norm_axis(est_node_attr_int(run->node, "axis", 0), d->rank);
    if (axis < 0 || axis >= d->rank) return vx_fail(ctx, VX_ESHAPE, "bad axis");
    vx_tensor *o = host_out(ctx, run, 0, d->dtype, ix->rank, ix->dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    for (int64_t i = 0; i < o->numel; i++) {
        int64_t r = i, off = 0, s = 1;
        for (int k = ix->rank - 1; k >= 0; k--) {
            int64_t c = r % ix->dims[k];
            r /= ix->dims[k];
            if (k == axis) {
                c = ix->host_i64[i];
                if (c < 0) c += d->dims[k];
                if (c < 0 || c >= d->dims[k]) return vx_fail(ctx, VX_ESHAPE, "index out of range");
            }
            off += c * s;
            s *= d->dims[k];
        }
        if (vx_dtype_is_float(o->dtype)) o->host_f32[i] = d->host_f32[off];
        else o->host_i64[i] = d->host_i64[off];
    }
    return VX_OK;
}

static vx_status h_concat(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    int axis;
    int64_t dims[VX_MAX_RANK];
    if ((st = concat_dims(ctx, run, &axis, dims))) return st;
    vx_tensor *x0 = run->in[0] ? run->in[0] : run->in[1];
    vx_tensor *o = host_out(ctx, run, 0, x0->dtype, x0->rank, dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= dims[i];
    for (int i = axis + 1; i < x0->rank; i++) inner *= dims[i];
    int64_t k = 0;
    for (int64_t a = 0; a < outer; a++)
        for (int p = 0; p < run->n_in; p++) {
            vx_tensor *t = run->in[p];
            if (!t) continue;
            int64_t w = t->dims[axis] * inner;
            for (int64_t j = 0; j < w; j++, k++) {
                if (vx_dtype_is_float(o->dtype)) o->host_f32[k] = t->host_f32[a * w + j];
                else o->host_i64[k] = t->host_i64[a * w + j];
            }
        }
    return VX_OK;
}

static vx_status h_slice(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    vx_tensor *x = run->in[0];
    int64_t start[VX_MAX_RANK], step[VX_MAX_RANK], dims[VX_MAX_RANK];
    if ((st = slice_params(ctx, run, x, start, step, dims))) return st;
    vx_tensor *o = host_out(ctx, run, 0, x->dtype, x->rank, dims);
    if (!o) return VX_EOOM;
    for (int64_t i = 0; i < o->numel; i++) {
        int64_t r = i, off = 0, s = 1;
        for (int k = x->rank - 1; k >= 0; k--) {
            off += (start[k] + (r % dims[k]) * step[k]) * s;
            r /= dims[k];
            s *= x->dims[k];
        }
        if (vx_dtype_is_float(o->dtype)) o->host_f32[i] = x->host_f32[off];
        else o->host_i64[i] = x->host_i64[off];
    }
    return VX_OK;
}

static vx_status h_expand(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    int rank;
    int64_t dims[VX_MAX_RANK];
    if ((st = expand_dims(ctx, run, &rank, dims))) return st;
    vx_tensor *x = run->in[0];
    vx_tensor *o = host_out(ctx, run, 0, x->dtype, rank, dims);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "result too large for the host path");
    for (int64_t i = 0; i < o->numel; i++) {
        int64_t k = bc_off(x, rank, dims, i);
        if (vx_dtype_is_float(o->dtype)) o->host_f32[i] = x->host_f32[k];
        else o->host_i64[i] = x->host_i64[k];
    }
    return VX_OK;
}

static vx_status h_range(vx_ctx *ctx, vx_run *run) {
    vx_status st = need_host(ctx, run);
    if (st) return st;
    double s = hget(run->in[0], 0), l = hget(run->in[1], 0), d = hget(run->in[2], 0);
    if (d == 0) return vx_fail(ctx, VX_ESHAPE, "delta 0");
    double nf = ceil((l - s) / d);
    int64_t n = nf > 0 ? (int64_t)nf : 0;
    vx_tensor *o = host_out(ctx, run, 0, run->in[0]->dtype, 1, &n);
    if (!o) return vx_fail(ctx, VX_EUNSUPPORTED, "range too long for the host path");
    for (int64_t i = 0; i < n; i++) {
        if (vx_dtype_is_float(o->dtype)) o->host_f32[i] = (float)(s + (double)i * d);
        else o->host_i64[i] = hgeti(run->in[0], 0) + i * hgeti(run->in[2], 0);
    }
    return VX_OK;
}

/* ConstantOfShape: host when small and integer, else on the device. */
static vx_status cos_value(vx_ctx *ctx, const vx_run *run, vx_dtype *dt, double *v) {
    *dt = vx_float_dtype(ctx);
    *v = 0;
    for (int i = 0; i < run->node->n_attrs; i++) {
        const est_attr *a = &run->node->attrs[i];
        if (strcmp(a->name, "value") || a->type != EST_ATTR_TENSOR) continue;
        est_dtype d = a->t_dtype;
        *dt = (d == EST_DT_FLOAT || d == EST_DT_DOUBLE || d == EST_DT_FLOAT16 || d == EST_DT_BFLOAT16) ? vx_float_dtype(ctx)
              : d == EST_DT_BOOL ? VX_BOOL : VX_I64;
        if (a->t_value && a->t_value->count > 0)
            *v = a->t_value->i64 ? (double)a->t_value->i64[0] : a->t_value->f64 ? a->t_value->f64[0] : 0;
    }
    return VX_OK;
}

static vx_status cos_dims(vx_ctx *ctx, vx_run *run, int *rank, int64_t *dims) {
    int64_t n;
    vx_status st = in_ints(ctx, run, 0, dims, &n, VX_MAX_RANK);
    if (st) return st;
    if (n < 0) return vx_fail(ctx, VX_ESHAPE, "no shape");
    *rank = (int)n;
    return VX_OK;
}

static vx_status constant_of_shape_fwd(vx_ctx *ctx, vx_run *run) {
    int rank = 0;
    int64_t dims[VX_MAX_RANK];
    vx_status st = cos_dims(ctx, run, &rank, dims);
    if (st) return st;
    vx_dtype dt;
    double v;
    cos_value(ctx, run, &dt, &v);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (!vx_dtype_is_float(dt) && n <= VX_HOST_MAX) {
        vx_tensor *o = host_out(ctx, run, 0, dt, rank, dims);
        if (!o) return VX_EOOM;
        for (int64_t i = 0; i < n; i++) o->host_i64[i] = (int64_t)v;
        return VX_OK;
    }
    vx_tensor *o = vx_out_new(ctx, run, 0, dt, rank, dims);
    if (!o) return VX_EOOM;
    return vx_k_fill(ctx, o, (float)v);
}

static vx_status range_fwd(vx_ctx *ctx, vx_run *run) {
    return h_range(ctx, run);
}

/* ---- tables ------------------------------------------------------------------------- */

#define HOST_IN_ALL (~0u)
#define VIEW_OP (VX_STRIDED_IN | VX_STRIDED_SAVED | VX_STRIDED_GRAD)

const vx_op vx_ops_shape[] = {
    {"Identity", identity_fwd, view_bwd, 0, 0, false, 0, NULL, VIEW_OP, VX_HALF},
    {"Detach", identity_fwd, NULL, 0, 0, false, 0, NULL, VIEW_OP, VX_HALF}, /* ai.memest: no gradient flows */
    {"Reshape", reshape_fwd, view_bwd, 0, 0, false, VX_SLOT(1), NULL, VIEW_OP, VX_HALF},
    {"Flatten", flatten_fwd, view_bwd, 0, 0, false, 0, NULL, VIEW_OP, VX_HALF},
    {"Squeeze", squeeze_fwd, view_bwd, 0, 0, false, VX_SLOT(1), NULL, VIEW_OP, VX_HALF},
    {"Unsqueeze", unsqueeze_fwd, view_bwd, 0, 0, false, VX_SLOT(1), NULL, VIEW_OP, VX_HALF},
    {"Transpose", transpose_fwd, transpose_bwd, 0, 0, false, 0, NULL, VIEW_OP, VX_HALF},
    /* backward: a sum-reduction (Expand), a zero-filled scatter (Slice) */
    {"Expand", expand_fwd, expand_bwd, 0, 0, false, VX_SLOT(1), NULL, VX_STRIDED_IN, VX_HALF},
    {"Concat", concat_fwd, concat_bwd, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Slice", slice_fwd, slice_bwd, VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3) | VX_SLOT(4), 0, false,
     VX_SLOT(1) | VX_SLOT(2) | VX_SLOT(3) | VX_SLOT(4), NULL, VX_STRIDED_IN | VX_STRIDED_SAVED, VX_HALF},
    {"Shape", h_shape, NULL, 0, 0, true, 0, NULL, 0, VX_HALF},
    {"Size", h_size, NULL, 0, 0, true, 0, NULL, 0, VX_HALF},
    {"ConstantOfShape", constant_of_shape_fwd, NULL, 0, 0, false, VX_SLOT(0), NULL, 0, VX_HALF},
    {"Range", range_fwd, NULL, 0, 0, true, HOST_IN_ALL, NULL, 0, VX_HALF},
};
const size_t vx_ops_shape_count = sizeof vx_ops_shape / sizeof vx_ops_shape[0];

/* Run when every input is host-only (and no gradient is needed). */
const vx_op vx_host_ops[] = {
    {"Shape", h_shape, NULL, 0, 0, true, 0, NULL, 0, VX_HALF},
    {"Size", h_size, NULL, 0, 0, true, 0, NULL, 0, VX_HALF},
    {"Gather", h_gather, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"GatherElements", h_gather_elements, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Unsqueeze", unsqueeze_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Squeeze", squeeze_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Reshape", reshape_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Flatten", flatten_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Identity", identity_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Concat", h_concat, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Slice", h_slice, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Expand", h_expand, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Add", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Sub", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Mul", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Div", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Equal", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"GreaterOrEqual", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Less", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Greater", h_binary, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Where", h_where, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Cast", h_cast, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"Range", h_range, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
    {"ConstantOfShape", constant_of_shape_fwd, NULL, 0, 0, false, 0, NULL, 0, VX_HALF},
};
const size_t vx_host_ops_count = sizeof vx_host_ops / sizeof vx_host_ops[0];
