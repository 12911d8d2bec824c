/* devmem.h - "device memory" for tests of staging without a device: an
 * arena mapped twice from one memfd, once without access (the addresses
 * handed to Loom, as a GPU's addresses are to the CPU: any load or store
 * through them faults) and once readable and writable (the alias a fake
 * copy engine and the test's checks use). Create it in each rank after the
 * fork: the memory is shared by every process that maps it. */
#ifndef LOOM_TEST_DEVMEM_H
#define LOOM_TEST_DEVMEM_H

/* memfd_create needs _GNU_SOURCE, defined by the test before any include */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

struct devmem {
    char *dev;   /* PROT_NONE: the "device" addresses */
    char *alias; /* the same pages, read/write        */
    size_t size, used;
};

/* 0 on success. */
static inline int devmem_init(struct devmem *m, size_t size)
{
    int fd = memfd_create("loom-test-device", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) < 0) {
        close(fd);
        return -1;
    }
    m->alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m->dev = mmap(NULL, size, PROT_NONE, MAP_SHARED, fd, 0);
    close(fd);
    if (m->alias == MAP_FAILED || m->dev == MAP_FAILED)
        return -1;
    m->size = size;
    m->used = 0;
    return 0;
}

static inline void devmem_fini(struct devmem *m)
{
    munmap(m->alias, m->size);
    munmap(m->dev, m->size);
}

/* bytes of "device memory" (256-byte aligned), or NULL when full; the
 * arena is reset as a whole (devmem_reset), not per allocation */
static inline void *devmem_alloc(struct devmem *m, size_t bytes)
{
    size_t off = (m->used + 255) & ~(size_t)255;
    if (off + bytes > m->size)
        return NULL;
    m->used = off + bytes;
    return m->dev + off;
}

static inline void devmem_reset(struct devmem *m)
{
    m->used = 0;
}

static inline int devmem_contains(const struct devmem *m, const void *p)
{
    return (const char *)p >= m->dev && (const char *)p < m->dev + m->size;
}

/* The read/write alias of a device address. */
static inline void *devmem_view(const struct devmem *m, const void *p)
{
    return m->alias + ((const char *)p - m->dev);
}

#endif
