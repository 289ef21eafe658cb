/* pw_fnv1a, the one hash: the published FNV-1a 64 values (the graph cache
 * keeps these in its files, so they must never change), and chaining: the
 * hash of two pieces hashed in turn is the hash of both at once. */
#include "internal.h"
#include "test_util.h"

#define CHECK_HASH(text, want)                                                                 \
    CHECK(pw_fnv1a(PW_FNV1A_BASIS, (text), strlen(text)) == UINT64_C(want))

int main(void) {
    /* Reference values of 64-bit FNV-1a (Fowler, Noll, Vo). */
    CHECK(PW_FNV1A_BASIS == UINT64_C(14695981039346656037));
    CHECK_HASH("", 0xcbf29ce484222325);
    CHECK_HASH("a", 0xaf63dc4c8601ec8c);
    CHECK_HASH("foobar", 0x85944171f73967e8);

    const char *text = "piecewise graph cache";
    size_t n = strlen(text);
    uint64_t whole = pw_fnv1a(PW_FNV1A_BASIS, text, n);
    for (size_t cut = 0; cut <= n; cut++)
        CHECK(pw_fnv1a(pw_fnv1a(PW_FNV1A_BASIS, text, cut), text + cut, n - cut) == whole);

    /* every byte counts, NUL included */
    const unsigned char with_nul[2] = {'a', 0};
    CHECK(pw_fnv1a(PW_FNV1A_BASIS, with_nul, 2) != pw_fnv1a(PW_FNV1A_BASIS, with_nul, 1));
    CHECK(pw_fnv1a(PW_FNV1A_BASIS, NULL, 0) == PW_FNV1A_BASIS);
    return pw_test_finish("core_hash");
}
