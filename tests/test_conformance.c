/*
 * test_conformance: shape inference against the ONNX backend node tests.
 *
 * For every case under onnx-node-tests/ whose ops are all supported, the
 * inferred shape of every graph output must equal the dims of the expected
 * output_K.pb. Cases with an unsupported op (or input type) are counted and
 * skipped; any other failure fails the test.
 *
 * Only dims and dtypes are compared, never values: memest infers no values
 * beyond folded shape constants. That is also what lets the cases of the
 * random generators (test_bernoulli*, whose _expanded forms run
 * RandomUniformLike) pass: their expected outputs are one random draw.
 *
 * usage: test_conformance DIR [SUBSTRING] [-v]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "onnx_loader.h"

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

typedef struct tensor_file {
    est_dtype dtype;
    int rank;
    int64_t dims[EST_MAX_RANK];
    est_const *values;
} tensor_file;

static int read_tensor_file(const char *path, tensor_file *t) {
    size_t size;
    char *buf = read_all(path, &size);
    if (!buf) return -1;
    est_error err;
    est_status st = est__onnx_read_tensor(buf, size, &t->dtype, &t->rank, t->dims, &t->values, &err);
    free(buf);
    return st == EST_OK ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

enum { CASE_PASS, CASE_UNSUPPORTED, CASE_FAIL };

/* memest rejects zero-size graph inputs by design (a zero dim in a model
 * being estimated is a mistake), so cases that feed empty tensors are skipped. */
static bool has_empty_input(const char *dir, const char *name) {
    char path[4096];
    for (int i = 0; i < 64; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, i);
        tensor_file tf = {0};
        if (read_tensor_file(path, &tf) != 0) return false;
        est__const_free(tf.values);
        for (int d = 0; d < tf.rank; d++)
            if (tf.dims[d] == 0) return true;
    }
    return false;
}

static int run_case(const char *dir, const char *name, bool verbose) {
    char path[4096];
    if (has_empty_input(dir, name)) {
        if (verbose) printf("skip %s: zero-size input\n", name);
        return CASE_UNSUPPORTED;
    }
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    est_error err;
    est_graph *g = NULL;
    est_status st = est_load_file(path, &g, &err);
    if (st == EST_EUNSUPPORTED) {
        if (verbose) printf("skip %s: %s\n", name, err.message);
        return CASE_UNSUPPORTED;
    }
    if (st != EST_OK) {
        printf("FAIL %s: load: %s\n", name, err.message);
        return CASE_FAIL;
    }
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].op) {
            if (verbose) printf("skip %s: unsupported op %s\n", name, g->nodes[i].op_type);
            est_graph_free(g);
            return CASE_UNSUPPORTED;
        }

    /* Feed the inputs' contents, so shape tensors given as inputs fold, and
     * bind any symbolic dims from the real inputs' dims. */
    est_input_value values[64];
    est_binding binds[64];
    tensor_file inputs[64];
    int n_values = 0, n_binds = 0, n_inputs = 0;
    int result = CASE_PASS;
    for (int32_t i = 0; i < g->n_inputs && i < 64; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, i);
        tensor_file *tf = &inputs[n_inputs];
        memset(tf, 0, sizeof *tf);
        if (read_tensor_file(path, tf) != 0) break;
        n_inputs++;
        const est_tensor *t = &g->tensors[g->inputs[i]];
        if (t->rank == tf->rank)
            for (int d = 0; d < t->rank; d++)
                if (t->dims[d].sym >= 0 && n_binds < 64)
                    binds[n_binds++] = (est_binding){g->symbols[t->dims[d].sym], tf->dims[d]};
        if (tf->values && tf->values->i64)
            values[n_values++] = (est_input_value){t->name, (size_t)tf->values->count, tf->values->i64, NULL};
        else if (tf->values && tf->values->f64 && tf->values->count <= 64)
            values[n_values++] = (est_input_value){t->name, (size_t)tf->values->count, NULL, tf->values->f64};
    }
    /* De-duplicate symbol bindings (the same symbol on several inputs). */
    int nb = 0;
    for (int i = 0; i < n_binds; i++) {
        bool dup = false;
        for (int j = 0; j < nb; j++) dup |= strcmp(binds[j].name, binds[i].name) == 0;
        if (!dup) binds[nb++] = binds[i];
    }
    est_options opt;
    est_options_init(&opt);
    opt.dims = binds;
    opt.n_dims = (size_t)nb;
    opt.values = values;
    opt.n_values = (size_t)n_values;
    est_report *r = NULL;
    st = est_estimate(g, &opt, &r, &err);
    if (st == EST_EUNSUPPORTED) {
        if (verbose) printf("skip %s: %s\n", name, err.message);
        result = CASE_UNSUPPORTED;
    } else if (st != EST_OK) {
        printf("FAIL %s: %s\n", name, err.message);
        result = CASE_FAIL;
    } else {
        for (size_t k = 0; k < est_report_output_count(r) && result == CASE_PASS; k++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%zu.pb", dir, name, k);
            tensor_file want = {0};
            if (read_tensor_file(path, &want) != 0) {
                if (verbose) printf("skip %s: output %zu is not a tensor file\n", name, k);
                result = CASE_UNSUPPORTED;
                break;
            }
            const est_tensor_info *got = est_report_output(r, k);
            bool same = got->rank == want.rank;
            for (int d = 0; same && d < want.rank; d++) same = got->shape[d] == want.dims[d];
            if (!same) {
                char a[256] = "", b[256] = "";
                for (int d = 0; d < got->rank; d++)
                    snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "x" : "", (long long)got->shape[d]);
                for (int d = 0; d < want.rank; d++)
                    snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "x" : "", (long long)want.dims[d]);
                printf("FAIL %s: output %zu '%s' inferred [%s], expected [%s]\n", name, k, got->name, a, b);
                result = CASE_FAIL;
            } else if (got->dtype != want.dtype) {
                printf("FAIL %s: output %zu '%s' inferred dtype %s, expected %s\n", name, k, got->name,
                       est_dtype_name(got->dtype), est_dtype_name(want.dtype));
                result = CASE_FAIL;
            }
            est__const_free(want.values);
        }
    }
    for (int i = 0; i < n_inputs; i++) est__const_free(inputs[i].values);
    est_report_free(r);
    est_graph_free(g);
    if (result == CASE_PASS && verbose) printf("pass %s\n", name);
    return result;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [SUBSTRING] [-v]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    const char *filter = argc > 2 && strcmp(argv[2], "-v") ? argv[2] : NULL;
    bool verbose = argc > 2 && strcmp(argv[argc - 1], "-v") == 0;
    DIR *d = opendir(dir);
    if (!d) {
        printf("SKIP: %s not found\n", dir);
        return 77;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5) != 0) continue;
        if (filter && !strstr(e->d_name, filter)) continue;
        if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int counts[3] = {0};
    for (size_t i = 0; i < n; i++) {
        counts[run_case(dir, names[i], verbose)]++;
        free(names[i]);
    }
    free(names);
    printf("conformance: %d of %zu cases supported; %d passed, %d failed\n", counts[CASE_PASS] + counts[CASE_FAIL],
           n, counts[CASE_PASS], counts[CASE_FAIL]);
    return counts[CASE_FAIL] ? 1 : 0;
}
