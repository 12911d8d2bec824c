/* ddp_train.c - data-parallel training on Loom's C API, for users without
 * Python: what torch's DistributedDataParallel does, in ~300 lines.
 *
 *   ddp_train -n 4            start 4 ranks (processes) on this host
 *   ddp_train -n 4 -s 50      ... for 50 steps
 *   ddp_train -n 4 -k 1       ... through a kill -9 of rank 1 mid-training
 *
 * N ranks train the same 3-layer MLP (float32) from the same seed, each on
 * its share of a fixed global batch. Backward produces gradients from the
 * last layer to the first; as soon as a layer's are ready its bucket (the
 * layer's weight and bias gradients, adjacent in one buffer as in DDP's
 * buckets) is averaged across ranks by a group of allreduces enqueued on a
 * stream, so the exchange overlaps the backward of the layers below. A
 * request per bucket tells when it is done; the optimizer step waits for
 * all. At the end every rank checks that its parameters equal every other
 * rank's (bit for bit) and a single-process full-batch run it computes
 * itself (float tolerance). Exit status 0 when they do.
 *
 * With -k R the parent kills rank R with SIGKILL by its PID halfway through
 * (R waits for it there, so the others are mid-step whatever the machine's
 * speed). The survivors see the step fail, revoke the communicator, shrink
 * it to the live ranks (docs/shrink.md), go back to the latest step all of
 * them completed (a failed step may have completed on some ranks), take
 * their shares of the batch anew and train on: the same checks hold. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"

#define BATCH 24 /* divisible by 1..4 and 6, 8 */
#define D_IN 16
#define H1 32
#define H2 32
#define D_OUT 4
#define NLAYERS 3
#define LR 0.05f

struct layer {
    int in, out;
    float *w, *b;      /* parameters: w[out][in], b[out]                */
    float *grad;       /* the bucket: dw[out][in] then db[out], adjacent */
    float *act_in;     /* the layer's input for the current batch       */
    float *pre;        /* pre-activation (x W^T + b)                    */
};

struct net {
    struct layer l[NLAYERS];
};

static const int dims[NLAYERS + 1] = {D_IN, H1, H2, D_OUT};

/* a seeded generator every rank runs alike */
static float urand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 33) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static void net_init(struct net *n)
{
    unsigned long long s = 42;
    for (int k = 0; k < NLAYERS; k++) {
        struct layer *L = &n->l[k];
        L->in = dims[k];
        L->out = dims[k + 1];
        L->w = malloc(sizeof(float) * (size_t)(L->in * L->out));
        L->b = malloc(sizeof(float) * (size_t)L->out);
        L->grad = malloc(sizeof(float) * (size_t)(L->in * L->out + L->out));
        L->act_in = malloc(sizeof(float) * (size_t)(BATCH * L->in));
        L->pre = malloc(sizeof(float) * (size_t)(BATCH * L->out));
        float scale = 1.0f / sqrtf((float)L->in);
        for (int i = 0; i < L->in * L->out; i++)
            L->w[i] = urand(&s) * scale;
        for (int i = 0; i < L->out; i++)
            L->b[i] = urand(&s) * scale;
    }
}

static void net_free(struct net *n)
{
    for (int k = 0; k < NLAYERS; k++) {
        free(n->l[k].w);
        free(n->l[k].b);
        free(n->l[k].grad);
        free(n->l[k].act_in);
        free(n->l[k].pre);
    }
}

static void data(float *x, float *y)
{
    unsigned long long s = 7;
    for (int i = 0; i < BATCH * D_IN; i++)
        x[i] = urand(&s);
    for (int i = 0; i < BATCH; i++)
        for (int o = 0; o < D_OUT; o++) {
            float v = 0;
            for (int d = 0; d < D_IN; d++)
                v += x[i * D_IN + d] * (float)((d + o) % 3 - 1);
            y[i * D_OUT + o] = sinf(v);
        }
}

