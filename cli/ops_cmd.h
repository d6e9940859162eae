/* ops_cmd.h: `memest ops` (ops_cmd.c). */
#ifndef MEMEST_OPS_CMD_H
#define MEMEST_OPS_CMD_H

/* Prints the operator table with the verify column; exit code 0, or 1 when
 * the output could not be written. */
int list_ops(void);

#endif
