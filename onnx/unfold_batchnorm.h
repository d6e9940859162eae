/* unfold_batchnorm.h: the loader's pass that restores the BatchNorms an
 * exporter folded into a Conv (unfold_batchnorm.c says how it knows). */
#ifndef EST_UNFOLD_BATCHNORM_H
#define EST_UNFOLD_BATCHNORM_H

#include "ir.h"
#include "onnx.pb-c.h"

/* Whether Conv node p carries a folded BatchNorm: *dynamo when the dynamo
 * exporter's optimizer folded it (else the TorchScript exporter's eval-mode
 * fold), *training when the BatchNorm trained. *oom is set when reading the
 * node's metadata ran out of memory (the answer is then meaningless). */
bool est__onnx_folded_batchnorm(const est_graph *g, const Onnx__NodeProto *p, bool *training, bool *dynamo,
                                bool *oom);

/* Appends BatchNormalization(output of node conv_index) to g, which the
 * Conv now feeds, and drops the folded bias. A name already taken leaves
 * the model as it is. */
est_status est__onnx_unfold_batchnorm(est_graph *g, int32_t conv_index, bool training, bool dynamo, est_error *err);

/* Removes the Identity nodes of an initializer that feed nothing once the
 * folded biases are gone (the TorchScript exporter shares equal biases so). */
est_status est__onnx_drop_dead_identities(est_graph *g, est_error *err);

#endif