/* forward of rows [0, m) of x; returns the output of the last layer */
static const float *forward(struct net *n, const float *x, int m)
{
    const float *in = x;
    for (int k = 0; k < NLAYERS; k++) {
        struct layer *L = &n->l[k];
        memcpy(L->act_in, in, sizeof(float) * (size_t)(m * L->in));
        for (int i = 0; i < m; i++)
            for (int o = 0; o < L->out; o++) {
                float v = L->b[o];
                for (int d = 0; d < L->in; d++)
                    v += in[i * L->in + d] * L->w[o * L->in + d];
                L->pre[i * L->out + o] = v;
            }
        if (k + 1 < NLAYERS) /* relu, in place in the next layer's input */
            for (int i = 0; i < m * L->out; i++)
                n->l[k + 1].act_in[i] = L->pre[i] > 0 ? L->pre[i] : 0;
        in = k + 1 < NLAYERS ? n->l[k + 1].act_in : L->pre;
    }
    return n->l[NLAYERS - 1].pre;
}

/* Backward of the mean squared error over `total` rows (m of them here);
 * each layer's bucket is handed to ready(k) as soon as it is complete. */
typedef loom_result_t (*bucket_ready_fn)(struct net *n, int k, void *arg);

static loom_result_t backward(struct net *n, const float *y, int m, int total,
                              bucket_ready_fn ready, void *arg)
{
    int maxw = H1 > H2 ? H1 : H2;
    float *dout = malloc(sizeof(float) * (size_t)(m * (maxw > D_OUT ? maxw : D_OUT)));
    float *din = malloc(sizeof(float) * (size_t)(m * maxw));
    const float *out = n->l[NLAYERS - 1].pre;
    for (int i = 0; i < m * D_OUT; i++)
        dout[i] = 2.0f * (out[i] - y[i]) / (float)(total * D_OUT);
    loom_result_t res = LOOM_SUCCESS;
    for (int k = NLAYERS - 1; k >= 0 && res == LOOM_SUCCESS; k--) {
        struct layer *L = &n->l[k];
        float *dw = L->grad, *db = L->grad + L->in * L->out;
        memset(L->grad, 0, sizeof(float) * (size_t)(L->in * L->out + L->out));
        for (int i = 0; i < m; i++)
            for (int o = 0; o < L->out; o++) {
                float g = dout[i * L->out + o];
                db[o] += g;
                for (int d = 0; d < L->in; d++)
                    dw[o * L->in + d] += g * L->act_in[i * L->in + d];
            }
        if (k > 0) { /* the gradient of the input, through the relu */
            for (int i = 0; i < m; i++)
                for (int d = 0; d < L->in; d++) {
                    float v = 0;
                    for (int o = 0; o < L->out; o++)
                        v += dout[i * L->out + o] * L->w[o * L->in + d];
                    din[i * L->in + d] = L->act_in[i * L->in + d] > 0 ? v : 0;
                }
            memcpy(dout, din, sizeof(float) * (size_t)(m * L->in));
        }
        if (ready)
            res = ready(n, k, arg);
    }
    free(dout);
    free(din);
    return res;
}

static void sgd(struct net *n)
{
    for (int k = 0; k < NLAYERS; k++) {
        struct layer *L = &n->l[k];
        for (int i = 0; i < L->in * L->out; i++)
            L->w[i] -= LR * L->grad[i];
        for (int i = 0; i < L->out; i++)
            L->b[i] -= LR * L->grad[L->in * L->out + i];
    }
}

/* ---- the distributed part ------------------------------------------------- */

struct ddp {
    loom_comm_t comm;
    loom_stream_t stream;
    loom_request_t req[NLAYERS];
};

/* -k: the parent's end of a pipe that the rank to kill writes to when it
 * is where it waits to be killed, and that rank and step */
static int kill_fd = -1, kill_rank = -1, kill_step = -1;

/* The parameters, flat (every layer's w then b), after a completed step:
 * ranks joined by an allreduce each step are at most one step apart, so
 * the last two steps' suffice to go back to the one every survivor has. */
