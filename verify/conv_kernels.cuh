/*
 * conv_kernels.cuh: the index kernels of ops_conv.cu (im2col, col2im, the
 * depthwise kernels, the bias add) and their launchers.
 *
 * These kernels are mostly index arithmetic. Where every index fits in 31
 * bits (nearly always) they run the fast forms: a block row per column row
 * or channel plane, positions split with vxk_fdiv (a multiply and a shift,
 * where a 32-bit division is some twenty instructions and a 64-bit one
 * several times that), kernel taps walked in nested loops. Otherwise the
 * generic forms run in 64-bit arithmetic.
 *
 * Spatial axes are depth, height and width; a 1-D or 2-D convolution has
 * the leading ones of size 1 (kernel 1, stride 1, no padding).
 */
#ifndef MEMEST_VX_CONV_KERNELS_CUH
#define MEMEST_VX_CONV_KERNELS_CUH

#include "ops_common.cuh"

enum { AXES = 3 };

typedef struct conv_geom {
    int sp;                    /* spatial rank: 1, 2 or 3 */
    int64_t N, C, M, G, Cg, Mg;
    int64_t in[AXES], k[AXES], st[AXES], dl[AXES], pad[AXES], out[AXES]; /* depth, height, width */
    int64_t IS, KK, P;         /* input pixels, kernel taps, output pixels per channel */
} conv_geom;

/* Whether every index of g's tensors (and a kernel over `total` elements,
 * grid-stride steps included) fits in int32_t. */
static bool conv_fits32(const conv_geom *g, int64_t total) {
    const int64_t lim = INT32_MAX / 2;
    int64_t big = g->N * (g->C > g->M ? g->C : g->M) * (g->IS > g->P ? g->IS : g->P);
    int64_t col = g->N * g->C * g->KK * g->P;
    return total < lim && big < lim && col < lim;
}

/* Where element (sample n, channel c, tap t, output pixel p) of a column
 * buffer lies: n * sN + c * sC + t * sT + p. */
typedef struct col_layout {
    int64_t sN, sC, sT;
} col_layout;

/* Sample by sample: (nb, C*KK, P), each sample's columns one matrix. */
static col_layout col_by_sample(const conv_geom *g) { return (col_layout){g->C * g->KK * g->P, g->KK * g->P, g->P}; }

/* Samples inside each row: (C*KK, nb, P), a group's columns of all nb
 * samples one matrix (C*KK rows of nb*P), which the weight gradient sums
 * over in one product. */
static col_layout col_by_row(const conv_geom *g, int64_t nb) { return (col_layout){g->P, g->KK * nb * g->P, nb * g->P}; }

/* ---- generic forms, 64-bit -------------------------------------------------------- */

/* v's coordinates (depth, height, width) in a grid of dims. */
static __device__ __forceinline__ void unravel3(int64_t v, const int64_t *dims, int64_t *c) {
    for (int ax = AXES - 1; ax >= 0; ax--) {
        c[ax] = v % dims[ax];
        v /= dims[ax];
    }
}

/* The input offset (within a channel) that output pixel p reads at kernel
 * tap t, or -1 in the padding. */
static __device__ __forceinline__ int64_t tap_input(const conv_geom &g, int64_t p, int64_t t) {
    int64_t o[AXES], k[AXES], off = 0;
    unravel3(p, g.out, o);
    unravel3(t, g.k, k);
    for (int ax = 0; ax < AXES; ax++) {
        int64_t i = o[ax] * g.st[ax] - g.pad[ax] + k[ax] * g.dl[ax];
        if (i < 0 || i >= g.in[ax]) return -1;
        off = off * g.in[ax] + i;
    }
    return off;
}

/* The output pixel whose window puts tap t on input pixel q, or -1. */
static __device__ __forceinline__ int64_t tap_output(const conv_geom &g, int64_t q, int64_t t) {
    int64_t in[AXES], k[AXES], off = 0;
    unravel3(q, g.in, in);
    unravel3(t, g.k, k);
    for (int ax = 0; ax < AXES; ax++) {
        int64_t o = vxk_window_of(in[ax], g.pad[ax], k[ax], g.dl[ax], g.st[ax], g.out[ax]);
        if (o < 0) return -1;
        off = off * g.out[ax] + o;
    }
    return off;
}

