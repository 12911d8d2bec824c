/* oob_service.c - the out-of-band service's thread: one poll loop over the
 * job's listener, its incoming and outgoing sockets and its wake-up fd
 * (oob_priv.h). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "bootstrap/oob_priv.h"

void *loom_oob_main(void *arg)
{
    struct oob_job *j = arg;
    loom_log_set_rank(j->rank);
    size_t cap = 0;
    struct pollfd *pfds = NULL;
    struct oob_conn **owners = NULL;
    pthread_mutex_lock(&j->lock);
    while (!j->stop) {
        double now = loom_now(), wake_at = now + 0.5;
        size_t need = 2 + (size_t)j->nins + (size_t)j->nranks;
        if (need > cap) {
            struct pollfd *np = realloc(pfds, need * sizeof *np);
            struct oob_conn **no = realloc(owners, need * sizeof *no);
            if (np)
                pfds = np;
            if (no)
                owners = no;
            if (!np || !no) {
                pthread_mutex_unlock(&j->lock);
                usleep(10000);
                pthread_mutex_lock(&j->lock);
                continue;
            }
            cap = need;
        }
        size_t n = 0;
        pfds[n] = (struct pollfd){.fd = j->kick, .events = POLLIN};
        owners[n++] = NULL;
        pfds[n] = (struct pollfd){.fd = j->lfd, .events = POLLIN};
        owners[n++] = NULL;
        for (struct oob_conn *c = j->ins; c; c = c->next) {
            short ev = c->state == IN_HS ? c->hs.events : POLLIN;
            if (!ev)
                continue; /* a hello held until the job id is known */
            pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
            owners[n++] = c;
            if (c->state != IN_MSGS && c->deadline < wake_at)
                wake_at = c->deadline;
        }
        for (int r = 0; r < j->nranks; r++) {
            struct oob_conn *c = j->outs[r];
            short ev = c ? loom_oob_out_events(c, &wake_at) : 0;
            if (!ev)
                continue;
            pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
            owners[n++] = c;
        }
        pthread_mutex_unlock(&j->lock);
        int ms = (int)((wake_at - now) * 1000.0) + 1;
        int rc = poll(pfds, (nfds_t)n, ms < 0 ? 0 : ms);
        pthread_mutex_lock(&j->lock);
        if (rc < 0 && errno != EINTR)
            break;
        now = loom_now();
        if (pfds[0].revents & POLLIN) {
            uint64_t v;
            if (read(j->kick, &v, sizeof v) < 0) {
                /* nothing to read: another wake-up took it */
            }
        }
        for (size_t i = 2; i < n && rc > 0; i++) {
            struct oob_conn *c = owners[i];
            if (!pfds[i].revents)
                continue;
            if (c->state <= IN_MSGS)
                loom_oob_in_read(j, c);
            else
                loom_oob_out_io(j, c, pfds[i].revents, now);
        }
        if (rc > 0 && (pfds[1].revents & POLLIN))
            loom_oob_accept_new(j);
        /* handshakes that never finished, retries, idle sockets */
        loom_oob_in_expire(j, now);
        for (int r = 0; r < j->nranks; r++)
            if (j->outs[r])
                loom_oob_out_tick(j, j->outs[r], now);
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->lock);
    free(pfds);
    free(owners);
    return NULL;
}
