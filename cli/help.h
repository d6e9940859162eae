/* help.h: memest's --help text (help.c). */
#ifndef MEMEST_HELP_H
#define MEMEST_HELP_H

#include <stdio.h>

/* The usage lines, which usage errors print too. */
extern const char usage_text[];
/* The whole of --help. */
void print_help(FILE *f);

#endif
