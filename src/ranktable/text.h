/* text.h - raw-byte checks of a rank table (text.c). */
#ifndef LOOM_RANKTABLE_TEXT_H
#define LOOM_RANKTABLE_TEXT_H

#include <stddef.h>

struct loom_diag;

/* 1-based line and column (in characters) of byte offset in text. */
void loom_rt_position(const char *text, size_t len, size_t offset,
                      size_t *line, size_t *column);
/* 0 when text is UTF-8 without NUL bytes; else -1 with an error in d. */
int loom_rt_check_utf8(const char *text, size_t len, struct loom_diag *d);
/* 0 when no bracket nests deeper than LOOM_RT_MAX_DEPTH; else -1. */
int loom_rt_check_depth(const char *text, size_t len, struct loom_diag *d);

/* " (a comma before '}': ...)" when the JSON syntax error at offset follows
 * a trailing comma; else "". */
const char *loom_rt_json_hint(const char *text, size_t len, size_t offset);
/* Edits (insert, delete, replace) that turn a into b; (size_t)-1 for names
 * of 64 bytes or more. For "did you mean" hints on unknown fields. */
size_t loom_rt_edit_distance(const char *a, const char *b);

#endif
