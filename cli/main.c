/* main.c: the memest command line. Exit codes: 0 ok, 1 the model or the run
 * failed, 2 usage. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "estimate.h"
#include "gpus.h"
#include "heap.h"
#include "help.h"
#include "ops_cmd.h"
#include "output.h"
#include "term.h"
#include "verify_cmd.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };
#define MAX_DIM_FLAGS 64
#define MAX_SHAPE_DIMS 12   /* est_limits.max_rank at most */


__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    char msg[1024]; /* it quotes the arguments: escaped like names */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "memest: %s\n%s(memest --help explains every option)\n", term(msg), usage_text);
    return EXIT_USAGE;
}

static int out_of_memory(void) {
    fprintf(stderr, "memest: out of memory\n");
    return EXIT_FAIL;
}

/* A whole decimal integer: no white space, no trailing characters. */
static bool parse_int64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    const char *digits = s[0] == '-' || s[0] == '+' ? s + 1 : s;
    if (!isdigit((unsigned char)digits[0])) return false; /* strtoll would skip white space */
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

#define MAX_CHECKPOINT_PREFIXES 64
#define MAX_PARAM_PATTERNS 64

typedef struct cli {
    const char *command;   /* NULL, "convert", "verify" or "ops" */
    double tolerance;      /* verify: percent */
    bool dtype_given;
    bool tolerance_given;
    const char *first_option; /* the first option given, for "ops takes no options" */
    bool kernels_given;
    const char *model;
    const char *out_path;
    output_format format;
    bool all_layers;
    bool timeline;                     /* --timeline */
    int64_t top;                       /* --top N */
    int64_t depth;                     /* --depth N */
    const char *plot_path;             /* --plot FILE.svg|.html */
    est_options opt;
    est_limits limits;     /* docs/robustness.md */
    est_binding dims[MAX_DIM_FLAGS];
    char *dim_names[MAX_DIM_FLAGS];
    est_input_shape input_shapes[MAX_DIM_FLAGS];   /* --input-shape */
    est_dim input_dims[MAX_DIM_FLAGS][MAX_SHAPE_DIMS];
    char *input_shape_args[MAX_DIM_FLAGS];         /* split in place into the names */
    const char *inputs[MAX_DIM_FLAGS]; /* verify --input */
    size_t n_inputs;
    const char *dump_dir;              /* verify --dump-outputs */
    fit_info fit;                      /* --gpu, --gpu-memory, --reserve */
    bool fit_given, reserve_given;
    est_host host;                     /* --host-us, else est_host_init's */
    bool host_given;
    bool max_batch;                    /* --max-batch */
    sweep_spec sweep;                  /* --sweep NAME=V1,V2,... */
    char *sweep_name;
    char *checkpoint_arg;              /* --checkpoint, split in place at commas */
    const char *checkpoint_prefixes[MAX_CHECKPOINT_PREFIXES];
    char *pattern_args[2 * MAX_PARAM_PATTERNS]; /* --trainable/--freeze values, split in place */
    size_t n_pattern_args;
    const char *trainable[MAX_PARAM_PATTERNS];  /* --trainable */
    const char *frozen[MAX_PARAM_PATTERNS];     /* --freeze */
} cli;

static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
    const char *eq = strchr(argv[*i], '=');
    if (strncmp(argv[*i], "--", 2) == 0 && eq) return eq + 1;
    if (*i + 1 >= argc) return NULL;
    (void)flag;
    return argv[++*i];
}

static bool is_flag(const char *arg, const char *s, const char *l) {
    size_t n = strlen(l);
    return strcmp(arg, s) == 0 || strcmp(arg, l) == 0 || (strncmp(arg, l, n) == 0 && arg[n] == '=');
}

/* Splits `list` (modified in place) at commas into out[*n...]; returns -1 to
 * go on, or the usage error's exit code. */
static int split_list(char *list, const char **out, size_t *n, size_t max, const char *flag, const char *what) {
    for (char *p = list;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p) return usage_error("%s: empty %s in the list", flag, what);
        if (*n == max) return usage_error("%s: at most %zu %s values", flag, max, what);
        out[(*n)++] = p;
        if (!comma) return -1;
        p = comma + 1;
    }
}

/* --checkpoint every=N or PREFIX[,PREFIX...]. Returns -1 to go on, or an
 * exit code. */
