/*
 * _memest.c: the C extension behind the memest Python package. A Graph
 * holds one loaded est_graph, estimated again under each call's keyword
 * options and never parsed again; a report comes back as the text
 * est_report_to_json writes, which is what `memest --format json` prints.
 * Failures raise memest.Error with the library's code and message. The
 * options mean what the CLI's flags of the same names mean; memest/__init__.py
 * documents them and turns the text into Report objects.
 *
 * Arguments are untrusted: a wrong type raises TypeError, a value out of
 * range memest.Error (EINVAL), never OverflowError or a crash. While the
 * estimate runs without the GIL, the library reads only what the request
 * owns (tuples copied from the caller's sequences), so another thread that
 * changes the caller's lists cannot free a string under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <string.h>

#include "estimate.h"

static PyObject *error_class; /* memest.Error: _set_error_class */

/* Raises memest.Error(message, code name, code). */
static PyObject *raise_status(est_status code, const char *message) {
    PyObject *cls = error_class ? error_class : PyExc_RuntimeError;
    /* the library escapes what a model names, but a message cut at its
     * buffer's end may end inside a UTF-8 sequence */
    PyObject *text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    if (!text) return NULL;
    PyObject *e = PyObject_CallFunction(cls, "Osi", text, est_status_name(code), (int)code);
    Py_DECREF(text);
    if (e) {
        PyErr_SetObject(cls, e);
        Py_DECREF(e);
    }
    return NULL;
}

static PyObject *raise_error(const est_error *err) { return raise_status(err->code, err->message); }

/* A str of what the library wrote: names from a model and the JSON that
 * quotes them are its bytes, which need not be UTF-8; surrogateescape keeps
 * them, so that .encode("utf-8", "surrogateescape") gives the CLI's bytes. */
static PyObject *str_of(const char *s) {
    return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0, "surrogateescape");
}

/* ---- options -------------------------------------------------------------- */

#define MAX_KEEP 16

/* One call's options, and what they point into: the Python objects are kept
 * referenced until request_free, the arrays are PyMem's. */
typedef struct request {
    est_options opt;
    est_fit fit;
    int has_fit;
    const char *gpu;       /* --gpu's name; NULL for a bare memory size */
    est_host host;
    int has_host;
    int timeline;
    int64_t depth;
    const char *model;
    PyObject *keep[MAX_KEEP];
    size_t n_keep;
    void *mem[MAX_KEEP];
    size_t n_mem;
} request;

static void request_free(request *q) {
    for (size_t i = 0; i < q->n_keep; i++) Py_XDECREF(q->keep[i]);
    for (size_t i = 0; i < q->n_mem; i++) PyMem_Free(q->mem[i]);
    q->n_keep = q->n_mem = 0;
}

static void *request_alloc(request *q, size_t n, size_t size) {
    if (q->n_mem == MAX_KEEP) {
        PyErr_SetString(PyExc_SystemError, "_memest: too many arrays in one request");
        return NULL;
    }
    void *p = PyMem_Calloc(n ? n : 1, size);
    if (!p) {
        PyErr_NoMemory();
        return NULL;
    }
    q->mem[q->n_mem++] = p;
    return p;
}

/* q keeps o (a new reference, which it steals) until request_free; o on
 * success, NULL (o released) on error. */
static PyObject *request_keep(request *q, PyObject *o) {
    if (!o) return NULL;
    if (q->n_keep == MAX_KEEP) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_SystemError, "_memest: too many objects in one request");
        return NULL;
    }
    q->keep[q->n_keep++] = o;
    return o;
}

/* Raises memest.Error(EINVAL) with the message; returns 0. */
static int invalid(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    raise_status(EST_EINVAL, msg);
    return 0;
}

/* An integer option (an int, or what has __index__) into *out when it is
 * in [lo, hi]; None leaves *out. TypeError for another type, memest.Error
 * (EINVAL) out of range. 0 on error. */
static int int_opt(PyObject *o, const char *name, long long lo, long long hi, long long *out) {
    if (!o || o == Py_None) return 1;
    PyObject *i = PyNumber_Index(o);
    if (!i) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (v == -1 && PyErr_Occurred()) return 0;
    if (overflow) return invalid("%s wants an integer from %lld to %lld, got a %s one", name, lo, hi,
                                 overflow > 0 ? "larger" : "smaller");
    if (v < lo || v > hi) return invalid("%s wants an integer from %lld to %lld, got %lld", name, lo, hi, v);
    *out = v;
    return 1;
}

