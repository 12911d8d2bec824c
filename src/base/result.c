/* result.c - names of results, dtypes and ops; version; per-thread errors. */
#include "build_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loom.h"
#include "util.h"

LOOM_API const char *loom_result_string(loom_result_t res)
{
    switch (res) {
    case LOOM_SUCCESS: return "success";
    case LOOM_NOT_READY: return "not ready";
    case LOOM_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case LOOM_ERROR_NO_MEMORY: return "out of memory";
    case LOOM_ERROR_SYSTEM: return "system call failed";
    case LOOM_ERROR_IO: return "I/O error";
    case LOOM_ERROR_INVALID_RANKTABLE: return "invalid rank table";
    case LOOM_ERROR_CONFIG: return "invalid configuration";
    case LOOM_ERROR_TIMEOUT: return "timeout";
    case LOOM_ERROR_REMOTE: return "remote peer failed";
    case LOOM_ERROR_PROTOCOL: return "protocol error";
    case LOOM_ERROR_MISMATCH: return "ranks disagree";
    case LOOM_ERROR_ABORTED: return "aborted";
    case LOOM_ERROR_NOT_SUPPORTED: return "not supported";
    case LOOM_ERROR_INTERNAL: return "internal error";
    case LOOM_ERROR_REVOKED: return "communicator revoked";
    }
    return "unknown result";
}

LOOM_API loom_result_t loom_get_version(int *code, const char **version_string)
{
    if (code)
        *code = LOOM_VERSION_CODE;
    if (version_string)
        *version_string = PACKAGE_VERSION;
    return LOOM_SUCCESS;
}


static const size_t dtype_sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2};
static const char *const dtype_names[] = {
    "int8", "uint8", "int32", "uint32", "int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
    "int16", "uint16"};
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == LOOM_DTYPE_COUNT &&
                   sizeof dtype_names / sizeof *dtype_names == LOOM_DTYPE_COUNT,
               "a size and a name for every dtype");
static const char *const redop_names[LOOM_REDOP_COUNT] = {"sum", "prod", "min",
                                                          "max", "avg"};

LOOM_API size_t loom_dtype_size(loom_dtype_t dtype)
{
    if ((unsigned)dtype >= LOOM_DTYPE_COUNT)
        return 0;
    return dtype_sizes[dtype];
}

LOOM_API const char *loom_dtype_name(loom_dtype_t dtype)
{
    if ((unsigned)dtype >= LOOM_DTYPE_COUNT)
        return "invalid-dtype";
    return dtype_names[dtype];
}

LOOM_API const char *loom_redop_name(loom_redop_t op)
{
    if ((unsigned)op >= LOOM_REDOP_COUNT)
        return "invalid-op";
    return redop_names[op];
}

static __thread char thread_error[1024];

void loom_set_thread_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
}

const char *loom_thread_error(void)
{
    return thread_error;
}