static int parse_checkpoint(cli *c, const char *v) {
    if (c->checkpoint_arg) return usage_error("one --checkpoint at a time (list prefixes with commas)");
    if (strncmp(v, "every=", 6) == 0) {
        int64_t n;
        if (!parse_int64(v + 6, &n) || n <= 0)
            return usage_error("--checkpoint every=N wants a positive N, got '%s'", v);
        c->opt.checkpoint.every = n;
        return -1;
    }
    if (!(c->checkpoint_arg = strdup(v))) return out_of_memory();
    size_t n = 0;
    int st = split_list(c->checkpoint_arg, c->checkpoint_prefixes, &n, MAX_CHECKPOINT_PREFIXES, "--checkpoint",
                        "prefix");
    c->opt.checkpoint.prefixes = c->checkpoint_prefixes;
    c->opt.checkpoint.n_prefixes = n;
    return st;
}

/* A count of GPUs for `flag` (--world-size, --shard-group, --tp) into
 * *dst: -1 to go on, or the usage error's exit code. */
static int parse_gpus(int argc, char **argv, int *i, const char *a, const char *flag, int64_t *dst) {
    const char *v = flag_value(argc, argv, i, a);
    if (!v) return usage_error("%s needs a value", a);
    if (!parse_int64(v, dst) || *dst <= 0 || *dst > (1 << 20))
        return usage_error("%s wants a number of GPUs from 1 to 1048576, got '%s'", flag, v);
    return -1;
}

/* --trainable or --freeze PATTERN[,PATTERN...]; repeatable. Returns -1 to go
 * on, or an exit code. */
static int parse_patterns(cli *c, const char *v, bool freeze) {
    if (c->n_pattern_args == sizeof c->pattern_args / sizeof *c->pattern_args)
        return usage_error("too many --trainable and --freeze flags");
    char *copy = strdup(v);
    if (!copy) return out_of_memory();
    c->pattern_args[c->n_pattern_args++] = copy;
    est_param_filter *f = &c->opt.params;
    f->trainable = c->trainable;
    f->frozen = c->frozen;
    return freeze ? split_list(copy, c->frozen, &f->n_frozen, MAX_PARAM_PATTERNS, "--freeze", "pattern")
                  : split_list(copy, c->trainable, &f->n_trainable, MAX_PARAM_PATTERNS, "--trainable", "pattern");
}

