/* hccl_map.c - HCCL's values to Loom's and back, each through a table
 * indexed by the HCCL (or Loom) value: the two enums number their members
 * differently (HCCL_REDUCE_MAX is 2, LOOM_MIN is 2), so nothing is cast. */
#include "build_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl_internal.h"

struct dtype_row {
    const char *name;  /* NULL: no such HcclDataType */
    size_t size;
    int reduces;       /* Loom reduces it as `loom` */
    loom_dtype_t loom;
};

/* Indexed by HcclDataType (0..17). */
static const struct dtype_row dtype_rows[] = {
    [HCCL_DATA_TYPE_INT8] = {"int8", 1, 1, LOOM_INT8},
    [HCCL_DATA_TYPE_INT16] = {"int16", 2, 1, LOOM_INT16},
    [HCCL_DATA_TYPE_INT32] = {"int32", 4, 1, LOOM_INT32},
    [HCCL_DATA_TYPE_FP16] = {"fp16", 2, 1, LOOM_FLOAT16},
    [HCCL_DATA_TYPE_FP32] = {"fp32", 4, 1, LOOM_FLOAT32},
    [HCCL_DATA_TYPE_INT64] = {"int64", 8, 1, LOOM_INT64},
    [HCCL_DATA_TYPE_UINT64] = {"uint64", 8, 1, LOOM_UINT64},
    [HCCL_DATA_TYPE_UINT8] = {"uint8", 1, 1, LOOM_UINT8},
    [HCCL_DATA_TYPE_UINT16] = {"uint16", 2, 1, LOOM_UINT16},
    [HCCL_DATA_TYPE_UINT32] = {"uint32", 4, 1, LOOM_UINT32},
    [HCCL_DATA_TYPE_FP64] = {"fp64", 8, 1, LOOM_FLOAT64},
    [HCCL_DATA_TYPE_BFP16] = {"bfp16", 2, 1, LOOM_BFLOAT16},
    [HCCL_DATA_TYPE_INT128] = {"int128", 16, 0, 0},
    [HCCL_DATA_TYPE_HIF8] = {"hif8", 1, 0, 0},
    [HCCL_DATA_TYPE_FP8E4M3] = {"fp8e4m3", 1, 0, 0},
    [HCCL_DATA_TYPE_FP8E5M2] = {"fp8e5m2", 1, 0, 0},
    [HCCL_DATA_TYPE_FP8E8M0] = {"fp8e8m0", 1, 0, 0},
};
#define NDTYPE_ROWS (sizeof dtype_rows / sizeof dtype_rows[0])

static const struct dtype_row *dtype_row(HcclDataType dt)
{
    if ((unsigned)dt >= NDTYPE_ROWS || !dtype_rows[dt].name)
        return NULL;
    return &dtype_rows[dt];
}

int loom_hccl_reduce_dtype(HcclDataType dt, loom_dtype_t *out)
{
    const struct dtype_row *row = dtype_row(dt);
    if (!row)
        return -2;
    if (!row->reduces)
        return -1;
    *out = row->loom;
    return 0;
}

size_t loom_hccl_dtype_size(HcclDataType dt)
{
    const struct dtype_row *row = dtype_row(dt);
    return row ? row->size : 0;
}

const char *loom_hccl_dtype_name(HcclDataType dt)
{
    const struct dtype_row *row = dtype_row(dt);
    return row ? row->name : NULL;
}

/* Indexed by HcclReduceOp. */
static const struct {
    int valid;
    loom_redop_t loom;
} redop_rows[] = {
    [HCCL_REDUCE_SUM] = {1, LOOM_SUM},
    [HCCL_REDUCE_PROD] = {1, LOOM_PROD},
    [HCCL_REDUCE_MAX] = {1, LOOM_MAX},
    [HCCL_REDUCE_MIN] = {1, LOOM_MIN},
};

int loom_hccl_redop(HcclReduceOp op, loom_redop_t *out)
{
    if ((unsigned)op >= sizeof redop_rows / sizeof redop_rows[0] ||
        !redop_rows[op].valid)
        return -1;
    *out = redop_rows[op].loom;
    return 0;
}

