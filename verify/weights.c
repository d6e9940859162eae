/* weights.c: initializer payloads and Constant values read from the ONNX
 * file (libestimate's loader never keeps weight bytes). Embedded data
 * (typed fields or raw_data) and external data (resolved against the
 * model's folder) are read; a tensor whose external file is absent has no
 * payload and the executor fills it with random values. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "vx_internal.h"

struct vx_weights {
    Onnx__ModelProto *model;
    char *dir;
    size_t n;
    const char **names;
    const Onnx__TensorProto **tensors;
};

/* fopen(path, "rb") for a regular file only: opened without blocking, so a
 * FIFO (which would wait for a writer) or a device is refused at once. */
static FILE *open_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    FILE *f = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? fdopen(fd, "rb") : NULL;
    if (!f) close(fd);
    return f;
}

static char *read_file(const char *path, size_t *size) {
    FILE *f = open_regular(path);
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                *size = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

static bool add(vx_weights *w, const char *name, const Onnx__TensorProto *t, size_t *cap) {
    if (!name || !t) return true;
    if (w->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        const char **nn = realloc(w->names, c * sizeof *nn);
        if (!nn) return false;
        w->names = nn;
        const Onnx__TensorProto **nt = realloc(w->tensors, c * sizeof *nt);
        if (!nt) return false;
        w->tensors = nt;
        *cap = c;
    }
    w->names[w->n] = name;
    w->tensors[w->n++] = t;
    return true;
}

vx_status vx_weights_open(const char *path, vx_weights **out, char *msg, size_t msg_size) {
    *out = NULL;
    if (!path) return VX_OK;
    size_t size = 0;
    char *buf = read_file(path, &size);
    if (!buf) return VX_OK; /* "<memory>" or unreadable: random weights */
    size_t i = 0;
    while (i < size && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
    if (i < size && buf[i] == '{') {
        free(buf);
        return VX_OK; /* a JSON graph holds no weights */
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, (const uint8_t *)buf);
    free(buf);
    if (!m) {
        snprintf(msg, msg_size, "%s: cannot parse the ONNX file for its weights", path);
        return VX_EIO;
    }
    vx_weights *w = calloc(1, sizeof *w);
    if (!w) {
        onnx__model_proto__free_unpacked(m, NULL);
        snprintf(msg, msg_size, "out of memory");
        return VX_EIO;
    }
    w->model = m;
    const char *slash = strrchr(path, '/');
    w->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    size_t cap = 0;
    bool ok = w->dir != NULL;
    Onnx__GraphProto *g = m->graph;
    if (g) {
        for (size_t k = 0; ok && k < g->n_initializer; k++) ok = add(w, g->initializer[k]->name, g->initializer[k], &cap);
        for (size_t k = 0; ok && k < g->n_node; k++) {
            Onnx__NodeProto *n = g->node[k];
            if (!n->op_type || strcmp(n->op_type, "Constant") || n->n_output < 1) continue;
            for (size_t a = 0; a < n->n_attribute; a++)
                if (n->attribute[a]->name && strcmp(n->attribute[a]->name, "value") == 0 && n->attribute[a]->t)
                    ok = add(w, n->output[0], n->attribute[a]->t, &cap);
        }
    }
    if (!ok) {
        vx_weights_free(w);
        snprintf(msg, msg_size, "out of memory");
        return VX_EIO;
    }
    *out = w;
    return VX_OK;
}

void vx_weights_free(vx_weights *w) {
    if (!w) return;
    if (w->model) onnx__model_proto__free_unpacked(w->model, NULL);
    free(w->dir);
    free(w->names);
    free(w->tensors);
    free(w);
}

static size_t elem_size(int32_t dt) {
    switch (dt) {
    case 1: case 6: case 12: return 4;          /* float, int32, uint32 */
    case 2: case 3: case 9: return 1;           /* uint8, int8, bool */
    case 4: case 5: case 10: case 16: return 2; /* (u)int16, float16, bfloat16 */
    case 7: case 11: case 13: return 8;         /* int64, double, uint64 */
    default: return 0;
    }
}

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        if (!m) bits = s;
        else {
            e = 127 - 15 + 1;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            bits = s | (e << 23) | ((m & 1023) << 13);
        }
    } else if (e == 31) {
        bits = s | 0x7f800000u | (m << 13);
    } else {
        bits = s | ((e + 127 - 15) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Element k of raw little-endian bytes of ONNX dtype dt, as double / int64. */
static void raw_get(const uint8_t *p, int32_t dt, double *f, int64_t *i) {
    switch (dt) {
    case 1: { float v; memcpy(&v, p, 4); *f = v; *i = (int64_t)v; break; }
    case 11: { double v; memcpy(&v, p, 8); *f = v; *i = (int64_t)v; break; }
    case 10: { uint16_t h; memcpy(&h, p, 2); *f = half_to_float(h); *i = (int64_t)*f; break; }
    case 16: { uint16_t h; memcpy(&h, p, 2); uint32_t b = (uint32_t)h << 16; float v; memcpy(&v, &b, 4); *f = v; *i = (int64_t)v; break; }
    case 2: case 9: *i = p[0]; *f = (double)*i; break;
    case 3: *i = (int8_t)p[0]; *f = (double)*i; break;
    case 4: { uint16_t v; memcpy(&v, p, 2); *i = v; *f = v; break; }
    case 5: { int16_t v; memcpy(&v, p, 2); *i = v; *f = v; break; }
    case 6: { int32_t v; memcpy(&v, p, 4); *i = v; *f = v; break; }
    case 12: { uint32_t v; memcpy(&v, p, 4); *i = v; *f = v; break; }
    case 7: { int64_t v; memcpy(&v, p, 8); *i = v; *f = (double)v; break; }
    case 13: { uint64_t v; memcpy(&v, p, 8); *i = (int64_t)v; *f = (double)v; break; }
    default: *i = 0; *f = 0;
    }
}

static void put(void *dst, vx_dtype dt, int64_t k, double f, int64_t i, bool is_float) {
    if (dt == VX_F32) ((float *)dst)[k] = (float)f;
    else if (dt == VX_I64) ((int64_t *)dst)[k] = is_float ? (int64_t)f : i;
    else ((uint8_t *)dst)[k] = (is_float ? f != 0 : i != 0);
}

static bool is_float_type(int32_t dt) {
    return dt == 1 || dt == 10 || dt == 11 || dt == 16;
}

/* Reads external data into a new buffer of `need` bytes. */
static uint8_t *read_external(const vx_weights *w, const Onnx__TensorProto *t, size_t need) {
    const char *loc = NULL;
    long long off = 0, len = -1;
    for (size_t k = 0; k < t->n_external_data; k++) {
        const Onnx__StringStringEntryProto *e = t->external_data[k];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) loc = e->value;
        else if (strcmp(e->key, "offset") == 0) off = atoll(e->value);
        else if (strcmp(e->key, "length") == 0) len = atoll(e->value);
    }
    if (!loc || strstr(loc, "..") || loc[0] == '/') return NULL;
    if (len >= 0 && (size_t)len < need) return NULL;
    size_t pl = strlen(w->dir) + strlen(loc) + 2;
    char *path = malloc(pl);
    if (!path) return NULL;
    snprintf(path, pl, "%s/%s", w->dir, loc);
    FILE *f = open_regular(path);
    free(path);
    if (!f) return NULL;
    uint8_t *buf = malloc(need ? need : 1);
    bool ok = buf && fseek(f, (long)off, SEEK_SET) == 0 && fread(buf, 1, need, f) == need;
    fclose(f);
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

bool vx_weights_get(vx_weights *w, const char *name, vx_dtype dt, int64_t numel, void *dst) {
    if (!w || !name) return false;
    const Onnx__TensorProto *t = NULL;
    for (size_t k = 0; k < w->n; k++)
        if (strcmp(w->names[k], name) == 0) {
            t = w->tensors[k];
            break;
        }
    if (!t) return false;
    int64_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++) n *= t->dims[d];
    if (n != numel) return false;
    int32_t tdt = t->data_type;
    bool fl = is_float_type(tdt);
    size_t es = elem_size(tdt);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (!es) return false;
        uint8_t *buf = read_external(w, t, (size_t)n * es);
        if (!buf) return false;
        for (int64_t k = 0; k < n; k++) {
            double f;
            int64_t i;
            raw_get(buf + (size_t)k * es, tdt, &f, &i);
            put(dst, dt, k, f, i, fl);
        }
        free(buf);
        return true;
    }
    if (t->has_raw_data) {
        if (!es || t->raw_data.len < (size_t)n * es) return false;
        for (int64_t k = 0; k < n; k++) {
            double f;
            int64_t i;
            raw_get(t->raw_data.data + (size_t)k * es, tdt, &f, &i);
            put(dst, dt, k, f, i, fl);
        }
        return true;
    }
    if (n == 0) return true;
    if (t->n_float_data == (size_t)n) {
        for (int64_t k = 0; k < n; k++) put(dst, dt, k, t->float_data[k], (int64_t)t->float_data[k], true);
        return true;
    }
    if (t->n_double_data == (size_t)n) {
        for (int64_t k = 0; k < n; k++) put(dst, dt, k, t->double_data[k], (int64_t)t->double_data[k], true);
        return true;
    }
    if (t->n_int64_data == (size_t)n) {
        for (int64_t k = 0; k < n; k++) put(dst, dt, k, (double)t->int64_data[k], t->int64_data[k], false);
        return true;
    }
    if (t->n_uint64_data == (size_t)n) {
        for (int64_t k = 0; k < n; k++) put(dst, dt, k, (double)t->uint64_data[k], (int64_t)t->uint64_data[k], false);
        return true;
    }
    if (t->n_int32_data == (size_t)n) {
        /* int32_data also carries (u)int8/16, bool, and float16 / bfloat16 bits */
        for (int64_t k = 0; k < n; k++) {
            int32_t v = t->int32_data[k];
            double f = v;
            if (tdt == 10) f = half_to_float((uint16_t)v);
            else if (tdt == 16) {
                uint32_t b = (uint32_t)(uint16_t)v << 16;
                float x;
                memcpy(&x, &b, 4);
                f = x;
            }
            put(dst, dt, k, f, v, fl);
        }
        return true;
    }
    return false;
}
