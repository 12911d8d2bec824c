/* check_hccl.c - libloom_hccl without a network: the translation tables,
 * the header's values, a one-rank communicator through every init and
 * collective (and a Loom stream), the environment checks, config and
 * argument errors. Multi-rank results are test_hccl.sh's. */
#include "build_config.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl_internal.h"

static const char *srcdir(void)
{
    const char *s = getenv("LOOM_SRCDIR");
    return s ? s : ".";
}

static void table_path(char *out, size_t len, const char *file)
{
    snprintf(out, len, "%s/etc/ranktables/%s", srcdir(), file);
}

/* Nothing from the caller's environment leaks into a case. */
static void clean_env(void)
{
    static const char *const vars[] = {"RANK_TABLE_FILE", "RANK_ID",
                                       "RANK_SIZE", "DEVICE_ID",
                                       "HCCL_CONNECT_TIMEOUT",
                                       "LOOM_BOOTSTRAP_TIMEOUT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("LOOM_CONF_FILE", "/dev/null", 1);
}

START_TEST(test_header_values)
{
    ck_assert_uint_eq(sizeof(HcclRootInfo), 4108);
    ck_assert_int_eq(HCCL_SUCCESS, 0);
    ck_assert_int_eq(HCCL_E_PARA, 1);
    ck_assert_int_eq(HCCL_E_NOT_SUPPORT, 5);
    ck_assert_int_eq(HCCL_E_TIMEOUT, 9);
    ck_assert_int_eq(HCCL_E_REMOTE, 21);
    ck_assert_int_eq(HCCL_E_OOM, 24);
    ck_assert_int_eq(HCCL_REDUCE_SUM, 0);
    ck_assert_int_eq(HCCL_REDUCE_PROD, 1);
    ck_assert_int_eq(HCCL_REDUCE_MAX, 2);
    ck_assert_int_eq(HCCL_REDUCE_MIN, 3);
    static const int numbers[] = {
        HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_INT32,
        HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT64,
        HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_UINT16,
        HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_FP64, HCCL_DATA_TYPE_BFP16};
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(numbers[i], i);
    HcclCommConfig config;
    memset(&config, 0xab, sizeof config);
    HcclCommConfigInit(&config);
    HcclCommConfigInfo info;
    memcpy(&info, config.reserved, sizeof info);
    ck_assert_uint_eq(info.size, sizeof config);
    ck_assert_uint_eq(info.magicWord, HCCL_COMM_CONFIG_MAGIC_WORD);
    ck_assert_uint_eq(config.hcclDeterministic,
                      HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET);
    ck_assert_str_eq(config.hcclCommName, "");
}
END_TEST

/* Each HCCL type and op against Loom's, by name: the tables, not the
 * numbers, decide (HCCL's MAX is 2, Loom's MIN is 2). */
START_TEST(test_tables)
{
    static const struct {
        HcclDataType dt;
        const char *loom;  /* NULL: Loom only moves it */
        size_t size;
    } types[] = {
        {HCCL_DATA_TYPE_INT8, "int8", 1},     {HCCL_DATA_TYPE_INT16, "int16", 2},
        {HCCL_DATA_TYPE_INT32, "int32", 4},   {HCCL_DATA_TYPE_FP16, "float16", 2},
        {HCCL_DATA_TYPE_FP32, "float32", 4},  {HCCL_DATA_TYPE_INT64, "int64", 8},
        {HCCL_DATA_TYPE_UINT64, "uint64", 8}, {HCCL_DATA_TYPE_UINT8, "uint8", 1},
        {HCCL_DATA_TYPE_UINT16, "uint16", 2},   {HCCL_DATA_TYPE_UINT32, "uint32", 4},
        {HCCL_DATA_TYPE_FP64, "float64", 8},  {HCCL_DATA_TYPE_BFP16, "bfloat16", 2},
        {HCCL_DATA_TYPE_INT128, NULL, 16},    {HCCL_DATA_TYPE_HIF8, NULL, 1},
        {HCCL_DATA_TYPE_FP8E4M3, NULL, 1},    {HCCL_DATA_TYPE_FP8E5M2, NULL, 1},
        {HCCL_DATA_TYPE_FP8E8M0, NULL, 1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        loom_dtype_t ldt = LOOM_DTYPE_COUNT;
        int rc = loom_hccl_reduce_dtype(types[i].dt, &ldt);
        ck_assert_uint_eq(loom_hccl_dtype_size(types[i].dt), types[i].size);
        if (types[i].loom) {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(loom_dtype_name(ldt), types[i].loom);
            ck_assert_uint_eq(loom_dtype_size(ldt), types[i].size);
        } else {
            ck_assert_int_eq(rc, -1);
        }
    }
    loom_dtype_t ldt;
    ck_assert_int_eq(loom_hccl_reduce_dtype((HcclDataType)13, &ldt), -2);
    ck_assert_int_eq(loom_hccl_reduce_dtype(HCCL_DATA_TYPE_RESERVED, &ldt), -2);
    ck_assert_int_eq(loom_hccl_reduce_dtype((HcclDataType)-1, &ldt), -2);
    ck_assert_uint_eq(loom_hccl_dtype_size((HcclDataType)13), 0);

    static const char *const op_names[] = {"sum", "prod", "max", "min"};
    for (int op = 0; op < 4; op++) {
        loom_redop_t lop;
        ck_assert_int_eq(loom_hccl_redop((HcclReduceOp)op, &lop), 0);
        ck_assert_str_eq(loom_redop_name(lop), op_names[op]);
    }
    loom_redop_t lop;
    ck_assert_int_eq(loom_hccl_redop((HcclReduceOp)4, &lop), -1);
    ck_assert_int_eq(loom_hccl_redop(HCCL_REDUCE_RESERVED, &lop), -1);

    ck_assert_int_eq(loom_hccl_result(LOOM_SUCCESS), HCCL_SUCCESS);
    ck_assert_int_eq(loom_hccl_result(LOOM_NOT_READY), HCCL_E_AGAIN);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_INVALID_ARGUMENT), HCCL_E_PARA);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_NO_MEMORY), HCCL_E_MEMORY);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_SYSTEM), HCCL_E_SYSCALL);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_IO), HCCL_E_OPEN_FILE_FAILURE);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_INVALID_RANKTABLE), HCCL_E_PARA);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_CONFIG), HCCL_E_PARA);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_TIMEOUT), HCCL_E_TIMEOUT);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_REMOTE), HCCL_E_REMOTE);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_PROTOCOL), HCCL_E_NETWORK);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_MISMATCH), HCCL_E_PARA);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_ABORTED), HCCL_E_UNAVAIL);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_NOT_SUPPORTED), HCCL_E_NOT_SUPPORT);
    ck_assert_int_eq(loom_hccl_result(LOOM_ERROR_INTERNAL), HCCL_E_INTERNAL);
    ck_assert_int_eq(loom_hccl_result((loom_result_t)-99), HCCL_E_INTERNAL);

    for (int code = 0; code <= HCCL_E_OOM; code++) {
        const char *s = HcclGetErrorString((HcclResult)code);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_ne(s, "unknown HcclResult");
        for (int other = 0; other < code; other++)
            ck_assert_str_ne(s, HcclGetErrorString((HcclResult)other));
    }
    ck_assert_str_eq(HcclGetErrorString((HcclResult)77), "unknown HcclResult");
    ck_assert_str_eq(HcclGetErrorString(HCCL_E_IN_STATUS), "error in status");
}
END_TEST

