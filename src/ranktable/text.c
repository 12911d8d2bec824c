/* text.c - checks on the raw bytes of a rank table before JSON parsing:
 * UTF-8, nesting depth, and line/column positions for messages. */
#include "build_config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ranktable/ranktable_internal.h"
#include "ranktable/text.h"

void loom_rt_position(const char *text, size_t len, size_t offset,
                      size_t *line, size_t *column)
{
    size_t l = 1, c = 1;
    if (offset > len)
        offset = len;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            c++; /* count characters, not continuation bytes */
        }
    }
    *line = l;
    *column = c;
}

/* Length of the UTF-8 sequence at p (at most n bytes), 0 when invalid.
 * Rejects overlong forms, surrogates and code points past U+10FFFF. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
    unsigned char b = p[0];
    if (b < 0x80)
        return 1;
    size_t need;
    uint32_t cp, min;
    if ((b & 0xE0) == 0xC0) {
        need = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
        need = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
        need = 4, cp = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (need > n)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

int loom_rt_check_utf8(const char *text, size_t len, struct loom_diag *d)
{
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t line, col;
        if (p[i] == 0) {
            loom_rt_position(text, len, i, &line, &col);
            loom_rt_error(d, "", "contains a NUL byte at line %zu, column %zu",
                          line, col);
            return -1;
        }
        size_t n = utf8_sequence(p + i, len - i);
        if (n == 0) {
            loom_rt_position(text, len, i, &line, &col);
            loom_rt_error(d, "",
                          "not valid UTF-8 at line %zu, column %zu (byte 0x%02x)",
                          line, col, p[i]);
            return -1;
        }
        i += n;
    }
    return 0;
}

int loom_rt_check_depth(const char *text, size_t len, struct loom_diag *d)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\')
                i++; /* skip the escaped character */
            else if (ch == '"')
                in_string = 0;
            continue;
        }
        if (ch == '"') {
            in_string = 1;
        } else if (ch == '{' || ch == '[') {
            if (++depth > LOOM_RT_MAX_DEPTH) {
                size_t line, col;
                loom_rt_position(text, len, i, &line, &col);
                loom_rt_error(d, "",
                              "nesting deeper than %d levels at line %zu, "
                              "column %zu",
                              LOOM_RT_MAX_DEPTH, line, col);
                return -1;
            }
        } else if ((ch == '}' || ch == ']') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

const char *loom_rt_json_hint(const char *text, size_t len, size_t offset)
{
    if (offset >= len || (text[offset] != '}' && text[offset] != ']'))
        return "";
    size_t i = offset;
    while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n' ||
                     text[i - 1] == '\r'))
        i--;
    if (i > 0 && text[i - 1] == ',')
        return text[offset] == '}' ? " (a comma before '}': JSON allows none after "
                                     "the last field)"
                                   : " (a comma before ']': JSON allows none after "
                                     "the last item)";
    return "";
}

size_t loom_rt_edit_distance(const char *a, const char *b)
{
    /* Levenshtein distance over one row; names longer than 63 bytes are
     * never near misses of a field name. */
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la > 63 || lb > 63)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}
