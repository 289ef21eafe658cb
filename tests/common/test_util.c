#include "test_util.h"

#include "piecewise/extend.h"

#include <unistd.h>

int pw_test_failures = 0;
int pw_test_checks = 0;
int pw_test_skipped_parts = 0;

int pw_test_finish(const char *name) {
    if (pw_test_failures) {
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, pw_test_failures, pw_test_checks);
        return 1;
    }
    /* A part that could not run makes the whole test a skip, never a pass. */
    if (pw_test_skipped_parts) {
        printf("SKIP: %s: %d checks passed, %d part(s) skipped (see above)\n", name,
               pw_test_checks, pw_test_skipped_parts);
        return 77;
    }
    /* A test that checked nothing proved nothing: it must check or skip. */
    if (pw_test_checks == 0) {
        fprintf(stderr, "%s: no checks were made (a test that cannot run must skip)\n", name);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, pw_test_checks);
    return 0;
}

void pw_test_skip_part(const char *what) {
    printf("SKIP (part): %s\n", what);
    pw_test_skipped_parts++;
}

bool pw_test_device_refused(pw_status s, const char *what) {
    if (s != PW_ERR_UNSUPPORTED || pw_device_from_env() == PW_DEVICE_CPU) return false;
    const char *msg = pw_last_error();
    if (!strstr(msg, "kernel set has no")) return false;
    pw_test_checks++;
    char part[1024];
    snprintf(part, sizeof part, "%s on device %s: %s", what, pw_device_name(pw_device_from_env()),
             msg);
    pw_test_skip_part(part);
    return true;
}

void pw_test_skip(const char *reason) {
    /* a check that failed before the skip still fails the test */
    if (pw_test_failures) {
        fprintf(stderr, "%d of %d checks FAILED before the skip (%s)\n", pw_test_failures,
                pw_test_checks, reason);
        exit(1);
    }
    printf("SKIP: %s\n", reason);
    exit(77);
}

char *pw_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len) *len = (size_t)n;
    }
    return buf;
}

const char *pw_test_shared_path(const char *rel, char *buf, size_t cap) {
    const char *dir = getenv("PW_SHARED_DIR");
#ifdef PW_SHARED_DIR
    if (!dir) dir = PW_SHARED_DIR;
#endif
    if (!dir) return NULL;
    snprintf(buf, cap, "%s/%s", dir, rel);
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return buf;
}

const char *pw_test_model_path(const char *env, const char *file, char *buf, size_t cap) {
    const char *path = getenv(env);
    if (path) {
        snprintf(buf, cap, "%s", path);
    } else {
        snprintf(buf, cap, "%s/../../models/%s", PW_TEST_DATA_DIR, file);
    }
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return buf;
}

const char *pw_test_source_root(char *buf, size_t cap) {
    /* __FILE__ is <root>/tests/common/test_util.c */
    snprintf(buf, cap, "%s", __FILE__);
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(buf, '/');
        if (slash) *slash = '\0';
    }
    return buf;
}

char *pw_test_run_printing(int (*fn)(void), int *rc) {
    char path[] = "/tmp/pw_test_stdout_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    *rc = fn();
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(fd);
    size_t len = 0;
    char *printed = pw_test_read_file(path, &len);
    unlink(path);
    return printed;
}

/* ---- SHA-256 (FIPS 180-4): the reference tests tell their model file from another ---- */

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t used;
} sha256_ctx;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(sha256_ctx *c, const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
    uint32_t e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha256_k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->used = 0;
}

static void sha256_update(sha256_ctx *c, const uint8_t *p, size_t n) {
    c->bytes += n;
    while (n > 0) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->block + c->used, p, take);
        c->used += take, p += take, n -= take;
        if (c->used == 64) {
            sha256_block(c, c->block);
            c->used = 0;
        }
    }
}

static void sha256_hex(sha256_ctx *c, char out[65]) {
    uint64_t bits = c->bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t npad = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++) pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, pad, npad + 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", c->h[i]);
}

/* The file's sha256 as 64 hex digits; false if it cannot be read. */
bool pw_test_file_sha256(const char *path, char out[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    sha256_ctx c;
    sha256_init(&c);
    static uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&c, buf, n);
    bool ok = !ferror(f);
    fclose(f);
    sha256_hex(&c, out);
    return ok;
}