/* A str as UTF-8 that lives as long as the object; TypeError (naming what)
 * for another type. */
static const char *utf8_of(PyObject *o, const char *what) {
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s wants str, got %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8(o);
}

/* A sequence of str as a C array, kept alive by q (a tuple copy: the
 * caller's list may change while the GIL is released). 0 on error. */
static int str_list(request *q, PyObject *seq, const char *what, const char *const **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!seq || seq == Py_None) return 1;
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) { /* not a sequence of one-letter patterns */
        PyErr_Format(PyExc_TypeError, "%s, not a single str", what);
        return 0;
    }
    PyObject *t = request_keep(q, PySequence_Tuple(seq));
    if (!t) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, what);
        }
        return 0;
    }
    Py_ssize_t len = PyTuple_GET_SIZE(t);
    const char **a = request_alloc(q, (size_t)len, sizeof *a);
    if (!a) return 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (!(a[i] = utf8_of(PyTuple_GET_ITEM(t, i), what))) return 0;
    *out = a;
    *n = (size_t)len;
    return 1;
}

/* The (key, value) pairs of a mapping, as a list of 2-tuples kept by q. */
static PyObject *mapping_items(request *q, PyObject *map, const char *what) {
    if (!PyDict_Check(map) && (PyUnicode_Check(map) || PyList_Check(map) || PyTuple_Check(map) ||
                               !PyObject_HasAttrString(map, "items"))) {
        PyErr_Format(PyExc_TypeError, "%s wants a dict, got %.100s", what, Py_TYPE(map)->tp_name);
        return NULL;
    }
    PyObject *items = request_keep(q, PyMapping_Items(map));
    if (!items) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) {
            PyErr_Format(PyExc_TypeError, "%s: items() must give (key, value) pairs", what);
            return NULL;
        }
    }
    return items;
}

/* dims: a dict of name -> positive int. */
static int parse_dims(request *q, PyObject *dims) {
    if (!dims || dims == Py_None) return 1;
    PyObject *items = mapping_items(q, dims, "dims");
    if (!items) return 0;
    Py_ssize_t n = PyList_GET_SIZE(items);
    est_binding *b = request_alloc(q, (size_t)n, sizeof *b);
    if (!b) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        if (!(b[i].name = utf8_of(PyTuple_GET_ITEM(kv, 0), "dims: a dim's name"))) return 0;
        long long v = 0;
        char what[96];
        snprintf(what, sizeof what, "dims: %.64s", b[i].name);
        if (!int_opt(PyTuple_GET_ITEM(kv, 1), what, 1, LLONG_MAX, &v)) return 0;
        if (PyTuple_GET_ITEM(kv, 1) == Py_None) return invalid("%s wants a positive integer, got None", what);
        b[i].value = v;
    }
    q->opt.dims = b;
    q->opt.n_dims = (size_t)n;
    return 1;
}

/* input_shapes: a dict of input name -> sequence of dims, each a positive
 * int or a symbolic dim's name. */
static int parse_input_shapes(request *q, PyObject *shapes) {
    if (!shapes || shapes == Py_None) return 1;
    PyObject *items = mapping_items(q, shapes, "input_shapes");
    if (!items) return 0;
    Py_ssize_t n = PyList_GET_SIZE(items), total = 0;
    /* each shape as a tuple of its own, which the request owns: its items
     * stay alive, and its length cannot change between the two passes */
    PyObject *owned = request_keep(q, PyList_New(n));
    if (!owned) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *dims = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        if (PyUnicode_Check(dims)) {
            PyErr_SetString(PyExc_TypeError, "input_shapes: a shape is a sequence of sizes and dim names");
            return 0;
        }
        PyObject *t = PySequence_Tuple(dims);
        if (!t) return 0;
        PyList_SET_ITEM(owned, i, t);
        if (PyTuple_GET_SIZE(t) > (1 << 20)) /* the library bounds the rank; this bounds the int it is held in */
            return invalid("input_shapes: a shape of %zd dims", PyTuple_GET_SIZE(t));
        total += PyTuple_GET_SIZE(t);
    }
    est_input_shape *s = request_alloc(q, (size_t)n, sizeof *s);
    est_dim *d = request_alloc(q, (size_t)total, sizeof *d);
    if (!s || !d) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i), *dims = PyList_GET_ITEM(owned, i);
        if (!(s[i].name = utf8_of(PyTuple_GET_ITEM(kv, 0), "input_shapes: an input's name"))) return 0;
        s[i].rank = (int)PyTuple_GET_SIZE(dims);
        s[i].dims = d;
        for (int k = 0; k < s[i].rank; k++, d++) {
            PyObject *v = PyTuple_GET_ITEM(dims, k);
            if (PyUnicode_Check(v)) {
                if (!(d->symbol = PyUnicode_AsUTF8(v))) return 0;
            } else {
                char what[112];
                snprintf(what, sizeof what, "input_shapes: %.64s: dim %d", s[i].name, k);
                if (v == Py_None) return invalid("%s wants a size or a dim name, got None", what);
                long long value = 0;
                if (!int_opt(v, what, 1, LLONG_MAX, &value)) return 0;
                d->value = value;
            }
        }
    }
    q->opt.input_shapes = s;
    q->opt.n_input_shapes = (size_t)n;
    return 1;
}

