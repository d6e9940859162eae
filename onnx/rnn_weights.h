/* rnn_weights.h: the loader's passes over PyTorch's recurrent modules: each
 * layer's node reads the module's own weights, and a stacked module's nodes
 * know how many layers their one cuDNN call runs (rnn_weights.c says how). */
#ifndef EST_RNN_WEIGHTS_H
#define EST_RNN_WEIGHTS_H

#include "ir.h"

/* Runs both passes over g (nodes added, producers not yet assigned). Only
 * EST_ENOMEM fails; a pattern it does not recognise stays as it is. */
est_status est__onnx_rnn_weights(est_graph *g, est_error *err);

#endif
