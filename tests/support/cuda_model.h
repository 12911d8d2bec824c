/* cuda_model.h - a CUDA driver without a GPU, for the adapter's tests.
 *
 * It fills the adapter's driver table (cuda_driver.h) and runs what is
 * enqueued on its streams on one "GPU" thread, in stream order, streams
 * independent of each other: stream memory operations (a wait blocks its
 * stream until the word satisfies it), copies (which take a random time
 * up to max_delay_us, so copies on different streams overlap), events,
 * the adapter's wait kernel, and "kernels" the test writes as C functions.
 * Device memory is devmem.h's arena: the CPU faults on a device address,
 * as it would on a GPU's; kernels and checks use cuda_model_view(). Errors
 * can be injected into any entry (the nth call returns an error) and into
 * the nth copy (a sticky error of the context, as an illegal address is).
 * Two switches break the ordering on purpose, so that a test can show it
 * notices when ordering is broken. Each process (rank) has its own fake. */
#ifndef LOOM_CUDA_MODEL_H
#define LOOM_CUDA_MODEL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"

struct cuda_model_knobs {
    int ndevices;          /* devices the fake has (default 2)          */
    unsigned max_delay_us; /* copies take 0..max_delay_us (default 200) */
    int memops_refused;    /* cuStreamWrite/WaitValue32: NOT_SUPPORTED  */
    int ignore_waits;      /* BROKEN: stream waits never hold a stream  */
    int write_at_enqueue;  /* BROKEN: cuStreamWriteValue32 stores at the
                                call instead of in stream order            */
};
/* Set before cuda_model_install (or between tests in one process). */
extern struct cuda_model_knobs cuda_model;

/* Give the adapter the fake (loom_cuda_driver_use) and return its table,
 * which a test also calls as an application calls the driver. */
const struct loom_cuda_driver *cuda_model_install(void);

/* Memory. Device and managed memory come from arenas that
 * cuda_model_reset_memory empties; pinned memory is registered host memory
 * (cuda_model_free_pinned). */
void *cuda_model_malloc(size_t bytes);
void *cuda_model_malloc_managed(size_t bytes);
void *cuda_model_malloc_pinned(size_t bytes);
void cuda_model_free_pinned(void *p);
void cuda_model_reset_memory(void);
/* The CPU's view of any of them (device memory: its alias). */
void *cuda_model_view(const void *p);

/* A kernel: fn(arg) runs on the GPU thread in stream order, delay_us after
 * the stream reaches it (it may use cuda_model_view). */
CUresult cuda_model_launch(CUstream s, void (*fn)(void *), void *arg, unsigned delay_us);

/* Wait until s has run everything enqueued (0), or timeout_s passed (-1),
 * or the context has a sticky error (1). */
int cuda_model_stream_wait(CUstream s, double timeout_s);

/* Error injection: the nth call (1-based, counted from now) of entry name
 * ("cuMemcpyAsync", ... as cuda.h names them) returns err; 0 clears. */
void cuda_model_fail(const char *name, unsigned nth, CUresult err);
/* The nth copy run from now fails: the context's error becomes err. */
void cuda_model_fail_copy(unsigned nth, CUresult err);
/* Calls of entry name so far; the names of every entry. */
unsigned cuda_model_calls(const char *name);
extern const char *const cuda_model_entry_names[];
extern const int cuda_model_nentries;

/* What the fake saw that the adapter should not do. */
struct cuda_model_stats {
    unsigned pageable_copies; /* async copies to or from unpinned memory */
    unsigned bad_addresses;   /* copies outside any allocation           */
    unsigned host_registers;  /* cuMemHostRegister calls that succeeded  */
};
struct cuda_model_stats cuda_model_stats(void);

#endif