/* checkpoint: None, an int (every N blocks) or a sequence of prefixes. */
static int parse_checkpoint(request *q, PyObject *ck) {
    if (!ck || ck == Py_None) return 1;
    if (PyLong_Check(ck)) {
        long long every = 0;
        if (!int_opt(ck, "checkpoint=N", 1, LLONG_MAX, &every)) return 0;
        q->opt.checkpoint.every = every;
        return 1;
    }
    return str_list(q, ck, "checkpoint wants an int or a list of module prefixes", &q->opt.checkpoint.prefixes,
                    &q->opt.checkpoint.n_prefixes);
}

static int parse_names(request *q, const char *mode, const char *optimizer, const char *dtype, const char *amp,
                       const char *strategy, const char *kernels) {
    int m = est_mode_from_name(mode), o = est_optimizer_from_name(optimizer);
    if (m < 0) return invalid("mode wants train or infer, got '%s'", mode);
    if (o < 0) return invalid("optimizer wants sgd, momentum, adam, adamw or adafactor, got '%s'", optimizer);
    q->opt.mode = (est_mode)m;
    q->opt.optimizer = (est_optimizer)o;
    if (dtype) {
        est_dtype dt = est_dtype_from_name(dtype);
        if (dt != EST_DT_FLOAT && dt != EST_DT_FLOAT16 && dt != EST_DT_BFLOAT16)
            return invalid("dtype wants float32, float16 or bfloat16, got '%s'", dtype);
        q->opt.dtype = dt;
    }
    if (amp && (!strcmp(amp, "bf16") || !strcmp(amp, "bfloat16"))) q->opt.amp = EST_AMP_BF16;
    else if (amp && (!strcmp(amp, "fp16") || !strcmp(amp, "float16"))) q->opt.amp = EST_AMP_FP16;
    else if (amp) return invalid("amp wants bf16 or fp16, got '%s'", amp);
    if (strategy) {
        int s = est_strategy_from_name(strategy);
        if (s < 0) return invalid("strategy wants ddp, zero1, fsdp, fsdp-grad-op or hsdp, got '%s'", strategy);
        q->opt.parallel.strategy = (est_strategy)s;
    }
    if (!strcmp(kernels, "verify")) q->opt.kernels = EST_KERNELS_VERIFY;
    else if (strcmp(kernels, "pytorch")) return invalid("kernels wants pytorch or verify, got '%s'", kernels);
    return 1;
}

/* gpu (a name of the device table) or gpu_memory (bytes), and reserve:
 * the fit, the device the rules follow, and the allocator's limit. */
static int parse_gpu(request *q, const char *gpu, long long gpu_memory, long long reserve) {
    if (gpu && gpu_memory) return invalid("give one of gpu and gpu_memory");
    if (gpu) {
        const est_device *d = est_device_find(gpu);
        if (!d) return invalid("unknown GPU '%s' (memest.gpus() lists them; or give gpu_memory)", gpu);
        q->gpu = d->name;
        q->fit.gpu_bytes = d->memory_bytes;
        q->opt.device = d; /* the hardware rules follow the GPU asked about */
    } else if (gpu_memory) {
        q->fit.gpu_bytes = (uint64_t)gpu_memory;
    } else {
        if (reserve >= 0) return invalid("reserve needs gpu or gpu_memory");
        return 1;
    }
    q->has_fit = 1;
    if (reserve >= 0) {
        q->fit.reserve_bytes = (uint64_t)reserve;
    } else {
        q->fit.reserve_bytes = est_default_reserve(q->fit.gpu_bytes, &q->opt.parallel);
    }
    uint64_t usable = est_fit_usable(&q->fit);
    q->opt.memory_limit = usable ? usable : 1; /* the replay runs out where PyTorch would */
    return 1;
}

