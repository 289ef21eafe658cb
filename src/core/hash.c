/* The one hash (FNV-1a, 64-bit). The graph cache keeps these values in its
 * files: the basis and the prime are part of its format. */
#include "internal.h"

#define FNV1A_PRIME UINT64_C(0x100000001b3)

uint64_t pw_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV1A_PRIME;
    return h;
}
