/*
 * test_verify_conformance.c: the verify executor's forward pass against the
 * ONNX backend node tests (../shared/onnx-node-tests/<case>/model.onnx with
 * test_data_set_0/input_N.pb and output_N.pb, serialized TensorProtos).
 *
 * Every case is loaded with est_load_file; a case runs when every node's op
 * has an executor kernel (memest_verify_has_op), its inputs and outputs are
 * float32, int64 or bool (narrower integers widened to int64, a float16
 * graph input to float32), no tensor of the graph declares another dtype, and
 * it gives a value for every graph input. It runs in inference mode, one
 * step, with the given inputs (vx_options.inputs), and the fetched outputs
 * (vx_options.fetch_outputs) must match output_N.pb: float32 within
 * 1e-5 absolute + 1e-4 relative, int64 and bool exactly, same shape.
 * A case that a kernel refuses at run time (VX_EUNSUPPORTED: an attribute or
 * mode it has no code for) is skipped and counted too. Cases in `excluded`
 * below are not run, each with its reason.
 *
 * The cases run in a child process; when a child dies (crash, hang past
 * CASE_SECONDS, or a CUDA error that may have spoiled its context) the case
 * it was running fails and a new child goes on with the next one. The parent
 * never touches CUDA.
 *
 * Prints each failure, then one summary line:
 *   conformance: P passed, F failed, S skipped (...)
 * Exits 1 when a case failed, 77 (skipped) when the verify module cannot be
 * loaded, there is no GPU, or no node tests.
 *
 * Usage: test_verify_conformance NODE_TESTS_DIR [--list] [--verbose]
 *   --list     print the cases that would run (no GPU needed) and exit
 *   --verbose  also print every skipped case with its reason
 * Environment: CONFORMANCE_FILTER=substring runs only matching cases.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "estimate.h"
#include "ir.h"
#include "onnx.pb-c.h"
#include "verify_load.h"

#define MAX_VALUES 16
#define CASE_SECONDS 60
#define RTOL 1e-4
#define ATOL 1e-5

/* Cases not run: the ONNX op's semantics differ from the training-framework
 * op the executor implements, in a way that does not matter for the truth
 * models (PyTorch exports). Keep it short and give the reason. */
static const struct {
    const char *name;
    const char *reason;
} excluded[] = {
    /* The reference output is written with 4 significant digits (0.1511,
     * 0.2841, 0.3572); the executor's 0.15106 is right, 1e-4 relative is not. */
    {"test_averagepool_2d_ceil_last_window_starts_on_pad", "reference output rounded to 4 digits"},
    /* BatchNormalization with training_mode=1: the executor follows the run
     * mode (PyTorch's module.train() / eval()), not the node's attribute; these
     * cases run in inference mode, so running statistics are used. The truth
     * models are measured in the mode they were exported for. */
    {"test_batchnorm_epsilon_training_mode", "batch statistics come from the run mode, not training_mode"},
    {"test_batchnorm_example_training_mode", "batch statistics come from the run mode, not training_mode"},
    /* Dropout in training mode draws a random mask: numpy's generator in the
     * reference, the executor's own here; no element-wise match is possible.
     * Eval-mode Dropout (identity) runs in test_dropout_*. */
    {"test_training_dropout", "random mask (another generator)"},
    {"test_training_dropout_default", "random mask (another generator)"},
    {"test_training_dropout_default_mask", "random mask (another generator)"},
    {"test_training_dropout_mask", "random mask (another generator)"},
    /* Bernoulli with a seed: the reference draws with numpy's generator. */
    {"test_bernoulli_seed", "random draws (another generator)"},
    {"test_bernoulli_seed_expanded", "random draws (another generator)"},
    /* Outputs written with 4 decimals (-0.1406 for -0.140625, 0.351 for
     * 0.35105): within 5e-5 of the executor's, past 1e-5 + 1e-4 relative.
     * The other GridSample and RoiAlign cases hold full floats and pass. */
    {"test_gridsample_bicubic", "reference output rounded to 4 decimals"},
    {"test_roialign_aligned_false", "reference output rounded to 4 decimals"},
    {"test_roialign_aligned_true", "reference output rounded to 4 decimals"},
    {NULL, NULL},
};