/* A symbolic dim name: letters, digits and '_', not starting with a digit. */
static bool is_dim_name(const char *s) {
    if (!*s || isdigit((unsigned char)*s)) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

static bool is_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

/* One dim of --input-shape: a positive size or a symbolic dim name. */
static int parse_shape_dim(const char *arg, int d, char *tok, est_dim *out) {
    int64_t v;
    if (!*tok) return usage_error("--input-shape %s: dim %d is empty", arg, d);
    if (is_digits(tok)) {
        if (!parse_int64(tok, &v) || v <= 0)
            return usage_error("--input-shape %s: dim %d is %s; sizes must be positive integers", arg, d, tok);
        *out = (est_dim){.value = v};
    } else if (is_dim_name(tok)) {
        *out = (est_dim){.symbol = tok};
    } else {
        return usage_error("--input-shape %s: dim %d '%s' is neither a positive integer nor a name (letters, "
                           "digits and _, not starting with a digit)", arg, d, tok);
    }
    return -1;
}

/* --input-shape NAME=DIMS: DIMS separated by commas when it has any, else
 * by 'x' (so a name with an x in it can still be written). Returns -1 to go
 * on, or an exit code. */
static int parse_input_shape(cli *c, const char *v) {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return usage_error("--input-shape wants NAME=DIMS such as input=1x3x224x224, got '%s'", v);
    size_t n = c->opt.n_input_shapes;
    if (n == MAX_DIM_FLAGS) return usage_error("too many --input-shape flags");
    char *name = c->input_shape_args[n] = strdup(v);
    if (!name) return out_of_memory();
    char *dims = name + (eq - v);
    *dims++ = '\0';
    for (size_t i = 0; i < n; i++)
        if (strcmp(c->input_shapes[i].name, name) == 0)
            return usage_error("--input-shape: input '%s' is given twice", name);
    char sep = strchr(dims, ',') ? ',' : 'x';
    int rank = 0;
    for (char *p = dims;;) {
        char *end = strchr(p, sep);
        if (end) *end = '\0';
        if (rank == MAX_SHAPE_DIMS) return usage_error("--input-shape %s: more than %d dims", v, MAX_SHAPE_DIMS);
        int st = parse_shape_dim(v, rank, p, &c->input_dims[n][rank]);
        if (st >= 0) return st;
        rank++;
        if (!end) break;
        p = end + 1;
    }
    c->input_shapes[n] = (est_input_shape){name, rank, c->input_dims[n]};
    c->opt.n_input_shapes = n + 1;
    return -1;
}

/* Returns -1 to go on, or an exit code. */
static int parse_args(cli *c, int argc, char **argv) {
    est_options_init(&c->opt);
    est_limits_init(&c->limits);
    c->opt.dims = c->dims;
    c->opt.input_shapes = c->input_shapes;
    c->tolerance = 5.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (a[0] == '-' && a[1] && strcmp(a, "-h") && strcmp(a, "--help") && strcmp(a, "-V") && strcmp(a, "--version"))
            c->first_option = c->first_option ? c->first_option : a;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_help(stdout);
            return EXIT_OK;
        } else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("memest %s\n", est_version());
            return EXIT_OK;
        } else if (is_flag(a, "--max-nodes", "--max-nodes") || is_flag(a, "--max-file-size", "--max-file-size")) {
            bool nodes = strncmp(a, "--max-nodes", 11) == 0;
            int64_t n;
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &n) || n <= 0)
                return usage_error("%s wants a positive integer, got '%s'", nodes ? "--max-nodes" : "--max-file-size", v);
            if (nodes) c->limits.max_nodes = (uint64_t)n;
            else c->limits.max_file_bytes = (uint64_t)n;
        } else if (is_flag(a, "-b", "--batch")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &c->opt.batch) || c->opt.batch <= 0)
                return usage_error("--batch wants a positive integer, got '%s'", v);
        } else if (is_flag(a, "-d", "--dim")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs NAME=VALUE", a);
            const char *eq = strchr(v, '=');
            int64_t val;
            if (!eq || eq == v || !parse_int64(eq + 1, &val) || val <= 0)
                return usage_error("--dim wants NAME=VALUE with a positive VALUE, got '%s'", v);
            if (c->opt.n_dims == MAX_DIM_FLAGS) return usage_error("too many --dim flags");
            for (size_t k = 0; k < c->opt.n_dims; k++)
                if (strlen(c->dims[k].name) == (size_t)(eq - v) && strncmp(c->dims[k].name, v, (size_t)(eq - v)) == 0)
                    return usage_error("--dim %s given twice (%lld and %lld)", c->dims[k].name,
                                       (long long)c->dims[k].value, (long long)val);
            char *name = strndup(v, (size_t)(eq - v));
            if (!name) return out_of_memory();
            c->dim_names[c->opt.n_dims] = name;
            c->dims[c->opt.n_dims++] = (est_binding){name, val};
        } else if (is_flag(a, "--input-shape", "--input-shape")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs NAME=DIMS", a);
            int st = parse_input_shape(c, v);
            if (st >= 0) return st;
        } else if (is_flag(a, "-m", "--mode")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            int m = est_mode_from_name(v);
            if (m < 0) return usage_error("--mode wants train or infer, got '%s'", v);
            c->opt.mode = (est_mode)m;
        } else if (is_flag(a, "--optimizer", "--optimizer")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            int o = est_optimizer_from_name(v);
            if (o < 0) return usage_error("--optimizer wants sgd, momentum, adam, adamw or adafactor, got '%s'", v);
            c->opt.optimizer = (est_optimizer)o;
        } else if (is_flag(a, "--dtype", "--dtype")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            est_dtype dt = est_dtype_from_name(v);
            if (dt != EST_DT_FLOAT && dt != EST_DT_FLOAT16 && dt != EST_DT_BFLOAT16)
                return usage_error("--dtype wants float32, float16 or bfloat16, got '%s'", v);
            c->opt.dtype = dt;
            c->dtype_given = true;
        } else if (is_flag(a, "--amp", "--amp")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (strcmp(v, "bf16") == 0 || strcmp(v, "bfloat16") == 0) c->opt.amp = EST_AMP_BF16;
            else if (strcmp(v, "fp16") == 0 || strcmp(v, "float16") == 0) c->opt.amp = EST_AMP_FP16;
            else if (strcmp(v, "none") == 0 || strcmp(v, "off") == 0) c->opt.amp = EST_AMP_NONE;
            else return usage_error("--amp wants bf16 or fp16, got '%s'", v);
        } else if (is_flag(a, "--checkpoint", "--checkpoint")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs every=N or PREFIX[,PREFIX...]", a);
            int st = parse_checkpoint(c, v);
            if (st >= 0) return st;
        } else if (is_flag(a, "--trainable", "--trainable") || is_flag(a, "--freeze", "--freeze")) {
            bool freeze = strncmp(a, "--freeze", 8) == 0;
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs PATTERN[,PATTERN...]", a);
            int st = parse_patterns(c, v, freeze);
            if (st >= 0) return st;
        } else if (is_flag(a, "--grad-accum", "--grad-accum")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &c->opt.grad_accum) || c->opt.grad_accum <= 0 || c->opt.grad_accum > 1024)
                return usage_error("--grad-accum wants a number of micro-batches from 1 to 1024, got '%s'", v);
        } else if (is_flag(a, "--world-size", "--world-size")) {
            int st = parse_gpus(argc, argv, &i, a, "--world-size", &c->opt.parallel.world_size);
            if (st >= 0) return st;
        } else if (is_flag(a, "--shard-group", "--shard-group")) {
            int st = parse_gpus(argc, argv, &i, a, "--shard-group", &c->opt.parallel.shard_group);
            if (st >= 0) return st;
        } else if (is_flag(a, "--tp", "--tp")) {
            int st = parse_gpus(argc, argv, &i, a, "--tp", &c->opt.parallel.tp);
            if (st >= 0) return st;
        } else if (strcmp(a, "--sequence-parallel") == 0) {
            c->opt.parallel.sequence_parallel = 1;
        } else if (is_flag(a, "--strategy", "--strategy")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            int st = est_strategy_from_name(v);
            if (st <= 0) return usage_error("--strategy wants ddp, zero1, fsdp, fsdp-grad-op or hsdp, got '%s'", v);
            c->opt.parallel.strategy = (est_strategy)st;
        } else if (is_flag(a, "--bucket-mb", "--bucket-mb")) {
            int64_t mb;
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &mb) || mb <= 0 || mb > (1 << 20))
                return usage_error("--bucket-mb wants a positive number of MiB, got '%s'", v);
            c->opt.parallel.bucket_bytes = (uint64_t)mb << 20;
        } else if (strcmp(a, "--grad-as-bucket-view") == 0) {
            c->opt.parallel.grad_as_bucket_view = 1;
        } else if (is_flag(a, "--rank", "--rank")) {
            int64_t rank;
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &rank) || rank < 0) return usage_error("--rank wants a GPU's rank, 0 or more, got '%s'", v);
            c->opt.parallel.by_rank = 1;
            c->opt.parallel.rank = rank;
        } else if (is_flag(a, "--ddp-first-bucket", "--ddp-first-bucket")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (strcmp(v, "auto") == 0) c->opt.parallel.first_bucket = EST_FIRST_BUCKET_AUTO;
            else if (strcmp(v, "held") == 0) c->opt.parallel.first_bucket = EST_FIRST_BUCKET_HELD;
            else if (strcmp(v, "released") == 0) c->opt.parallel.first_bucket = EST_FIRST_BUCKET_RELEASED;
            else return usage_error("--ddp-first-bucket wants auto, held or released, got '%s'", v);
        } else if (strcmp(a, "--offload") == 0) {
            c->opt.parallel.offload = 1;
        } else if (is_flag(a, "--kernels", "--kernels")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (strcmp(v, "pytorch") == 0) c->opt.kernels = EST_KERNELS_PYTORCH;
            else if (strcmp(v, "verify") == 0) c->opt.kernels = EST_KERNELS_VERIFY;
            else return usage_error("--kernels wants pytorch or verify, got '%s'", v);
            c->kernels_given = true;
        } else if (is_flag(a, "--tolerance", "--tolerance")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            char *end;
            errno = 0;
            double t = strtod(v, &end);
            if (errno || *end || !(t >= 0)) return usage_error("--tolerance wants a percentage >= 0, got '%s'", v);
            c->tolerance = t;
            c->tolerance_given = true;
        } else if (is_flag(a, "--input", "--input")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a file name", a);
            if (c->n_inputs == MAX_DIM_FLAGS) return usage_error("too many --input flags");
            c->inputs[c->n_inputs++] = v;
        } else if (is_flag(a, "--dump-outputs", "--dump-outputs")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a folder", a);
            c->dump_dir = v;
        } else if (is_flag(a, "--gpu", "--gpu")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a GPU name", a);
            const est_device *gi = est_device_find(v);
            if (!gi) {
                char names[1024];
                return usage_error("unknown GPU '%s'; --gpu knows: %s (or give --gpu-memory SIZE)", v,
                                   gpu_names(names, sizeof names));
            }
            if (c->fit_given) return usage_error("give one of --gpu and --gpu-memory, once");
            c->fit.gpu = gi->name;
            c->fit.gpu_bytes = gi->memory_bytes;
            c->fit_given = true;
            c->opt.device = gi; /* the hardware rules (cuDNN's split-K) follow the GPU asked about */
        } else if (is_flag(a, "--gpu-memory", "--gpu-memory") || is_flag(a, "--reserve", "--reserve")) {
            bool mem = strncmp(a, "--gpu-memory", 12) == 0;
            const char *flag = mem ? "--gpu-memory" : "--reserve";
            uint64_t bytes;
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a size", a);
            if (!parse_size(v, &bytes) || (mem && bytes == 0))
                return usage_error("%s wants a size such as 24GiB, 80GB, 16000MiB or a number of bytes "
                                   "(GiB, MiB, KiB binary; GB, MB, KB decimal), got '%s'", flag, v);
            if (mem) {
                if (c->fit_given) return usage_error("give one of --gpu and --gpu-memory, once");
                c->fit.gpu = NULL;
                c->fit.gpu_bytes = bytes;
                c->fit_given = true;
            } else {
                c->fit.reserve_bytes = bytes;
                c->reserve_given = true;
            }
        } else if (strcmp(a, "--max-batch") == 0) {
            c->max_batch = true;
        } else if (is_flag(a, "--sweep", "--sweep")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs NAME=V1,V2,...", a);
            if (c->sweep_name) return usage_error("one --sweep at a time");
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return usage_error("--sweep wants NAME=V1,V2,... (NAME: batch or a symbolic dim), got '%s'", v);
            if (!(c->sweep_name = strndup(v, (size_t)(eq - v)))) return out_of_memory();
            c->sweep.name = c->sweep_name;
            for (const char *p = eq + 1;;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                char num[32];
                int64_t val;
                if (len == 0 || len >= sizeof num) return usage_error("--sweep: bad value list '%s'", eq + 1);
                memcpy(num, p, len);
                num[len] = '\0';
                if (!parse_int64(num, &val) || val <= 0)
                    return usage_error("--sweep wants positive integers, got '%s'", num);
                if (c->sweep.n == MAX_SWEEP_POINTS) return usage_error("--sweep: at most %d values", MAX_SWEEP_POINTS);
                c->sweep.values[c->sweep.n++] = val;
                if (!comma) break;
                p = comma + 1;
            }
        } else if (is_flag(a, "-f", "--format")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (strcmp(v, "table") == 0) c->format = FORMAT_TABLE;
            else if (strcmp(v, "json") == 0) c->format = FORMAT_JSON;
            else if (strcmp(v, "csv") == 0) c->format = FORMAT_CSV;
            else return usage_error("--format wants table, json or csv, got '%s'", v);
        } else if (is_flag(a, "-o", "--output")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a file name", a);
            c->out_path = v;
        } else if (is_flag(a, "--depth", "--depth")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &c->depth) || c->depth <= 0 || c->depth > 64)
                return usage_error("--depth wants a module depth from 1 to 64, got '%s'", v);
        } else if (is_flag(a, "--plot", "--plot")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a file name", a);
            size_t len = strlen(v);
            if (len < 5 || (strcmp(v + len - 4, ".svg") != 0 && strcmp(v + len - 5, ".html") != 0))
                return usage_error("--plot wants a file name ending in .svg or .html, got '%s'", v);
            c->plot_path = v;
        } else if (is_flag(a, "--host-us", "--host-us")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs five costs", a);
            if (!parse_host_us(v, &c->host))
                return usage_error("--host-us wants five costs in microseconds, FWD,FWD_PARAM,BWD,BWD_PARAM,OPT_PARAM, "
                                   "got '%s'", v);
            c->host_given = true;
        } else if (strcmp(a, "--timeline") == 0) {
            c->timeline = true;
        } else if (is_flag(a, "--top", "--top")) {
            if (!(v = flag_value(argc, argv, &i, a))) return usage_error("%s needs a value", a);
            if (!parse_int64(v, &c->top) || c->top <= 0 || c->top > 1000000)
                return usage_error("--top wants a positive count of tensors, got '%s'", v);
        } else if (strcmp(a, "-a") == 0 || strcmp(a, "--all") == 0) {
            c->all_layers = true;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (!c->command && !c->model && (strcmp(a, "convert") == 0 || strcmp(a, "ops") == 0 ||
                                                       strcmp(a, "verify") == 0)) {
            c->command = a;
        } else if (!c->model) {
            c->model = a;
        } else {
            return usage_error("unexpected argument '%s'", a);
        }
    }
    if (c->command && strcmp(c->command, "ops") == 0) {
        if (c->model) return usage_error("'ops' takes no model");
        if (c->first_option) return usage_error("'ops' takes no options, got '%s'", c->first_option);
        return -1;
    }
    if (!c->model) return usage_error("no model given");
    if (c->tolerance_given && !(c->command && strcmp(c->command, "verify") == 0))
        return usage_error("--tolerance is verify's: memest verify MODEL --tolerance PCT");
    /* dims above the largest memest takes are usage errors, as a malformed
     * number is, not failures of the model */
    int64_t largest = (int64_t)c->limits.max_dim_value;
    const char *flag = NULL, *name = NULL;
    int64_t value = 0;
    if (c->opt.batch > largest) flag = "--batch", value = c->opt.batch;
    for (size_t k = 0; !flag && k < c->opt.n_dims; k++)
        if (c->dims[k].value > largest) flag = "--dim", name = c->dims[k].name, value = c->dims[k].value;
    for (size_t k = 0; !flag && k < c->sweep.n; k++)
        if (c->sweep.values[k] > largest) flag = "--sweep", name = c->sweep.name, value = c->sweep.values[k];
    if (flag)
        return usage_error("%s %s%s%lld: above the largest dim memest takes, %lld (est_limits.max_dim_value)", flag,
                           name ? name : "", name ? "=" : "", (long long)value, (long long)largest);
    if (c->opt.amp != EST_AMP_NONE && c->dtype_given && c->opt.dtype != EST_DT_FLOAT)
        return usage_error("--amp keeps float32 weights; it does not combine with --dtype %s",
                           est_dtype_name(c->opt.dtype));
    bool checkpoint = c->opt.checkpoint.every || c->opt.checkpoint.n_prefixes;
    if (checkpoint && c->opt.mode == EST_MODE_INFER)
        return usage_error("--checkpoint changes training only; drop it with --mode infer");
    if (checkpoint && c->command)
        return usage_error("--checkpoint is for estimating, not %s", c->command);
    bool fine_tuning = c->opt.params.n_trainable || c->opt.params.n_frozen || c->opt.grad_accum > 1;
    if (fine_tuning && c->opt.mode == EST_MODE_INFER)
        return usage_error("--trainable, --freeze and --grad-accum change training only; drop them with --mode infer");
    bool verify = c->command && strcmp(c->command, "verify") == 0;
    if ((c->opt.grad_accum > 1 || c->opt.optimizer == EST_OPT_ADAFACTOR) && c->command)
        return usage_error("--grad-accum and --optimizer adafactor are for estimating, not %s", c->command);
    if (fine_tuning && c->command && !verify)
        return usage_error("--trainable and --freeze are for estimating and verify, not %s", c->command);
    if (c->opt.n_input_shapes && c->command)
        return usage_error("--input-shape is for estimating, not %s", c->command);
    if ((c->n_inputs || c->dump_dir) && !(c->command && strcmp(c->command, "verify") == 0))
        return usage_error("--input and --dump-outputs are verify's");
    if (c->command && strcmp(c->command, "verify") == 0 &&
        (c->opt.parallel.world_size > 1 || c->opt.parallel.strategy != EST_STRATEGY_NONE || c->opt.parallel.tp > 1))
        return usage_error("verify runs one GPU: --world-size, --strategy and --tp are for estimates");
    bool capacity = c->fit_given || c->reserve_given || c->max_batch || c->sweep_name;
    if (capacity && c->command)
        return usage_error("--gpu, --gpu-memory, --reserve, --max-batch and --sweep are for estimating, not %s",
                           c->command);
    if (c->reserve_given && !c->fit_given) return usage_error("--reserve needs --gpu or --gpu-memory");
    if (c->host_given && (!c->fit_given || !c->fit.gpu || c->max_batch || c->sweep_name))
        return usage_error("--host-us times one estimate's step: it needs --gpu NAME, not --gpu-memory, "
                           "--max-batch or --sweep");
    if (c->timeline && c->format != FORMAT_JSON) return usage_error("--timeline is JSON's: add --format json");
    if (c->top && c->format != FORMAT_TABLE)
        return usage_error("--top is the table's (JSON lists every tensor live at the peak under peak.live)");
    if ((c->timeline || c->top || c->depth || c->plot_path) && (c->max_batch || c->sweep_name || c->command))
        return usage_error("--timeline, --top, --depth and --plot are for one estimate, not --max-batch, --sweep or %s",
                           c->command ? c->command : "a search");
    /* JSON always says what is live at the peak; the table with --top */
    if (!c->max_batch && !c->sweep_name && !c->command && (c->format == FORMAT_JSON || c->top || c->plot_path))
        c->opt.timeline = 1;
    if (!c->reserve_given) c->fit.reserve_bytes = est_default_reserve(c->fit.gpu_bytes, &c->opt.parallel);
    /* the allocator's replay runs out where PyTorch would on this GPU */
    if (c->fit_given) c->opt.memory_limit = fit_usable(&c->fit) ? fit_usable(&c->fit) : 1;
    if (c->max_batch && !c->fit_given) return usage_error("--max-batch needs --gpu NAME or --gpu-memory SIZE");
    if (c->max_batch && c->sweep_name) return usage_error("give one of --max-batch and --sweep");
    if (c->max_batch && c->opt.batch) return usage_error("--max-batch finds the batch: drop --batch");
    if (c->sweep_name && strcmp(c->sweep_name, "batch") == 0 && c->opt.batch)
        return usage_error("--sweep batch=... sets the batch: drop --batch");
    if (c->command && strcmp(c->command, "convert") == 0 && !c->out_path)
        return usage_error("convert needs -o OUT.json");
    return -1;
}

