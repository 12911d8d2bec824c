/* verbs_dl.c - fill the verbs table (verbs_api.h) from libibverbs.so.1 at
 * first use, so that libloom never links libibverbs.
 *
 * The library is opened through dl.h. Symbols are looked up by version
 * (dlvsym "IBVERBS_1.1", falling back to "IBVERBS_1.0" for those that have
 * only that): libibverbs keeps 1.0 compatibility entries of the same
 * names with other structure layouts, and plain dlsym would hand out
 * whichever is the default.
 *
 * The header's inline entry points are wrapped here, calling the inlines
 * themselves: ibv_post_send, ibv_post_recv, ibv_poll_cq and
 * ibv_req_notify_cq reach the provider through qp/cq->context->ops and
 * reference no libibverbs symbol. ibv_query_port is a macro around an
 * inline that first tries the extended context's query_port and otherwise
 * calls the exported ibv_query_port with the older (prefix) layout; the
 * wrapper below does the same through the looked-up symbol. */
#include "build_config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl.h"
#include "transport/verbs/verbs_api.h"

static const struct loom_ibv *installed;

/* Test programs that link the software model of verbs
 * (tests/support/verbs_model.c) define this; run with LOOM_TEST_VERBS_MODEL=1
 * they get the model instead of libibverbs. libloom itself has no
 * definition: the weak reference stays NULL and the variable is refused. */
extern const struct loom_ibv *loom_verbs_test_model(char *why, size_t len) __attribute__((weak));

/* the exported ibv_query_port, with the layout it has (a prefix of
 * struct ibv_port_attr), beside the table */
static struct {
    struct loom_ibv t;
    int (*query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
} lib;

static int wrap_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(context, query_port);
    if (vctx)
        return vctx->query_port(context, port, attr, sizeof *attr);
    memset(attr, 0, sizeof *attr);
    return lib.query_port(context, port, (struct _compat_ibv_port_attr *)attr);
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

#define SYM(field, name)                                                                           \
    {                                                                                              \
        name, offsetof(__typeof__(lib), field)                                                     \
    }
static const struct loom_dl_sym syms[] = {
    SYM(t.get_device_list, "ibv_get_device_list"),
    SYM(t.free_device_list, "ibv_free_device_list"),
    SYM(t.get_device_name, "ibv_get_device_name"),
    SYM(t.open_device, "ibv_open_device"),
    SYM(t.close_device, "ibv_close_device"),
    SYM(t.query_device, "ibv_query_device"),
    SYM(query_port, "ibv_query_port"),
    SYM(t.query_gid, "ibv_query_gid"),
    SYM(t.alloc_pd, "ibv_alloc_pd"),
    SYM(t.dealloc_pd, "ibv_dealloc_pd"),
    SYM(t.reg_mr, "ibv_reg_mr"),
    SYM(t.dereg_mr, "ibv_dereg_mr"),
    SYM(t.create_comp_channel, "ibv_create_comp_channel"),
    SYM(t.destroy_comp_channel, "ibv_destroy_comp_channel"),
    SYM(t.create_cq, "ibv_create_cq"),
    SYM(t.resize_cq, "ibv_resize_cq"),
    SYM(t.destroy_cq, "ibv_destroy_cq"),
    SYM(t.get_cq_event, "ibv_get_cq_event"),
    SYM(t.ack_cq_events, "ibv_ack_cq_events"),
    SYM(t.create_qp, "ibv_create_qp"),
    SYM(t.modify_qp, "ibv_modify_qp"),
    SYM(t.destroy_qp, "ibv_destroy_qp"),
    SYM(t.wc_status_str, "ibv_wc_status_str"),
};
#undef SYM

static const char *const versions[] = {"IBVERBS_1.1", "IBVERBS_1.0", NULL};

static void fill_wrappers(void)
{
    lib.t.struct_size = sizeof lib.t;
    lib.t.name = "libibverbs.so.1";
    lib.t.sysfs = "/sys/class/infiniband";
    /* inline in verbs.h: through the context's ops */
    lib.t.query_port = wrap_query_port;
    lib.t.req_notify_cq = wrap_req_notify_cq;
    lib.t.post_send = wrap_post_send;
    lib.t.post_recv = wrap_post_recv;
    lib.t.poll_cq = wrap_poll_cq;
}

static struct loom_dl dl = {
    .lib = "libibverbs.so.1",
    .versions = versions,
    .syms = syms,
    .nsyms = sizeof syms / sizeof syms[0],
    .table = &lib,
    .before = fill_wrappers,
    LOOM_DL_STATE,
};

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
            snprintf(why, len,
                     "LOOM_TEST_VERBS_MODEL=1, but this program has no software "
                     "model of verbs linked in (only Loom's tests do)");
        return NULL;
    }
    return loom_dl_load(&dl, why, len) == 0 ? &lib.t : NULL;
}

void loom_ibv_set(const struct loom_ibv *ibv)
{
    __atomic_store_n(&installed, ibv, __ATOMIC_RELEASE);
}