/* The columns of nb samples (total = nb * C * KK * P), laid out as l says. */
template <typename T>
static __global__ void im2col_kernel(T *col, const T *x, conv_geom g, col_layout l, int64_t total) {
    VXK_LOOP(i, total) {
        int64_t p = i % g.P, t = i / g.P;
        int64_t tap = t % g.KK, nc = t / g.KK; /* nc = n * C + c */
        int64_t off = tap_input(g, p, tap);
        col[(nc / g.C) * l.sN + (nc % g.C) * l.sC + tap * l.sT + p] =
            vxk_st<T>(off >= 0 ? vxk_ld(x[nc * g.IS + off]) : 0.f);
    }
}

/* dx of nb samples = col2im(dcol): each input element gathers. */
template <typename T>
static __global__ void col2im_kernel(T *dx, const T *dcol, conv_geom g, col_layout l, int64_t total) {
    VXK_LOOP(i, total) {
        int64_t q = i % g.IS, nc = i / g.IS;
        const T *cb = dcol + (nc / g.C) * l.sN + (nc % g.C) * l.sC;
        float acc = 0.f;
        for (int64_t t = 0; t < g.KK; t++) {
            int64_t o = tap_output(g, q, t);
            if (o >= 0) acc += vxk_ld(cb[t * l.sT + o]);
        }
        dx[i] = vxk_st<T>(acc);
    }
}

template <typename T> static __global__ void dw_forward_kernel(T *y, const T *x, const T *w, const T *b, conv_geom g) {
    int64_t total = g.N * g.M * g.P;
    VXK_LOOP(i, total) {
        int64_t p = i % g.P, t = i / g.P;
        int64_t m = t % g.M, n = t / g.M;
        const T *xp = x + (n * g.C + m / g.Mg) * g.IS;
        const T *wp = w + m * g.KK;
        float acc = b ? vxk_ld(b[m]) : 0.f;
        for (int64_t tap = 0; tap < g.KK; tap++) {
            int64_t off = tap_input(g, p, tap);
            if (off >= 0) acc += vxk_ld(wp[tap]) * vxk_ld(xp[off]);
        }
        y[i] = vxk_st<T>(acc);
    }
}

template <typename T> static __global__ void dw_dx_kernel(T *dx, const T *dy, const T *w, conv_geom g) {
    int64_t total = g.N * g.C * g.IS;
    VXK_LOOP(i, total) {
        int64_t q = i % g.IS, t = i / g.IS;
        int64_t c = t % g.C, n = t / g.C;
        float acc = 0.f;
        for (int64_t j = 0; j < g.Mg; j++) {
            int64_t m = c * g.Mg + j;
            const T *dyp = dy + (n * g.M + m) * g.P;
            const T *wp = w + m * g.KK;
            for (int64_t tap = 0; tap < g.KK; tap++) {
                int64_t o = tap_output(g, q, tap);
                if (o >= 0) acc += vxk_ld(wp[tap]) * vxk_ld(dyp[o]);
            }
        }
        dx[i] = vxk_st<T>(acc);
    }
}

/* One block per weight element, reducing over (N, output pixels). */
template <typename T> static __global__ void dw_dw_kernel(T *dw, const T *dy, const T *x, conv_geom g) {
    __shared__ float sh[VXK_THREADS];
    for (int64_t e = blockIdx.x; e < g.M * g.KK; e += gridDim.x) {
        int64_t tap = e % g.KK, m = e / g.KK, c = m / g.Mg;
        float acc = 0.f;
        for (int64_t j = threadIdx.x; j < g.N * g.P; j += blockDim.x) {
            int64_t n = j / g.P, p = j % g.P;
            int64_t off = tap_input(g, p, tap);
            if (off >= 0) acc += vxk_ld(dy[(n * g.M + m) * g.P + p]) * vxk_ld(x[(n * g.C + c) * g.IS + off]);
        }
        acc = vxk_block_reduce(acc, sh, false);
        if (threadIdx.x == 0) dw[e] = vxk_st<T>(acc);
        __syncthreads();
    }
}