static int convert(const cli *c, const est_graph *g) {
    est_error err;
    char *text = NULL;
    if (est_graph_to_json(g, &text, &err) != EST_OK) {
        fprintf(stderr, "memest: %s\n", err.message);
        return EXIT_FAIL;
    }
    out_file o;
    if (!out_open(&o, c->out_path)) {
        est_free(text);
        return EXIT_FAIL;
    }
    bool failed = fputs(text, o.f) == EOF;
    est_free(text);
    return out_close(&o, failed) ? EXIT_OK : EXIT_FAIL;
}

/* --max-batch and --sweep: many estimates of the loaded graph. */
static int capacity(cli *c, const est_graph *g) {
    out_file out;
    if (!out_open(&out, c->out_path)) return EXIT_FAIL;
    FILE *f = out.f;
    output_opts o = {.model = c->model, .all_layers = c->all_layers, .fit = c->fit_given ? &c->fit : NULL,
                     .opt = &c->opt};
    est_limits lim;
    est_limits_init(&lim);
    int64_t cap = c->limits.max_dim_value ? c->limits.max_dim_value : lim.max_dim_value;
    int rc = c->max_batch ? run_max_batch(f, g, &c->opt, cap, c->format, &o)
                          : run_sweep(f, g, &c->opt, &c->sweep, c->format, &o);
    /* rc 1: an estimate failed and said so; a write that failed is out_close's to say */
    bool written = out_close(&out, false);
    return rc || !written ? EXIT_FAIL : EXIT_OK;
}

