/* hccl_internal.h - what the files of libloom_hccl share: the tables that
 * translate HCCL's values to Loom's and back (hccl_map.c), and how a failed
 * call reports itself. libloom_hccl uses Loom's public API only. */
#ifndef LOOM_HCCL_INTERNAL_H
#define LOOM_HCCL_INTERNAL_H

#include <stdint.h>

#include <hccl/hccl.h>

#include "loom.h"

/* The Loom dtype that reduces dt; 0 and *out set when there is one, else
 * -1 (a type HCCL has that Loom does not reduce) or -2 (not an
 * HcclDataType). */
int loom_hccl_reduce_dtype(HcclDataType dt, loom_dtype_t *out);
/* Bytes of one dt element (types Loom only moves included); 0 when dt is
 * not an HcclDataType. */
size_t loom_hccl_dtype_size(HcclDataType dt);
/* The Loom op for op; -1 when op is not one of HCCL's four. */
int loom_hccl_redop(HcclReduceOp op, loom_redop_t *out);
/* The HcclResult for a Loom result. */
HcclResult loom_hccl_result(loom_result_t res);
/* HCCL's name of dt ("int16"), or NULL. */
const char *loom_hccl_dtype_name(HcclDataType dt);

/* Report a failed call: "loom-hccl: WHAT: MESSAGE" on stderr (unless
 * LOOM_DEBUG=NONE), and return code. HCCL's API has no message to ask for,
 * so the message goes where an operator sees it. */
HcclResult loom_hccl_fail(HcclResult code, const char *what, const char *fmt,
                          ...) __attribute__((format(printf, 3, 4)));
/* The same for a failed Loom call on comm (NULL: a failed init): its
 * message is loom_get_error_string(comm). */
HcclResult loom_hccl_fail_loom(loom_result_t res, const char *what,
                               loom_comm_t comm);

/* Apply the HCCL environment to Loom's configuration before Loom reads it
 * (HCCL_CONNECT_TIMEOUT -> LOOM_BOOTSTRAP_TIMEOUT); once per process.
 * HCCL_SUCCESS, or HCCL_E_PARA (reported) for a malformed value. */
HcclResult loom_hccl_env_once(const char *what);

#endif
