/* The JSON reader of chat tools (pw_jinja_from_json: tool lists come from
 * API callers and HTTP clients): any byte string is read or refused with an
 * error, never a crash or a hang; what is read, written back by the
 * templates' tojson, reads again to a value that tojson writes the same
 * way (a round trip), and none of it is trusted template text. */
#include "fuzz_common.h"
#include "core/internal.h"
#include "model/jinja.h"

/* tojson of v, or NULL when it cannot be written (NaN-free JSON always can). */
static char *to_json(const pw_jinja_template *t, pw_jinja_value *v, size_t *len) {
    pw_jinja_value *ctx = pw_jinja_dict();
    FUZZ_CHECK(pw_jinja_set(ctx, "v", v) == PW_OK, "context: %s", pw_last_error());
    pw_jinja_rendered r = {0};
    pw_status s = pw_jinja_render(t, ctx, NULL, &r);
    pw_jinja_value_free(ctx);
    if (s != PW_OK) return NULL; /* a bound of the render (output size) */
    FUZZ_CHECK(r.n_trusted == 0, "JSON text became trusted template text");
    *len = r.len;
    return r.text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_TEXT) return 0;
    pw_log_set_level(PW_LOG_ERROR);
    static pw_jinja_template *t;
    if (!t) FUZZ_CHECK(pw_jinja_parse("{{ v | tojson }}", 16, &t) == PW_OK, "%s", pw_last_error());
    pw_jinja_value *v = NULL;
    pw_status s = pw_jinja_from_json((const char *)data, size, &v);
    if (s != PW_OK) {
        FUZZ_CHECK(v == NULL && pw_last_error()[0], "a refused text left a value or no message");
        return 0;
    }
    size_t n1 = 0, n2 = 0;
    char *once = to_json(t, v, &n1);
    if (!once) return 0;
    pw_jinja_value *again = NULL;
    FUZZ_CHECK(pw_jinja_from_json(once, n1, &again) == PW_OK, "tojson wrote what the reader refuses: %s",
               pw_last_error());
    char *twice = to_json(t, again, &n2);
    FUZZ_CHECK(twice && n1 == n2 && memcmp(once, twice, n1) == 0, "the round trip changed the JSON");
    pw_host_free(once);
    pw_host_free(twice);
    return 0;
}
