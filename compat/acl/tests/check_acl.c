/* check_acl.c - libloom_acl: ACL's codes and values, the device count and
 * where it comes from, device and host memory, copies, streams, and every
 * refusal with its code. Each test runs in its own process (Check forks),
 * so each starts before aclInit. */
#include "build_config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>

#include "loom.h"

/* A table of the source tree (make check sets LOOM_SRCDIR). */
static void set_table(const char *name)
{
    const char *src = getenv("LOOM_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/etc/ranktables/%s", src ? src : ".", name);
    setenv("RANK_TABLE_FILE", path, 1);
}

static void clear_env(void)
{
    unsetenv("LOOM_ACL_DEVICES");
    unsetenv("RANK_TABLE_FILE");
    unsetenv("LOOM_RANK_TABLE");
    unsetenv("RANK_ID");
    unsetenv("LOOM_RANK");
    setenv("LOOM_DEBUG", "NONE", 1);
}

START_TEST(test_values)
{
    ck_assert_int_eq(ACL_SUCCESS, 0);
    ck_assert_int_eq(ACL_ERROR_INVALID_PARAM, 100000);
    ck_assert_int_eq(ACL_ERROR_UNINITIALIZE, 100001);
    ck_assert_int_eq(ACL_ERROR_REPEAT_INITIALIZE, 100002);
    ck_assert_int_eq(ACL_ERROR_REPEAT_FINALIZE, 100037);
    ck_assert_int_eq(ACL_ERROR_BAD_ALLOC, 200000);
    ck_assert_int_eq(ACL_ERROR_INVALID_DEVICE, 200002);
    ck_assert_int_eq(ACL_ERROR_INVALID_RESOURCE_HANDLE, 200005);
    ck_assert_int_eq(ACL_ERROR_FEATURE_UNSUPPORTED, 200006);
    ck_assert_int_eq(ACL_ERROR_RT_FAILURE, 500003);
    ck_assert_int_eq(ACL_MEM_MALLOC_HUGE_ONLY, 1);
    ck_assert_int_eq(ACL_MEM_MALLOC_NORMAL_ONLY, 2);
    ck_assert_int_eq(ACL_MEMCPY_HOST_TO_DEVICE, 1);
    ck_assert_int_eq(ACL_MEMCPY_DEVICE_TO_HOST, 2);
    ck_assert_int_eq(ACL_MEMCPY_DEVICE_TO_DEVICE, 3);
}
END_TEST