/* ---- fast forms, 32-bit ----------------------------------------------------------- */

/* Whether the column kernels' indices fit in int32_t: im2col_fast,
 * col2im_fast and the staged forms index within one channel plane and
 * count `rows` (planes, or planes x taps) in int, and reach a plane in 64
 * bits, so a chunk's whole columns may pass 2^31 elements (r3d_18's do at
 * batch 32, which sent it to the 64-bit forms). */
static bool planes_fit32(const conv_geom *g, int64_t rows) {
    const int64_t lim = INT32_MAX / 2;
    return g->IS < lim && g->P < lim && g->KK < lim && rows < lim;
}


typedef struct conv_fast {
    int in[AXES], k[AXES], st[AXES], dl[AXES], pad[AXES], out[AXES];
    int C, M, Mg, IS, KK, P;
    vxk_fdiv out_w, out_h, in_w, in_h, P_div; /* splitting output and input pixels, (n, p) */
} conv_fast;

static conv_fast conv_fast_of(const conv_geom *g) {
    conv_fast f;
    for (int ax = 0; ax < AXES; ax++) {
        f.in[ax] = (int)g->in[ax], f.k[ax] = (int)g->k[ax], f.st[ax] = (int)g->st[ax];
        f.dl[ax] = (int)g->dl[ax], f.pad[ax] = (int)g->pad[ax], f.out[ax] = (int)g->out[ax];
    }
    f.C = (int)g->C, f.M = (int)g->M, f.Mg = (int)g->Mg, f.IS = (int)g->IS, f.KK = (int)g->KK, f.P = (int)g->P;
    f.out_w = vxk_fdiv_make((uint32_t)g->out[2]);
    f.out_h = vxk_fdiv_make((uint32_t)g->out[1]);
    f.in_w = vxk_fdiv_make((uint32_t)g->in[2]);
    f.in_h = vxk_fdiv_make((uint32_t)g->in[1]);
    f.P_div = vxk_fdiv_make((uint32_t)g->P);
    return f;
}

/* Pixel p of a (d, h, w) grid split with the grid's dividers. */
static __device__ __forceinline__ void split3(int p, vxk_fdiv w_div, vxk_fdiv h_div, int w_size, int h_size, int *d,
                                              int *h, int *w) {
    int t = (int)vxk_fdiv_div(w_div, (uint32_t)p);
    *w = p - t * w_size;
    *d = (int)vxk_fdiv_div(h_div, (uint32_t)t);
    *h = t - *d * h_size;
}

/* The output position along an axis whose window puts tap k on input
 * position i, or -1. */
static __device__ __forceinline__ int out_of(int i, int pad, int k, int dil, int stride, int out) {
    int p = i + pad - k * dil;
    if (p < 0) return -1;
    if (stride != 1) {
        if (p % stride) return -1;
        p /= stride;
    }
    return p < out ? p : -1;
}

/* The sum over the taps that put input pixel (id, ih, iw) in an output
 * window of term(tap, output pixel): the gathers of col2im and of the
 * depthwise dX. */
template <typename Term>
static __device__ __forceinline__ float gather_taps(const conv_fast &g, int id, int ih, int iw, Term term) {
    float acc = 0.f;
    for (int kd = 0; kd < g.k[0]; kd++) {
        int od = out_of(id, g.pad[0], kd, g.dl[0], g.st[0], g.out[0]);
        if (od < 0) continue;
        for (int kh = 0; kh < g.k[1]; kh++) {
            int oh = out_of(ih, g.pad[1], kh, g.dl[1], g.st[1], g.out[1]);
            if (oh < 0) continue;
            for (int kw = 0; kw < g.k[2]; kw++) {
                int ow = out_of(iw, g.pad[2], kw, g.dl[2], g.st[2], g.out[2]);
                if (ow < 0) continue;
                acc += term((kd * g.k[1] + kh) * g.k[2] + kw, (od * g.out[1] + oh) * g.out[2] + ow);
            }
        }
    }
    return acc;
}

