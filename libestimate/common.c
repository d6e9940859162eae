/* common.c: error strings, dtypes, small-constant storage, node attributes. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ir.h"

static const char *const status_messages[] = {
#define EST_STATUS_MSG(name, msg) [EST_##name] = msg,
    EST_STATUS_MAP(EST_STATUS_MSG)
#undef EST_STATUS_MSG
};

static const char *const status_names[] = {
#define EST_STATUS_NAME(name, msg) [EST_##name] = #name,
    EST_STATUS_MAP(EST_STATUS_NAME)
#undef EST_STATUS_NAME
};

const char *est_strerror(est_status code) {
    if ((unsigned)code >= EST_STATUS_COUNT) return "unknown error";
    return status_messages[code];
}

const char *est_status_name(est_status code) {
    if ((unsigned)code >= EST_STATUS_COUNT) return "EUNKNOWN";
    return status_names[code];
}

/* The length of the valid UTF-8 sequence at s that is no C1 control, or 0. */
static size_t printable_utf8(const unsigned char *s) {
    unsigned c = s[0];
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (!len || c > 0xF4) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    uint32_t cp = len == 2 ? (c & 0x1Fu) << 6 | (s[1] & 0x3Fu)
                : len == 3 ? (c & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu)
                           : (c & 0x07u) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3Fu);
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    bool bad = overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F);
    return bad ? 0 : len;
}

size_t est_escape_controls(char *dst, size_t cap, const char *text) {
    static const char hex[] = "0123456789abcdef";
    size_t need = 0;
    if (!text) text = "";
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        size_t run = *p >= 0x20 && *p < 0x7f ? 1 : *p >= 0x80 ? printable_utf8(p) : 0;
        if (run) {
            for (size_t k = 0; k < run; k++, need++)
                if (need + 1 < cap) dst[need] = (char)p[k];
            p += run;
            continue;
        }
        const char esc[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
        for (size_t k = 0; k < 4; k++, need++)
            if (need + 1 < cap) dst[need] = esc[k];
        p++;
    }
    if (cap) dst[need < cap ? need : cap - 1] = '\0';
    return need;
}

est_status est__fail(est_error *err, est_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        char raw[sizeof err->message];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* the message quotes names from the model: keep it safe to print */
        est_escape_controls(err->message, sizeof err->message, raw);
    }
    return code;
}

