/*
 * grad_half.h: test_grad.cu's check of the ops whose kernels take bfloat16 /
 * float16 tensors (vx_op.dtypes & VX_HALF): a case run with its floating
 * inputs stored in the half dtype, against the float32 kernels on the same
 * values rounded to that dtype; output and gradients within a tolerance of
 * their largest magnitude (the half kernels compute in float32 and round
 * their stores). Included by test_grad.cu before run_case, which calls
 * half_case for every VX_HALF op.
 */

/* v rounded to dt's precision (bfloat16 or float16), as a float. */
static float round_to(float v, vx_dtype dt) {
    return dt == VX_BF16 ? __bfloat162float(__float2bfloat16(v)) : __half2float(__float2half(v));
}

/* Forward and backward of c on inputs stored as dt (every floating input),
 * the output's gradient R: output c.loss_out and the gradients asked for,
 * as float values. False (message printed) when a kernel fails. */
static bool run_in_dtype(const char *name, Case &c, const std::vector<HT> &in, const std::vector<float> &R, vx_dtype dt,
                         HT *y, std::vector<HT> *grads) {
    const vx_op *op = find_op(c.node.op.c_str());
    std::vector<vx_tensor *> ins;
    for (auto h : in) {
        if (h.dims.empty() && h.f.empty() && h.i.empty()) { ins.push_back(NULL); continue; }
        if (h.dt == VX_F32) h.dt = dt;
        ins.push_back(upload(h));
    }
    vx_run run;
    est_node en;
    int32_t outs[8];
    setup_run(&run, &en, c.node, op, ins, outs, c.training);
    for (size_t k = 0; k < in.size(); k++) run.need_grad[k] = k < c.grad.size() && c.grad[k];
    vx_status st = op->forward(&g_ctx, &run);
    if (!st) *y = download(run.out[c.loss_out]);
    grads->assign(in.size(), HT());
    if (!st && op->backward && R.size() == y->f.size()) {
        HT r;
        r.dt = dt;
        r.dims = y->dims;
        r.f = R;
        run.grad_out[c.loss_out] = upload(r);
        st = op->backward(&g_ctx, &run);
        for (size_t k = 0; !st && k < in.size(); k++)
            if (run.need_grad[k] && run.grad_in[k]) (*grads)[k] = download(run.grad_in[k]);
    }
    if (st) printf("FAIL %s (%s): %d %s\n", name, vx_dtype_name(dt), st, g_ctx.message);
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) { printf("FAIL %s (%s): CUDA error %s\n", name, vx_dtype_name(dt), cudaGetErrorString(ce)); exit(1); }
    release_run(&run);
    return !st;
}

/* max |a - b| / max |b| over two float value lists (0 when b is all zeros
 * and a matches). */
static double rel_err(const std::vector<float> &a, const std::vector<float> &b) {
    double d = 0, m = 0;
    for (size_t k = 0; k < a.size() && k < b.size(); k++) {
        d = std::max(d, (double)fabs(a[k] - b[k]));
        m = std::max(m, (double)fabs(b[k]));
    }
    if (a.size() != b.size()) return INFINITY;
    return m > 0 ? d / m : d;
}

/* An op whose kernels take half tensors (VX_HALF): the case run in dt on
 * inputs rounded to dt, against the float32 kernels on the same rounded
 * values; output and gradients within tol of the largest magnitude (the
 * half kernels accumulate in float32, so only the stores round). */
static void half_case(const char *name, Case c, vx_dtype dt) {
    double tol = dt == VX_BF16 ? 4e-2 : 1e-2;
    std::vector<HT> in = c.in;
    for (auto &h : in)
        if (h.dt == VX_F32) for (auto &v : h.f) v = round_to(v, dt);
    HT y32, yh;
    std::vector<HT> g32, gh;
    std::vector<float> R;
    if (!run_in_dtype(name, c, in, R, VX_F32, &y32, &g32)) { g_failures++; return; }
    R.resize(y32.f.size());
    for (auto &v : R) v = round_to((float)urand(), dt);
    if (!run_in_dtype(name, c, in, R, VX_F32, &y32, &g32) || !run_in_dtype(name, c, in, R, dt, &yh, &gh)) {
        g_failures++;
        return;
    }
    bool ok = yh.dims == y32.dims;
    double worst = rel_err(yh.f, y32.f);
    const char *where = "output";
    for (size_t k = 0; k < in.size(); k++) {
        if (k >= c.grad.size() || !c.grad[k]) continue;
        double e = rel_err(gh[k].f, g32[k].f);
        if (e > worst) { worst = e; where = "a gradient"; }
    }
    g_checks++;
    ok = ok && worst <= tol;
    printf("%s %s (%s)%s", ok ? "ok  " : "FAIL", name, vx_dtype_name(dt), ok ? "\n" : "");
    if (!ok) {
        printf(": %s differs from float32 by %.3g of its largest magnitude (tolerance %.3g)\n", where, worst, tol);
        g_failures++;
    }
}