/* The block threads over one row's pixels (grid x), rows over grid y. */
static dim3 conv_grid(int64_t rows, int64_t pixels, unsigned *threads) {
    unsigned t = pixels >= VXK_THREADS ? VXK_THREADS : (unsigned)((pixels + 31) / 32 * 32);
    if (t == 0) t = 32;
    int64_t x = (pixels + t - 1) / t;
    *threads = t;
    return dim3((unsigned)(x > 65535 ? 65535 : x < 1 ? 1 : x), (unsigned)(rows > 65535 ? 65535 : rows < 1 ? 1 : rows));
}

#define FAST_ROWS(row, rows) for (int row = blockIdx.y; row < (rows); row += gridDim.y)
#define FAST_PIXELS(p, n) for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < (n); p += blockDim.x * gridDim.x)

/* Row (n*C + c)*KK + tap: input channel plane n*C + c read at that tap,
 * into the columns as l lays them out. */
template <typename T> static __global__ void im2col_fast(T *col, const T *x, conv_fast g, col_layout l, int rows) {
    FAST_ROWS(row, rows) {
        int tap = row % g.KK, nc = row / g.KK;
        int kw = tap % g.k[2], kh = (tap / g.k[2]) % g.k[1], kd = tap / (g.k[2] * g.k[1]);
        const T *xb = x + (int64_t)nc * g.IS;
        T *cb = col + (nc / g.C) * l.sN + (nc % g.C) * l.sC + tap * l.sT;
        FAST_PIXELS(p, g.P) {
            int od, oh, ow;
            split3(p, g.out_w, g.out_h, g.out[2], g.out[1], &od, &oh, &ow);
            int id = od * g.st[0] - g.pad[0] + kd * g.dl[0];
            int ih = oh * g.st[1] - g.pad[1] + kh * g.dl[1];
            int iw = ow * g.st[2] - g.pad[2] + kw * g.dl[2];
            bool in = (unsigned)id < (unsigned)g.in[0] && (unsigned)ih < (unsigned)g.in[1] && (unsigned)iw < (unsigned)g.in[2];
            cb[p] = vxk_st<T>(in ? vxk_ld(xb[(id * g.in[1] + ih) * g.in[2] + iw]) : 0.f);
        }
    }
}

/* Plane nc of dx: each input pixel gathers the column entries that read it. */
template <typename T> static __global__ void col2im_fast(T *dx, const T *dcol, conv_fast g, col_layout l, int rows) {
    FAST_ROWS(nc, rows) {
        const T *cb = dcol + (nc / g.C) * l.sN + (nc % g.C) * l.sC;
        FAST_PIXELS(q, g.IS) {
            int id, ih, iw;
            split3(q, g.in_w, g.in_h, g.in[2], g.in[1], &id, &ih, &iw);
            float acc = gather_taps(g, id, ih, iw, [&](int tap, int o) { return vxk_ld(cb[tap * l.sT + o]); });
            dx[(int64_t)nc * g.IS + q] = vxk_st<T>(acc);
        }
    }
}

/* Plane n*M + m of y: one input channel per group, taps walked in place. */
template <typename T>
static __global__ void dw_forward_fast(T *y, const T *x, const T *w, const T *b, conv_fast g, int rows) {
    FAST_ROWS(nm, rows) {
        int m = nm % g.M, n = nm / g.M;
        const T *xp = x + ((int64_t)n * g.C + m / g.Mg) * g.IS;
        const T *wp = w + (int64_t)m * g.KK;
        float bias = b ? vxk_ld(b[m]) : 0.f;
        FAST_PIXELS(p, g.P) {
            int od, oh, ow;
            split3(p, g.out_w, g.out_h, g.out[2], g.out[1], &od, &oh, &ow);
            float acc = bias;
            for (int kd = 0; kd < g.k[0]; kd++) {
                int id = od * g.st[0] - g.pad[0] + kd * g.dl[0];
                if ((unsigned)id >= (unsigned)g.in[0]) continue;
                for (int kh = 0; kh < g.k[1]; kh++) {
                    int ih = oh * g.st[1] - g.pad[1] + kh * g.dl[1];
                    if ((unsigned)ih >= (unsigned)g.in[1]) continue;
                    for (int kw = 0; kw < g.k[2]; kw++) {
                        int iw = ow * g.st[2] - g.pad[2] + kw * g.dl[2];
                        if ((unsigned)iw >= (unsigned)g.in[2]) continue;
                        acc += vxk_ld(wp[(kd * g.k[1] + kh) * g.k[2] + kw]) *
                               vxk_ld(xp[(id * g.in[1] + ih) * g.in[2] + iw]);
                    }
                }
            }
            y[(int64_t)nm * g.P + p] = vxk_st<T>(acc);
        }
    }
}