static int parse_host(request *q, PyObject *host_us) {
    if (!host_us || host_us == Py_None) return 1;
    static const char what[] = "host_us wants five costs in microseconds (fwd, fwd_param, bwd, bwd_param, opt_param)";
    PyObject *t = PyUnicode_Check(host_us) ? NULL : PySequence_Tuple(host_us);
    if (!t || PyTuple_GET_SIZE(t) != 5) {
        Py_XDECREF(t);
        if (!t && !PyErr_ExceptionMatches(PyExc_TypeError) && PyErr_Occurred()) return 0;
        PyErr_Clear();
        return invalid("%s", what);
    }
    double us[5];
    for (int i = 0; i < 5; i++) {
        us[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(t, i));
        if (us[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(t);
            return 0;
        }
    }
    Py_DECREF(t);
    q->host = (est_host){us[0] * 1e-6, us[1] * 1e-6, us[2] * 1e-6, us[3] * 1e-6, us[4] * 1e-6};
    q->has_host = 1;
    return 1;
}

/* The CLI's checks that are not the library's (cli/main.c, parse_args). */
static int check_combinations(request *q, int dtype_given) {
    const est_options *o = &q->opt;
    if (o->amp != EST_AMP_NONE && dtype_given && o->dtype != EST_DT_FLOAT)
        return invalid("amp keeps float32 weights; it does not combine with dtype %s", est_dtype_name(o->dtype));
    if ((o->checkpoint.every || o->checkpoint.n_prefixes) && o->mode == EST_MODE_INFER)
        return invalid("checkpoint changes training only; drop it with mode='infer'");
    if ((o->params.n_trainable || o->params.n_frozen || o->grad_accum > 1) && o->mode == EST_MODE_INFER)
        return invalid("trainable, freeze and grad_accum change training only; drop them with mode='infer'");
    if (q->has_host && !q->gpu) return invalid("host_us times one estimate's step: it needs gpu=NAME");
    return 1;
}

typedef struct graph_object {
    PyObject_HEAD
    est_graph *g;
    PyObject *path; /* str: the path as given, the reports' "model" */
} graph_object;

/* Fills q from a call's keywords (args: the positional arguments, which
 * none of the options is); 0 (an exception set) on error. */
static int parse_request(graph_object *self, PyObject *args, PyObject *kw, request *q) {
    static char *kwlist[] = {"batch", "dims", "input_shapes", "mode", "optimizer", "dtype", "amp", "checkpoint",
                             "trainable", "freeze", "grad_accum", "world_size", "strategy", "shard_group",
                             "bucket_mb", "grad_as_bucket_view", "offload", "tp", "sequence_parallel", "kernels",
                             "gpu", "gpu_memory", "reserve", "host_us", "timeline", "depth", "model",
                             "ddp_first_bucket", "rank", NULL};
    long long rank = 0, batch = 0, grad_accum = 0, world = 0, shard = 0, bucket_mb = 0, tp = 0, depth = 0, gpu_memory = 0,
              reserve = -1;
    int bucket_view = 0, offload = 0, seq_par = 0, timeline = 0;
    const char *mode = "train", *optimizer = "adam", *dtype = NULL, *amp = NULL, *strategy = NULL,
               *kernels = "pytorch", *gpu = NULL, *model = NULL, *first_bucket = "auto";
    PyObject *dims = NULL, *shapes = NULL, *ck = NULL, *trainable = NULL, *freeze = NULL, *reserve_obj = NULL,
             *host_us = NULL, *batch_obj = NULL, *accum_obj = NULL, *world_obj = NULL, *shard_obj = NULL,
             *bucket_obj = NULL, *tp_obj = NULL, *depth_obj = NULL, *memory_obj = NULL, *rank_obj = NULL;
    memset(q, 0, sizeof *q);
    est_options_init(&q->opt);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOsszzOOOOOzOOppOpszOOOpOzsO", kwlist, &batch_obj, &dims, &shapes,
                                     &mode, &optimizer, &dtype, &amp, &ck, &trainable, &freeze, &accum_obj,
                                     &world_obj, &strategy, &shard_obj, &bucket_obj, &bucket_view, &offload, &tp_obj,
                                     &seq_par, &kernels, &gpu, &memory_obj, &reserve_obj, &host_us, &timeline,
                                     &depth_obj, &model, &first_bucket, &rank_obj))
        return 0;
    /* 0 is "not given" (the library's default), as None is; the library
     * bounds batch, world_size, shard_group and tp itself; the others are
     * the CLI's bounds */
    if (!int_opt(batch_obj, "batch", 0, LLONG_MAX, &batch) ||
        !int_opt(accum_obj, "grad_accum", 0, 1024, &grad_accum) ||
        !int_opt(world_obj, "world_size", 0, LLONG_MAX, &world) ||
        !int_opt(shard_obj, "shard_group", 0, LLONG_MAX, &shard) ||
        !int_opt(bucket_obj, "bucket_mb", 0, 1 << 20, &bucket_mb) || !int_opt(tp_obj, "tp", 0, LLONG_MAX, &tp) ||
        !int_opt(depth_obj, "depth", 0, 64, &depth) || !int_opt(memory_obj, "gpu_memory", 0, LLONG_MAX, &gpu_memory) ||
        !int_opt(reserve_obj, "reserve", 0, LLONG_MAX, &reserve) || !int_opt(rank_obj, "rank", 0, LLONG_MAX, &rank))
        return 0;
    q->opt.batch = batch;
    q->opt.grad_accum = grad_accum;
    q->opt.parallel = (est_parallel){.world_size = world, .shard_group = shard,
                                     .bucket_bytes = (uint64_t)bucket_mb << 20, .grad_as_bucket_view = bucket_view,
                                     .offload = offload, .tp = tp, .sequence_parallel = seq_par,
                                     .by_rank = rank_obj && rank_obj != Py_None, .rank = rank};
    if (strcmp(first_bucket, "held") == 0) q->opt.parallel.first_bucket = EST_FIRST_BUCKET_HELD;
    else if (strcmp(first_bucket, "released") == 0) q->opt.parallel.first_bucket = EST_FIRST_BUCKET_RELEASED;
    else if (strcmp(first_bucket, "auto") != 0)
        return invalid("ddp_first_bucket wants auto, held or released, got '%s'", first_bucket);
    q->timeline = timeline;
    q->depth = depth;
    q->model = model ? model : PyUnicode_AsUTF8(self->path);
    if (!q->model || !parse_names(q, mode, optimizer, dtype, amp, strategy, kernels) || !parse_dims(q, dims) ||
        !parse_input_shapes(q, shapes) || !parse_checkpoint(q, ck) ||
        !str_list(q, trainable, "trainable wants a list of patterns", &q->opt.params.trainable,
                  &q->opt.params.n_trainable) ||
        !str_list(q, freeze, "freeze wants a list of patterns", &q->opt.params.frozen, &q->opt.params.n_frozen) ||
        !parse_gpu(q, gpu, gpu_memory, reserve) || !parse_host(q, host_us) || !check_combinations(q, dtype != NULL))
        return 0;
    if (!dtype) q->opt.dtype = est_graph_dtype(self->g); /* the export's, as the CLI takes it */
    if (q->opt.amp != EST_AMP_NONE && q->opt.dtype != EST_DT_FLOAT)
        return invalid("amp keeps float32 weights, and the model's are %s: add dtype='float32'",
                        est_dtype_name(q->opt.dtype));
    est_error err;
    if (est_check_param_filter(self->g, &q->opt.params, &err) != EST_OK || est_check_parallel(&q->opt, &err) != EST_OK)
        return raise_error(&err) != NULL; /* 0: raised */
    return 1;
}

