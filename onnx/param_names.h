/* param_names.h: PyTorch's names for weights an exporter renamed
 * (param_names.c). Internal. */
#ifndef EST_PARAM_NAMES_H
#define EST_PARAM_NAMES_H

#include "ir.h"

/* Sets est_tensor.torch_name of the initializers node `n` reads whose names
 * the exporter generated, where the file records the parameter's name:
 * `fx_node` is the node's "pkg.torch.onnx.fx_node" metadata (dynamo
 * exports), or NULL (the TorchScript exporter's node names). n->inputs and
 * n->scope must be set. Where one merged initializer stands for several
 * parameters, points n's input at a tensor of the parameter's own. False
 * only when out of memory. Marks the initializers the FX call reads as
 * registered buffers (est_tensor.torch_buffer). */
bool est__name_renamed_weights(est_graph *g, est_node *n, const char *fx_node);

#endif