/* Plane n*C + c of dx: the gradient through every output channel of c's group. */
template <typename T> static __global__ void dw_dx_fast(T *dx, const T *dy, const T *w, conv_fast g, int rows) {
    FAST_ROWS(nc, rows) {
        int c = nc % g.C, n = nc / g.C;
        FAST_PIXELS(q, g.IS) {
            int id, ih, iw;
            split3(q, g.in_w, g.in_h, g.in[2], g.in[1], &id, &ih, &iw);
            float acc = 0.f;
            for (int j = 0; j < g.Mg; j++) {
                int m = c * g.Mg + j;
                const T *dyp = dy + ((int64_t)n * g.M + m) * g.P;
                const T *wp = w + (int64_t)m * g.KK;
                acc += gather_taps(g, id, ih, iw, [&](int tap, int o) { return vxk_ld(wp[tap]) * vxk_ld(dyp[o]); });
            }
            dx[(int64_t)nc * g.IS + q] = vxk_st<T>(acc);
        }
    }
}

/* One block per weight element (m, tap), reducing over (n, output pixel). */
template <typename T> static __global__ void dw_dw_fast(T *dw, const T *dy, const T *x, conv_fast g, int N) {
    __shared__ float sh[VXK_THREADS];
    for (int e = blockIdx.x; e < g.M * g.KK; e += gridDim.x) {
        int tap = e % g.KK, m = e / g.KK, c = m / g.Mg;
        int kw = tap % g.k[2], kh = (tap / g.k[2]) % g.k[1], kd = tap / (g.k[2] * g.k[1]);
        float acc = 0.f;
        for (int j = threadIdx.x; j < N * g.P; j += blockDim.x) {
            int n = (int)vxk_fdiv_div(g.P_div, (uint32_t)j), p = j - n * g.P;
            int od, oh, ow;
            split3(p, g.out_w, g.out_h, g.out[2], g.out[1], &od, &oh, &ow);
            int id = od * g.st[0] - g.pad[0] + kd * g.dl[0];
            int ih = oh * g.st[1] - g.pad[1] + kh * g.dl[1];
            int iw = ow * g.st[2] - g.pad[2] + kw * g.dl[2];
            if ((unsigned)id < (unsigned)g.in[0] && (unsigned)ih < (unsigned)g.in[1] && (unsigned)iw < (unsigned)g.in[2])
                acc += vxk_ld(dy[((int64_t)n * g.M + m) * g.P + p]) *
                       vxk_ld(x[((int64_t)n * g.C + c) * g.IS + (id * g.in[1] + ih) * g.in[2] + iw]);
        }
        acc = vxk_block_reduce(acc, sh, false);
        if (threadIdx.x == 0) dw[e] = vxk_st<T>(acc);
        __syncthreads();
    }
}

/* y (n, M, P) += b[channel] */
template <typename T> static __global__ void bias_add_kernel(T *y, const T *b, int64_t M, int64_t P, int64_t total) {
    if (total < INT32_MAX / 2) {
        int iM = (int)M, iP = (int)P;
        VXK_LOOP(i, total) y[i] = vxk_st<T>(vxk_ld(y[i]) + vxk_ld(b[((int)i / iP) % iM]));
    } else {
        VXK_LOOP(i, total) y[i] = vxk_st<T>(vxk_ld(y[i]) + vxk_ld(b[(i / P) % M]));
    }
}