static est_json_options json_of(const request *q) {
    est_json_options j;
    est_json_options_init(&j);
    j.model = q->model;
    j.options = &q->opt;
    j.timeline = q->timeline;
    j.depth = q->depth;
    j.fit = q->has_fit ? &q->fit : NULL;
    j.gpu = q->gpu;
    return j;
}

static PyObject *text_or_raise(est_status st, char *text, const est_error *err) {
    PyObject *res = st == EST_OK ? str_of(text) : raise_error(err);
    est_free(text);
    return res;
}

/* ---- Graph ------------------------------------------------------------------ */

static void graph_dealloc(graph_object *self) {
    est_graph_free(self->g);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(estimate_doc, "estimate(**options) -> str: the JSON report (memest --format json).");

static PyObject *graph_estimate(graph_object *self, PyObject *args, PyObject *kw) {
    request q;
    if (!parse_request(self, args, kw, &q)) {
        request_free(&q);
        return NULL;
    }
    q.opt.timeline = 1; /* JSON always says what is live at the peak, as the CLI's */
    est_error err;
    est_report *r = NULL;
    est_time *time = NULL;
    char *text = NULL;
    est_status st;
    Py_BEGIN_ALLOW_THREADS
    st = est_estimate(self->g, &q.opt, &r, &err);
    if (st == EST_OK && q.gpu) st = est_time_estimate(r, q.opt.device, q.has_host ? &q.host : NULL, &time, &err);
    if (st == EST_OK) {
        est_json_options j = json_of(&q);
        j.time = time;
        st = est_report_to_json(r, &j, &text, &err);
    }
    est_time_free(time);
    est_report_free(r);
    Py_END_ALLOW_THREADS
    request_free(&q);
    return text_or_raise(st, text, &err);
}

PyDoc_STRVAR(max_batch_doc, "max_batch(cap=0, **options) -> str: memest --max-batch --format json.");

static PyObject *graph_max_batch(graph_object *self, PyObject *args, PyObject *kw) {
    long long cap = 0;
    PyObject *cap_obj = kw ? PyDict_GetItemString(kw, "cap") : NULL; /* borrowed */
    if (!int_opt(cap_obj, "cap", 0, LLONG_MAX, &cap)) return NULL;
    PyObject *rest = kw ? PyDict_Copy(kw) : PyDict_New(); /* the options without cap */
    if (!rest || (cap_obj && PyDict_DelItemString(rest, "cap") < 0)) {
        Py_XDECREF(rest);
        return NULL;
    }
    request q;
    int parsed = parse_request(self, args, rest, &q);
    Py_DECREF(rest); /* q keeps what it points into */
    if (!parsed) goto fail;
    if (!q.has_fit) {
        invalid("max_batch needs gpu=NAME or gpu_memory=SIZE");
        goto fail;
    }
    if (q.opt.batch) {
        invalid("max_batch finds the batch: drop batch");
        goto fail;
    }
    if (cap <= 0) {
        est_limits lim;
        est_limits_init(&lim);
        cap = lim.max_dim_value;
    }
    est_error err;
    est_max_batch_result mb;
    est_report *r = NULL;
    char *text = NULL;
    est_status st;
    Py_BEGIN_ALLOW_THREADS
    st = est_max_batch(self->g, &q.opt, &q.fit, cap, &mb, &err);
    if (st == EST_OK) { /* the whole report at the largest batch that fits (batch 1 when none does) */
        q.opt.batch = mb.batch ? mb.batch : 1;
        st = est_estimate(self->g, &q.opt, &r, &err);
    }
    if (st == EST_OK) {
        est_json_options j = json_of(&q);
        j.max_batch = &mb;
        j.max_batch_cap = cap;
        st = est_report_to_json(r, &j, &text, &err);
    }
    est_report_free(r);
    Py_END_ALLOW_THREADS
    request_free(&q);
    return text_or_raise(st, text, &err);
fail:
    request_free(&q);
    return NULL;
}

PyDoc_STRVAR(sweep_doc, "sweep(dim, values, **options) -> str: memest --sweep DIM=V1,... --format json.");

static PyObject *graph_sweep(graph_object *self, PyObject *args, PyObject *kw) {
    const char *dim;
    PyObject *values;
    if (!PyArg_ParseTuple(args, "sO", &dim, &values)) return NULL;
    request q;
    est_point *pts = NULL;
    int64_t *v = NULL;
    PyObject *none = PyTuple_New(0); /* dim and values are sweep's own */
    int parsed = none && parse_request(self, none, kw, &q);
    Py_XDECREF(none);
    if (!none) return NULL;
    if (!parsed) goto fail;
    if (strcmp(dim, "batch") == 0 && q.opt.batch) {
        invalid("sweep('batch', ...) sets the batch: drop batch");
        goto fail;
    }
    PyObject *fast = request_keep(&q, PySequence_Fast(values, "sweep's values want a sequence of ints"));
    if (!fast) goto fail;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(fast);
    if (n == 0) {
        invalid("sweep wants at least one value");
        goto fail;
    }
    if (!(v = request_alloc(&q, n, sizeof *v)) || !(pts = request_alloc(&q, n, sizeof *pts))) goto fail;
    for (size_t i = 0; i < n; i++) {
        long long value = 0;
        PyObject *item = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        if (item == Py_None) {
            invalid("sweep wants positive integers, got None");
            goto fail;
        }
        if (!int_opt(item, "sweep: a value", 1, LLONG_MAX, &value)) goto fail;
        v[i] = value;
    }
    est_error err;
    char *text = NULL;
    est_status st;
    size_t done = 0;
    Py_BEGIN_ALLOW_THREADS
    st = est_sweep(self->g, &q.opt, dim, v, n, pts, &done, &err);
    if (st == EST_OK) {
        est_json_options j = json_of(&q);
        st = est_sweep_to_json(&q.opt, dim, pts, n, &j, &text, &err);
    }
    Py_END_ALLOW_THREADS
    if (st != EST_OK && done < n) { /* say which value failed, as the CLI does */
        char msg[sizeof err.message];
        snprintf(msg, sizeof msg, "%s", err.message);
        snprintf(err.message, sizeof err.message, "%.64s=%lld: %.400s", dim, (long long)v[done], msg);
    }
    request_free(&q);
    return text_or_raise(st, text, &err);
fail:
    request_free(&q);
    return NULL;
}

static PyObject *graph_name(graph_object *self, void *c) { return str_of(est_graph_name(self->g)); }
static PyObject *graph_path(graph_object *self, void *c) {
    Py_INCREF(self->path);
    return self->path;
}
static PyObject *graph_node_count(graph_object *self, void *c) {
    return PyLong_FromSize_t(est_graph_node_count(self->g));
}
static PyObject *graph_opset(graph_object *self, void *c) { return PyLong_FromLongLong(est_graph_opset(self->g)); }
static PyObject *graph_dtype(graph_object *self, void *c) {
    return PyUnicode_FromString(est_dtype_name(est_graph_dtype(self->g)));
}

static PyObject *graph_inputs(graph_object *self, void *c) {
    size_t n = est_graph_input_count(self->g);
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *s = str_of(est_graph_input_name(self->g, i));
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}

static PyObject *graph_parameters(graph_object *self, void *c) {
    size_t n = est_graph_param_count(self->g);
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *name = str_of(est_graph_param_name(self->g, i));
        PyObject *torch = str_of(est_graph_param_torch_name(self->g, i));
        PyObject *pair = name && torch ? PyTuple_Pack(2, name, torch) : NULL;
        Py_XDECREF(name);
        Py_XDECREF(torch);
        if (!pair) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, pair);
    }
    return t;
}