START_TEST(test_init)
{
    clear_env();
    uint32_t n = 0;
    void *p = NULL;
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_ERROR_UNINITIALIZE);
    ck_assert_int_eq(aclrtSetDevice(0), ACL_ERROR_UNINITIALIZE);
    ck_assert_int_eq(aclrtMallocHost(&p, 8), ACL_ERROR_UNINITIALIZE);
    ck_assert(strstr(aclGetRecentErrMsg(), "aclInit") != NULL);
    ck_assert_int_eq(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    ck_assert_int_eq(aclInit("/etc/acl.json"), ACL_ERROR_FEATURE_UNSUPPORTED);
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclInit(""), ACL_ERROR_REPEAT_INITIALIZE);
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    ck_assert_uint_eq(n, 8); /* the default */
    ck_assert_int_eq(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
    ck_assert_int_eq(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    /* again after finalize, with another count */
    setenv("LOOM_ACL_DEVICES", "3", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
    setenv("LOOM_ACL_DEVICES", "three", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "LOOM_ACL_DEVICES=three") != NULL);
    setenv("LOOM_ACL_DEVICES", "0", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_ERROR_INVALID_PARAM);
}
END_TEST

/* The rank table's devices on this server: the server of RANK_ID. */
START_TEST(test_count_from_table)
{
    clear_env();
    uint32_t n = 0;
    set_table("single-4.json");
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
    /* two servers of two devices: which one needs RANK_ID */
    set_table("two-server.json");
    ck_assert_int_eq(aclInit(NULL), ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "RANK_ID") != NULL);
    setenv("RANK_ID", "3", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
    /* LOOM_ACL_DEVICES wins */
    setenv("LOOM_ACL_DEVICES", "5", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
    unsetenv("LOOM_ACL_DEVICES");
    setenv("RANK_TABLE_FILE", "/nonexistent/table.json", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_ERROR_INVALID_FILE);
}
END_TEST

START_TEST(test_devices)
{
    clear_env();
    setenv("LOOM_ACL_DEVICES", "2", 1);
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    int32_t d = -1;
    void *p = NULL;
    ck_assert_int_eq(aclrtGetDevice(&d), ACL_ERROR_INVALID_DEVICE);
    /* device memory needs a current device */
    ck_assert_int_eq(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_ONLY), ACL_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(aclrtSetDevice(2), ACL_ERROR_INVALID_DEVICE);
    ck_assert(strstr(aclGetRecentErrMsg(), "device 2") != NULL);
    ck_assert_int_eq(aclrtSetDevice(-1), ACL_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(aclrtSetDevice(1), ACL_SUCCESS);
    ck_assert_int_eq(aclrtGetDevice(&d), ACL_SUCCESS);
    ck_assert_int_eq(d, 1);
    ck_assert_int_eq(aclrtResetDevice(0), ACL_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(aclrtResetDevice(1), ACL_SUCCESS);
    ck_assert_int_eq(aclrtResetDevice(1), ACL_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
}
END_TEST

START_TEST(test_memory)
{
    clear_env();
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    ck_assert_int_eq(aclrtSetDevice(0), ACL_SUCCESS);
    void *dev = NULL, *host = NULL, *other = NULL;
    ck_assert_int_eq(aclrtMalloc(&dev, 0, ACL_MEM_MALLOC_HUGE_ONLY), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtMalloc(&dev, 64, (aclrtMemMallocPolicy)0x40), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_ONLY), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    ck_assert_uint_eq((uintptr_t)dev % 64, 0);
    ck_assert_int_eq(aclrtMalloc(&other, 16, (aclrtMemMallocPolicy)(ACL_MEM_MALLOC_NORMAL_ONLY |
                                                                     ACL_MEM_TYPE_HIGH_BAND_WIDTH)),
                     ACL_SUCCESS);
    ck_assert_int_eq(aclrtMallocHost(&host, 256), ACL_SUCCESS);
    int32_t in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = i * 7 - 100;
    ck_assert_int_eq(aclrtMemcpy(host, 256, in, 256, ACL_MEMCPY_HOST_TO_HOST), ACL_SUCCESS);
    ck_assert_int_eq(aclrtMemcpy(dev, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    memset(host, 0, 256);
    ck_assert_int_eq(aclrtMemcpy(host, 256, dev, 256, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    memcpy(out, host, 256);
    ck_assert_mem_eq(in, out, 256);
    /* inside an allocation, from its middle */
    ck_assert_int_eq(aclrtMemcpy((char *)dev + 128, 128, in, 128, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_SUCCESS);
    /* refusals */
    ck_assert_int_eq(aclrtMemcpy(dev, 128, host, 256, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "destMax") != NULL);
    ck_assert_int_eq(aclrtMemcpy((char *)dev + 200, 256, host, 100, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "run past") != NULL);
    ck_assert_int_eq(aclrtMemcpy(host, 256, in, 256, ACL_MEMCPY_HOST_TO_DEVICE),
                     ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "not device memory") != NULL);
    ck_assert_int_eq(aclrtMemcpy(host, 256, in, 256, (aclrtMemcpyKind)9), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtMemcpy(other, 16, dev, 16, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
    ck_assert_int_eq(aclrtMemset(other, 16, 0x5a, 16), ACL_SUCCESS);
    ck_assert_uint_eq(((unsigned char *)other)[15], 0x5a);
    ck_assert_int_eq(aclrtMemset(other, 16, 0, 17), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtFreeHost(dev), ACL_ERROR_INVALID_PARAM);
    ck_assert(strstr(aclGetRecentErrMsg(), "but device memory") != NULL);
    ck_assert_int_eq(aclrtFree(host), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtFree(in), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtFree(dev), ACL_SUCCESS);
    ck_assert_int_eq(aclrtFree(dev), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtFreeHost(host), ACL_SUCCESS);
    ck_assert_int_eq(aclrtFree(other), ACL_SUCCESS);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
}
END_TEST

/* A stream is a Loom host stream: Loom's calls on it run in order and
 * aclrtSynchronizeStream waits for them. */
START_TEST(test_streams)
{
    clear_env();
    ck_assert_int_eq(aclInit(NULL), ACL_SUCCESS);
    aclrtStream s = NULL;
    ck_assert_int_eq(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
    ck_assert_ptr_nonnull(s);
    loom_comm_t comm;
    loom_unique_id_t id;
    ck_assert_int_eq(loom_get_unique_id(&id), LOOM_SUCCESS);
    ck_assert_int_eq(loom_comm_init_rank(&comm, 1, &id, 0), LOOM_SUCCESS);
    int32_t a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = i - 9;
    ck_assert_int_eq(loom_allreduce(a, b, 32, LOOM_INT32, LOOM_SUM, comm, (loom_stream_t)s),
                     LOOM_SUCCESS);
    ck_assert_int_eq(aclrtSynchronizeStream(s), ACL_SUCCESS);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert_int_eq(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    int dummy;
    ck_assert_int_eq(aclrtSynchronizeStream(&dummy), ACL_ERROR_INVALID_RESOURCE_HANDLE);
    ck_assert_int_eq(aclrtDestroyStream(&dummy), ACL_ERROR_INVALID_RESOURCE_HANDLE);
    ck_assert_int_eq(aclrtDestroyStream(s), ACL_SUCCESS);
    ck_assert_int_eq(aclrtDestroyStream(s), ACL_ERROR_INVALID_RESOURCE_HANDLE);
    ck_assert_int_eq(loom_comm_destroy(comm), LOOM_SUCCESS);
    /* what is left at aclFinalize is freed */
    void *h;
    ck_assert_int_eq(aclrtCreateStream(&s), ACL_SUCCESS);
    ck_assert_int_eq(aclrtMallocHost(&h, 8), ACL_SUCCESS);
    ck_assert_int_eq(aclFinalize(), ACL_SUCCESS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("acl");
    TCase *tc = tcase_create("runtime");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_count_from_table);
    tcase_add_test(tc, test_devices);
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_streams);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
