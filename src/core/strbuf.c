/* The string builder (pw_sb): appends that cannot fail at the call site,
 * a failure remembered and reported once, by pw_sb_finish; and byte counts
 * as text for messages. */
#include "internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* Room for `extra` more bytes and the NUL. */
static bool sb_reserve(pw_sb *sb, size_t extra) {
    if (sb->status != PW_OK) return false;
    if (sb->data && extra < sb->cap - sb->len) return true;
    if (extra > SIZE_MAX - 1 - sb->len) {
        sb->status = PW_ERR_OOM;
        return false;
    }
    char *p = pw_host_grow(sb->data, 1, &sb->cap, sb->len + extra + 1, SIZE_MAX);
    if (!p) {
        sb->status = PW_ERR_OOM;
        return false;
    }
    sb->data = p;
    return true;
}

void pw_sb_append(pw_sb *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    if (n) memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = 0;
}

void pw_sb_puts(pw_sb *sb, const char *s) { pw_sb_append(sb, s, strlen(s)); }

void pw_sb_printf(pw_sb *sb, const char *fmt, ...) {
    if (sb->status != PW_OK) return;
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->status = PW_ERR_INVALID_ARG;
        return;
    }
    if ((size_t)n < sizeof small) {
        pw_sb_append(sb, small, (size_t)n);
        return;
    }
    if (!sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

pw_status pw_sb_finish(pw_sb *sb, char **out) {
    *out = NULL;
    if (sb->status == PW_OK && !sb->data) sb_reserve(sb, 0);
    if (sb->status != PW_OK) {
        pw_status s = sb->status;
        pw_sb_discard(sb);
        if (s == PW_ERR_OOM) return pw_error(s, "out of host memory building text");
        return pw_error(s, "formatting text failed (vsnprintf)");
    }
    sb->data[sb->len] = 0;
    *out = sb->data;
    memset(sb, 0, sizeof *sb);
    return PW_OK;
}

void pw_sb_discard(pw_sb *sb) {
    pw_host_free(sb->data);
    memset(sb, 0, sizeof *sb);
}

const char *pw_format_bytes(size_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < PW_ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%zu B", bytes);
    else snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
