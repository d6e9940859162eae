/* registry.c: the list of op families; see registry.h. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "registry.h"

#define EST_FAMILIES(X) \
    X(activation)       \
    X(math)             \
    X(shape)            \
    X(index)            \
    X(resample)         \
    X(datadep)          \
    X(conv)             \
    X(pool)             \
    X(norm)             \
    X(linear)           \
    X(reduce)           \
    X(softmax)          \
    X(dropout)          \
    X(random)           \
    X(recurrent)

#define EST_DECLARE_FAMILY(fam) extern const est_family est_family_##fam;
EST_FAMILIES(EST_DECLARE_FAMILY)

static const est_family *const families[] = {
#define EST_LIST_FAMILY(fam) &est_family_##fam,
    EST_FAMILIES(EST_LIST_FAMILY)
};

#define N_FAMILIES (sizeof families / sizeof families[0])
_Static_assert(N_FAMILIES > 0, "no op families");

/* Lookups go through an open-addressed table of every op, keyed by
 * (domain, name) and built once: a load looks up every node. */
enum { LOOKUP_SLOTS = 1024 };
static const est_op_def *lookup_table[LOOKUP_SLOTS];
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;

static uint64_t op_hash(const char *domain, const char *op_type) {
    uint64_t h = est__fnv1a(EST_FNV_START, domain, strlen(domain) + 1); /* "domain\0op_type" */
    return est__fnv1a(h, op_type, strlen(op_type));
}

static void build_lookup_table(void) {
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (size_t i = 0; i < families[f]->count; i++) {
            const est_op_def *op = &families[f]->ops[i];
            uint64_t h = op_hash(op->domain ? op->domain : "", op->name) % LOOKUP_SLOTS;
            while (lookup_table[h]) h = (h + 1) % LOOKUP_SLOTS;
            lookup_table[h] = op; /* a later duplicate is never reached, as in a scan */
        }
}

const est_op_def *est__op_lookup(const char *domain, const char *op_type) {
    pthread_once(&lookup_once, build_lookup_table);
    for (uint64_t h = op_hash(domain, op_type) % LOOKUP_SLOTS; lookup_table[h]; h = (h + 1) % LOOKUP_SLOTS) {
        const est_op_def *op = lookup_table[h];
        if (strcmp(op->name, op_type) == 0 && strcmp(op->domain ? op->domain : "", domain) == 0) return op;
    }
    return NULL;
}

const char *est__op_family_of(const est_op_def *op) {
    for (size_t f = 0; f < N_FAMILIES; f++)
        if (op >= families[f]->ops && op < families[f]->ops + families[f]->count) return families[f]->name;
    return "";
}

static const est_op_def *op_at(size_t i, const est_family **fam) {
    for (size_t f = 0; f < N_FAMILIES; f++) {
        if (i < families[f]->count) {
            if (fam) *fam = families[f];
            return &families[f]->ops[i];
        }
        i -= families[f]->count;
    }
    return NULL;
}

size_t est_op_count(void) {
    size_t n = 0;
    for (size_t f = 0; f < N_FAMILIES; f++) n += families[f]->count;
    return n;
}

const char *est_op_name(size_t i) {
    const est_op_def *op = op_at(i, NULL);
    return op ? op->name : NULL;
}

const char *est_op_domain(size_t i) {
    const est_op_def *op = op_at(i, NULL);
    return op ? (op->domain ? op->domain : "") : NULL;
}

const char *est_op_family(size_t i) {
    const est_family *f = NULL;
    return op_at(i, &f) ? f->name : NULL;
}