struct history {
    int step[2];
    float *params[2];
};

static size_t nparams(void)
{
    size_t n = 0;
    for (int k = 0; k < NLAYERS; k++)
        n += (size_t)(dims[k] * dims[k + 1] + dims[k + 1]);
    return n;
}

static void params_copy(struct net *n, float *flat, int save)
{
    for (int k = 0; k < NLAYERS; k++) {
        struct layer *L = &n->l[k];
        size_t nw = (size_t)(L->in * L->out), nb = (size_t)L->out;
        memcpy(save ? flat : L->w, save ? L->w : flat, sizeof(float) * nw);
        memcpy(save ? flat + nw : L->b, save ? L->b : flat + nw, sizeof(float) * nb);
        flat += nw + nb;
    }
}

static void history_commit(struct history *h, struct net *n, int step)
{
    h->step[step % 2] = step;
    params_copy(n, h->params[step % 2], 1);
}

/* Revoke, shrink to the live ranks, agree on the step to go back to and
 * restore it; *step, *rank and *nranks become the new ones. */
static loom_result_t survive(struct ddp *p, struct net *n, struct history *h, int *step, int *rank,
                             int *nranks, int first)
{
    loom_comm_t next = NULL;
    loom_stream_synchronize(p->stream); /* the failed calls, and their error */
    loom_comm_revoke(p->comm);          /* the others stop at once, too */
    loom_result_t res = loom_comm_shrink(p->comm, LOOM_SHRINK_ABORT, &next);
    loom_comm_destroy(p->comm); /* never waits for the dead */
    p->comm = next;
    if (res != LOOM_SUCCESS) {
        fprintf(stderr, "rank %d: shrink: %s: %s\n", first, loom_result_string(res),
                loom_get_error_string(NULL));
        return res;
    }
    int64_t last = *step;
    if ((res = loom_allreduce(&last, &last, 1, LOOM_INT64, LOOM_MIN, next, NULL)) ||
        (res = loom_comm_rank(next, rank)) || (res = loom_comm_size(next, nranks))) {
        fprintf(stderr, "rank %d: after the shrink: %s: %s\n", first, loom_result_string(res),
                loom_get_error_string(next));
        return res;
    }
    if (h->step[last % 2] != last) {
        fprintf(stderr, "rank %d: the parameters after step %lld are gone\n", first,
                (long long)last);
        return LOOM_ERROR_INTERNAL;
    }
    params_copy(n, h->params[last % 2], 0);
    *step = (int)last;
    printf("rank %d (first %d): going on with %d ranks from step %d\n", *rank, first, *nranks,
           *step);
    fflush(stdout);
    return LOOM_SUCCESS;
}

/* A layer's bucket is ready: average it across ranks, without waiting. The
 * weight and bias gradients are two calls in one group; their buffers are
 * adjacent, so Loom merges them into one allreduce with no copy. */
static loom_result_t bucket_ready(struct net *n, int k, void *arg)
{
    struct ddp *p = arg;
    struct layer *L = &n->l[k];
    loom_group_start();
    loom_allreduce(L->grad, L->grad, (uint64_t)(L->in * L->out), LOOM_FLOAT32, LOOM_AVG,
                   p->comm, p->stream);
    loom_allreduce(L->grad + L->in * L->out, L->grad + L->in * L->out, (uint64_t)L->out,
                   LOOM_FLOAT32, LOOM_AVG, p->comm, p->stream);
    loom_result_t res = loom_group_end();
    if (res == LOOM_SUCCESS)
        res = loom_request_create(p->stream, NULL, NULL, &p->req[k]);
    return res;
}

static int check(loom_result_t res, loom_comm_t comm, const char *what, int rank)
{
    if (res == LOOM_SUCCESS)
        return 0;
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, loom_result_string(res),
            loom_get_error_string(comm));
    return 1;
}

/* One step on rows [0, share) of mx, my: the buckets averaged as backward
 * makes them, then the update. On failure nothing is updated. */
