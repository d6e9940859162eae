/*
 * device.c: the GPUs memest knows, as the estimate needs them (est_device).
 *
 * Rules that depend on the hardware read it from here, never from their own
 * constants: cuDNN's split-K weight gradient (layers/conv.c) splits across
 * the SMs, the fit compares a peak with the memory. An estimate runs on
 * est_options.device, or on the H100 (80 GB SXM) when none is given: the
 * workspace rules were measured there.
 *
 * Memory: HBM parts and GeForce cards in GiB (their memory is sized in
 * powers of two); the GDDR data-center parts sold as "N GB" in decimal GB,
 * a little below what nvidia-smi reports (the safe side); two figures are
 * what nvidia-smi reports on the real device. SM counts, memory bandwidth
 * and peak dense FLOP/s (no sparsity; the tensor-core figures of bf16 and
 * fp16 with float32 accumulation) are NVIDIA's datasheets and architecture
 * whitepapers; 0 where the part has no such unit (bf16 and tf32 before
 * Ampere) or the figure is not published for the part (A10G). docs/
 * capacity.md lists the table with its basis: keep the two in step. The
 * resident threads per SM are the CUDA C Programming Guide's limit for the
 * part's compute capability (7.0, 8.0, 9.0: 2048; 7.5: 1024; 8.6, 8.9:
 * 1536).
 */
#include <ctype.h>
#include <string.h>

#include "ir.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define GB ((uint64_t)1000000000)
#define T 1e12

static const est_device devices[] = {
    {"T4", 16 * GB, "16 GB GDDR6, decimal", 40, 320e9, 8.1 * T, 0, 0, 65 * T, 1024},
    {"L4", 24 * GB, "24 GB GDDR6, decimal", 58, 300e9, 30.3 * T, 60 * T, 121 * T, 121 * T, 1536},
    {"A10G", 24 * GB, "24 GB GDDR6, decimal", 80, 600e9, 0, 0, 0, 0, 1536},
    {"L40S", 48 * GB, "48 GB GDDR6, decimal", 142, 864e9, 91.6 * T, 183 * T, 362 * T, 362 * T, 1536},
    {"RTX3090", 24 * GiB, "24 GiB GDDR6X", 82, 936e9, 35.6 * T, 35.6 * T, 71 * T, 71 * T, 1536},
    {"RTX4090", 24 * GiB, "24 GiB GDDR6X", 128, 1008e9, 82.6 * T, 82.6 * T, 165.2 * T, 165.2 * T, 1536},
    {"V100-16GB", 16 * GiB, "16 GiB HBM2", 80, 900e9, 15.7 * T, 0, 0, 125 * T, 2048},
    {"V100-32GB", 32 * GiB, "32 GiB HBM2", 80, 900e9, 15.7 * T, 0, 0, 125 * T, 2048},
    {"A100-40GB", 40 * GiB, "40 GiB HBM2", 108, 1555e9, 19.5 * T, 156 * T, 312 * T, 312 * T, 2048},
    {"A100-80GB", 80 * GiB, "80 GiB HBM2e", 108, 2039e9, 19.5 * T, 156 * T, 312 * T, 312 * T, 2048},
    {"H100-80GB", 81559 * MiB, "80 GiB HBM3: 81559 MiB as nvidia-smi reports", 132, 3350e9, 67 * T, 494.7 * T,
     989.4 * T, 989.4 * T, 2048},
    {"H100-94GB", 94 * GB, "H100 NVL, 94 GB HBM3, decimal", 132, 3900e9, 60 * T, 417.5 * T, 835.5 * T, 835.5 * T, 2048},
    {"H200", 143771 * MiB, "141 GB HBM3e: 143771 MiB as nvidia-smi reports on our machine", 132, 4800e9, 67 * T,
     494.7 * T, 989.4 * T, 989.4 * T, 2048},
};
enum { N_DEVICES = sizeof devices / sizeof devices[0], DEFAULT_DEVICE = 10 };

size_t est_device_count(void) { return N_DEVICES; }

const est_device *est_device_at(size_t i) { return i < N_DEVICES ? &devices[i] : NULL; }

const est_device *est__default_device(void) { return &devices[DEFAULT_DEVICE]; }

/* Compares ignoring case and the separators '-', '_' and ' '. */
static bool same_name(const char *a, const char *b) {
    for (;;) {
        while (*a == '-' || *a == '_' || *a == ' ') a++;
        while (*b == '-' || *b == '_' || *b == ' ') b++;
        if (!*a || !*b) return !*a && !*b;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
        a++;
        b++;
    }
}

const est_device *est_device_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < N_DEVICES; i++)
        if (same_name(name, devices[i].name)) return &devices[i];
    if (same_name(name, "H100-NVL")) return est_device_find("H100-94GB"); /* the H100 NVL's usual name */
    return NULL;
}