/* With --gpu NAME: the step's time on it (docs/time-model.md). */
static bool time_step(const cli *c, const est_report *r, est_time **out) {
    *out = NULL;
    if (!c->fit_given || !c->fit.gpu) return true;
    est_error err;
    if (est_time_estimate(r, est_device_find(c->fit.gpu), c->host_given ? &c->host : NULL, out, &err) == EST_OK)
        return true;
    fprintf(stderr, "memest: %s\n", err.message);
    return false;
}

static int estimate(const cli *c, const est_graph *g) {
    est_error err;
    est_report *r = NULL;
    if (est_estimate(g, &c->opt, &r, &err) != EST_OK) {
        fprintf(stderr, "memest: %s\n", err.message);
        return EXIT_FAIL;
    }
    est_time *time = NULL;
    if (!time_step(c, r, &time)) {
        est_report_free(r);
        return EXIT_FAIL;
    }
    out_file out;
    if (!out_open(&out, c->out_path)) {
        est_time_free(time);
        est_report_free(r);
        return EXIT_FAIL;
    }
    output_opts o = {.model = c->model, .all_layers = c->all_layers, .fit = c->fit_given ? &c->fit : NULL,
                     .opt = &c->opt, .timeline = c->timeline, .top = (size_t)c->top, .depth = c->depth, .time = time};
    int bad = c->format == FORMAT_JSON  ? print_json(out.f, r, &o)
              : c->format == FORMAT_CSV ? print_csv(out.f, r, &o)
                                        : print_table(out.f, r, &o);
    bool ok = out_close(&out, bad == 1) && bad != 2; /* 2: the reason is printed */
    if (ok && c->plot_path) {
        out_file plot;
        size_t len = strlen(c->plot_path);
        ok = out_open(&plot, c->plot_path);
        if (ok) ok = out_close(&plot, write_plot(plot.f, r, &o, strcmp(c->plot_path + len - 5, ".html") == 0) != 0);
    }
    est_time_free(time);
    est_report_free(r);
    return ok ? EXIT_OK : EXIT_FAIL;
}