static loom_result_t train_step(struct ddp *p, struct net *net, const float *mx, const float *my,
                                int share)
{
    forward(net, mx, share);
    /* each rank's loss is the mean over its share: averaging the gradients
     * gives the full batch's */
    memset(p->req, 0, sizeof p->req);
    loom_result_t res = backward(net, my, share, share, bucket_ready, p);
    for (int k = 0; k < NLAYERS; k++)
        if (p->req[k]) {
            loom_result_t r = loom_request_wait(p->req[k]);
            if (res == LOOM_SUCCESS)
                res = r;
            loom_request_free(p->req[k]);
        }
    if (res == LOOM_SUCCESS)
        sgd(net);
    return res;
}

static int rank_main(int rank, int nranks, int port, int steps)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    struct ddp p = {0};
    if (check(loom_comm_init_url(url, nranks, rank, &p.comm), NULL, "init", rank) ||
        check(loom_stream_create_host(&p.stream), p.comm, "stream", rank))
        return 1;
    static float x[BATCH * D_IN], y[BATCH * D_OUT];
    data(x, y);
    const int first = rank;

    struct net net, ref;
    net_init(&net);
    net_init(&ref);
    struct history hist = {{-1, -1},
                           {malloc(sizeof(float) * nparams()), malloc(sizeof(float) * nparams())}};
    if (!hist.params[0] || !hist.params[1])
        return 1;
    history_commit(&hist, &net, 0);
    for (int step = 0; step < steps;) {
        if (first == kill_rank && step == kill_step) {
            /* tell the parent, and wait for its SIGKILL (alarm bounds it) */
            if (write(kill_fd, "k", 1) != 1)
                return 1;
            pause();
        }
        int share = BATCH / nranks;
        loom_result_t res = train_step(&p, &net, x + rank * share * D_IN, y + rank * share * D_OUT,
                                       share);
        if (res == LOOM_SUCCESS) {
            history_commit(&hist, &net, ++step);
            continue;
        }
        check(res, p.comm, "step", rank);
        if (kill_rank < 0 || survive(&p, &net, &hist, &step, &rank, &nranks, first))
            return 1;
        if (BATCH % nranks) {
            fprintf(stderr, "rank %d: the batch of %d does not split among %d ranks\n", first,
                    BATCH, nranks);
            return 1;
        }
    }
    /* the single-process, full-batch reference */
    for (int step = 0; step < steps; step++) {
        forward(&ref, x, BATCH);
        backward(&ref, y, BATCH, BATCH, NULL, NULL);
        sgd(&ref);
    }
    /* every rank's parameters, bit for bit: max and min across ranks agree */
    float maxdiff = 0;
    int differ = 0;
    for (int k = 0; k < NLAYERS; k++) {
        struct layer *L = &net.l[k], *R = &ref.l[k];
        int nw = L->in * L->out;
        float *hi = malloc(sizeof(float) * (size_t)(nw + L->out));
        float *lo = malloc(sizeof(float) * (size_t)(nw + L->out));
        memcpy(hi, L->w, sizeof(float) * (size_t)nw);
        memcpy(hi + nw, L->b, sizeof(float) * (size_t)L->out);
        if (check(loom_allreduce(hi, lo, (uint64_t)(nw + L->out), LOOM_FLOAT32, LOOM_MIN,
                                 p.comm, NULL), p.comm, "check", rank) ||
            check(loom_allreduce(hi, hi, (uint64_t)(nw + L->out), LOOM_FLOAT32, LOOM_MAX,
                                 p.comm, NULL), p.comm, "check", rank))
            return 1;
        for (int i = 0; i < nw + L->out; i++) {
            float mine = i < nw ? L->w[i] : L->b[i - nw];
            float want = i < nw ? R->w[i] : R->b[i - nw];
            differ |= hi[i] != lo[i];
            if (fabsf(mine - want) > maxdiff)
                maxdiff = fabsf(mine - want);
        }
        free(hi);
        free(lo);
    }
    int ok = !differ && maxdiff <= 1e-5f;
    if (rank == 0 || !ok)
        printf("rank %d (first %d): %d ranks, %d steps: parameters identical across ranks: "
               "%s, max |ddp - single process| %.2e: %s\n",
               rank, first, nranks, steps, differ ? "no" : "yes", (double)maxdiff,
               ok ? "ok" : "FAILED");
    free(hist.params[0]);
    free(hist.params[1]);
    net_free(&net);
    net_free(&ref);
    loom_stream_destroy(p.stream);
    loom_comm_destroy(p.comm);
    return ok ? 0 : 1;
}