/* ---- staged forms, 2-D and 3-D ---------------------------------------------------- */

/* A conv's columns are its kernel's taps times its input (27 times for a
 * 3x3x3 kernel), and moving them is most of a convolutional step. These
 * forms stage what a block reads in shared memory and give each thread
 * whole output pixels. Over r3d_18's convs and 2-D convs of ResNet shapes
 * (bench/verify/conv_bench.cu, 8 and 32 samples a chunk, H100 and H200) the
 * staged im2col writes 2.3-5.6x faster than im2col_fast (a 1x1 kernel stays
 * with im2col_fast), and the staged col2im is 1.1-3.9x faster where the
 * conv is strided but half as fast where it is not: the launchers pick by
 * that. 1-D convs keep the fast forms. */
enum { STAGE_BYTES = 48 << 10, STAGE_THREADS = 256 };

/* Output rows per block of im2col_staged: as many as keep the input rows they
 * read, at every depth tap, within STAGE_BYTES. 0: not even one fits. */
static int staged_rows(const conv_geom *g) {
    int64_t span1 = (g->k[1] - 1) * g->dl[1] + 1, per_row = g->k[0] * g->in[2] * (int64_t)sizeof(float);
    int64_t fit = STAGE_BYTES / per_row;
    if (fit < span1) return 0;
    int64_t r = (fit - span1) / g->st[1] + 1;
    return (int)(r < g->out[1] ? r : g->out[1]);
}

/* Block (run of R output rows, output depth od, plane n*C + c): the input
 * rows the run reads at each depth tap, staged; then each thread writes its
 * output pixels at every tap. */
template <typename T>
static __global__ void im2col_staged(T *col, const T *x, conv_fast g, col_layout l, int planes, int R) {
    extern __shared__ float stage[]; /* k[0] x span x in[2], as float */
    int od = blockIdx.y, oh0 = blockIdx.x * R, W = g.in[2];
    int rows = min(R, g.out[1] - oh0);
    int span = (rows - 1) * g.st[1] + (g.k[1] - 1) * g.dl[1] + 1;
    int ih_first = oh0 * g.st[1] - g.pad[1];
    for (int nc = blockIdx.z; nc < planes; nc += gridDim.z) {
        const T *xb = x + (int64_t)nc * g.IS;
        __syncthreads(); /* the previous plane's reads are done */
        for (int kd = 0; kd < g.k[0]; kd++) {
            int id = od * g.st[0] - g.pad[0] + kd * g.dl[0];
            bool dok = (unsigned)id < (unsigned)g.in[0];
            for (int q = threadIdx.x; q < span * W; q += blockDim.x) {
                int r = q / W, ih = ih_first + r;
                bool ok = dok && (unsigned)ih < (unsigned)g.in[1];
                stage[kd * span * W + q] = ok ? vxk_ld(xb[(id * g.in[1] + ih) * W + (q - r * W)]) : 0.f;
            }
        }
        __syncthreads();
        T *cb = col + (nc / g.C) * l.sN + (nc % g.C) * l.sC + (od * g.out[1] + oh0) * g.out[2];
        for (int p = threadIdx.x; p < rows * g.out[2]; p += blockDim.x) {
            int r = p / g.out[2], ow = p - r * g.out[2], iw0 = ow * g.st[2] - g.pad[2], t = 0;
            for (int kd = 0; kd < g.k[0]; kd++)
                for (int kh = 0; kh < g.k[1]; kh++) {
                    const float *srow = stage + (kd * span + r * g.st[1] + kh * g.dl[1]) * W;
                    for (int kw = 0; kw < g.k[2]; kw++, t++) {
                        int iw = iw0 + kw * g.dl[2];
                        cb[t * l.sT + p] = vxk_st<T>((unsigned)iw < (unsigned)W ? srow[iw] : 0.f);
                    }
                }
        }
    }
}