enum { TP_FLOAT = 1, TP_UINT8 = 2, TP_INT8 = 3, TP_UINT16 = 4, TP_INT16 = 5, TP_INT32 = 6, TP_INT64 = 7, TP_BOOL = 9,
       TP_FLOAT16 = 10 };

/* The executor holds every integer tensor as int64 (verify/vx.h): narrower
 * integer values are widened on load and compared as int64. */
static bool tp_narrow_int(int32_t tp) {
    return tp == TP_UINT8 || tp == TP_INT8 || tp == TP_UINT16 || tp == TP_INT16 || tp == TP_INT32;
}

static int64_t narrow_int_at(const Onnx__TensorProto *t, size_t i) {
    if (!t->raw_data.len) return t->int32_data[i];
    const uint8_t *r = t->raw_data.data;
    switch (t->data_type) {
    case TP_UINT8: return r[i];
    case TP_INT8: return (int8_t)r[i];
    case TP_UINT16: return (uint16_t)(r[2 * i] | r[2 * i + 1] << 8);
    case TP_INT16: return (int16_t)(r[2 * i] | r[2 * i + 1] << 8);
    default: return (int32_t)((uint32_t)r[4 * i] | (uint32_t)r[4 * i + 1] << 8 | (uint32_t)r[4 * i + 2] << 16 |
                              (uint32_t)r[4 * i + 3] << 24);
    }
}

static float half_to_float(uint16_t h) {
    int e = h >> 10 & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return h >> 15 ? -v : v;
}

/* A float16 graph input, widened to the float32 the run holds it in (its
 * values are exact in float32). */
static float half_at(const Onnx__TensorProto *t, size_t i) {
    const uint8_t *r = t->raw_data.data;
    return half_to_float(t->raw_data.len ? (uint16_t)(r[2 * i] | r[2 * i + 1] << 8) : (uint16_t)t->int32_data[i]);
}

typedef struct tvalue {
    int32_t data_type;
    int rank;
    int64_t dims[8];
    int64_t numel;
    void *data; /* float, int64_t or uint8_t */
} tvalue;

typedef struct tcase {
    est_graph *g;
    int n_in, n_out;
    tvalue in[MAX_VALUES], out[MAX_VALUES];
} tcase;

static vx_module mod;
static const char *root;

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

