/*
 * slim.c: a graph item's bytes without the weights memest never reads.
 *
 * protobuf-c's unpack copies every bytes field onto the heap, so a model
 * with 1 GiB of embedded weights would cost 1 GiB of copies for values the
 * loader drops. This pass writes a copy of one node, initializer or sparse
 * initializer (stream.c hands them over one at a time) in which each
 * tensor's data field is cut to its first SLIM_KEEP bytes, walking the
 * messages that hold tensors:
 *
 *   NodeProto.attribute(5) -> AttributeProto
 *   AttributeProto.t(5), .tensors(10) -> TensorProto
 *   AttributeProto.sparse_tensor(22), .sparse_tensors(23),
 *     GraphProto.sparse_initializer(15) -> SparseTensorProto.values(1), .indices(2)
 *   AttributeProto.g(6), .graphs(11) -> GraphProto (subgraphs)
 *   GraphProto.node(1), .initializer(5)
 *
 * A tensor's values are only read when it has at most EST_FOLD_MAX_ELEMENTS
 * elements of at most 8 bytes, and a floating one at most
 * EST_FOLD_MAX_FLOAT_VALUES (tensor_values.c). Serializers write a
 * TensorProto's dims (field 1) and data_type (2) before its data, so when
 * both came first and say the values will not be read, the data is cut to
 * nothing; otherwise it keeps SLIM_KEEP bytes, enough for any values that
 * are read. Either way the loader sees what it would have: raw_data keeps a
 * prefix, packed fixed-width fields a prefix of whole elements, packed
 * varint fields a prefix of whole varints. The payload bytes it cuts
 * are skipped by their length, never read, so the mapped file's pages
 * behind them are not touched either.
 *
 * Anything it does not understand (a malformed length, a group) stops the
 * pass, and the loader unpacks the original bytes, which protobuf-c then
 * judges as before. The loader runs it in files of 4 MiB and more: below
 * that the copies it saves cost less than the walk.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "slim.h"

#define SLIM_KEEP ((size_t)EST_FOLD_MAX_ELEMENTS * 8)

typedef enum { M_GRAPH, M_NODE, M_ATTR, M_TENSOR, M_SPARSE, M_NONE } msg_kind;

/* The message kind of field `id` of a message of kind k (M_NONE: copy as is). */
static msg_kind child_kind(msg_kind k, uint64_t id) {
    switch (k) {
    case M_GRAPH: return id == 1 ? M_NODE : id == 5 ? M_TENSOR : id == 15 ? M_SPARSE : M_NONE;
    case M_NODE: return id == 5 ? M_ATTR : M_NONE;
    case M_ATTR:
        return id == 5 || id == 10 ? M_TENSOR : id == 6 || id == 11 ? M_GRAPH : id == 22 || id == 23 ? M_SPARSE
                                                                                                       : M_NONE;
    case M_SPARSE: return id == 1 || id == 2 ? M_TENSOR : M_NONE;
    default: return M_NONE;
    }
}

/* TensorProto's data fields: 0 not one, else how a prefix is cut (1 bytes,
 * 4 or 8 fixed width, 10 varints). */
static int data_field(uint64_t id) {
    switch (id) {
    case 9: return 1;           /* raw_data */
    case 4: return 4;           /* float_data, packed */
    case 10: return 8;          /* double_data, packed */
    case 5: case 7: case 11: return 10; /* int32_data, int64_data, uint64_data: packed varints */
    default: return 0;
    }
}


static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) p[n++] = (uint8_t)(v | 0x80), v >>= 7;
    p[n++] = (uint8_t)v;
    return n;
}

/* What a TensorProto said of itself before its data fields. */
typedef struct tensor_head {
    bool has_type;
    uint64_t data_type;
    uint64_t count;     /* product of the dims seen, saturating */
} tensor_head;

static bool is_float_type(uint64_t dt) { return dt == 1 || dt == 10 || dt == 11 || dt == 16 || (dt >= 17 && dt <= 20); }

/* Whether the loader may read this tensor's values. */
static bool values_read(const tensor_head *h) {
    if (!h->has_type) return true; /* unknown yet: keep enough */
    if (h->count > EST_FOLD_MAX_ELEMENTS) return false;
    return !is_float_type(h->data_type) || h->count <= EST_FOLD_MAX_FLOAT_VALUES;
}

