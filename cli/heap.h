/* heap.h: the memest process's use of the C library's heap. */
#ifndef MEMEST_CLI_HEAP_H
#define MEMEST_CLI_HEAP_H

/* Called once, first thing in main: keeps freed memory in the process and
 * asks for the heap in huge pages (heap.c says why). Changes no output. */
void tune_heap(void);

#endif