/* 0 ok, 1 skip (dtype / rank), -1 error; why says which. */
static int load_tensor(const char *path, bool widen_half, tvalue *v, char *why, size_t wn) {
    size_t size;
    void *buf = read_file(path, &size);
    if (!buf) {
        snprintf(why, wn, "%.300s: cannot read", path);
        return -1;
    }
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, size, buf);
    free(buf);
    if (!t) {
        snprintf(why, wn, "%.300s: not a TensorProto", path);
        return -1;
    }
    int rc = 0;
    memset(v, 0, sizeof *v);
    v->data_type = t->data_type;
    bool narrow = tp_narrow_int(t->data_type), half = t->data_type == TP_FLOAT16 && widen_half;
    if (t->data_type != TP_FLOAT && t->data_type != TP_INT64 && t->data_type != TP_BOOL && !narrow && !half) {
        snprintf(why, wn, "dtype %d", t->data_type);
        rc = 1;
        goto done;
    }
    if (t->n_dims > 8) {
        snprintf(why, wn, "rank %zu", t->n_dims);
        rc = 1;
        goto done;
    }
    v->rank = (int)t->n_dims;
    v->numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        v->dims[i] = t->dims[i];
        v->numel *= t->dims[i];
    }
    size_t es = t->data_type == TP_FLOAT || half ? 4 : t->data_type == TP_INT64 || narrow ? 8 : 1;
    v->data = calloc((size_t)(v->numel ? v->numel : 1), es);
    if (!v->data) {
        snprintf(why, wn, "out of memory");
        rc = -1;
        goto done;
    }
    size_t n = (size_t)v->numel;
    if (narrow || half) {
        size_t width = t->data_type == TP_UINT8 || t->data_type == TP_INT8 ? 1 : t->data_type == TP_INT32 ? 4 : 2;
        if (t->raw_data.len ? t->raw_data.len != n * width : t->n_int32_data != n) {
            snprintf(why, wn, "%.300s: no data for %zu elements", path, n);
            rc = -1;
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            if (half) ((float *)v->data)[i] = half_at(t, i);
            else ((int64_t *)v->data)[i] = narrow_int_at(t, i);
        v->data_type = half ? TP_FLOAT : TP_INT64;
    } else if (t->raw_data.len) {
        if (t->raw_data.len != n * es) {
            snprintf(why, wn, "%.300s: raw_data of %zu bytes for %zu elements", path, t->raw_data.len, n);
            rc = -1;
            goto done;
        }
        if (n) memcpy(v->data, t->raw_data.data, n * es);
    } else if (t->data_type == TP_FLOAT && t->n_float_data == n) {
        if (n) memcpy(v->data, t->float_data, n * 4);
    } else if (t->data_type == TP_INT64 && t->n_int64_data == n) {
        if (n) memcpy(v->data, t->int64_data, n * 8);
    } else if (t->data_type == TP_BOOL && t->n_int32_data == n) {
        for (size_t i = 0; i < n; i++) ((uint8_t *)v->data)[i] = t->int32_data[i] != 0;
    } else if (n) {
        snprintf(why, wn, "%.300s: no data for %zu elements", path, n);
        rc = -1;
    }
done:
    onnx__tensor_proto__free_unpacked(t, NULL);
    return rc;
}

static void case_free(tcase *c) {
    for (int i = 0; i < c->n_in; i++) free(c->in[i].data);
    for (int i = 0; i < c->n_out; i++) free(c->out[i].data);
    if (c->g) est_graph_free(c->g);
    memset(c, 0, sizeof *c);
}

static bool dtype_ok(const est_tensor *t) {
    switch (t->dtype) {
    case EST_DT_UNDEFINED: case EST_DT_FLOAT: case EST_DT_INT64: case EST_DT_BOOL:
    case EST_DT_UINT8: case EST_DT_INT8: case EST_DT_UINT16: case EST_DT_INT16: case EST_DT_INT32:
        return true;
    case EST_DT_FLOAT16: /* a graph input only: widened on load, computed as float32 */
        return t->kind == EST_T_INPUT;
    default:
        return false;
    }
}

/* Skip categories. */
enum { SK_LOAD, SK_OPS, SK_DTYPE, SK_INPUTS, SK_RUN, SK_EXCLUDED, SK_COUNT };
static const char *sk_names[SK_COUNT] = {"load", "ops", "dtype", "inputs", "unsupported at run", "excluded"};

/* Returns -1 when the case runs (c filled), or a skip category (why says
 * why); SK_COUNT + 1 for a broken case (a failure). */
