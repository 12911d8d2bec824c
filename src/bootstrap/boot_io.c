/* boot_io.c - deadline-bounded socket I/O for the bootstrap (boot_io.h). */
#include "build_config.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loom.h"
#include "util.h"
#include "bootstrap/boot_io.h"

int loom_boot_wait(int fd, short events, double deadline, int wake_fd)
{
    for (;;) {
        double left = deadline - loom_now();
        if (left <= 0)
            return 0;
        struct pollfd pf[2] = {{.fd = fd, .events = events},
                               {.fd = wake_fd, .events = POLLIN}};
        int ms = (int)(left * 1000.0) + 1;
        int rc = poll(pf, 2, ms);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            return LOOM_ERROR_SYSTEM;
        }
        if (pf[1].revents & POLLIN)
            return LOOM_ERROR_ABORTED;
        if (fd >= 0 && pf[0].revents)
            return 1;
    }
}

loom_result_t loom_boot_write_all(int fd, const void *buf, size_t len,
                                  double deadline, int wake_fd)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return (errno == EPIPE || errno == ECONNRESET) ? LOOM_ERROR_REMOTE
                                                          : LOOM_ERROR_SYSTEM;
        int w = loom_boot_wait(fd, POLLOUT, deadline, wake_fd);
        if (w == 0)
            return LOOM_ERROR_TIMEOUT;
        if (w < 0)
            return w;
    }
    return LOOM_SUCCESS;
}

loom_result_t loom_boot_read_all(int fd, void *buf, size_t len,
                                 double deadline, int wake_fd, int *eof)
{
    char *p = buf;
    *eof = 0;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            *eof = 1;
            return LOOM_ERROR_REMOTE;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return errno == ECONNRESET ? LOOM_ERROR_REMOTE : LOOM_ERROR_SYSTEM;
        int w = loom_boot_wait(fd, POLLIN, deadline, wake_fd);
        if (w == 0)
            return LOOM_ERROR_TIMEOUT;
        if (w < 0)
            return w;
    }
    return LOOM_SUCCESS;
}