static HcclComm one_rank(void)
{
    char path[PATH_MAX];
    clean_env();
    table_path(path, sizeof path, "single-1.json");
    setenv("RANK_TABLE_FILE", path, 1);
    HcclComm comm = NULL;
    ck_assert_int_eq(HcclCommInitClusterInfo(NULL, 0, &comm), HCCL_SUCCESS);
    ck_assert_ptr_nonnull(comm);
    return comm;
}

/* One rank: every collective is a copy, for every type it takes. */
START_TEST(test_one_rank_collectives)
{
    HcclComm comm = one_rank();
    uint32_t v = 9;
    ck_assert_int_eq(HcclGetRankSize(comm, &v), HCCL_SUCCESS);
    ck_assert_uint_eq(v, 1);
    ck_assert_int_eq(HcclGetRankId(comm, &v), HCCL_SUCCESS);
    ck_assert_uint_eq(v, 0);
    unsigned char in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    for (int dt = 0; dt <= HCCL_DATA_TYPE_FP8E8M0; dt++) {
        size_t size = loom_hccl_dtype_size((HcclDataType)dt);
        if (!size)
            continue;
        uint64_t count = 64 / size;
        loom_dtype_t ldt;
        int reduces = loom_hccl_reduce_dtype((HcclDataType)dt, &ldt) == 0;
        HcclResult want = reduces ? HCCL_SUCCESS : HCCL_E_NOT_SUPPORT;
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclAllReduce(in, out, count, (HcclDataType)dt,
                                       HCCL_REDUCE_MAX, comm, NULL), want);
        if (reduces)
            ck_assert_mem_eq(in, out, 64);
        ck_assert_int_eq(HcclReduce(in, out, count, (HcclDataType)dt,
                                    HCCL_REDUCE_SUM, 0, comm, NULL), want);
        ck_assert_int_eq(HcclReduceScatter(in, out, count, (HcclDataType)dt,
                                           HCCL_REDUCE_MIN, comm, NULL), want);
        /* data movement takes every type with a size */
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclAllGather(in, out, count, (HcclDataType)dt, comm,
                                       NULL), HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64);
        memcpy(out, in, 64);
        ck_assert_int_eq(HcclBroadcast(out, count, (HcclDataType)dt, 0, comm,
                                       NULL), HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64);
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclScatter(in, out, count, (HcclDataType)dt, 0, comm,
                                     NULL), HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64);
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclAlltoAll(in, count, (HcclDataType)dt, out, count,
                                      (HcclDataType)dt, comm, NULL),
                         HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64);
        /* one rank's v-forms: its block to itself, at displacement 1 */
        uint64_t n1 = count - 1, one = 1, zero = 0, m = count - 1;
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclAlltoAllV(in, &n1, &one, (HcclDataType)dt, out,
                                       &n1, &zero, (HcclDataType)dt, comm,
                                       NULL), HCCL_SUCCESS);
        ck_assert_mem_eq(in + size, out, 64 - size);
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclAlltoAllVC(in, &m, (HcclDataType)dt, out,
                                        (HcclDataType)dt, comm, NULL),
                         HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64 - size);
        /* a batch with a send to itself and its receive */
        HcclSendRecvItem items[2] = {
            {HCCL_RECV, out, count, (HcclDataType)dt, 0},
            {HCCL_SEND, in, count, (HcclDataType)dt, 0}};
        memset(out, 0, sizeof out);
        ck_assert_int_eq(HcclBatchSendRecv(items, 2, comm, NULL), HCCL_SUCCESS);
        ck_assert_mem_eq(in, out, 64);
    }
    /* the alltoalls move one type, one count a block */
    ck_assert_int_eq(HcclAlltoAll(in, 4, HCCL_DATA_TYPE_INT8, out, 4,
                                  HCCL_DATA_TYPE_UINT8, comm, NULL), HCCL_E_PARA);
    ck_assert_int_eq(HcclAlltoAll(in, 4, HCCL_DATA_TYPE_INT8, out, 3,
                                  HCCL_DATA_TYPE_INT8, comm, NULL), HCCL_E_PARA);
    uint64_t c4 = 4, c3 = 3, d0 = 0;
    ck_assert_int_eq(HcclAlltoAllV(in, NULL, &d0, HCCL_DATA_TYPE_INT8, out, &c4,
                                   &d0, HCCL_DATA_TYPE_INT8, comm, NULL), HCCL_E_PTR);
    /* a rank that sends itself 4 but receives 3 */
    ck_assert_int_eq(HcclAlltoAllV(in, &c4, &d0, HCCL_DATA_TYPE_INT8, out, &c3,
                                   &d0, HCCL_DATA_TYPE_INT8, comm, NULL), HCCL_E_PARA);
    ck_assert_int_eq(HcclAlltoAllVC(in, NULL, HCCL_DATA_TYPE_INT8, out,
                                    HCCL_DATA_TYPE_INT8, comm, NULL), HCCL_E_PTR);
    /* a bad item posts nothing: the good one before it does not hang */
    HcclSendRecvItem bad[2] = {{HCCL_SEND, in, 4, HCCL_DATA_TYPE_INT8, 0},
                               {(HcclSendRecvType)5, out, 4, HCCL_DATA_TYPE_INT8, 0}};
    ck_assert_int_eq(HcclBatchSendRecv(bad, 2, comm, NULL), HCCL_E_PARA);
    bad[1].sendRecvType = HCCL_RECV;
    bad[1].remoteRank = 1;
    ck_assert_int_eq(HcclBatchSendRecv(bad, 2, comm, NULL), HCCL_E_PARA);
    ck_assert_int_eq(HcclBatchSendRecv(NULL, 1, comm, NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclBatchSendRecv(NULL, 0, comm, NULL), HCCL_SUCCESS);
    ck_assert_int_eq(HcclBarrier(comm, NULL), HCCL_SUCCESS);
    /* argument errors: a type that is none, an op that is none, a root */
    ck_assert_int_eq(HcclAllReduce(in, out, 1, (HcclDataType)13,
                                   HCCL_REDUCE_SUM, comm, NULL), HCCL_E_PARA);
    ck_assert_int_eq(HcclBroadcast(in, 1, (HcclDataType)99, 0, comm, NULL),
                     HCCL_E_PARA);
    ck_assert_int_eq(HcclAllReduce(in, out, 1, HCCL_DATA_TYPE_FP32,
                                   HCCL_REDUCE_RESERVED, comm, NULL),
                     HCCL_E_PARA);
    ck_assert_int_eq(HcclBroadcast(in, 1, HCCL_DATA_TYPE_INT8, 1, comm, NULL),
                     HCCL_E_PARA);
    ck_assert_int_eq(HcclAllGather(in, out, UINT64_MAX / 4,
                                   HCCL_DATA_TYPE_INT128, comm, NULL),
                     HCCL_E_PARA);
    /* point to point: a peer that is not a rank, a type that is none */
    ck_assert_int_eq(HcclSend(in, 1, HCCL_DATA_TYPE_INT8, 1, comm, NULL),
                     HCCL_E_PARA);
    ck_assert_int_eq(HcclRecv(in, 1, (HcclDataType)13, 0, comm, NULL),
                     HCCL_E_PARA);
    HcclResult async = HCCL_E_RESERVED;
    ck_assert_int_eq(HcclGetCommAsyncError(comm, &async), HCCL_SUCCESS);
    ck_assert_int_eq(async, HCCL_SUCCESS);
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

/* The stream argument is a Loom stream; an HcclComm is a loom_comm_t. */
START_TEST(test_stream_and_async_error)
{
    HcclComm comm = one_rank();
    loom_stream_t stream = NULL;
    ck_assert_int_eq(loom_stream_create_host(&stream), LOOM_SUCCESS);
    float in[256], out[256];
    for (int i = 0; i < 256; i++)
        in[i] = (float)i * 0.5f, out[i] = -1;
    ck_assert_int_eq(HcclAllReduce(in, out, 256, HCCL_DATA_TYPE_FP32,
                                   HCCL_REDUCE_SUM, comm, stream),
                     HCCL_SUCCESS);
    ck_assert_int_eq(loom_stream_synchronize(stream), LOOM_SUCCESS);
    ck_assert_mem_eq(in, out, sizeof in);
    ck_assert_int_eq(loom_stream_destroy(stream), LOOM_SUCCESS);

    ck_assert_int_eq(loom_comm_abort((loom_comm_t)comm), LOOM_SUCCESS);
    HcclResult async = HCCL_SUCCESS;
    ck_assert_int_eq(HcclGetCommAsyncError(comm, &async), HCCL_SUCCESS);
    ck_assert_int_eq(async, HCCL_E_UNAVAIL);
    ck_assert_int_eq(HcclBarrier(comm, NULL), HCCL_E_UNAVAIL);
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

START_TEST(test_root_info_one_rank)
{
    clean_env();
    HcclRootInfo info;
    ck_assert_int_eq(HcclGetRootInfo(&info), HCCL_SUCCESS);
    HcclComm comm = NULL;
    ck_assert_int_eq(HcclCommInitRootInfo(1, &info, 1, &comm), HCCL_E_PARA);
    ck_assert_ptr_null(comm);
    HcclRootInfo bad = info;
    bad.internal[0] ^= 1;
    ck_assert_int_eq(HcclCommInitRootInfo(1, &bad, 0, &comm), HCCL_E_PARA);
    setenv("RANK_SIZE", "2", 1);
    ck_assert_int_eq(HcclCommInitRootInfo(1, &info, 0, &comm), HCCL_E_PARA);
    unsetenv("RANK_SIZE");
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    ck_assert_int_eq(HcclCommInitRootInfoConfig(1, &info, 0, &config, &comm),
                     HCCL_SUCCESS);
    int x = 41, y = 0;
    ck_assert_int_eq(HcclAllReduce(&x, &y, 1, HCCL_DATA_TYPE_INT32,
                                   HCCL_REDUCE_SUM, comm, NULL), HCCL_SUCCESS);
    ck_assert_int_eq(y, 41);
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

/* RANK_ID, RANK_SIZE and DEVICE_ID must agree with the call and the table. */
START_TEST(test_env_disagreements)
{
    char path[PATH_MAX];
    HcclComm comm = (HcclComm)&path;
    clean_env();
    table_path(path, sizeof path, "single-4.json");
    setenv("RANK_SIZE", "8", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 2, &comm), HCCL_E_PARA);
    ck_assert_ptr_null(comm);
    unsetenv("RANK_SIZE");
    setenv("RANK_ID", "1", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 2, &comm), HCCL_E_PARA);
    setenv("RANK_ID", "x", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 2, &comm), HCCL_E_PARA);
    unsetenv("RANK_ID");
    setenv("DEVICE_ID", "3", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 2, &comm), HCCL_E_PARA);
    unsetenv("DEVICE_ID");
    /* a rank the table lacks, a table that is none */
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 4, &comm), HCCL_E_PARA);
    ck_assert_int_eq(HcclCommInitClusterInfo("/nonexistent/rt.json", 0, &comm),
                     HCCL_E_OPEN_FILE_FAILURE);
    ck_assert_int_eq(HcclCommInitClusterInfo(NULL, 0, &comm), HCCL_E_PARA);
    /* all agreeing: one rank of single-1.json */
    table_path(path, sizeof path, "single-1.json");
    setenv("RANK_SIZE", "1", 1);
    setenv("RANK_ID", "0", 1);
    setenv("DEVICE_ID", "0", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 0, &comm), HCCL_SUCCESS);
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