/* Indexed by -loom_result_t (errors are negative). */
static const HcclResult result_rows[] = {
    [-LOOM_SUCCESS] = HCCL_SUCCESS,
    [-LOOM_ERROR_INVALID_ARGUMENT] = HCCL_E_PARA,
    [-LOOM_ERROR_NO_MEMORY] = HCCL_E_MEMORY,
    [-LOOM_ERROR_SYSTEM] = HCCL_E_SYSCALL,
    [-LOOM_ERROR_IO] = HCCL_E_OPEN_FILE_FAILURE,
    [-LOOM_ERROR_INVALID_RANKTABLE] = HCCL_E_PARA,
    [-LOOM_ERROR_CONFIG] = HCCL_E_PARA,
    [-LOOM_ERROR_TIMEOUT] = HCCL_E_TIMEOUT,
    [-LOOM_ERROR_REMOTE] = HCCL_E_REMOTE,
    [-LOOM_ERROR_PROTOCOL] = HCCL_E_NETWORK,
    [-LOOM_ERROR_MISMATCH] = HCCL_E_PARA,
    [-LOOM_ERROR_ABORTED] = HCCL_E_UNAVAIL,
    [-LOOM_ERROR_NOT_SUPPORTED] = HCCL_E_NOT_SUPPORT,
    [-LOOM_ERROR_INTERNAL] = HCCL_E_INTERNAL,
    [-LOOM_ERROR_REVOKED] = HCCL_E_UNAVAIL,
};

HcclResult loom_hccl_result(loom_result_t res)
{
    if (res == LOOM_NOT_READY)
        return HCCL_E_AGAIN;
    if (res > 0 || (size_t)-res >= sizeof result_rows / sizeof result_rows[0])
        return HCCL_E_INTERNAL;
    return result_rows[-res];
}

/* Indexed by HcclResult (0..24); HCCL_E_IN_STATUS apart. */
static const char *const result_names[] = {
    [HCCL_SUCCESS] = "success",
    [HCCL_E_PARA] = "parameter error",
    [HCCL_E_PTR] = "null pointer",
    [HCCL_E_MEMORY] = "memory error",
    [HCCL_E_INTERNAL] = "internal error",
    [HCCL_E_NOT_SUPPORT] = "not supported",
    [HCCL_E_NOT_FOUND] = "not found",
    [HCCL_E_UNAVAIL] = "resource unavailable",
    [HCCL_E_SYSCALL] = "system call failed",
    [HCCL_E_TIMEOUT] = "timeout",
    [HCCL_E_OPEN_FILE_FAILURE] = "cannot open a file",
    [HCCL_E_TCP_CONNECT] = "TCP connection failed",
    [HCCL_E_ROCE_CONNECT] = "RoCE connection failed",
    [HCCL_E_TCP_TRANSFER] = "TCP transfer failed",
    [HCCL_E_ROCE_TRANSFER] = "RoCE transfer failed",
    [HCCL_E_RUNTIME] = "runtime call failed",
    [HCCL_E_DRV] = "driver call failed",
    [HCCL_E_PROFILING] = "profiling call failed",
    [HCCL_E_CCE] = "CCE call failed",
    [HCCL_E_NETWORK] = "network error",
    [HCCL_E_AGAIN] = "try again",
    [HCCL_E_REMOTE] = "remote error",
    [HCCL_E_SUSPENDING] = "communicator suspending",
    [HCCL_E_OPRETRY_FAIL] = "operation retry failed",
    [HCCL_E_OOM] = "out of memory",
};

LOOM_HCCL_API const char *HcclGetErrorString(HcclResult code)
{
    if (code == HCCL_E_IN_STATUS)
        return "error in status";
    if ((unsigned)code < sizeof result_names / sizeof result_names[0] &&
        result_names[code])
        return result_names[code];
    return "unknown HcclResult";
}

static int quiet(void)
{
    const char *d = getenv("LOOM_DEBUG");
    return d && (strcmp(d, "NONE") == 0 || strcmp(d, "none") == 0);
}

HcclResult loom_hccl_fail(HcclResult code, const char *what, const char *fmt,
                          ...)
{
    if (quiet())
        return code;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "loom-hccl: %s: %s (%s)\n", what, msg,
            HcclGetErrorString(code));
    return code;
}

HcclResult loom_hccl_fail_loom(loom_result_t res, const char *what,
                               loom_comm_t comm)
{
    const char *msg = loom_get_error_string(comm);
    return loom_hccl_fail(loom_hccl_result(res), what, "%s",
                          msg && *msg ? msg : loom_result_string(res));
}
