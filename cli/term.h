/* term.h: what the CLI prints from a model, made safe for a terminal, and
 * its writes checked. */
#ifndef MEMEST_TERM_H
#define MEMEST_TERM_H

#include <stdbool.h>
#include <stdio.h>

/* s escaped for a terminal (est_escape_controls): s itself when nothing in
 * it needs escaping, else a copy that stays valid until TERM_SLOTS more
 * calls. Model names, op types, module paths and messages go through it. */
enum { TERM_SLOTS = 16 };
const char *term(const char *s);

/* Where a report goes: -o PATH, "-" or no -o for standard output. */
typedef struct out_file {
    FILE *f;
    const char *name; /* the path, or "standard output" */
} out_file;

/* Opens path (NULL or "-": standard output). false, with the error printed
 * ("memest: PATH: cannot write: REASON"), when it cannot be opened. */
bool out_open(out_file *o, const char *path);

/* Flushes and closes o (standard output is flushed, not closed). `failed`
 * says a write already failed. Returns false, with the path and errno's
 * reason printed, when anything written was lost. */
bool out_close(out_file *o, bool failed);

#endif
