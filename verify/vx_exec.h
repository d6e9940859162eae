/*
 * vx_exec.h: what the executor's graph runner shares among its files: the
 * run's state (vx_exec, one node_state per node) and the functions that
 * exec.c (forward, steps), exec_setup.c (setup) and exec_train.c (backward,
 * optimizer step) call across them.
 */
#ifndef MEMEST_VX_EXEC_H
#define MEMEST_VX_EXEC_H

#include "vx_internal.h"

typedef struct vx_profile vx_profile;

typedef struct node_state {
    const vx_op *op;
    bool host;             /* ran on the host */
    bool bwd;              /* backward will run */
    bool need_grad[VX_MAX_IO];
    int n_in, n_out;
    vx_tensor *in[VX_MAX_IO];   /* retained saved inputs, or shape stubs */
    vx_tensor *out[VX_MAX_IO];
    vx_tensor *saved[4];
    uint8_t cast_from[VX_MAX_IO]; /* --amp: 1 + the dtype an input was copied from, 0 if none */
} node_state;

typedef struct vx_exec {
    vx_ctx *ctx;
    const est_graph *g;
    const vx_options *o;
    vx_result *r;
    bool train;
    vx_tensor **val;
    vx_tensor **grad;
    bool *req_grad;
    bool *persistent;      /* initializers, inputs, constants */
    bool *is_output;
    int32_t *pending;      /* forward reads left this step */
    int32_t *reads;        /* forward reads per step */
    int32_t **rel;         /* per node: tensors whose read ends after it */
    int32_t *rel_n;
    node_state *ns;
    vx_tensor **opt_a, **opt_b;
    vx_weights *w;
    vx_tensor *prev_y, *prev_loss;
    int64_t adam_step;
    vx_profile *prof;      /* MEMEST_VERIFY_PROFILE, else NULL */
    bool profiling;        /* the measured step, with prof */
    vx_dtype amp_low;      /* --amp: the low dtype */
    vx_tensor **amp_cache; /* --amp: autocast's parameter copies by tensor; NULL without --amp */
} vx_exec;

/* ---- exec.c -------------------------------------------------------------------- */

/* Fills the result's failure fields and the message for an allocation that
 * did not fit; returns VX_EOOM. */
vx_status vx_exec_oom(vx_exec *x, const char *what);
/* A kernel launch's error, if any. */
vx_status vx_exec_check_launch(vx_exec *x);

/* ---- exec_setup.c -------------------------------------------------------------- */

/* Kernels checked; initializers, Constants and inputs made; gradients and
 * forward reads planned. */
vx_status vx_exec_setup(vx_exec *x);

/* ---- exec_train.c -------------------------------------------------------------- */

/* Releases what a node kept for its backward. */
void vx_exec_release_node_state(vx_exec *x, node_state *s);
/* loss.backward() for y.mean(), y being tensor yi. */
vx_status vx_exec_backward(vx_exec *x, vx_tensor *y, int32_t yi);
vx_status vx_exec_optimizer_step(vx_exec *x);

/* ---- exec_amp.c: autocast (--amp) ----------------------------------------------- */

vx_status vx_amp_setup(vx_exec *x);
/* want[k]: the dtype node i's kernel reads floating input k in, or -1 to
 * keep it (always -1 without --amp). run->in[] are the inputs as bound. */
void vx_amp_targets(const vx_exec *x, int32_t i, const vx_run *run, vx_dtype *want);
/* Replaces each device input whose dtype differs from want[k] by its
 * autocast copy (orig[k] too; mine[k] when the node owns the copy) and
 * notes the dtype it came from in cast_from[k]. */
vx_status vx_amp_cast_inputs(vx_exec *x, int32_t i, vx_run *run, const vx_dtype *want, vx_tensor **orig,
                             vx_tensor **mine, uint8_t *cast_from);
/* Leaving autocast: its parameter copies go (those a backward keeps stay). */
void vx_amp_exit(vx_exec *x);
/* A copy's gradient cast back to the dtype the input had (cast_from as
 * noted; 0 leaves *gr). */
vx_status vx_amp_grad_back(vx_exec *x, vx_tensor **gr, uint8_t cast_from);

/* ---- profile.c ----------------------------------------------------------------- */

/* NULL unless MEMEST_VERIFY_PROFILE names a file to append to. Every call
 * takes NULL. */
vx_profile *vx_profile_open(void);
void vx_profile_start(vx_profile *p);
/* The time since the last mark (or the start) goes to (op_type, phase). */
void vx_profile_mark(vx_profile *p, const char *op_type, int phase);
void vx_profile_write(vx_profile *p, const char *model, int64_t batch);
void vx_profile_close(vx_profile *p);

#endif