START_TEST(test_connect_timeout)
{
    char path[PATH_MAX];
    HcclComm comm = NULL;
    clean_env();
    table_path(path, sizeof path, "single-1.json");
    setenv("HCCL_CONNECT_TIMEOUT", "7", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 0, &comm), HCCL_SUCCESS);
    ck_assert_str_eq(getenv("LOOM_BOOTSTRAP_TIMEOUT"), "7");
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);
}
END_TEST

START_TEST(test_connect_timeout_bad)
{
    char path[PATH_MAX];
    HcclComm comm = NULL;
    clean_env();
    table_path(path, sizeof path, "single-1.json");
    setenv("HCCL_CONNECT_TIMEOUT", "soon", 1);
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 0, &comm), HCCL_E_PARA);
    ck_assert_ptr_null(getenv("LOOM_BOOTSTRAP_TIMEOUT"));
}
END_TEST

START_TEST(test_config_and_pointer_errors)
{
    char path[PATH_MAX];
    HcclComm comm = NULL;
    clean_env();
    table_path(path, sizeof path, "single-1.json");
    HcclCommConfig config;
    memset(&config, 0, sizeof config);
    ck_assert_int_eq(HcclCommInitClusterInfoConfig(path, 0, &config, &comm),
                     HCCL_E_PARA);
    ck_assert_int_eq(HcclCommInitClusterInfoConfig(path, 0, NULL, &comm),
                     HCCL_E_PTR);
    HcclCommConfigInit(&config);
    config.hcclDeterministic = 5;
    ck_assert_int_eq(HcclCommInitClusterInfoConfig(path, 0, &config, &comm),
                     HCCL_E_PARA);
    config.hcclDeterministic = 2;
    ck_assert_int_eq(HcclCommInitClusterInfoConfig(path, 0, &config, &comm),
                     HCCL_SUCCESS);
    ck_assert_int_eq(HcclCommDestroy(comm), HCCL_SUCCESS);

    uint32_t v;
    HcclResult h;
    ck_assert_int_eq(HcclCommInitClusterInfo(path, 0, NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclGetRootInfo(NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclCommInitRootInfo(1, NULL, 0, &comm), HCCL_E_PTR);
    ck_assert_int_eq(HcclCommDestroy(NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclGetRankSize(NULL, &v), HCCL_E_PTR);
    ck_assert_int_eq(HcclGetRankId(NULL, &v), HCCL_E_PTR);
    ck_assert_int_eq(HcclGetCommAsyncError(NULL, &h), HCCL_E_PTR);
    ck_assert_int_eq(HcclBarrier(NULL, NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_UINT32,
                                   HCCL_REDUCE_SUM, NULL, NULL), HCCL_E_PTR);
    ck_assert_int_eq(HcclSend(&v, 1, HCCL_DATA_TYPE_UINT32, 0, NULL, NULL),
                     HCCL_E_PTR);
    ck_assert_int_eq(HcclRecv(&v, 1, HCCL_DATA_TYPE_UINT32, 0, NULL, NULL),
                     HCCL_E_PTR);
}
END_TEST

static Suite *hccl_suite(void)
{
    Suite *s = suite_create("hccl");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_header_values);
    tcase_add_test(tc, test_tables);
    suite_add_tcase(s, tc);
    tc = tcase_create("one_rank");
    tcase_add_test(tc, test_one_rank_collectives);
    tcase_add_test(tc, test_stream_and_async_error);
    tcase_add_test(tc, test_root_info_one_rank);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_env_disagreements);
    tcase_add_test(tc, test_connect_timeout);
    tcase_add_test(tc, test_connect_timeout_bad);
    tcase_add_test(tc, test_config_and_pointer_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hccl_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