char *est__strdup(const char *s) {
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *est__strndup(const char *s, size_t len) {
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

void est_free(void *p) { free(p); }

const char *est_version(void) { return "0.1.0"; }

/* ---- dtypes ---------------------------------------------------------------- */

static const char *const dtype_names[EST_DT_COUNT] = {
#define DTYPE_NAME(e, value, name, bits) [EST_DT_##e] = name,
    EST_DTYPES(DTYPE_NAME)
#undef DTYPE_NAME
};

const uint8_t est__dtype_bits[EST_DT_COUNT] = {
#define DTYPE_BITS(e, value, name, bits) [EST_DT_##e] = bits,
    EST_DTYPES(DTYPE_BITS)
#undef DTYPE_BITS
};

const char *est_dtype_name(est_dtype dt) {
    if ((unsigned)dt >= EST_DT_COUNT) return "undefined";
    return dtype_names[dt];
}

est_dtype est_dtype_from_name(const char *name) {
    static const struct { const char *alias; est_dtype dt; } aliases[] = {
        {"float", EST_DT_FLOAT}, {"fp32", EST_DT_FLOAT}, {"f32", EST_DT_FLOAT},
        {"half", EST_DT_FLOAT16}, {"fp16", EST_DT_FLOAT16}, {"f16", EST_DT_FLOAT16},
        {"bf16", EST_DT_BFLOAT16}, {"double", EST_DT_DOUBLE}, {"fp64", EST_DT_DOUBLE},
    };
    if (!name) return EST_DT_UNDEFINED;
    for (int i = 1; i < EST_DT_COUNT; i++)
        if (dtype_names[i] && strcasecmp(name, dtype_names[i]) == 0) return (est_dtype)i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(name, aliases[i].alias) == 0) return aliases[i].dt;
    return EST_DT_UNDEFINED;
}

uint64_t est_dtype_bytes(est_dtype dt, uint64_t count) {
    uint64_t bits = (unsigned)dt < EST_DT_COUNT ? est__dtype_bits[dt] : 0;
    /* whole bytes (and no size): count x bytes, exact whenever it fits */
    if (bits % 8 == 0) return est__dtype_bytes(dt, count);
    uint64_t whole; /* sub-byte types: each 8 elements take `bits` bytes, the rest rounds up */
    if (__builtin_mul_overflow(count / 8, bits, &whole)) return UINT64_MAX;
    uint64_t rest = ((count % 8) * bits + 7) / 8;
    return whole > UINT64_MAX - rest ? UINT64_MAX : whole + rest;
}

bool est__dtype_is_integer(est_dtype dt) {
    switch (dt) {
    case EST_DT_INT8: case EST_DT_UINT8: case EST_DT_INT16: case EST_DT_UINT16:
    case EST_DT_INT32: case EST_DT_UINT32: case EST_DT_INT64: case EST_DT_UINT64:
        return true;
    default:
        return false;
    }
}

bool est__dtype_is_int(est_dtype dt) {
    switch (dt) {
    case EST_DT_UINT8: case EST_DT_INT8: case EST_DT_UINT16: case EST_DT_INT16:
    case EST_DT_INT32: case EST_DT_INT64: case EST_DT_BOOL: case EST_DT_UINT32:
    case EST_DT_UINT64: case EST_DT_UINT4: case EST_DT_INT4: case EST_DT_UINT2: case EST_DT_INT2:
        return true;
    default:
        return false;
    }
}

/* ---- constants ------------------------------------------------------------- */

bool est__const_foldable(est_dtype dt, int64_t count) {
    return count >= 0 && count <= EST_FOLD_MAX_ELEMENTS && (est__dtype_is_float(dt) || est__dtype_is_int(dt));
}

/* est__const_new's elements zeroed, or left for the caller to write. The
 * elements follow the header in one block (sizeof *c keeps them aligned):
 * one allocation and one free for each of the many small constants. */
static est_const *const_alloc(est_dtype dt, int64_t count, bool zeroed) {
    if (!est__const_foldable(dt, count)) return NULL;
    _Static_assert(sizeof(est_const) % sizeof(int64_t) == 0, "the elements follow the header aligned");
    bool is_f = est__dtype_is_float(dt);
    size_t n = count ? (size_t)count : 1, size = is_f ? sizeof(double) : sizeof(int64_t);
    size_t bytes = sizeof(est_const) + n * size; /* n is at most EST_FOLD_MAX_ELEMENTS */
    est_const *c = zeroed ? calloc(1, bytes) : malloc(bytes);
    if (!c) return NULL;
    *c = (est_const){.dtype = dt, .count = count};
    atomic_init(&c->refs, 1);
    void *values = c + 1;
    if (is_f) c->f64 = values;
    else c->i64 = values;
    return c;
}

est_const *est__const_new(est_dtype dt, int64_t count) { return const_alloc(dt, count, true); }
est_const *est__const_new_unset(est_dtype dt, int64_t count) { return const_alloc(dt, count, false); }

est_const *est__const_ref(est_const *c) {
    if (c) atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void est__const_free(est_const *c) {
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
    free(c); /* its elements with it */
}

/* ---- limits ---------------------------------------------------------------- */

void est_limits_init(est_limits *lim) {
    if (!lim) return;
    *lim = (est_limits){
        .max_file_bytes = EST_DEFAULT_MAX_FILE_BYTES,
        .max_nodes = EST_DEFAULT_MAX_NODES,
        .max_tensors = EST_DEFAULT_MAX_TENSORS,
        .max_symbols = EST_DEFAULT_MAX_SYMBOLS,
        .max_rank = EST_MAX_RANK,
        .max_dim_value = EST_MAX_DIM_VALUE,
        .max_attr_elements = EST_DEFAULT_MAX_ATTR_ELEMENTS,
        .max_nesting = EST_DEFAULT_MAX_NESTING,
        .max_work = EST_DEFAULT_MAX_WORK,
    };
}

void est__limits_resolve(const est_limits *lim, est_limits *out) {
    est_limits d;
    est_limits_init(&d);
    *out = lim ? *lim : d;
    if (!out->max_file_bytes) out->max_file_bytes = d.max_file_bytes;
    if (!out->max_nodes) out->max_nodes = d.max_nodes;
    if (!out->max_tensors) out->max_tensors = d.max_tensors;
    if (!out->max_symbols) out->max_symbols = d.max_symbols;
    /* rank and dims size fixed arrays and bound int64 products: never above the defaults' hard caps */
    if (!out->max_rank || out->max_rank > EST_MAX_RANK) out->max_rank = EST_MAX_RANK;
    if (out->max_dim_value <= 0 || out->max_dim_value > EST_MAX_DIM_VALUE) out->max_dim_value = EST_MAX_DIM_VALUE;
    if (!out->max_attr_elements) out->max_attr_elements = d.max_attr_elements;
    if (!out->max_nesting) out->max_nesting = d.max_nesting;
    if (out->max_nesting > EST_MAX_NESTING_CAP) out->max_nesting = EST_MAX_NESTING_CAP;
    if (!out->max_work) out->max_work = d.max_work;
}

/* ---- node attributes ------------------------------------------------------ */

const est_attr *est_attr_get(const est_node *n, const char *name) {
    for (int32_t k = 0; k < n->n_attrs; k++) /* the first character spares most strcmp calls */
        if (n->attrs[k].name[0] == name[0] && strcmp(n->attrs[k].name, name) == 0) return &n->attrs[k];
    return NULL;
}

int64_t est_node_attr_int(const est_node *n, const char *name, int64_t dflt) {
    const est_attr *a = est_attr_get(n, name);
    return a && a->type == EST_ATTR_INT ? a->i : dflt;
}

double est_node_attr_float(const est_node *n, const char *name, double dflt) {
    const est_attr *a = est_attr_get(n, name);
    if (a && a->type == EST_ATTR_FLOAT) return a->f;
    return a && a->type == EST_ATTR_INT ? (double)a->i : dflt;
}

const char *est_node_attr_string(const est_node *n, const char *name, const char *dflt) {
    const est_attr *a = est_attr_get(n, name);
    return a && a->type == EST_ATTR_STRING && a->s ? a->s : dflt;
}

const int64_t *est_node_attr_ints(const est_node *n, const char *name, int64_t *count) {
    const est_attr *a = est_attr_get(n, name);
    bool ok = a && a->type == EST_ATTR_INTS;
    *count = ok ? a->n : 0;
    return ok ? a->ints : NULL;
}
