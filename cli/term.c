/* term.c: see term.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "term.h"

const char *term(const char *s) {
    static char *slot[TERM_SLOTS];
    static size_t cap[TERM_SLOTS];
    static unsigned next;
    if (!s) return "";
    /* printable ASCII, what nearly every name is, needs no escaping: one
     * tight scan (a table prints a million names) */
    const unsigned char *p = (const unsigned char *)s;
    while (*p >= 0x20 && *p < 0x7f) p++;
    if (!*p) return s;
    char probe[1];
    size_t need = est_escape_controls(probe, 0, s);
    if (need == strlen(s)) return s; /* nothing escaped: the same bytes */
    unsigned k = next++ % TERM_SLOTS;
    if (cap[k] < need + 1) {
        char *grown = realloc(slot[k], need + 1);
        if (!grown) return "(name not printable: out of memory)";
        slot[k] = grown;
        cap[k] = need + 1;
    }
    est_escape_controls(slot[k], cap[k], s);
    return slot[k];
}

bool out_open(out_file *o, const char *path) {
    if (!path || strcmp(path, "-") == 0) {
        *o = (out_file){stdout, "standard output"};
        return true;
    }
    *o = (out_file){fopen(path, "w"), path};
    if (o->f) return true;
    fprintf(stderr, "memest: %s: cannot write: %s\n", term(path), strerror(errno));
    return false;
}

bool out_close(out_file *o, bool failed) {
    int prior = errno; /* a write that failed before left its reason here */
    errno = 0;
    failed |= fflush(o->f) != 0;
    int err = errno;
    failed |= ferror(o->f) != 0;
    if (failed && !err) err = prior;
    if (o->f != stdout) {
        errno = 0;
        if (fclose(o->f) != 0) {
            failed = true;
            if (!err) err = errno;
        }
    }
    o->f = NULL;
    if (failed)
        fprintf(stderr, "memest: %s: cannot write: %s\n", term(o->name), err ? strerror(err) : "a write failed");
    return !failed;
}
