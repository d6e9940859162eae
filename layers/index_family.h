/*
 * index_family.h: what the index family's files share. Its table is in
 * index.c; the shape rules it names from index_gather.c and index_slice.c
 * are declared here, with the one helper they share. Internal.
 */
#ifndef EST_INDEX_FAMILY_H
#define EST_INDEX_FAMILY_H

#include "registry.h"

/* Reads a known integer scalar (or one-element tensor) input (index.c). */
est_status est__index_known_scalar(est_infer_ctx *ctx, int i, const char *what, int64_t *out);

/* index_gather.c */
est_status est__gather_infer(est_infer_ctx *ctx);
est_status est__gather_elements_infer(est_infer_ctx *ctx);
est_status est__gather_nd_infer(est_infer_ctx *ctx);
est_status est__scatter_nd_infer(est_infer_ctx *ctx);
est_status est__scatter_elements_infer(est_infer_ctx *ctx); /* and Scatter */

/* index_slice.c */
est_status est__slice_infer(est_infer_ctx *ctx);
est_status est__split_infer(est_infer_ctx *ctx);
est_status est__concat_infer(est_infer_ctx *ctx);
est_status est__tile_infer(est_infer_ctx *ctx);
est_status est__pad_infer(est_infer_ctx *ctx);
est_status est__center_crop_pad_infer(est_infer_ctx *ctx);

#endif