/* A PEFT export estimated as full fine-tuning is a different job from the
 * one its user means: say so. */
static void warn_if_adapters_train_with_base(const cli *c, const est_graph *g) {
    if (c->opt.mode != EST_MODE_TRAIN || c->opt.params.n_trainable || c->opt.params.n_frozen || c->command) return;
    size_t adapters = 0, n = est_graph_param_count(g);
    for (size_t i = 0; i < n; i++) adapters += est_name_matches("lora_", est_graph_param_torch_name(g, i)) != 0;
    if (adapters)
        fprintf(stderr,
                "memest: note: %zu of the %zu parameters are LoRA adapters ('lora_'); every parameter trains "
                "unless you say otherwise (--trainable lora_ trains the adapters only)\n",
                adapters, n);
}

/* The patterns of --trainable and --freeze name real parameters, and the
 * step's dtype is the export's unless --dtype converts it: -1 to go on, or
 * the usage error's exit code. */
static int check_model_options(cli *c, const est_graph *g) {
    est_error err;
    if (!c->dtype_given) c->opt.dtype = est_graph_dtype(g);
    if (c->opt.amp != EST_AMP_NONE && c->opt.dtype != EST_DT_FLOAT)
        return usage_error("--amp keeps float32 weights, and %s's are %s: add --dtype float32", c->model,
                           est_dtype_name(c->opt.dtype));
    if (est_check_param_filter(g, &c->opt.params, &err) != EST_OK || est_check_parallel(&c->opt, &err) != EST_OK) {
        fprintf(stderr, "memest: %s\n", err.message);
        return EXIT_USAGE;
    }
    warn_if_adapters_train_with_base(c, g);
    if (est_graph_opset(g) > EST_OPSET_MAX)
        fprintf(stderr,
                "memest: note: %s declares opset %lld of the default domain; memest's rules follow opsets up to %d, "
                "so an op that changed since is estimated as it was in opset %d\n",
                term(c->model), (long long)est_graph_opset(g), EST_OPSET_MAX, EST_OPSET_MAX);
    return -1;
}