static int prepare(const char *name, tcase *c, char *why, size_t wn) {
    memset(c, 0, sizeof *c);
    why[0] = 0;
    for (size_t i = 0; excluded[i].name; i++)
        if (strcmp(excluded[i].name, name) == 0) {
            snprintf(why, wn, "%s", excluded[i].reason);
            return SK_EXCLUDED;
        }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", root, name);
    est_error err;
    if (est_load_file(path, &c->g, &err) != EST_OK) {
        snprintf(why, wn, "%s", err.message);
        c->g = NULL;
        return SK_LOAD;
    }
    const est_graph *g = c->g;
    char missing[256] = "";
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const est_node *n = &g->nodes[i];
        bool dom_ok = !n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0;
        if (dom_ok && mod.has_op(n->op_type)) continue;
        if (!strstr(missing, n->op_type) && strlen(missing) + strlen(n->op_type) + 3 < sizeof missing) {
            if (missing[0]) strcat(missing, ", ");
            strcat(missing, n->op_type);
        }
    }
    if (missing[0]) {
        snprintf(why, wn, "no kernel for %s", missing);
        case_free(c);
        return SK_OPS;
    }
    for (int32_t ti = 0; ti < g->n_tensors; ti++)
        if (!dtype_ok(&g->tensors[ti])) {
            snprintf(why, wn, "tensor '%s' is %s", g->tensors[ti].name, est_dtype_name(g->tensors[ti].dtype));
            case_free(c);
            return SK_DTYPE;
        }
    for (int io = 0; io < 2; io++) {
        int *cnt = io ? &c->n_out : &c->n_in;
        tvalue *vals = io ? c->out : c->in;
        for (int k = 0;; k++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/%s_%d.pb", root, name, io ? "output" : "input", k);
            if (access(path, R_OK) != 0) break;
            if (k >= MAX_VALUES) {
                snprintf(why, wn, "more than %d %ss", MAX_VALUES, io ? "output" : "input");
                case_free(c);
                return SK_INPUTS;
            }
            int rc = load_tensor(path, !io, &vals[k], why, wn);
            if (rc) {
                free(vals[k].data);
                case_free(c);
                return rc > 0 ? SK_DTYPE : SK_COUNT + 1;
            }
            ++*cnt;
        }
    }
    if (c->n_in != g->n_inputs || c->n_out != g->n_outputs) {
        snprintf(why, wn, "%d input / %d output files for %d graph inputs / %d outputs", c->n_in, c->n_out,
                 (int)g->n_inputs, (int)g->n_outputs);
        case_free(c);
        return SK_INPUTS;
    }
    return -1;
}