/* Block (input depth id, plane n*C + c): for each tap, the output plane that
 * reads slice id there is read whole and added at its shifted place into
 * the slice, held in shared memory. Each thread adds to distinct pixels at
 * one tap, and taps go in a fixed order, so the sums are deterministic. */
template <typename T>
static __global__ void col2im_staged(T *dx, const T *dcol, conv_fast g, col_layout l, int planes) {
    extern __shared__ float acc[]; /* in[1] x in[2] */
    int id = blockIdx.x, HW = g.in[1] * g.in[2], plane = g.out[1] * g.out[2];
    int tid = threadIdx.y * blockDim.x + threadIdx.x, nthr = blockDim.x * blockDim.y;
    for (int nc = blockIdx.y; nc < planes; nc += gridDim.y) {
        __syncthreads();
        for (int q = tid; q < HW; q += nthr) acc[q] = 0.f;
        const T *cb = dcol + (nc / g.C) * l.sN + (nc % g.C) * l.sC;
        for (int kd = 0; kd < g.k[0]; kd++) {
            int pd = id + g.pad[0] - kd * g.dl[0];
            if (pd < 0 || pd % g.st[0] || pd / g.st[0] >= g.out[0]) continue;
            const T *src_d = cb + (pd / g.st[0]) * plane;
            for (int kh = 0; kh < g.k[1]; kh++)
                for (int kw = 0; kw < g.k[2]; kw++) {
                    __syncthreads(); /* the previous tap's adds are done */
                    const T *src = src_d + ((kd * g.k[1] + kh) * g.k[2] + kw) * l.sT;
                    for (int oh = threadIdx.y; oh < g.out[1]; oh += blockDim.y) {
                        int ih = oh * g.st[1] - g.pad[1] + kh * g.dl[1];
                        if ((unsigned)ih >= (unsigned)g.in[1]) continue;
                        for (int ow = threadIdx.x; ow < g.out[2]; ow += blockDim.x) {
                            int iw = ow * g.st[2] - g.pad[2] + kw * g.dl[2];
                            if ((unsigned)iw < (unsigned)g.in[2]) acc[ih * g.in[2] + iw] += vxk_ld(src[oh * g.out[2] + ow]);
                        }
                    }
                }
        }
        __syncthreads();
        for (int q = tid; q < HW; q += nthr) dx[(int64_t)nc * g.IS + (int64_t)id * HW + q] = vxk_st<T>(acc[q]);
    }
}

/* ---- launchers -------------------------------------------------------------------- */

/* The columns of nb samples of x (their first), laid out as l says. */
template <typename T>
static void conv_im2col(const conv_geom *g, int64_t nb, col_layout l, cudaStream_t s, T *col, const T *x) {
    int64_t rows = nb * g->C * g->KK;
    int R = g->sp >= 2 && g->KK > 1 && planes_fit32(g, nb * g->C) ? staged_rows(g) : 0;
    if (R > 0) {
        int span = (R - 1) * (int)g->st[1] + (int)((g->k[1] - 1) * g->dl[1]) + 1;
        int64_t planes = nb * g->C;
        dim3 grid((unsigned)((g->out[1] + R - 1) / R), (unsigned)g->out[0], (unsigned)(planes < 65535 ? planes : 65535));
        im2col_staged<T><<<grid, STAGE_THREADS, (size_t)g->k[0] * span * g->in[2] * sizeof(float), s>>>(
            col, x, conv_fast_of(g), l, (int)planes, R);
    } else if (planes_fit32(g, rows)) {
        unsigned t;
        dim3 grid = conv_grid(rows, g->P, &t);
        im2col_fast<T><<<grid, t, 0, s>>>(col, x, conv_fast_of(g), l, (int)rows);
    } else {
        im2col_kernel<T><<<vxk_blocks(rows * g->P), VXK_THREADS, 0, s>>>(col, x, *g, l, rows * g->P);
    }
}

