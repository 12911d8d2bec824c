/*
 * acl/acl_base.h - the ACL runtime's base types and result codes (Huawei
 * CANN's names and values, as CANN documents them; the header is Loom's
 * own), for programs written against ACL to build and run on plain hosts
 * with libloom_acl. See docs/hccl.md ("ACL runtime").
 */
#ifndef LOOM_ACL_BASE_H
#define LOOM_ACL_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOOM_ACL_BUILDING_LIBRARY) && defined(__GNUC__)
#define LOOM_ACL_API __attribute__((visibility("default")))
#else
#define LOOM_ACL_API
#endif

/* Every call's result: ACL_SUCCESS or one of the codes below. */
typedef int aclError;

/* A stream (aclrtCreateStream). On Loom it is a loom_stream_t, which the
 * HCCL calls of libloom_hccl take as it is. hccl/hccl.h declares the same
 * type under the same guard. */
#ifndef LOOM_ACLRT_STREAM_DEFINED
#define LOOM_ACLRT_STREAM_DEFINED
typedef void *aclrtStream;
#endif

/* The codes CANN documents; C and C++ alike (CANN's header declares them as
 * static const int, which C cannot use in a switch). */
#define ACL_SUCCESS 0
#define ACL_ERROR_NONE 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_INVALID_FILE 100003
#define ACL_ERROR_REPEAT_FINALIZE 100037
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_API_NOT_SUPPORT 200001
#define ACL_ERROR_INVALID_DEVICE 200002
#define ACL_ERROR_MEMORY_ADDRESS_UNALIGNED 200003
#define ACL_ERROR_RESOURCE_NOT_MATCH 200004
#define ACL_ERROR_INVALID_RESOURCE_HANDLE 200005
#define ACL_ERROR_FEATURE_UNSUPPORTED 200006
#define ACL_ERROR_STORAGE_OVER_LIMIT 300000
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_ERROR_FAILURE 500001
#define ACL_ERROR_RT_FAILURE 500003

#ifdef __cplusplus
}
#endif

#endif /* LOOM_ACL_BASE_H */
