/*
 * verify_kernels.h: what memest verify's executor (verify/) does that the
 * estimate of its kernels (est_options.kernels = EST_KERNELS_VERIFY) must
 * count the same way, defined once for both.
 */
#ifndef EST_VERIFY_KERNELS_H
#define EST_VERIFY_KERNELS_H

/* A tensor of at most this many elements may keep a host copy, and a
 * constant initializer that small stays on the host; a larger constant is
 * uploaded to the device at setup (dynamo's folded RoPE tables). */
#define EST_VERIFY_HOST_MAX 4096

#endif