static vx_dtype vdt(int32_t tp) {
    return tp == TP_FLOAT ? VX_F32 : tp == TP_INT64 ? VX_I64 : VX_BOOL;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Runs a prepared case: 'P' passed, 'F' failed, 'U' refused by a kernel,
 * 'C' failed with a CUDA error (the child then exits). */
static char run_case(tcase *c, char *why, size_t wn) {
    const est_graph *g = c->g;
    vx_value in[MAX_VALUES];
    for (int k = 0; k < c->n_in; k++) {
        in[k] = (vx_value){.name = g->tensors[g->inputs[k]].name, .dtype = vdt(c->in[k].data_type),
                           .rank = c->in[k].rank, .numel = c->in[k].numel, .data = c->in[k].data};
        memcpy(in[k].dims, c->in[k].dims, sizeof in[k].dims);
    }
    vx_options o;
    mod.options_init(&o);
    o.mode = EST_MODE_INFER;
    o.steps = 1;
    o.inputs = in;
    o.n_inputs = (size_t)c->n_in;
    o.fetch_outputs = 1;
    o.cublas_workspace = 4u << 20;
    vx_result r;
    vx_status st = mod.run(g, &o, &r);
    char verdict = 'P';
    if (st != VX_OK) {
        snprintf(why, wn, "run: status %d: %s", (int)st, r.message);
        verdict = st == VX_EUNSUPPORTED ? 'U' : st == VX_ECUDA ? 'C' : 'F';
        goto out;
    }
    if ((int)r.n_outputs != c->n_out) {
        snprintf(why, wn, "%zu outputs, expected %d", r.n_outputs, c->n_out);
        verdict = 'F';
        goto out;
    }
    for (int k = 0; k < c->n_out; k++) {
        const vx_value *got = &r.outputs[k];
        const tvalue *exp = &c->out[k];
        char gs[128], es[128];
        shape_str(gs, sizeof gs, got->rank, got->dims);
        shape_str(es, sizeof es, exp->rank, exp->dims);
        if (!got->data && exp->numel) {
            snprintf(why, wn, "output %d ('%s') not produced", k, got->name ? got->name : "?");
            verdict = 'F';
            goto out;
        }
        if (got->dtype != vdt(exp->data_type)) {
            snprintf(why, wn, "output %d: dtype %d, expected onnx type %d", k, (int)got->dtype, exp->data_type);
            verdict = 'F';
            goto out;
        }
        if (strcmp(gs, es) != 0) {
            snprintf(why, wn, "output %d: shape %s, expected %s", k, gs, es);
            verdict = 'F';
            goto out;
        }
        int64_t bad = 0, first = -1;
        double max_abs = 0;
        for (int64_t e = 0; e < exp->numel; e++) {
            bool ok;
            if (exp->data_type == TP_FLOAT) {
                double a = ((const float *)got->data)[e], b = ((const float *)exp->data)[e];
                if (isnan(b) || isnan(a)) ok = isnan(a) && isnan(b);
                else if (isinf(b) || isinf(a)) ok = a == b;
                else {
                    double d = fabs(a - b);
                    if (d > max_abs) max_abs = d;
                    ok = d <= ATOL + RTOL * fabs(b);
                }
            } else if (exp->data_type == TP_INT64) {
                ok = ((const int64_t *)got->data)[e] == ((const int64_t *)exp->data)[e];
            } else {
                ok = (((const uint8_t *)got->data)[e] != 0) == (((const uint8_t *)exp->data)[e] != 0);
            }
            if (!ok) {
                if (first < 0) first = e;
                bad++;
            }
        }
        if (bad) {
            double gv, ev;
            if (exp->data_type == TP_FLOAT) {
                gv = ((const float *)got->data)[first];
                ev = ((const float *)exp->data)[first];
            } else if (exp->data_type == TP_INT64) {
                gv = (double)((const int64_t *)got->data)[first];
                ev = (double)((const int64_t *)exp->data)[first];
            } else {
                gv = ((const uint8_t *)got->data)[first];
                ev = ((const uint8_t *)exp->data)[first];
            }
            snprintf(why, wn, "output %d %s: %lld of %lld elements differ; first [%lld] got %.7g expected %.7g; max abs err %.3g",
                     k, es, (long long)bad, (long long)exp->numel, (long long)first, gv, ev, max_abs);
            verdict = 'F';
            goto out;
        }
    }
out:
    mod.result_free(&r);
    return verdict;
}

/* The child: runs cases[from..] and reports on fd: "S i", "R i V message". */
static void free_names(char **names, int n, char *verdict) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(verdict);
}

