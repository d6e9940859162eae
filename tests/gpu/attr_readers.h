/* attr_readers.h: libestimate's attribute readers (libestimate/common.c,
 * est_node_attr_*) for the GPU tests that compile the kernel files without
 * libestimate. Include once, inside an extern "C" block. */
static const est_attr *find_attr(const est_node *n, const char *name) {
    for (int32_t k = 0; k < n->n_attrs; k++)
        if (!strcmp(n->attrs[k].name, name)) return &n->attrs[k];
    return NULL;
}
int64_t est_node_attr_int(const est_node *n, const char *name, int64_t dflt) {
    const est_attr *a = find_attr(n, name);
    return a && a->type == EST_ATTR_INT ? a->i : dflt;
}
double est_node_attr_float(const est_node *n, const char *name, double dflt) {
    const est_attr *a = find_attr(n, name);
    if (a && a->type == EST_ATTR_FLOAT) return a->f;
    return a && a->type == EST_ATTR_INT ? (double)a->i : dflt;
}
const char *est_node_attr_string(const est_node *n, const char *name, const char *dflt) {
    const est_attr *a = find_attr(n, name);
    return a && a->type == EST_ATTR_STRING && a->s ? a->s : dflt;
}
const int64_t *est_node_attr_ints(const est_node *n, const char *name, int64_t *count) {
    const est_attr *a = find_attr(n, name);
    bool ok = a && a->type == EST_ATTR_INTS;
    *count = ok ? a->n : 0;
    return ok ? a->ints : NULL;
}
