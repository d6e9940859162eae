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

/* Parses --host-us: five costs in microseconds, "FWD,FWD_PARAM,BWD,
 * BWD_PARAM,OPT_PARAM" (est_host's fields in order), each a plain
 * non-negative decimal number. Returns false on anything else. */
struct est_host;
bool parse_host_us(const char *s, struct est_host *out);

#endif
