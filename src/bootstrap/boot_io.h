/* boot_io.h - blocking-with-deadline socket I/O for the bootstrap. Every wait
 * also watches wake_fd (>= 0): readable means give up (LOOM_ERROR_ABORTED). */
#ifndef LOOM_BOOT_IO_H
#define LOOM_BOOT_IO_H

#include <stddef.h>
#include "loom.h"

/* Wait for events on fd (or just the deadline when fd < 0). Returns 1 when
 * ready, 0 at the deadline, LOOM_ERROR_ABORTED on wake, LOOM_ERROR_SYSTEM. */
int loom_boot_wait(int fd, short events, double deadline, int wake_fd);
/* Write/read exactly len bytes on a non-blocking socket. Results: success,
 * LOOM_ERROR_TIMEOUT, LOOM_ERROR_ABORTED, LOOM_ERROR_REMOTE (EOF or reset;
 * *eof set to 1 for a clean EOF), LOOM_ERROR_SYSTEM. errno is kept. */
loom_result_t loom_boot_write_all(int fd, const void *buf, size_t len,
                                  double deadline, int wake_fd);
loom_result_t loom_boot_read_all(int fd, void *buf, size_t len,
                                 double deadline, int wake_fd, int *eof);

#endif
