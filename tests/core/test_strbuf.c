/* pw_sb, the string builder: appends, formats (short and past its 256-byte
 * stack buffer), hands the text over; and when memory runs out it stops,
 * remembers, and pw_sb_finish reports PW_ERR_OOM with a message instead of
 * returning a truncated text. Leaks on the failure paths are caught by
 * LeakSanitizer in the sanitized build. */
#include "internal.h"
#include "test_util.h"

static void test_builds_text(void) {
    pw_sb sb = {0};
    pw_sb_puts(&sb, "hello");
    pw_sb_append(&sb, ", world!!", 7);
    pw_sb_printf(&sb, " %d+%d=%s", 2, 2, "4");
    CHECK_EQ_INT(sb.len, strlen("hello, world 2+2=4"));
    CHECK_STREQ(sb.data, "hello, world 2+2=4");
    char *text = NULL;
    CHECK_OK(pw_sb_finish(&sb, &text));
    CHECK_STREQ(text, "hello, world 2+2=4");
    CHECK(sb.data == NULL && sb.len == 0 && sb.cap == 0); /* reset: reusable */
    free(text);
}

static void test_long_format(void) {
    char word[1001];
    memset(word, 'x', 1000);
    word[1000] = 0;
    pw_sb sb = {0};
    pw_sb_puts(&sb, "<");
    pw_sb_printf(&sb, "%s|%s", word, word); /* 2001 bytes: past the stack buffer */
    pw_sb_puts(&sb, ">");
    char *text = NULL;
    CHECK_OK(pw_sb_finish(&sb, &text));
    CHECK_EQ_INT(text ? strlen(text) : 0, 2003);
    CHECK(text && text[0] == '<' && text[1000] == 'x' && text[1001] == '|' && text[2002] == '>');
    free(text);
}

static void test_empty(void) {
    pw_sb sb = {0};
    char *text = NULL;
    CHECK_OK(pw_sb_finish(&sb, &text));
    CHECK_STREQ(text, "");
    free(text);
    pw_sb none = {0};
    pw_sb_discard(&none); /* nothing to free */
    CHECK(none.data == NULL);
}

/* The first allocation fails: every later append is ignored, and finish
 * reports the failure (no text at all, rather than a partial one). */
static void test_oom_first(void) {
    pw_sb sb = {0};
    pw_host_fail_nth(1);
    pw_sb_puts(&sb, "lost");
    pw_host_fail_nth(0);
    CHECK_EQ_INT(sb.status, PW_ERR_OOM);
    pw_sb_puts(&sb, "later, memory is back, but the text would have a hole");
    pw_sb_printf(&sb, "%d", 1);
    CHECK_EQ_INT(sb.len, 0);
    char *text = (char *)"sentinel";
    CHECK_ERR(pw_sb_finish(&sb, &text), PW_ERR_OOM, "out of host memory building text");
    CHECK(text == NULL);
    CHECK(sb.data == NULL);
}

/* Memory runs out in the middle, growing past what was already built. */
static void test_oom_while_growing(void) {
    pw_sb sb = {0};
    pw_sb_puts(&sb, "kept so far");
    char block[300];
    memset(block, 'y', sizeof block - 1);
    block[sizeof block - 1] = 0;
    pw_host_fail_nth(1);
    pw_sb_printf(&sb, "%s", block); /* the long path: reserve, then format */
    pw_host_fail_nth(0);
    pw_sb_puts(&sb, "tail");
    char *text = NULL;
    CHECK_ERR(pw_sb_finish(&sb, &text), PW_ERR_OOM, "out of host memory");
    CHECK(text == NULL);

    pw_sb sb2 = {0};
    pw_sb_puts(&sb2, "x");
    pw_host_fail_nth(1);
    pw_sb_append(&sb2, block, sizeof block - 1);
    pw_host_fail_nth(0);
    CHECK_EQ_INT(sb2.status, PW_ERR_OOM);
    pw_sb_discard(&sb2); /* dropping a failed builder frees it */
    CHECK(sb2.data == NULL && sb2.status == PW_OK);
}

/* A size that cannot be represented is refused, not wrapped. */
static void test_oversized_append(void) {
    pw_sb sb = {0};
    pw_sb_puts(&sb, "abc");
    pw_sb_append(&sb, "", SIZE_MAX - 2);
    CHECK_EQ_INT(sb.status, PW_ERR_OOM);
    CHECK_EQ_INT(sb.len, 3);
    char *text = NULL;
    CHECK_ERR(pw_sb_finish(&sb, &text), PW_ERR_OOM, "out of host memory");
    CHECK(text == NULL);
}

int main(void) {
    pw_log_set_level(PW_LOG_ERROR);
    test_builds_text();
    test_long_format();
    test_empty();
    test_oom_first();
    test_oom_while_growing();
    test_oversized_append();
    return pw_test_finish("core_strbuf");
}