static PyMethodDef graph_methods[] = {
    {"estimate", (PyCFunction)(void (*)(void))graph_estimate, METH_VARARGS | METH_KEYWORDS, estimate_doc},
    {"max_batch", (PyCFunction)(void (*)(void))graph_max_batch, METH_VARARGS | METH_KEYWORDS, max_batch_doc},
    {"sweep", (PyCFunction)(void (*)(void))graph_sweep, METH_VARARGS | METH_KEYWORDS, sweep_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"name", (getter)graph_name, NULL, "the file's name, as the library labels messages", NULL},
    {"path", (getter)graph_path, NULL, "the path as given to load()", NULL},
    {"node_count", (getter)graph_node_count, NULL, "nodes in the graph", NULL},
    {"opset", (getter)graph_opset, NULL, "the default domain's opset", NULL},
    {"dtype", (getter)graph_dtype, NULL, "the export's dtype (est_graph_dtype)", NULL},
    {"inputs", (getter)graph_inputs, NULL, "the graph inputs' names", NULL},
    {"parameters", (getter)graph_parameters, NULL, "(name, torch_name) of every parameter", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject graph_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "memest._memest.Graph",
    .tp_basicsize = sizeof(graph_object),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A loaded model graph (est_graph); made by load().",
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
};

/* ---- module ----------------------------------------------------------------- */

static PyObject *mod_load(PyObject *m, PyObject *args) {
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSDecoder, &path)) return NULL;
    PyObject *bytes = PyUnicode_EncodeFSDefault(path);
    if (!bytes) {
        Py_DECREF(path);
        return NULL;
    }
    est_graph *g = NULL;
    est_error err;
    est_status st;
    const char *p = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    st = est_load_file(p, &g, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != EST_OK) {
        Py_DECREF(path);
        return raise_error(&err);
    }
    graph_object *self = PyObject_New(graph_object, &graph_type);
    if (!self) {
        est_graph_free(g);
        Py_DECREF(path);
        return NULL;
    }
    self->g = g;
    self->path = path;
    return (PyObject *)self;
}

