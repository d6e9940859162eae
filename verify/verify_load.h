/*
 * verify_load.h: finds and dlopens the verify module (libmemest_verify.so)
 * for memest and the GPU tests. Header-only; needs -ldl on old glibc.
 *
 * Search order: $MEMEST_VERIFY_MODULE; next to the executable's build
 * folder (<exe>/../verify/); the install folder (<exe>/../lib/memest/ and the like,
 * MEMEST_VERIFY_INSTALL_DIR); <exe>/; then the loader's own search path.
 */
#ifndef MEMEST_VERIFY_LOAD_H
#define MEMEST_VERIFY_LOAD_H

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verify.h"

#define VX_MODULE_NAME "libmemest_verify.so"

typedef struct vx_module {
    void *handle;
    memest_verify_options_init_fn options_init;
    memest_verify_run_fn run;
    memest_verify_result_free_fn result_free;
    memest_verify_has_op_fn has_op;             /* optional: NULL when absent */
    memest_verify_device_count_fn device_count; /* optional: NULL when absent */
    memest_verify_op_info_fn op_info;           /* optional: NULL when absent */
    memest_verify_archs_fn archs;               /* optional: NULL when absent */
    char path[PATH_MAX];
} vx_module;

/* dlsym's object pointer as a function pointer, without the cast ISO C forbids. */
static inline void vx_module_sym(void *h, const char *name, void *fnp, size_t size) {
    void *p = dlsym(h, name);
    memset(fnp, 0, size);
    if (p && size == sizeof p) memcpy(fnp, &p, sizeof p);
}

static inline int vx_module_try(vx_module *m, const char *path, char *err, size_t err_size) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        /* keep the most telling error: one that is not "no such file" */
        if (e && (!err[0] || !strstr(e, "No such file"))) snprintf(err, err_size, "%s", e);
        return 0;
    }
    memest_verify_abi_fn abi;
    vx_module_sym(h, "memest_verify_abi", &abi, sizeof abi);
    vx_module_sym(h, "memest_verify_options_init", &m->options_init, sizeof m->options_init);
    vx_module_sym(h, "memest_verify_run", &m->run, sizeof m->run);
    vx_module_sym(h, "memest_verify_result_free", &m->result_free, sizeof m->result_free);
    vx_module_sym(h, "memest_verify_has_op", &m->has_op, sizeof m->has_op);
    vx_module_sym(h, "memest_verify_device_count", &m->device_count, sizeof m->device_count);
    vx_module_sym(h, "memest_verify_op_info", &m->op_info, sizeof m->op_info);
    vx_module_sym(h, "memest_verify_archs", &m->archs, sizeof m->archs);
    if (!abi || abi() != MEMEST_VERIFY_ABI || !m->options_init || !m->run || !m->result_free) {
        snprintf(err, err_size, "%s: not a matching verify module", path);
        dlclose(h);
        return 0;
    }
    m->handle = h;
    snprintf(m->path, sizeof m->path, "%s", path);
    return 1;
}

/* Returns 1 and fills *m, or 0 with a reason in err. */
static inline int vx_module_open(vx_module *m, char *err, size_t err_size) {
    memset(m, 0, sizeof *m);
    err[0] = 0;
    const char *env = getenv("MEMEST_VERIFY_MODULE");
    if (env && *env) return vx_module_try(m, env, err, err_size);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char path[PATH_MAX + 64];
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"/../verify/", "/../../verify/", "/../lib/memest/", "/../lib64/memest/", "/../lib/x86_64-linux-gnu/memest/", "/"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(path, sizeof path, "%s%s%s", exe, rel[i], VX_MODULE_NAME);
            if (access(path, F_OK) == 0) return vx_module_try(m, path, err, err_size);
        }
    }
#ifdef MEMEST_VERIFY_INSTALL_DIR
    snprintf(path, sizeof path, "%s/%s", MEMEST_VERIFY_INSTALL_DIR, VX_MODULE_NAME);
    if (access(path, F_OK) == 0) return vx_module_try(m, path, err, err_size);
#endif
    if (vx_module_try(m, VX_MODULE_NAME, err, err_size)) return 1;
    if (!err[0]) snprintf(err, err_size, "%s not found", VX_MODULE_NAME);
    return 0;
}

/* The module stays loaded: the static CUDA runtime inside it registers
 * exit handlers, which must still be mapped when the process exits. */
static inline void vx_module_close(vx_module *m) {
    m->handle = NULL;
}

#endif
