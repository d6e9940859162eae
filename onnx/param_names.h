/* param_names.h: PyTorch's names for weights an exporter renamed
 * (param_names.c). Internal. */
#ifndef EST_PARAM_NAMES_H
#define EST_PARAM_NAMES_H

#include "ir.h"

/* The parameters one FX call's nodes have named so far: the nodes of one
 * call come one after another, and each parameter of the call is named once
 * (aten.group_norm's weight in its Mul, then its bias in its Add). The
 * loader keeps one, zeroed, for the whole file. */
enum { EST_FX_NAMES_MAX = 8 };
typedef struct est_fx_names {
    uint64_t call;                    /* a hash of the FX call's text; 0 none */
    int n;
    int32_t named[EST_FX_NAMES_MAX];  /* tensors named for this call */
} est_fx_names;

/* Sets est_tensor.torch_name of the initializers node `n` reads whose names
 * the exporter generated, where the file records the parameter's name:
 * `fx_node` is the node's "pkg.torch.onnx.fx_node" metadata (dynamo
 * exports), or NULL (the TorchScript exporter's node names). n->inputs and
 * n->scope must be set. Where one merged initializer stands for several
 * parameters, points n's input at a tensor of the parameter's own. False
 * only when out of memory. Marks the initializers the FX call reads as
 * registered buffers (est_tensor.torch_buffer). `call` carries what the
 * previous nodes of the same FX call named. */
bool est__name_renamed_weights(est_graph *g, est_node *n, const char *fx_node, est_fx_names *call);

#endif
