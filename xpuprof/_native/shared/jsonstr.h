/* jsonstr.h: JSON string tokens escaped exactly as orjson escapes them (jsonstr.c), the one C copy of that
 * rule: '"' and '\\' backslashed, \b \t \n \f \r short, other bytes below 0x20 as \u00XX (lowercase hex),
 * every other byte (multi-byte UTF-8 included) as it is. The input is valid UTF-8. */
#ifndef XPUPROF_JSONSTR_H
#define XPUPROF_JSONSTR_H

#include <stddef.h>

/* The most bytes the token of n bytes of text takes: every byte as \u00XX, and the quotes. */
#define JSON_STRING_MAX(n) (6 * (size_t)(n) + 2)

/* The exact size of the token of s[0:n] (its quotes included). */
size_t json_string_size(const char *s, size_t n);

/* Writes the token of s[0:n] at p (room for json_string_size(s, n) bytes); returns its end. */
char *json_string_put(char *p, const char *s, size_t n);

#endif
