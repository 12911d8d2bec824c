/*
 * hccl/hccl_types.h - HCCL's types and values, for programs written against
 * HCCL's C API (Huawei CANN) to build and run on Loom (libloom_hccl).
 *
 * The names and numbers are those CANN documents; the header is Loom's own.
 * It is installed under its own folder ($(includedir)/loom-hccl, which
 * `pkg-config --cflags loom-hccl` adds), so that it is found only when asked
 * for and never in place of a real CANN installation. See docs/hccl.md.
 */
#ifndef LOOM_HCCL_TYPES_H
#define LOOM_HCCL_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Results. Loom's own results map to these as docs/hccl.md tabulates. */
typedef enum {
    HCCL_SUCCESS = 0,
    HCCL_E_PARA = 1,             /* a parameter is wrong                 */
    HCCL_E_PTR = 2,              /* a pointer is NULL                    */
    HCCL_E_MEMORY = 3,           /* memory could not be allocated        */
    HCCL_E_INTERNAL = 4,
    HCCL_E_NOT_SUPPORT = 5,      /* not supported (e.g. reducing int16)  */
    HCCL_E_NOT_FOUND = 6,
    HCCL_E_UNAVAIL = 7,          /* resource unavailable (aborted)       */
    HCCL_E_SYSCALL = 8,          /* a system call failed                 */
    HCCL_E_TIMEOUT = 9,
    HCCL_E_OPEN_FILE_FAILURE = 10,
    HCCL_E_TCP_CONNECT = 11,
    HCCL_E_ROCE_CONNECT = 12,
    HCCL_E_TCP_TRANSFER = 13,
    HCCL_E_ROCE_TRANSFER = 14,
    HCCL_E_RUNTIME = 15,
    HCCL_E_DRV = 16,
    HCCL_E_PROFILING = 17,
    HCCL_E_CCE = 18,
    HCCL_E_NETWORK = 19,
    HCCL_E_AGAIN = 20,
    HCCL_E_REMOTE = 21,          /* the peer failed or closed the link   */
    HCCL_E_SUSPENDING = 22,
    HCCL_E_OPRETRY_FAIL = 23,
    HCCL_E_OOM = 24,
    HCCL_E_IN_STATUS = 1041,
    HCCL_E_RESERVED
} HcclResult;

/* A communicator. On Loom it is a loom_comm_t (docs/hccl.md). */
typedef void *HcclComm;

/* Reductions. Note MAX before MIN, unlike loom_redop_t: libloom_hccl maps
 * them through a table, never by number. */
typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/* Element types. Loom reduces int8, uint8, int16, uint16, int32, uint32,
 * int64, uint64, fp16, bfp16, fp32 and fp64; the others (int128, the 8-bit
 * floats) it moves (broadcast, allgather, send/recv, alltoall) but does not
 * reduce. */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_HIF8 = 14,
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

/* Sizes and markers. CANN's own header declares these as C++ constants;
 * here they are constants in C and C++ alike. */
#ifdef __cplusplus
static const uint32_t HCCL_ROOT_INFO_BYTES = 4108;
static const uint32_t COMM_NAME_MAX_LENGTH = 128;
static const uint32_t BUFFER_NAME_MAX_LENGTH = 128;
static const uint32_t UDI_MAX_LENGTH = 128;
static const uint32_t HCCL_COMM_ALGO_MAX_LENGTH = 1600;
static const uint32_t HCCL_COMM_RETRY_ENABLE_MAX_LENGTH = 50;
static const uint32_t HCCL_COMM_RETRY_PARAMS_MAX_LENGTH = 128;
static const uint32_t HCCL_COMM_CONFIG_INFO_BYTES = 24;
static const uint32_t HCCL_COMM_CONFIG_MAGIC_WORD = 0xf0f0f0f0u;
static const uint32_t HCCL_COMM_CONFIG_VERSION = 10;
static const uint32_t HCCL_COMM_DEFAULT_BUFFSIZE = 200;
static const uint32_t HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET = 0xffffffffu;
static const uint32_t HCCL_COMM_DEFAULT_DETERMINISTIC = 0;
static const uint32_t HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET = 0xffffffffu;
static const uint32_t HCCL_COMM_DEFAULT_OP_EXPANSION_MODE = 0;
static const uint32_t HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET = 0xffffffffu;
static const uint32_t HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET = 0xffffffffu;
static const int32_t HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET = -1;
static const uint32_t HCCL_COMM_QOS_CONFIG_NOT_SET = 0xffffffffu;
static const uint64_t HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE = 16;
#else
/* Enumerators, so that C sees integer constant expressions (array sizes)
 * and no unused-variable warnings. */