int main(int argc, char **argv) {
    tune_heap();
    cli c = {0};
    int rc = parse_args(&c, argc, argv);
    if (rc < 0) {
        if (c.command && strcmp(c.command, "ops") == 0) {
            rc = list_ops();
        } else {
            est_error err;
            est_graph *g = NULL;
            if (est_load_file_limited(c.model, &c.limits, &g, &err) != EST_OK) {
                fprintf(stderr, "memest: %s\n", err.message);
                rc = EXIT_FAIL;
            } else {
                rc = check_model_options(&c, g);
                if (rc < 0 && c.command && strcmp(c.command, "verify") == 0) {
                    verify_request q = {.model = c.model, .out_path = c.out_path, .format = c.format,
                                        .opt = c.opt, .tolerance = c.tolerance, .inputs = c.inputs,
                                        .n_inputs = c.n_inputs, .dump_dir = c.dump_dir};
                    /* compare like with like: the executor's own workspaces */
                    if (!c.kernels_given) q.opt.kernels = EST_KERNELS_VERIFY;
                    rc = run_verify(&q, g);
                } else if (rc < 0) {
                    rc = c.command                    ? convert(&c, g)
                         : c.max_batch || c.sweep_name ? capacity(&c, g)
                                                       : estimate(&c, g);
                }
                est_graph_free(g);
            }
        }
    }
    for (size_t i = 0; i < c.opt.n_dims; i++) free(c.dim_names[i]);
    for (size_t i = 0; i < MAX_DIM_FLAGS; i++) free(c.input_shape_args[i]);
    free(c.sweep_name);
    free(c.checkpoint_arg);
    for (size_t i = 0; i < c.n_pattern_args; i++) free(c.pattern_args[i]);
    return rc;
}
