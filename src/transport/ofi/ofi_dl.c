/* ofi_dl.c - fill the libfabric table (ofi_api.h) from libfabric.so.1 at
 * the first use of the ofi transport, so that libloom never links it.
 *
 * Symbols are libfabric's default versions (dlsym): the ones a program
 * linked against the same library binds; Loom asks fi_getinfo for the API
 * version it was written to (FI_VERSION(1, 9), ofi.c).
 *
 * Signals. Debian's libfabric.so.1 needs libpsm_infinipath.so.1 (whose
 * libinfinipath.so.4 is loaded with it) and libpsm2.so.2, and their
 * constructors, run inside dlopen, install handlers for SIGSEGV, SIGBUS,
 * SIGILL, SIGABRT, SIGINT and SIGTERM that write a backtrace file
 * (<prog>.<pid>,<host>.btr) and call exit(1): SIGTERM then ends a rank with
 * status 1 instead of being killed by it, Ctrl-C no longer reaches
 * Python, and exit() run from a signal handler can deadlock in the
 * process's atexit handlers. Each skips its handlers when a variable is
 * set (IPATH_NO_BACKTRACE, HFI_NO_BACKTRACE), so they are set here just
 * before the library is opened, unless the user set them; docs/ofi.md. */
#include "build_config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

#include "dl.h"
#include "log.h"
#include "transport/ofi/ofi_api.h"

struct loom_fi loom_fi;

#define SYM(field, name)                                                                           \
    {                                                                                              \
        name, offsetof(struct loom_fi, field)                                                      \
    }
static const struct loom_dl_sym syms[] = {
    SYM(version, "fi_version"), SYM(getinfo, "fi_getinfo"), SYM(freeinfo, "fi_freeinfo"),
    SYM(dupinfo, "fi_dupinfo"), SYM(fabric, "fi_fabric"),   SYM(strerror, "fi_strerror"),
};
#undef SYM

/* the variables that keep the provider libraries' constructors from
 * installing their signal handlers: libinfinipath (psm), libpsm2 (hfi1) */
static const char *const quiet[] = {"IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE"};

static void before_open(void)
{
    /* already mapped (another library of the process uses libfabric): its
     * constructors ran then, and these variables change nothing */
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        dlclose(h);
        LOOM_INFO(LOOM_SUB_NET,
                  "ofi: libfabric.so.1 was already loaded by this process: "
                  "its providers' signal handlers are as they set them (docs/ofi.md)");
        return;
    }
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
        if (getenv(quiet[i])) {
            LOOM_INFO(LOOM_SUB_NET, "ofi: %s=%s set by the user: kept", quiet[i], getenv(quiet[i]));
            continue;
        }
        setenv(quiet[i], "1", 0);
        LOOM_INFO(LOOM_SUB_NET,
                  "ofi: %s=1, so that libfabric's provider libraries install "
                  "no signal handlers that call exit() (docs/ofi.md)",
                  quiet[i]);
    }
}

static struct loom_dl dl = {
    .lib = "libfabric.so.1",
    .syms = syms,
    .nsyms = sizeof syms / sizeof syms[0],
    .table = &loom_fi,
    .before = before_open,
    LOOM_DL_STATE,
};

int loom_fi_load(char *why, size_t len)
{
    return loom_dl_load(&dl, why, len);
}