static int child(char **names, int n, int from, FILE *w) {
    char msg[512];
    if (!mod.device_count(msg, sizeof msg)) {
        fprintf(w, "N %s\n", msg);
        fflush(w);
        return 77;
    }
    for (int i = from; i < n; i++) {
        tcase c;
        char why[700];
        int sk = prepare(names[i], &c, why, sizeof why);
        if (sk >= 0) continue; /* the parent knows it */
        fprintf(w, "S %d\n", i);
        fflush(w);
        alarm(CASE_SECONDS);
        char v = run_case(&c, why, sizeof why);
        alarm(0);
        for (char *p = why; *p; p++)
            if (*p == '\n') *p = ' ';
        fprintf(w, "R %d %c %s\n", i, v, why);
        fflush(w);
        case_free(&c);
        if (v == 'C') return 3; /* the context may be spoiled: a fresh child goes on */
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    bool list = false, verbose = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) list = true;
        else if (strcmp(argv[i], "--verbose") == 0) verbose = true;
        else dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: %s NODE_TESTS_DIR [--list] [--verbose]\n", argv[0]);
        return 2;
    }
    root = dir;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[700];
    if (!vx_module_open(&mod, why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    if (!mod.has_op || !mod.device_count) {
        printf("SKIP: %s lacks memest_verify_has_op / memest_verify_device_count\n", mod.path);
        return 77;
    }
    DIR *d = opendir(dir);
    if (!d) {
        printf("SKIP: %s: no node tests\n", dir);
        return 77;
    }
    const char *filter = getenv("CONFORMANCE_FILTER");
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5) != 0) continue;
        if (filter && *filter && !strstr(e->d_name, filter)) continue;
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (stat(p, &sb) != 0) continue;
        if (n == cap) {
            char **nn = realloc(names, sizeof *names * (size_t)(cap = cap ? cap * 2 : 256));
            if (!nn) return 1;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!n) {
        printf("SKIP: %s: no node tests\n", dir);
        return 77;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);

    /* classify without the GPU */
    int skips[SK_COUNT] = {0};
    int failed = 0, passed = 0, runnable = 0;
    char *verdict = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        tcase c;
        int sk = prepare(names[i], &c, why, sizeof why);
        if (sk < 0) {
            runnable++;
            verdict[i] = '?';
            if (list) printf("%s\n", names[i]);
            case_free(&c);
        } else if (sk < SK_COUNT) {
            skips[sk]++;
            verdict[i] = 'K';
            if (verbose || sk == SK_EXCLUDED) printf("skip %s (%s): %s\n", names[i], sk_names[sk], why);
        } else {
            verdict[i] = 'F';
            failed++;
            printf("FAIL %s: %s\n", names[i], why);
        }
    }
    if (list) return 0;

    /* run the runnable cases in children */
    int next = 0;
    while (next < n) {
        while (next < n && verdict[next] != '?') next++;
        if (next >= n) break;
        int start = next;
        int fd[2];
        if (pipe(fd) != 0) return 1;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            close(fd[0]);
            FILE *w = fdopen(fd[1], "w");
            _exit(child(names, n, next, w));
        }
        close(fd[1]);
        FILE *rd = fdopen(fd[0], "r");
        char line[1024];
        int current = -1;
        bool nogpu = false;
        while (fgets(line, sizeof line, rd)) {
            line[strcspn(line, "\n")] = 0;
            if (line[0] == 'N') {
                printf("SKIP: %s\n", line + 2);
                nogpu = true;
            } else if (line[0] == 'S') {
                current = atoi(line + 2);
            } else if (line[0] == 'R') {
                char *p = line + 2;
                int i = (int)strtol(p, &p, 10);
                char v = p[1];
                const char *msg = p[2] ? p + 3 : "";
                if (i < 0 || i >= n) continue;
                if (v == 'P') {
                    verdict[i] = 'P';
                    passed++;
                } else if (v == 'U') {
                    verdict[i] = 'K';
                    skips[SK_RUN]++;
                    if (verbose) printf("skip %s (%s): %s\n", names[i], sk_names[SK_RUN], msg);
                    else printf("unsupported %s: %s\n", names[i], msg);
                } else {
                    verdict[i] = 'F';
                    failed++;
                    printf("FAIL %s: %s\n", names[i], msg);
                }
                current = -1;
                next = i + 1;
            }
        }
        fclose(rd);
        int status = 0;
        waitpid(pid, &status, 0);
        if (nogpu) {
            free_names(names, n, verdict);
            return 77;
        }
        if (current >= 0) {
            verdict[current] = 'F';
            failed++;
            if (WIFSIGNALED(status))
                printf("FAIL %s: the run died with signal %d%s\n", names[current], WTERMSIG(status),
                       WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
            else
                printf("FAIL %s: the run exited with status %d\n", names[current], WEXITSTATUS(status));
            next = current + 1;
        } else if (!(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3))) {
            /* died between cases */
            printf("child exited abnormally (status 0x%x) after case %d\n", status, next - 1);
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break; /* it ran all the rest */
        if (next == start && current < 0) {
            printf("FAIL: a child made no progress (status 0x%x); stopping\n", status);
            failed++;
            break;
        }
    }
    int skipped = 0;
    for (int s = 0; s < SK_COUNT; s++) skipped += skips[s];
    printf("conformance: %d passed, %d failed, %d skipped (", passed, failed, skipped);
    for (int s = 0; s < SK_COUNT; s++) printf("%s%s %d", s ? ", " : "", sk_names[s], skips[s]);
    printf(") of %d cases\n", n);
    free_names(names, n, verdict);
    return failed ? 1 : passed ? 0 : 77;
}