/* dx of nb samples from their columns, laid out as l says. */
template <typename T>
static void conv_col2im(const conv_geom *g, int64_t nb, col_layout l, cudaStream_t s, T *dx, const T *dcol) {
    int64_t rows = nb * g->C;
    size_t slice = (size_t)g->in[1] * g->in[2] * sizeof(float);
    bool strided = g->st[0] > 1 || g->st[1] > 1 || g->st[2] > 1;
    if (g->sp >= 2 && strided && slice <= STAGE_BYTES && g->in[0] <= 65535 && planes_fit32(g, rows)) {
        unsigned bx = g->out[2] >= 64 ? 64 : (unsigned)((g->out[2] + 31) / 32 * 32);
        dim3 grid((unsigned)g->in[0], (unsigned)(rows < 65535 ? rows : 65535));
        col2im_staged<T><<<grid, dim3(bx, STAGE_THREADS / bx), slice, s>>>(dx, dcol, conv_fast_of(g), l, (int)rows);
    } else if (planes_fit32(g, rows)) {
        unsigned t;
        dim3 grid = conv_grid(rows, g->IS, &t);
        col2im_fast<T><<<grid, t, 0, s>>>(dx, dcol, conv_fast_of(g), l, (int)rows);
    } else {
        col2im_kernel<T><<<vxk_blocks(rows * g->IS), VXK_THREADS, 0, s>>>(dx, dcol, *g, l, rows * g->IS);
    }
}

/* dyt (M, nb, P) = dy (nb, M, P): a chunk's output gradient with the samples
 * inside each channel. */
template <typename T>
static __global__ void samples_inner_kernel(T *dyt, const T *dy, int64_t M, int64_t nb, int64_t P) {
    for (int64_t row = blockIdx.y; row < M * nb; row += gridDim.y) { /* row = m * nb + n */
        int64_t m = row / nb, n = row - m * nb;
        const T *src = dy + (n * M + m) * P;
        T *dst = dyt + row * P;
        for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < P; p += (int64_t)blockDim.x * gridDim.x)
            dst[p] = src[p];
    }
}

template <typename T>
static void conv_samples_inner(const conv_geom *g, int64_t nb, cudaStream_t s, T *dyt, const T *dy) {
    unsigned t;
    dim3 grid = conv_grid(g->M * nb, g->P, &t);
    samples_inner_kernel<T><<<grid, t, 0, s>>>(dyt, dy, g->M, nb, g->P);
}

template <typename T>
static void conv_dw_forward(const conv_geom *g, cudaStream_t s, T *y, const T *x, const T *w, const T *b) {
    int64_t rows = g->N * g->M;
    if (conv_fits32(g, rows * g->P)) {
        unsigned t;
        dim3 grid = conv_grid(rows, g->P, &t);
        dw_forward_fast<T><<<grid, t, 0, s>>>(y, x, w, b, conv_fast_of(g), (int)rows);
    } else {
        dw_forward_kernel<T><<<vxk_blocks(rows * g->P), VXK_THREADS, 0, s>>>(y, x, w, b, *g);
    }
}

template <typename T> static void conv_dw_dx(const conv_geom *g, cudaStream_t s, T *dx, const T *dy, const T *w) {
    int64_t rows = g->N * g->C;
    if (conv_fits32(g, rows * g->IS)) {
        unsigned t;
        dim3 grid = conv_grid(rows, g->IS, &t);
        dw_dx_fast<T><<<grid, t, 0, s>>>(dx, dy, w, conv_fast_of(g), (int)rows);
    } else {
        dw_dx_kernel<T><<<vxk_blocks(rows * g->IS), VXK_THREADS, 0, s>>>(dx, dy, w, *g);
    }
}

template <typename T> static void conv_dw_dw(const conv_geom *g, cudaStream_t s, T *dw, const T *dy, const T *x) {
    int64_t nw = g->M * g->KK;
    unsigned blocks = (unsigned)(nw < 65536 ? nw : 65536);
    if (conv_fits32(g, nw)) dw_dw_fast<T><<<blocks, VXK_THREADS, 0, s>>>(dw, dy, x, conv_fast_of(g), (int)g->N);
    else dw_dw_kernel<T><<<blocks, VXK_THREADS, 0, s>>>(dw, dy, x, *g);
}

#endif
