/* jsonstr.c: JSON string tokens as orjson writes them (jsonstr.h). */
#include "jsonstr.h"

#include <string.h>

static const char HEX_DIGITS[] = "0123456789abcdef";

size_t json_string_size(const char *s, size_t n) {
    size_t size = n + 2;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20) {
            size += c == '"' || c == '\\';
        } else {
            size += (c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r') ? 1 : 5;
        }
    }
    return size;
}

char *json_string_put(char *p, const char *s, size_t n) {
    *p++ = '"';
    size_t run = 0; /* start of the bytes not copied yet: copied a run at a time */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        memcpy(p, s + run, i - run);
        p += i - run;
        run = i + 1;
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default:
            memcpy(p, "u00", 3);
            p[3] = HEX_DIGITS[c >> 4];
            p[4] = HEX_DIGITS[c & 15];
            p += 5;
        }
    }
    memcpy(p, s + run, n - run);
    p += n - run;
    *p++ = '"';
    return p;
}
