/* verbs_dl.c - fill the verbs table (verbs_api.h) from libibverbs.so.1 at
 * first use, so that libloom never links libibverbs.
 *
 * Symbols are looked up by version (dlvsym "IBVERBS_1.1", falling back to
 * "IBVERBS_1.0" for those that have only that): libibverbs keeps 1.0
 * compatibility entries of the same names with other structure layouts,
 * and plain dlsym would hand out whichever is the default.
 *
 * The header's inline entry points are wrapped here, calling the inlines
 * themselves: ibv_post_send, ibv_post_recv, ibv_poll_cq and
 * ibv_req_notify_cq reach the provider through qp/cq->context->ops and
 * reference no libibverbs symbol. ibv_query_port is a macro around an
 * inline that first tries the extended context's query_port and otherwise
 * calls the exported ibv_query_port with the older (prefix) layout; the
 * wrapper below does the same through the looked-up symbol. */
#include "build_config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs_api.h"

static const struct loom_ibv *installed;

/* Test programs that link the software model of verbs
 * (tests/unit/verbs_model.c) define this; run with LOOM_TEST_VERBS_MODEL=1
 * they get the model instead of libibverbs. libloom itself has no
 * definition: the weak reference stays NULL and the variable is refused. */
extern const struct loom_ibv *loom_verbs_test_model(char *why, size_t len)
    __attribute__((weak));
static struct loom_ibv lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static char lib_why[256];
static int lib_ok;

/* the exported ibv_query_port, with the layout it has (a prefix of
 * struct ibv_port_attr) */
static int (*dl_query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);

static int wrap_query_port(struct ibv_context *context, uint8_t port,
                           struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);
    if (vctx)
        return vctx->query_port(context, port, attr, sizeof *attr);
    memset(attr, 0, sizeof *attr);
    return dl_query_port(context, port, (struct _compat_ibv_port_attr *)attr);
}

static int wrap_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return ibv_req_notify_cq(cq, solicited_only);
}

static int wrap_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return ibv_post_send(qp, wr, bad);
}

static int wrap_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return ibv_post_recv(qp, wr, bad);
}

static int wrap_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    return ibv_poll_cq(cq, n, wc);
}

static void *sym(void *h, const char *name)
{
    void *p = dlvsym(h, name, "IBVERBS_1.1");
    if (!p)
        p = dlvsym(h, name, "IBVERBS_1.0");
    if (!p && !lib_why[0])
        snprintf(lib_why, sizeof lib_why, "libibverbs.so.1 has no %s", name);
    return p;
}

static void lib_load(void)
{
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib_why, sizeof lib_why, "%s", e ? e : "libibverbs.so.1: cannot be loaded");
        return;
    }
    /* each pointer takes the symbol's own type: a cast through void * is
     * how dlsym results are used (POSIX) */
#define LOAD(field, name) *(void **)&lib.field = sym(h, name)
    lib.struct_size = sizeof lib;
    lib.name = "libibverbs.so.1";
    lib.sysfs = "/sys/class/infiniband";
    LOAD(get_device_list, "ibv_get_device_list");
    LOAD(free_device_list, "ibv_free_device_list");
    LOAD(get_device_name, "ibv_get_device_name");
    LOAD(open_device, "ibv_open_device");
    LOAD(close_device, "ibv_close_device");
    LOAD(query_device, "ibv_query_device");
    *(void **)&dl_query_port = sym(h, "ibv_query_port");
    LOAD(query_gid, "ibv_query_gid");
    LOAD(alloc_pd, "ibv_alloc_pd");
    LOAD(dealloc_pd, "ibv_dealloc_pd");
    LOAD(reg_mr, "ibv_reg_mr");
    LOAD(dereg_mr, "ibv_dereg_mr");
    LOAD(create_comp_channel, "ibv_create_comp_channel");
    LOAD(destroy_comp_channel, "ibv_destroy_comp_channel");
    LOAD(create_cq, "ibv_create_cq");
    LOAD(resize_cq, "ibv_resize_cq");
    LOAD(destroy_cq, "ibv_destroy_cq");
    LOAD(get_cq_event, "ibv_get_cq_event");
    LOAD(ack_cq_events, "ibv_ack_cq_events");
    LOAD(create_qp, "ibv_create_qp");
    LOAD(modify_qp, "ibv_modify_qp");
    LOAD(destroy_qp, "ibv_destroy_qp");
    LOAD(wc_status_str, "ibv_wc_status_str");
#undef LOAD
    lib.query_port = wrap_query_port;
    lib.req_notify_cq = wrap_req_notify_cq;
    lib.post_send = wrap_post_send;
    lib.post_recv = wrap_post_recv;
    lib.poll_cq = wrap_poll_cq;
    if (lib_why[0]) {
        dlclose(h);
        return;
    }
    lib_ok = 1; /* the handle stays open for the life of the process */
}

const struct loom_ibv *loom_ibv_get(char *why, size_t len)
{
    const struct loom_ibv *t = __atomic_load_n(&installed, __ATOMIC_ACQUIRE);
    if (t)
        return t;
    const char *model = getenv("LOOM_TEST_VERBS_MODEL");
    if (model && strcmp(model, "1") == 0) {
        if (loom_verbs_test_model)
            return loom_verbs_test_model(why, len);
        if (why && len)
            snprintf(why, len, "LOOM_TEST_VERBS_MODEL=1, but this program has no software "
                     "model of verbs linked in (only Loom's tests do)");
        return NULL;
    }
    pthread_once(&lib_once, lib_load);
    if (lib_ok)
        return &lib;
    if (why && len)
        snprintf(why, len, "%s", lib_why);
    return NULL;
}

void loom_ibv_set(const struct loom_ibv *ibv)
{
    __atomic_store_n(&installed, ibv, __ATOMIC_RELEASE);
}