/* A port below the kernel's ephemeral range that nothing holds now. */
static int pick_port(void)
{
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    for (int attempt = 0; attempt < 256; attempt++) {
        int port = 10000 + rand() % 20000;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return port;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int nranks = 2, steps = 20, timeout = 60, opt;
    while ((opt = getopt(argc, argv, "n:s:t:k:")) != -1) {
        switch (opt) {
        case 'n': nranks = atoi(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 't': timeout = atoi(optarg); break;
        case 'k': kill_rank = atoi(optarg); break;
        default:
            fprintf(stderr,
                    "usage: %s [-n ranks] [-s steps] [-t timeout_s] "
                    "[-k rank_to_kill]\n",
                    argv[0]);
            return 2;
        }
    }
    int pipefd[2] = {-1, -1};
    if (kill_rank >= 0) {
        if (kill_rank >= nranks || nranks < 2 || steps < 2 || BATCH % (nranks - 1)) {
            fprintf(stderr,
                    "%s: -k needs a rank below -n, -s 2 or more, and the batch of "
                    "%d to split among -n minus one ranks\n",
                    argv[0], BATCH);
            return 2;
        }
        if (pipe(pipefd) != 0 || fcntl(pipefd[0], F_SETFL, O_NONBLOCK) != 0) {
            perror("pipe");
            return 2;
        }
        kill_fd = pipefd[1];
        kill_step = steps / 2;
    }
    if (nranks < 1 || BATCH % nranks) {
        fprintf(stderr, "%s: -n must divide the batch of %d\n", argv[0], BATCH);
        return 2;
    }
    int port = pick_port();
    if (!port) {
        fprintf(stderr, "%s: no free port on 127.0.0.1\n", argv[0]);
        return 2;
    }
    pid_t pids[64];
    if (nranks > 64) {
        fprintf(stderr, "%s: at most 64 ranks\n", argv[0]);
        return 2;
    }
    fflush(stdout);
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)timeout + 5); /* never outlive the parent */
            int rc = rank_main(r, nranks, port, steps);
            fflush(stdout);
            _exit(rc);
        }
    }
    int failed = 0, left = nranks, killed = 0;
    time_t deadline = time(NULL) + timeout;
    while (left > 0) {
        int st;
        char c;
        if (kill_rank >= 0 && !killed && pids[kill_rank] > 0 && read(pipefd[0], &c, 1) == 1) {
            kill(pids[kill_rank], SIGKILL); /* by PID; it waits for this */
            printf("parent: killed rank %d (pid %d) at step %d\n", kill_rank, (int)pids[kill_rank],
                   kill_step);
            fflush(stdout);
            killed = 1;
        }
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            left--;
            for (int r = 0; r < nranks; r++)
                if (pids[r] == pid) {
                    pids[r] = 0;
                    if (r == kill_rank)
                        failed |= !killed || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL;
                    else
                        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
                }
            continue;
        }
        if (time(NULL) > deadline) {
            for (int r = 0; r < nranks; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL); /* by PID: only the ranks still running */
            fprintf(stderr, "%s: ranks still running after %d s: killed\n", argv[0], timeout);
            return 1;
        }
        usleep(2000);
    }
    if (kill_rank >= 0 && !killed) {
        fprintf(stderr, "%s: rank %d never reached step %d\n", argv[0], kill_rank, kill_step);
        failed = 1;
    }
    return failed;
}