static PyObject *mod_set_error_class(PyObject *m, PyObject *cls) {
    Py_INCREF(cls);
    Py_XDECREF(error_class);
    error_class = cls;
    Py_RETURN_NONE;
}

static PyObject *mod_gpus(PyObject *m, PyObject *unused) {
    size_t n = est_device_count();
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < n; i++) {
        const est_device *dev = est_device_at(i);
        PyObject *bytes = PyLong_FromUnsignedLongLong(dev->memory_bytes);
        if (!bytes || PyDict_SetItemString(d, dev->name, bytes) < 0) Py_CLEAR(d);
        Py_XDECREF(bytes);
    }
    return d;
}

static PyObject *mod_default_reserve(PyObject *m, PyObject *args) {
    long long gpu_bytes = 0, world = 0, tp = 0, shard = 0;
    PyObject *bytes_obj, *world_obj = NULL, *tp_obj = NULL, *shard_obj = NULL;
    const char *strategy = NULL;
    if (!PyArg_ParseTuple(args, "O|OzOO", &bytes_obj, &world_obj, &strategy, &tp_obj, &shard_obj)) return NULL;
    if (bytes_obj == Py_None) return invalid("default_reserve wants the GPU's memory in bytes"), NULL;
    if (!int_opt(bytes_obj, "gpu_bytes", 0, LLONG_MAX, &gpu_bytes) ||
        !int_opt(world_obj, "world_size", 0, 1 << 20, &world) || !int_opt(tp_obj, "tp", 0, 1 << 20, &tp) ||
        !int_opt(shard_obj, "shard_group", 0, 1 << 20, &shard))
        return NULL;
    est_parallel p = {.world_size = world, .tp = tp, .shard_group = shard};
    if (strategy) {
        int s = est_strategy_from_name(strategy);
        if (s < 0)
            return invalid("strategy wants ddp, zero1, fsdp, fsdp-grad-op or hsdp, got '%s'", strategy), NULL;
        p.strategy = (est_strategy)s;
    }
    return PyLong_FromUnsignedLongLong(est_default_reserve((uint64_t)gpu_bytes, &p));
}

