/* loom-info - what this Loom was built with, and its configuration.
 *
 *   loom-info       version, features (transports) built, config file in use
 *   loom-info -c    every LOOM_* variable: value, where it came from, doc
 *   loom-info -h | --help, -V | --version */
#include "build_config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "base/config.h"
#include "transport/transport.h"

static void info_usage(FILE *out)
{
    fprintf(out,
            "usage: loom-info [-c] [-h] [-V]\n"
            "  (no option)    print the version, the features built and the config file\n"
            "  -c, --config   print every LOOM_* variable with its value, source and doc\n"
            "  -h, --help     this help\n"
            "  -V, --version  print the version only\n"
            "See loom-info(1).\n");
}

static int info_print_summary(void)
{
    int code = 0;
    const char *version = NULL, *features = NULL;
    if (loom_get_version(&code, &version) != LOOM_SUCCESS ||
        loom_get_features(&features) != LOOM_SUCCESS) {
        fprintf(stderr, "loom-info: cannot query the library's version or features\n");
        return 1;
    }
    printf("Loom version : %s (code %d)\n", version, code);
    printf("features     : %s\n", features);
    /* each transport slot: built or not, and whether it can run here */
    static const char *const slot_names[LOOM_TRANSPORT_SLOTS] = {"tcp", "ofi", "verbs"};
    static const char *const slot_flags[LOOM_TRANSPORT_SLOTS] = {"", "--with-ofi",
                                                                 "--with-verbs"};
    for (int i = 0; i < LOOM_TRANSPORT_SLOTS; i++) {
        const struct loom_transport *t = loom_transports[i];
        char why[512] = "";
        if (!t)
            printf("transport    : %-6s not built (configure %s)\n", slot_names[i],
                   slot_flags[i]);
        else if (t->available && t->available(why, sizeof why) != 0)
            printf("transport    : %-6s built; cannot run here: %s\n", t->name, why);
        else
            printf("transport    : %-6s built, available%s\n", t->name,
                   strcmp(t->name, loom_config()->transport) == 0 ? " (LOOM_TRANSPORT)" : "");
    }

    /* The same rule config.c follows: LOOM_CONF_FILE, else /etc/loom.conf. */
    const char *conf = getenv("LOOM_CONF_FILE");
    int explicit = conf && *conf;
    if (!explicit)
        conf = "/etc/loom.conf";
    if (access(conf, R_OK) == 0)
        printf("config file  : %s%s\n", conf, explicit ? " (LOOM_CONF_FILE)" : "");
    else
        printf("config file  : %s (%s)\n", conf,
               explicit ? "LOOM_CONF_FILE, not readable" : "none; not present");
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int show_config = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "chV", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            show_config = 1;
            break;
        case 'h':
            info_usage(stdout);
            return 0;
        case 'V':
            printf("loom-info (Loom) %s\n", PACKAGE_VERSION);
            return 0;
        default:
            info_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "loom-info: unexpected argument '%s'\n", argv[optind]);
        info_usage(stderr);
        return 2;
    }
    if (show_config) {
        loom_config_print(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    int rc = info_print_summary();
    if (fflush(stdout) != 0)
        rc = 1;
    return rc;
}