static void note_dim(tensor_head *h, uint64_t d) { h->count = d && h->count > UINT64_MAX / d ? UINT64_MAX : h->count * d; }

/* How many bytes of a data field of `len` bytes at p to keep. */
static size_t kept_prefix(const uint8_t *p, size_t len, int how, const tensor_head *h) {
    if (!values_read(h)) return 0;
    if (len <= SLIM_KEEP) return len;
    if (how == 1) return SLIM_KEEP;
    if (how == 4 || how == 8) return SLIM_KEEP / (size_t)how * (size_t)how;
    size_t i = 0, last = 0; /* whole varints up to SLIM_KEEP bytes */
    uint64_t v;
    while (i < SLIM_KEEP && est__wire_varint(p, len, &i, &v))
        if (i <= SLIM_KEEP) last = i;
    return last;
}

/* Walks a message of kind k in p[0..n). With out NULL it only measures:
 * returns the slimmed size, or SIZE_MAX when the bytes cannot be walked.
 * With out, it writes that many bytes there. */
static size_t slim_message(const uint8_t *p, size_t n, msg_kind k, uint8_t *out, unsigned depth) {
    size_t i = 0, o = 0;
    tensor_head head = {.count = 1};
    if (depth > EST_MAX_NESTING_CAP) return SIZE_MAX;
    while (i < n) {
        size_t start = i, body;
        uint64_t key, v;
        if (!est__wire_field(p, n, &i, &key, &v, &body)) return SIZE_MAX; /* groups or garbage: protobuf-c decides */
        if ((key & 7) == 0) {
            if (k == M_TENSOR && key >> 3 == 1) note_dim(&head, v);
            if (k == M_TENSOR && key >> 3 == 2) head.has_type = true, head.data_type = v;
        } else if ((key & 7) == 2) {
            size_t len = (size_t)v;
            if (k == M_TENSOR && key >> 3 == 1) { /* packed dims */
                for (size_t j = 0; j < len;) {
                    if (!est__wire_varint(p + body, len, &j, &v)) return SIZE_MAX;
                    note_dim(&head, v);
                }
            }
            msg_kind ck = child_kind(k, key >> 3);
            int how = k == M_TENSOR ? data_field(key >> 3) : 0;
            size_t keep = how ? kept_prefix(p + body, len, how, &head) : len;
            if (ck != M_NONE || keep != len) { /* else copied whole below */
                size_t inner = ck != M_NONE ? slim_message(p + body, len, ck, NULL, depth + 1) : keep;
                if (inner == SIZE_MAX) return SIZE_MAX;
                if (out) {
                    o += put_varint(out + o, key);
                    o += put_varint(out + o, inner);
                    if (ck != M_NONE) slim_message(p + body, len, ck, out + o, depth + 1);
                    else memcpy(out + o, p + body, inner);
                    o += inner;
                } else {
                    o += varint_size(key) + varint_size(inner) + inner;
                }
                continue;
            }
        }
        if (out) memcpy(out + o, p + start, i - start);
        o += i - start;
    }
    return o;
}

const uint8_t *est__onnx_slim(const uint8_t *p, size_t n, est_slim_kind kind, est_slim_buf *buf, size_t *out_n) {
    msg_kind k = kind == EST_SLIM_NODE ? M_NODE : kind == EST_SLIM_TENSOR ? M_TENSOR : M_SPARSE;
    enum { ITEM_DEPTH = 2 }; /* a graph's items: ModelProto, GraphProto, then them */
    *out_n = n;
    size_t size = slim_message(p, n, k, NULL, ITEM_DEPTH);
    if (size == SIZE_MAX || size >= n) return p; /* nothing to cut, or not walkable */
    if (buf->cap < size) {
        uint8_t *grown = realloc(buf->data, size ? size : 1);
        if (!grown) return p;
        buf->data = grown;
        buf->cap = size ? size : 1;
    }
    slim_message(p, n, k, buf->data, ITEM_DEPTH);
    *out_n = size;
    return buf->data;
}
