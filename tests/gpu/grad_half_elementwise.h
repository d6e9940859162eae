/*
 * grad_half_elementwise.h: test_grad_elementwise.cu's check of the ops whose
 * kernels take bfloat16 / float16 tensors (vx_op.dtypes & VX_HALF): a case
 * run with its floating inputs stored in the half dtype (the run's float
 * dtype set too, as `memest verify --dtype` sets it), against the float32
 * kernels on the same values rounded to that dtype; the output and the
 * gradients must agree within a tolerance of their largest magnitude (the
 * half kernels compute in float32 and round their stores); integer and
 * bool outputs must be equal. Included by test_grad_elementwise.cu before
 * run_case, which calls half_case for every VX_HALF op.
 */

/* v rounded to dt (bfloat16 or float16), as a float. */
static float half_round(float v, vx_dtype dt) {
    float r;
    unsigned short s;
    vx_from_f32(dt, &v, &s, 1);
    vx_to_f32(dt, &s, &r, 1);
    return r;
}

/* h with its floating values stored as dt (views become contiguous). */
static vx_tensor *upload_as(const HT &h, vx_dtype dt) {
    if (h.absent) return NULL;
    if (h.dt != VX_F32 || dt == VX_F32) return upload(h, true);
    int rank = (int)h.dims.size();
    if (h.host_only) {
        vx_tensor *t = vx_tensor_new_host(&g_ctx, dt, rank, h.dims.data());
        memcpy(t->host_f32, h.f.data(), sizeof(float) * h.f.size());
        return t;
    }
    vx_tensor *t = vx_tensor_new(&g_ctx, dt, rank, h.dims.data(), VX_CAT_ACTIVATIONS);
    std::vector<unsigned short> b(h.f.size() ? h.f.size() : 1); /* 2-byte storage */
    vx_from_f32(dt, h.f.data(), b.data(), (int64_t)h.f.size());
    vx_tensor_upload(&g_ctx, t, b.data());
    vx_sync(&g_ctx);
    return t;
}

/* t's values as floats, whatever its floating dtype. */
static HT download_f(vx_tensor *t) {
    if (t->dtype != VX_BF16 && t->dtype != VX_F16) return download(t);
    HT h;
    h.dims.assign(t->dims, t->dims + t->rank);
    std::vector<unsigned short> b(t->numel ? t->numel : 1);
    vx_tensor_download(&g_ctx, t, b.data());
    vx_sync(&g_ctx);
    h.f.resize(t->numel);
    vx_to_f32(t->dtype, b.data(), h.f.data(), t->numel);
    return h;
}

/* Forward and backward of c with its floating inputs as dt: output c.out
 * and the gradients asked for, as floats. VX_EUNSUPPORTED passes through
 * (a path with no half kernel). */
static vx_status half_run(Case &c, const std::vector<HT> &in, const std::vector<float> &R, vx_dtype dt, HT *y,
                          std::vector<HT> *grads) {
    const vx_op *op = find_op(c.node.op.c_str());
    std::vector<vx_tensor *> ins;
    for (auto &h : in) ins.push_back(upload_as(h, dt));
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, ins, outs, c.training);
    for (size_t k = 0; k < in.size(); k++) run.need_grad[k] = k < c.grad.size() && c.grad[k];
    g_ctx.fdt = dt;
    vx_status st = run_forward(op, &run);
    if (!st && !run.out[c.out]) st = vx_fail(&g_ctx, VX_ECUDA, "no output");
    if (!st) *y = download_f(run.out[c.out]);
    grads->assign(in.size(), HT());
    bool any_grad = false;
    for (size_t k = 0; k < in.size(); k++) any_grad |= run.need_grad[k];
    if (!st && any_grad && op->backward && R.size() == y->f.size()) {
        HT r;
        r.dims = y->dims;
        r.f = R;
        run.grad_out[c.out] = upload_as(r, run.out[c.out]->dtype == VX_F32 ? VX_F32 : dt);
        st = run_backward(op, &run);
        for (size_t k = 0; !st && k < in.size(); k++)
            if (run.need_grad[k] && run.grad_in[k]) (*grads)[k] = download_f(run.grad_in[k]);
    }
    g_ctx.fdt = VX_F32;
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) { printf("FAIL %s (half): CUDA error %s\n", c.node.op.c_str(), cudaGetErrorString(ce)); exit(1); }
    release_run(&run);
    return st;
}

static double half_rel_err(const std::vector<float> &a, const std::vector<float> &b) {
    if (a.size() != b.size()) return INFINITY;
    double d = 0, m = 0;
    for (size_t k = 0; k < a.size(); k++) {
        d = std::max(d, (double)fabs(a[k] - b[k]));
        m = std::max(m, (double)fabs(b[k]));
    }
    return m > 0 ? d / m : d;
}

static void half_case(const char *name, Case c, vx_dtype dt) {
    bool any_float = false;
    std::vector<HT> in = c.in;
    for (auto &h : in) {
        if (h.absent || h.dt != VX_F32) continue;
        any_float = true;
        if (h.view) { h.view = false; h.vbase.clear(); } /* the logical values, contiguous */
        for (auto &v : h.f) v = half_round(v, dt);
    }
    if (!any_float) return;
    double tol = dt == VX_BF16 ? 4e-2 : 1e-2;
    HT y32, yh;
    std::vector<HT> g32, gh;
    std::vector<float> R;
    vx_status st = half_run(c, in, R, VX_F32, &y32, &g32);
    if (!st) {
        R.resize(y32.f.size());
        for (auto &v : R) v = half_round((float)urand(), dt);
        st = half_run(c, in, R, VX_F32, &y32, &g32);
    }
    if (!st) st = half_run(c, in, R, dt, &yh, &gh);
    if (st == VX_EUNSUPPORTED && (strstr(g_ctx.message, "no bfloat16 kernel") || strstr(g_ctx.message, "no float16 kernel"))) {
        printf("skip %s (%s): %s\n", name, vx_dtype_name(dt), g_ctx.message);
        return;
    }
    if (st) {
        printf("FAIL %s (%s): %d %s\n", name, vx_dtype_name(dt), st, g_ctx.message);
        g_failures++;
        return;
    }
    g_checks++;
    double worst = yh.dims == y32.dims && yh.i == y32.i ? half_rel_err(yh.f, y32.f) : INFINITY;
    const char *where = "output";
    for (size_t k = 0; k < in.size(); k++) {
        if (k >= c.grad.size() || !c.grad[k]) continue;
        double e = half_rel_err(gh[k].f, g32[k].f);
        if (!(e <= worst)) { worst = e; where = "a gradient"; }
    }
    bool ok = worst <= tol;
    printf("%s %s (%s)", ok ? "ok  " : "FAIL", name, vx_dtype_name(dt));
    if (ok) printf("\n");
    else {
        printf(": %s differs from float32 by %.3g of its largest magnitude (tolerance %.3g)\n", where, worst, tol);
        g_failures++;
    }
}
