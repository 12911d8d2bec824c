/* hello_static.c - linked against libloom.a through pkg-config --static:
 * one rank, an allreduce, the version and features. */
#include <loom.h>
#include <stdio.h>

int main(void)
{
    loom_comm_t comm;
    if (loom_comm_init_url("tcp://127.0.0.1:1", 1, 0, &comm) != LOOM_SUCCESS) {
        fprintf(stderr, "hello_static: %s\n", loom_get_error_string(NULL));
        return 1;
    }
    int x = 21;
    loom_result_t res = loom_allreduce(&x, &x, 1, LOOM_INT32, LOOM_SUM, comm, NULL);
    const char *version = "", *features = "";
    loom_get_version(NULL, &version);
    loom_get_features(&features);
    loom_comm_destroy(comm);
    if (res != LOOM_SUCCESS || x != 21) {
        fprintf(stderr, "hello_static: allreduce gave %d (%s)\n", x, loom_result_string(res));
        return 1;
    }
    printf("hello_static: Loom %s (%s), linked statically: ok\n", version, features);
    return 0;
}
