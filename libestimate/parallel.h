/*
 * parallel.h: data parallelism in the simulated step (est_options.parallel,
 * docs/distributed.md). parallel.c plans what one GPU holds under each
 * strategy (DDP's buckets, ZeRO-1's partition, FSDP's shards and groups) and
 * replays, at the step's hook points, the allocations PyTorch's wrappers
 * make there. Every hook is a no-op on one GPU (s->par NULL). Internal.
 */
#ifndef MEMEST_PARALLEL_H
#define MEMEST_PARALLEL_H

#include "sim.h"

/* Plans s->par (after the step's tensors are sized); EST_ENOMEM, or
 * EST_OK with s->par NULL on one GPU. */
est_status est__par_plan(sim *s, est_error *err);
void est__par_free(sim *s);

/* Bytes of parameter t this GPU keeps between steps: an FSDP shard, padded;
 * 0 when offloaded to the host. */
uint64_t est__par_param_bytes(const sim *s, int32_t t);
/* tensor_parallel.c: finds the pairs --tp splits and marks s->tp_split and
 * s->tp_node (after the lifetimes are planned, before the step's sizes);
 * EST_EINVAL when it finds none. */
est_status est__tp_plan(sim *s, est_error *err);
/* Bytes of one optimizer-state tensor of parameter t on this GPU: the
 * shard's under FSDP; 0 for ZeRO-1's other partitions and under offload. */
uint64_t est__par_state_bytes(const sim *s, int32_t t);

/* The hook points, in step order. */
void est__par_construct(sim *s);               /* the wrapper is made */
void est__par_forward_begin(sim *s);           /* the root's pre-forward */
void est__par_forward_node(sim *s, int32_t i, bool after); /* around node i */
void est__par_backward_begin(sim *s);          /* the root's pre-backward */
void est__par_backward_node(sim *s, int32_t i, bool after);
void est__par_backward_end(sim *s);            /* the root's post-backward */
void est__par_zero_grad(sim *s);               /* zero_grad(set_to_none=True) */

#endif