static PyMethodDef mod_methods[] = {
    {"load", mod_load, METH_VARARGS, "load(path) -> Graph: an ONNX or JSON graph file, loaded once."},
    {"_set_error_class", mod_set_error_class, METH_O, "The class failures raise (memest.Error)."},
    {"gpus", mod_gpus, METH_NOARGS, "gpus() -> dict: the GPUs gpu= takes, with their memory in bytes."},
    {"default_reserve", mod_default_reserve, METH_VARARGS,
     "default_reserve(gpu_bytes, world_size=0, strategy=None, tp=0, shard_group=0) -> int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_memest", "libestimate, the estimator behind memest (use the memest package).", -1,
    mod_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__memest(void); /* the one exported symbol */

PyMODINIT_FUNC PyInit__memest(void) {
    if (PyType_Ready(&graph_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    PyObject *codes = PyDict_New();
    for (int c = 0; codes && c < EST_STATUS_COUNT; c++) {
        PyObject *v = PyLong_FromLong(c);
        if (!v || PyDict_SetItemString(codes, est_status_name((est_status)c), v) < 0) Py_CLEAR(codes);
        Py_XDECREF(v);
    }
    if (!codes || PyModule_AddObject(m, "STATUS", codes) < 0) { /* steals codes only on success */
        Py_XDECREF(codes);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&graph_type);
    if (PyModule_AddObject(m, "Graph", (PyObject *)&graph_type) < 0) {
        Py_DECREF(&graph_type);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "LIBRARY_VERSION", est_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
