/* ofi_api.h - the one table through which the ofi transport reaches
 * libfabric's exported functions.
 *
 * libloom does not link libfabric: ofi_dl.c opens libfabric.so.1 at the
 * first use of the ofi transport (its provider choice), so a process that
 * never chooses ofi never maps libfabric nor the provider libraries it
 * needs, and a build with ofi runs on hosts without it, saying why ofi is
 * unavailable there. Most of libfabric's calls (fi_domain, fi_endpoint,
 * fi_tsend, fi_cq_read, fi_close, ...) are inline functions in its headers
 * that call through the object's ops table and reference no libfabric
 * symbol; only the exported ones are here (fi_allocinfo is
 * loom_fi.dupinfo(NULL)). */
#ifndef LOOM_OFI_API_H
#define LOOM_OFI_API_H

#include <stdint.h>
#include <rdma/fabric.h>

struct loom_fi {
    uint32_t (*version)(void);
    int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const struct fi_info *hints, struct fi_info **info);
    void (*freeinfo)(struct fi_info *info);
    struct fi_info *(*dupinfo)(const struct fi_info *info);
    int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
    const char *(*strerror)(int errnum);
};

/* Filled by loom_fi_load; use it only after a call returned 0. */
extern struct loom_fi loom_fi;

/* Open libfabric.so.1 once (thread-safe): 0, or -1 with why naming the
 * library or the missing symbol. Before it opens the library it sets what
 * keeps the providers' libraries from taking over the process's signals
 * (ofi_dl.c). */
int loom_fi_load(char *why, size_t len);

#endif
