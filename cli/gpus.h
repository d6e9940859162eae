/* gpus.h: the names `memest --gpu NAME` takes (the library's device table,
 * est_device_find), and memory sizes as written on the command line
 * (docs/capacity.md). */
#ifndef MEMEST_GPUS_H
#define MEMEST_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "T4, L4, A10G, ..." into buf; returns buf. */
const char *gpu_names(char *buf, size_t n);

/* Parses "24GiB", "80GB", "16000MiB", "1.5GiB", "17179869184" (bytes):
 * KiB/MiB/GiB/TiB binary, KB/MB/GB/TB decimal, B or nothing bytes; units are
 * case-insensitive. Returns false on a bad number, unit or overflow. */
bool parse_size(const char *s, uint64_t *out);

/* The default reserve of a GPU of `gpu_bytes`: 1 GiB for what is gone before
 * PyTorch allocates (the CUDA context, 527 MiB, and what nvidia-smi counts
 * but CUDA cannot allocate: 480 MiB on an H100, 615 MiB on an H200), and
 * 1.5% of the memory for the estimate's error at the limit. Measured against
 * the true largest batch of ten models on both (bench/accuracy/data/
 * capacity/, docs/capacity.md): with 1 GiB alone 11 of 17 answers failed on
 * the GPU, with 1% more two (gpt2_6l on both, by 0.2-0.3%), with 1.5% none. */
#define DEFAULT_RESERVE_BYTES(gpu_bytes) (((uint64_t)1 << 30) + (gpu_bytes) / 200 * 3)
/* What NCCL holds outside PyTorch's allocator once a process group has run
 * a collective (NCCL 2.28.9, torch 2.11; nccl_init and outside_allocator in
 * bench/distributed/data/, docs/distributed.md): 564 MiB on an H100 at
 * world size 1, 846 MiB on each GPU of 2 and of 4 H100s (840 on 2 H200s);
 * HSDP's second mesh dimension took 966 MiB more a GPU and tensor
 * parallelism's DTensor collectives up to 378 MiB more (4 H100s). Added to
 * the default reserve under --strategy or --tp; 8 GPUs take the 4-GPU
 * figures until measured. */
/* Parses --host-us: five costs in microseconds, "FWD,FWD_PARAM,BWD,
 * BWD_PARAM,OPT_PARAM" (est_host's fields in order), each a plain
 * non-negative decimal number. Returns false on anything else. */
struct est_host;
bool parse_host_us(const char *s, struct est_host *out);

#define NCCL_RESERVE_BYTES(world, hsdp, tp) \
    ((uint64_t)(((world) > 1 ? 846 : 564) + ((hsdp) ? 966 : 0) + ((tp) > 1 ? 378 : 0)) << 20)

#endif
