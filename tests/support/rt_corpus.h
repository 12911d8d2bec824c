/* rt_corpus.h - what the rank-table Check suites share: a corpus case (a
 * file, its expected result and its exact list of severity, JSON path and
 * message) and its check, and loading the tables the suites read. Included
 * by one test file each; every function is static. */
#ifndef LOOM_TESTS_RT_CORPUS_H
#define LOOM_TESTS_RT_CORPUS_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"

#define E LOOM_DIAG_ERROR
#define W LOOM_DIAG_WARNING
#define MAX_EXPECT 12

struct expect {
    loom_diag_severity_t sev;
    const char *path;
    const char *message;
};

struct corpus_case {
    const char *file;
    loom_result_t result;
    struct expect diags[MAX_EXPECT];
};

/* $LOOM_SRCDIR/dir/file (the source tree: make check runs out of tree). */
static void data_path(char *out, size_t len, const char *dir, const char *file)
{
    const char *s = getenv("LOOM_SRCDIR");
    snprintf(out, len, "%s/%s/%s", s ? s : ".", dir, file);
}

static loom_ranktable_t *load_ok(const char *dir, const char *file)
{
    char path[PATH_MAX];
    loom_ranktable_t *t = NULL;
    loom_diag_t *diag = NULL;
    data_path(path, sizeof path, dir, file);
    loom_result_t res = loom_ranktable_load(path, &t, &diag);
    ck_assert_msg(res == LOOM_SUCCESS, "%s: %s", path, loom_result_string(res));
    ck_assert_ptr_nonnull(t);
    loom_diag_free(diag);
    return t;
}

/* Load dir/c->file: its result, and exactly the expected entries (any
 * order), each matched once. */
static void rt_corpus_check(const char *dir, const struct corpus_case *c)
{
    char path[PATH_MAX];
    loom_ranktable_t *t = (loom_ranktable_t *)&t; /* must be overwritten */
    loom_diag_t *diag = NULL;
    data_path(path, sizeof path, dir, c->file);

    loom_result_t res = loom_ranktable_load(path, &t, &diag);
    ck_assert_msg(res == c->result, "%s: got %s, want %s", c->file, loom_result_string(res),
                  loom_result_string(c->result));
    if (res == LOOM_SUCCESS)
        ck_assert_ptr_nonnull(t);
    else
        ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(diag);

    size_t want = 0, got = 0;
    while (want < MAX_EXPECT && c->diags[want].path)
        want++;
    ck_assert_int_eq(loom_diag_count(diag, &got), LOOM_SUCCESS);
    int used[64] = {0};
    ck_assert_uint_le(got, 64);
    for (size_t k = 0; k < want; k++) {
        const struct expect *x = &c->diags[k];
        int found = 0;
        for (size_t i = 0; i < got && !found; i++) {
            loom_diag_severity_t sev;
            const char *p, *m;
            ck_assert_int_eq(loom_diag_get(diag, i, &sev, &p, &m), LOOM_SUCCESS);
            if (!used[i] && sev == x->sev && strcmp(p, x->path) == 0 && strcmp(m, x->message) == 0)
                used[i] = found = 1;
        }
        ck_assert_msg(found, "%s: no %s \"%s: %s\"", c->file, x->sev == E ? "error" : "warning",
                      x->path, x->message);
    }
    for (size_t i = 0; i < got; i++) {
        const char *p, *m;
        loom_diag_get(diag, i, NULL, &p, &m);
        ck_assert_msg(used[i], "%s: unexpected \"%s: %s\"", c->file, p, m);
    }
    ck_assert_uint_eq(got, want);
    loom_diag_free(diag);
    loom_ranktable_free(res == LOOM_SUCCESS ? t : NULL);
}

#endif
