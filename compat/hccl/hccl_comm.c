/* hccl_comm.c - HCCL's communicator calls over Loom's: init from a rank
 * table (HcclCommInitClusterInfo) or from a root info (HcclGetRootInfo +
 * HcclCommInitRootInfo, over loom_get_unique_id + loom_comm_init_rank),
 * destroy, rank and size, the async error. An HcclComm is the loom_comm_t
 * itself, so a program may mix in Loom's calls (loom_get_error_string).
 *
 * The environment HCCL users set is honoured: RANK_TABLE_FILE (the table
 * when clusterInfo is NULL or ""), RANK_ID and RANK_SIZE (must agree with
 * the rank and the table), DEVICE_ID (must agree with the table's device
 * for the rank), HCCL_CONNECT_TIMEOUT (Loom's bootstrap timeout). */
#include "build_config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl_internal.h"

_Static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo is 4108 bytes");
_Static_assert(sizeof(HcclCommConfigInfo) == HCCL_COMM_CONFIG_INFO_BYTES,
               "the config header fills HcclCommConfig.reserved");
_Static_assert(LOOM_UNIQUE_ID_BYTES + 16 <= HCCL_ROOT_INFO_BYTES,
               "a Loom unique id fits in HcclRootInfo");

/* HcclRootInfo.internal: this tag, then the Loom unique id. */
static const char root_tag[16] = "loom-hccl-root1";

/* ---- environment -------------------------------------------------------- */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char env_error[256];

/* Decimal, 0..INT_MAX: 0 and *out; -1 otherwise. */
static int parse_uint(const char *s, long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v > INT_MAX)
        return -1;
    *out = v;
    return 0;
}

static void env_apply(void)
{
    const char *t = getenv("HCCL_CONNECT_TIMEOUT");
    long secs;
    if (!t || !*t)
        return;
    if (parse_uint(t, &secs) < 0 || secs == 0) {
        snprintf(env_error, sizeof env_error,
                 "HCCL_CONNECT_TIMEOUT=%s is not a number of seconds > 0", t);
        return;
    }
    /* LOOM_BOOTSTRAP_TIMEOUT set by the user wins; Loom reads its
     * configuration once, at its first call, which is this library's. */
    if (!getenv("LOOM_BOOTSTRAP_TIMEOUT"))
        setenv("LOOM_BOOTSTRAP_TIMEOUT", t, 0);
}

HcclResult loom_hccl_env_once(const char *what)
{
    pthread_once(&env_once, env_apply);
    if (env_error[0])
        return loom_hccl_fail(HCCL_E_PARA, what, "%s", env_error);
    return HCCL_SUCCESS;
}

/* An environment variable that, when set, must equal want. */
static HcclResult env_agrees(const char *what, const char *var, long want,
                             const char *want_desc)
{
    const char *v = getenv(var);
    long got;
    if (!v || !*v)
        return HCCL_SUCCESS;
    if (parse_uint(v, &got) < 0)
        return loom_hccl_fail(HCCL_E_PARA, what, "%s=%s is not a number", var,
                              v);
    if (got != want)
        return loom_hccl_fail(HCCL_E_PARA, what, "%s=%ld, but %s", var, got,
                              want_desc);
    return HCCL_SUCCESS;
}

/* ---- config ------------------------------------------------------------- */

/* The options Loom checks; the others it leaves to its own configuration
 * (docs/hccl.md). */
static HcclResult check_config(const char *what, const HcclCommConfig *config)
{
    HcclCommConfigInfo info;
    if (!config)
        return loom_hccl_fail(HCCL_E_PTR, what, "config is NULL");
    memcpy(&info, config->reserved, sizeof info);
    if (info.magicWord != HCCL_COMM_CONFIG_MAGIC_WORD)
        return loom_hccl_fail(HCCL_E_PARA, what, "config was not set up by "
                                                 "HcclCommConfigInit");
    /* Fields past what the caller's struct holds are not read. */
    size_t have = info.size < sizeof *config ? info.size : sizeof *config;
    if (have >= offsetof(HcclCommConfig, hcclDeterministic) + sizeof(uint32_t)) {
        uint32_t d = config->hcclDeterministic;
        if (d != HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET && d > 2)
            return loom_hccl_fail(HCCL_E_PARA, what, "hcclDeterministic %u is "
                                                     "not 0, 1 or 2", d);
    }
    if (have >= offsetof(HcclCommConfig, hcclCommName) + COMM_NAME_MAX_LENGTH &&
        !memchr(config->hcclCommName, '\0', COMM_NAME_MAX_LENGTH))
        return loom_hccl_fail(HCCL_E_PARA, what, "hcclCommName is not "
                                                 "terminated within %d bytes",
                              (int)COMM_NAME_MAX_LENGTH);
    return HCCL_SUCCESS;
}