enum {
    HCCL_ROOT_INFO_BYTES = 4108,
    COMM_NAME_MAX_LENGTH = 128,
    BUFFER_NAME_MAX_LENGTH = 128,
    UDI_MAX_LENGTH = 128,
    HCCL_COMM_ALGO_MAX_LENGTH = 1600,
    HCCL_COMM_RETRY_ENABLE_MAX_LENGTH = 50,
    HCCL_COMM_RETRY_PARAMS_MAX_LENGTH = 128,
    HCCL_COMM_CONFIG_INFO_BYTES = 24,
    HCCL_COMM_CONFIG_VERSION = 10,
    HCCL_COMM_DEFAULT_BUFFSIZE = 200,
    HCCL_COMM_DEFAULT_DETERMINISTIC = 0,
    HCCL_COMM_DEFAULT_OP_EXPANSION_MODE = 0,
    HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET = -1
};
#define HCCL_COMM_CONFIG_MAGIC_WORD ((uint32_t)0xf0f0f0f0u)
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET ((uint32_t)0xffffffffu)
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET ((uint32_t)0xffffffffu)
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET ((uint32_t)0xffffffffu)
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET ((uint32_t)0xffffffffu)
#define HCCL_COMM_QOS_CONFIG_NOT_SET ((uint32_t)0xffffffffu)
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE ((uint64_t)16)
#endif

/* One call of HcclBatchSendRecv. */
typedef enum {
    HCCL_SEND = 0,
    HCCL_RECV = 1,
    HCCL_SEND_RECV_RESERVED
} HcclSendRecvType;

typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void *buf;
    uint64_t count;
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

/* What HcclGetRootInfo writes and every rank passes to HcclCommInitRootInfo:
 * plain bytes, copied as they are (broadcast them with MPI, a file, ...). */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

/* Communicator options for HcclCommInitClusterInfoConfig and
 * HcclCommInitRootInfoConfig. Initialise with HcclCommConfigInit, then set
 * fields. Loom checks the header HcclCommConfigInit writes, rejects values
 * out of range and otherwise leaves the options to its own configuration
 * (docs/hccl.md says which apply). */
typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES]; /* size, magic, version */
    uint32_t hcclBufferSize;          /* MB                            */
    uint32_t hcclDeterministic;       /* 0, 1 or 2                     */
    char hcclCommName[COMM_NAME_MAX_LENGTH];
    char hcclUdi[UDI_MAX_LENGTH];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
    uint32_t hcclWorldRankID;
    uint64_t hcclJobID;
    uint8_t aclGraphZeroCopyEnable;
    int32_t hcclExecTimeOut;          /* seconds                       */
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];
    uint32_t hcclQos;
    uint64_t hcclSymWinMaxMemSizePerRank;
} HcclCommConfig;

/* The header HcclCommConfigInit writes in HcclCommConfig.reserved. */
typedef struct HcclCommConfigInfoDef {
    size_t size;                      /* sizeof(HcclCommConfig)        */
    uint32_t magicWord;               /* HCCL_COMM_CONFIG_MAGIC_WORD   */
    uint32_t version;                 /* HCCL_COMM_CONFIG_VERSION      */
    uint64_t reserved;
} HcclCommConfigInfo;

/* Every option "not set", with the header the Config inits check. */
static inline void HcclCommConfigInit(HcclCommConfig *config)
{
    HcclCommConfigInfo info;
    if (config == NULL)
        return;
    memset(&info, 0, sizeof info);
    info.size = sizeof(HcclCommConfig);
    info.magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
    info.version = HCCL_COMM_CONFIG_VERSION;
    memcpy(config->reserved, &info, sizeof info);
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}

#ifdef __cplusplus
}
#endif

#endif /* LOOM_HCCL_TYPES_H */
