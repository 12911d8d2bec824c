/* verbs_api.h - the one table through which the verbs transport reaches
 * libibverbs.
 *
 * libloom does not link libibverbs: the table is filled by
 * dlopen("libibverbs.so.1") at first use (verbs_dl.c), so a build with
 * verbs runs on hosts without it and says why verbs is unavailable there.
 * Tests install another table (a software model of the verbs this
 * transport uses, tests/support/verbs_model.c) with loom_ibv_set; the
 * transport cannot tell them apart.
 *
 * ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are
 * inline functions in <infiniband/verbs.h> that call through the context's
 * ops table (qp->context->ops.post_send, ...); they are entries here like
 * the rest, filled with wrappers around those inlines for the library and
 * with the model's own functions for the model. Every call the transport
 * makes goes through this table; nothing calls ibv_* directly. */
#ifndef LOOM_VERBS_API_H
#define LOOM_VERBS_API_H

#include <stddef.h>
#include <infiniband/verbs.h>

struct loom_ibv {
    size_t struct_size;
    const char *name;  /* "libibverbs.so.1", "verbs model"        */
    const char *sysfs; /* device tree: "/sys/class/infiniband"    */
    struct ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *device);
    struct ibv_context *(*open_device)(struct ibv_device *device);
    int (*close_device)(struct ibv_context *context);
    int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
    int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
    struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*resize_cq)(struct ibv_cq *cq, int cqe);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    /* inline in verbs.h: through the context's ops */
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
    int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
    int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
};

/* The table in use: the installed one, else libibverbs.so.1 loaded on the
 * first call (thread-safe). NULL when it cannot be loaded; why then says
 * so ("libibverbs.so.1: cannot open shared object file: ..."). */
const struct loom_ibv *loom_ibv_get(char *why, size_t len);
/* Tests: use this table from now on (NULL: back to libibverbs). */
void loom_ibv_set(const struct loom_ibv *ibv);

#endif