/* ---- rank table ----------------------------------------------------------- */

/* RANK_TABLE_FILE when path is NULL or "". */
static const char *table_path(const char *what, const char *path)
{
    if (path && *path)
        return path;
    path = getenv("RANK_TABLE_FILE");
    if (path && *path)
        return path;
    loom_hccl_fail(HCCL_E_PARA, what, "no rank table: clusterInfo is empty "
                                      "and RANK_TABLE_FILE is not set");
    return NULL;
}

/* RANK_SIZE and DEVICE_ID against the table, before joining: a rank that
 * will not agree should fail alone and at once, not time out the others. */
static HcclResult check_table_env(const char *what, const char *path,
                                  uint32_t rank)
{
    loom_ranktable_t *t = NULL;
    loom_result_t res = loom_ranktable_load(path, &t, NULL);
    if (res != LOOM_SUCCESS)
        return HCCL_SUCCESS; /* loom_comm_init_ranktable says why, in full */
    int n = 0;
    char desc[512];
    loom_ranktable_nranks(t, &n);
    snprintf(desc, sizeof desc, "rank table %s has %d rank%s", path, n,
             n == 1 ? "" : "s");
    HcclResult hres = env_agrees(what, "RANK_SIZE", n, desc);
    loom_rank_info_t ri;
    if (hres == HCCL_SUCCESS && rank < (uint32_t)n &&
        loom_ranktable_rank_info(t, (int)rank, &ri) == LOOM_SUCCESS) {
        snprintf(desc, sizeof desc, "rank table %s gives rank %u device %d "
                                    "of server %s",
                 path, rank, ri.device_id, ri.server_id);
        hres = env_agrees(what, "DEVICE_ID", ri.device_id, desc);
    }
    loom_ranktable_free(t);
    return hres;
}

static HcclResult init_cluster(const char *what, const char *clusterInfo,
                               uint32_t rank, HcclComm *comm)
{
    if (!comm)
        return loom_hccl_fail(HCCL_E_PTR, what, "comm is NULL");
    *comm = NULL;
    HcclResult hres = loom_hccl_env_once(what);
    if (hres != HCCL_SUCCESS)
        return hres;
    const char *path = table_path(what, clusterInfo);
    if (!path)
        return HCCL_E_PARA;
    if (rank > INT_MAX)
        return loom_hccl_fail(HCCL_E_PARA, what, "rank %u is out of range",
                              rank);
    char desc[64];
    snprintf(desc, sizeof desc, "%s was given rank %u", what, rank);
    hres = env_agrees(what, "RANK_ID", rank, desc);
    if (hres == HCCL_SUCCESS)
        hres = check_table_env(what, path, rank);
    if (hres != HCCL_SUCCESS)
        return hres;
    loom_comm_t c = NULL;
    loom_result_t res = loom_comm_init_ranktable(path, (int)rank, &c);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, what, NULL);
    *comm = c;
    return HCCL_SUCCESS;
}

LOOM_HCCL_API HcclResult HcclCommInitClusterInfo(const char *clusterInfo,
                                                 uint32_t rank, HcclComm *comm)
{
    return init_cluster("HcclCommInitClusterInfo", clusterInfo, rank, comm);
}

LOOM_HCCL_API HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo,
                                                       uint32_t rank,
                                                       HcclCommConfig *config,
                                                       HcclComm *comm)
{
    const char *what = "HcclCommInitClusterInfoConfig";
    HcclResult hres = check_config(what, config);
    if (hres != HCCL_SUCCESS) {
        if (comm)
            *comm = NULL;
        return hres;
    }
    return init_cluster(what, clusterInfo, rank, comm);
}

/* ---- root info ------------------------------------------------------------ */

LOOM_HCCL_API HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)
{
    const char *what = "HcclGetRootInfo";
    if (!rootInfo)
        return loom_hccl_fail(HCCL_E_PTR, what, "rootInfo is NULL");
    HcclResult hres = loom_hccl_env_once(what);
    if (hres != HCCL_SUCCESS)
        return hres;
    loom_unique_id_t id;
    loom_result_t res = loom_get_unique_id(&id);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, what, NULL);
    memset(rootInfo, 0, sizeof *rootInfo);
    memcpy(rootInfo->internal, root_tag, sizeof root_tag);
    memcpy(rootInfo->internal + sizeof root_tag, id.internal, sizeof id.internal);
    return HCCL_SUCCESS;
}

