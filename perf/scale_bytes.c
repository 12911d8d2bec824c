/* scale_bytes.c - counts the bytes a process moves through sockets, for
 * perf/scale-growth (built by it with `cc -shared -fPIC`, loaded with
 * LD_PRELOAD): send, sendto, sendmsg, write and writev on sockets count as
 * sent, recv, recvfrom, recvmsg, read and readv on sockets as received.
 * Eventfds, pipes and files do not count. perf/scale_probe reads the totals
 * through loom_scale_bytes() (found with dlsym), so it measures any build of
 * Loom the same way. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static uint64_t sent, received;

static int is_socket(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void count(int fd, ssize_t n, uint64_t *to)
{
    if (n > 0 && is_socket(fd))
        __atomic_add_fetch(to, (uint64_t)n, __ATOMIC_RELAXED);
}

void loom_scale_bytes(uint64_t *s, uint64_t *r)
{
    *s = __atomic_load_n(&sent, __ATOMIC_RELAXED);
    *r = __atomic_load_n(&received, __ATOMIC_RELAXED);
}

#define NEXT(fn)                                                               \
    static __typeof__(fn) *real;                                               \
    if (!real)                                                                 \
        real = (__typeof__(fn) *)dlsym(RTLD_NEXT, #fn)

ssize_t send(int fd, const void *b, size_t l, int f)
{
    NEXT(send);
    ssize_t n = real(fd, b, l, f);
    count(fd, n, &sent);
    return n;
}

ssize_t sendto(int fd, const void *b, size_t l, int f, const struct sockaddr *a, socklen_t al)
{
    NEXT(sendto);
    ssize_t n = real(fd, b, l, f, a, al);
    count(fd, n, &sent);
    return n;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int f)
{
    NEXT(sendmsg);
    ssize_t n = real(fd, m, f);
    count(fd, n, &sent);
    return n;
}

ssize_t write(int fd, const void *b, size_t l)
{
    NEXT(write);
    ssize_t n = real(fd, b, l);
    count(fd, n, &sent);
    return n;
}

ssize_t writev(int fd, const struct iovec *v, int c)
{
    NEXT(writev);
    ssize_t n = real(fd, v, c);
    count(fd, n, &sent);
    return n;
}

ssize_t recv(int fd, void *b, size_t l, int f)
{
    NEXT(recv);
    ssize_t n = real(fd, b, l, f);
    if (!(f & MSG_PEEK))
        count(fd, n, &received);
    return n;
}

ssize_t recvfrom(int fd, void *b, size_t l, int f, struct sockaddr *a, socklen_t *al)
{
    NEXT(recvfrom);
    ssize_t n = real(fd, b, l, f, a, al);
    if (!(f & MSG_PEEK))
        count(fd, n, &received);
    return n;
}

ssize_t recvmsg(int fd, struct msghdr *m, int f)
{
    NEXT(recvmsg);
    ssize_t n = real(fd, m, f);
    if (!(f & MSG_PEEK))
        count(fd, n, &received);
    return n;
}

ssize_t read(int fd, void *b, size_t l)
{
    NEXT(read);
    ssize_t n = real(fd, b, l);
    count(fd, n, &received);
    return n;
}

ssize_t readv(int fd, const struct iovec *v, int c)
{
    NEXT(readv);
    ssize_t n = real(fd, v, c);
    count(fd, n, &received);
    return n;
}
