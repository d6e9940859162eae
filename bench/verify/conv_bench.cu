/*
 * conv_bench: how fast verify's convolution index kernels (verify/
 * conv_kernels.cuh) move a chunk's columns, on r3d_18's convolutions, each
 * beside a device-to-device copy of the same bytes taken in the same run
 * (the reference: what the GPU's memory can do). The kernels the launchers
 * pick (conv_im2col, conv_col2im) run beside the per-element 32-bit forms
 * (im2col_fast, col2im_fast), and their outputs must agree.
 *
 * build: nvcc -O3 -arch=sm_90 -std=c++17 -Iverify -Ilibestimate -Ilayers -Iinclude/libestimate \
 *            -o conv_bench bench/verify/conv_bench.cu
 * usage (on a GPU machine): conv_bench [SAMPLES]     (default 8: a chunk of r3d_18 at batch 8)
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "conv_kernels.cuh"

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

/* A conv of C to M channels over an input of dims in, kernel k, stride st,
 * padding pad (both sides), as ops_conv.cu fills conv_geom. */
static conv_geom geom(int64_t N, int64_t C, int64_t M, const int64_t in[3], const int64_t k[3], const int64_t st[3],
                      const int64_t pad[3]) {
    conv_geom g = {};
    g.sp = in[0] == 1 && k[0] == 1 ? 2 : 3, g.N = N, g.C = C, g.M = M, g.G = 1, g.Cg = C, g.Mg = M;
    g.IS = g.KK = g.P = 1;
    for (int a = 0; a < 3; a++) {
        g.in[a] = in[a], g.k[a] = k[a], g.st[a] = st[a], g.dl[a] = 1, g.pad[a] = pad[a];
        g.out[a] = (in[a] + 2 * pad[a] - k[a]) / st[a] + 1;
        g.IS *= in[a], g.KK *= k[a], g.P *= g.out[a];
    }
    return g;
}

__global__ void fill(float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
}

__global__ void count_apart(const float *a, const float *b, int64_t n, unsigned long long *bad) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
        if (fabsf(a[i] - b[i]) > 1e-5f * (1.f + fabsf(a[i]))) atomicAdd(bad, 1ull);
}

static unsigned long long apart(const float *a, const float *b, int64_t n) {
    unsigned long long *d, h = 0;
    CHECK(cudaMalloc(&d, 8));
    CHECK(cudaMemset(d, 0, 8));
    count_apart<<<1024, 256>>>(a, b, n, d);
    CHECK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
    cudaFree(d);
    return h;
}

/* The best of 5 runs of launch(), in ms. */
template <typename F> static float best_ms(F launch) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(a);
        launch();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (ms < best) best = ms;
    }
    CHECK(cudaGetLastError());
    cudaEventDestroy(a), cudaEventDestroy(b);
    return best;
}

int main(int argc, char **argv) {
    int64_t nb = argc > 1 ? atoll(argv[1]) : 8;
    struct { const char *name; int64_t C, M, in[3], k[3], st[3], pad[3]; } convs[] = {
        {"stem 3->64 3x7x7 /1,2,2", 3, 64, {16, 112, 112}, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}},
        {"layer1 64 3x3x3", 64, 64, {16, 56, 56}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}},
        {"layer2.0 64->128 /2", 64, 128, {16, 56, 56}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}},
        {"layer2 128 3x3x3", 128, 128, {8, 28, 28}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}},
        {"layer2 down 1x1x1 /2", 64, 128, {16, 56, 56}, {1, 1, 1}, {2, 2, 2}, {0, 0, 0}},
        {"layer3.0 128->256 /2", 128, 256, {8, 28, 28}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}},
        {"layer3 256 3x3x3", 256, 256, {4, 14, 14}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}},
        {"layer4.0 256->512 /2", 256, 512, {4, 14, 14}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}},
        {"layer4 512 3x3x3", 512, 512, {2, 7, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}},
        {"2-D stem 3->64 7x7 /2", 3, 64, {1, 224, 224}, {1, 7, 7}, {1, 2, 2}, {0, 3, 3}},
        {"2-D 64 3x3 56x56", 64, 64, {1, 56, 56}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},
        {"2-D 64->128 3x3 /2", 64, 128, {1, 56, 56}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}},
        {"2-D 128 3x3 28x28", 128, 128, {1, 28, 28}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},
        {"2-D 256 3x3 14x14", 256, 256, {1, 14, 14}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},
        {"2-D 512 3x3 7x7", 512, 512, {1, 7, 7}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},
        {"2-D 64 3x3 128x128", 64, 64, {1, 128, 128}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}},
    };
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %lld samples a chunk; GB/s of column bytes (im2col writes them, col2im reads them; the copy both)\n",
           prop.name, (long long)nb);
    printf("%-24s %9s %9s | %8s %8s %8s | %8s %8s %8s | %s\n", "conv", "cols MB", "copy", "im2col", "fast", "x", "col2im",
           "fast", "x", "differ");
    for (auto &c : convs) {
        conv_geom g = geom(nb, c.C, c.M, c.in, c.k, c.st, c.pad);
        col_layout l = col_by_row(&g, nb);
        int64_t ncol = nb * g.C * g.KK * g.P, nx = nb * g.C * g.IS;
        float *x, *dx, *dx2, *col, *col2;
        CHECK(cudaMalloc(&x, nx * 4));
        CHECK(cudaMalloc(&dx, nx * 4));
        CHECK(cudaMalloc(&dx2, nx * 4));
        CHECK(cudaMalloc(&col, ncol * 4));
        CHECK(cudaMalloc(&col2, ncol * 4));
        fill<<<1024, 256>>>(x, nx);
        conv_fast f = conv_fast_of(&g);
        unsigned t;
        dim3 gi = conv_grid(nb * g.C * g.KK, g.P, &t), gc = conv_grid(nb * g.C, g.IS, &t);
        float copy = best_ms([&] { cudaMemcpyAsync(col2, col, ncol * 4, cudaMemcpyDeviceToDevice); });
        float im = best_ms([&] { conv_im2col(&g, nb, l, 0, col, x); });
        float im_fast = best_ms([&] { im2col_fast<float><<<gi, t>>>(col2, x, f, l, (int)(nb * g.C * g.KK)); });
        unsigned long long d1 = apart(col, col2, ncol);
        float c2i = best_ms([&] { conv_col2im(&g, nb, l, 0, dx, col); });
        unsigned t2;
        gc = conv_grid(nb * g.C, g.IS, &t2);
        float c2i_fast = best_ms([&] { col2im_fast<float><<<gc, t2>>>(dx2, col, f, l, (int)(nb * g.C)); });
        unsigned long long d2 = apart(dx, dx2, nx);
        double mb = ncol * 4 / 1e6;
        printf("%-24s %9.1f %9.0f | %8.0f %8.0f %7.2fx | %8.0f %8.0f %7.2fx | %llu %llu\n", c.name, mb, 2 * mb / copy,
               mb / im, mb / im_fast, im_fast / im, mb / c2i, mb / c2i_fast, c2i_fast / c2i, d1, d2);
        cudaFree(x), cudaFree(dx), cudaFree(dx2), cudaFree(col), cudaFree(col2);
    }
    return 0;
}