static HcclResult init_root(const char *what, uint32_t nRanks,
                            const HcclRootInfo *rootInfo, uint32_t rank,
                            HcclComm *comm)
{
    if (!comm || !rootInfo)
        return loom_hccl_fail(HCCL_E_PTR, what, "%s is NULL",
                              comm ? "rootInfo" : "comm");
    *comm = NULL;
    HcclResult hres = loom_hccl_env_once(what);
    if (hres != HCCL_SUCCESS)
        return hres;
    if (memcmp(rootInfo->internal, root_tag, sizeof root_tag) != 0)
        return loom_hccl_fail(HCCL_E_PARA, what, "rootInfo was not written by "
                                                 "HcclGetRootInfo (of Loom)");
    if (nRanks == 0 || nRanks > INT_MAX || rank >= nRanks)
        return loom_hccl_fail(HCCL_E_PARA, what, "rank %u is not in 0..%ld "
                                                 "(nRanks %u)",
                              rank, (long)nRanks - 1, nRanks);
    char desc[64];
    snprintf(desc, sizeof desc, "%s was given rank %u", what, rank);
    hres = env_agrees(what, "RANK_ID", rank, desc);
    snprintf(desc, sizeof desc, "%s was given nRanks %u", what, nRanks);
    if (hres == HCCL_SUCCESS)
        hres = env_agrees(what, "RANK_SIZE", nRanks, desc);
    if (hres != HCCL_SUCCESS)
        return hres;
    loom_unique_id_t id;
    memcpy(id.internal, rootInfo->internal + sizeof root_tag, sizeof id.internal);
    loom_comm_t c = NULL;
    loom_result_t res = loom_comm_init_rank(&c, (int)nRanks, &id, (int)rank);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, what, NULL);
    *comm = c;
    return HCCL_SUCCESS;
}

LOOM_HCCL_API HcclResult HcclCommInitRootInfo(uint32_t nRanks,
                                              const HcclRootInfo *rootInfo,
                                              uint32_t rank, HcclComm *comm)
{
    return init_root("HcclCommInitRootInfo", nRanks, rootInfo, rank, comm);
}

LOOM_HCCL_API HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks,
                                                    const HcclRootInfo *rootInfo,
                                                    uint32_t rank,
                                                    const HcclCommConfig *config,
                                                    HcclComm *comm)
{
    const char *what = "HcclCommInitRootInfoConfig";
    HcclResult hres = check_config(what, config);
    if (hres != HCCL_SUCCESS) {
        if (comm)
            *comm = NULL;
        return hres;
    }
    return init_root(what, nRanks, rootInfo, rank, comm);
}

/* ---- queries ---------------------------------------------------------------- */

LOOM_HCCL_API HcclResult HcclCommDestroy(HcclComm comm)
{
    if (!comm)
        return loom_hccl_fail(HCCL_E_PTR, "HcclCommDestroy", "comm is NULL");
    loom_result_t res = loom_comm_destroy((loom_comm_t)comm);
    return res == LOOM_SUCCESS ? HCCL_SUCCESS
                               : loom_hccl_fail_loom(res, "HcclCommDestroy", NULL);
}

LOOM_HCCL_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)
{
    int n = 0;
    if (!comm || !rankSize)
        return loom_hccl_fail(HCCL_E_PTR, "HcclGetRankSize", "%s is NULL",
                              comm ? "rankSize" : "comm");
    loom_result_t res = loom_comm_size((loom_comm_t)comm, &n);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, "HcclGetRankSize", (loom_comm_t)comm);
    *rankSize = (uint32_t)n;
    return HCCL_SUCCESS;
}

LOOM_HCCL_API HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)
{
    int r = 0;
    if (!comm || !rank)
        return loom_hccl_fail(HCCL_E_PTR, "HcclGetRankId", "%s is NULL",
                              comm ? "rank" : "comm");
    loom_result_t res = loom_comm_rank((loom_comm_t)comm, &r);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, "HcclGetRankId", (loom_comm_t)comm);
    *rank = (uint32_t)r;
    return HCCL_SUCCESS;
}

LOOM_HCCL_API HcclResult HcclGetCommAsyncError(HcclComm comm,
                                               HcclResult *asyncError)
{
    loom_result_t err = LOOM_SUCCESS;
    if (!comm || !asyncError)
        return loom_hccl_fail(HCCL_E_PTR, "HcclGetCommAsyncError",
                              "%s is NULL", comm ? "asyncError" : "comm");
    loom_result_t res = loom_comm_get_async_error((loom_comm_t)comm, &err);
    if (res != LOOM_SUCCESS)
        return loom_hccl_fail_loom(res, "HcclGetCommAsyncError",
                                   (loom_comm_t)comm);
    *asyncError = loom_hccl_result(err);
    return HCCL_SUCCESS;
}
