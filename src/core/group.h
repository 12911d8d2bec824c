/* group.h - loom_group_start/end: calls collected per thread, run as one
 * op per communicator (group.c builds it; coll/group_run.c runs it). */
#ifndef LOOM_GROUP_H
#define LOOM_GROUP_H

#include "comm/comm.h"

/* Nesting depth of this thread's group (0: none). */
int loom_group_depth(void);

/* Keep a validated call (op's stream set) for the end of the group.
 * Errors (a second stream on one communicator, no memory) are returned
 * now and again by loom_group_end, which then runs nothing. */
loom_result_t loom_group_add(struct loom_comm *comm, const struct loom_op *op);
/* A call of this thread's group failed its argument checks: the group
 * runs nothing and loom_group_end returns err (the first such). */
void loom_group_fail(loom_result_t err);

#endif
