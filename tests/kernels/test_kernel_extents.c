/* The extents the graph cache checks a restored launch against are
 * computed from argument values read from a file, so every value a forged
 * file can hold must give a size or "too big", never an arithmetic
 * overflow (UBSan fails this test on one) or a crash. Every CPU kernel's
 * argument struct is filled with hostile patterns (the largest and the
 * most negative 64-bit values, bytes of 0x7f, 0x80 and 0xff, random bytes)
 * and every address word's extent is asked for. A well-formed launch keeps
 * its exact extent. */
#include "kernel_test_util.h"
#include "ops/cpu/kernels.h"
#include "ops/kernel_args.h"
#include "ops/kernel_set.h"

static void ask_every_word(const pw_kernel *k, const void *args) {
    for (int w = 0; w < k->args->n_addresses; w++) {
        bool nullable = false;
        (void)pw_kernel_word_extent(k, args, w, &nullable);
    }
}

/* Every 8-byte-aligned slot that is not an address word gets v. */
static void fill_words(unsigned char *buf, const pw_kernel_args *layout, int64_t v) {
    for (size_t off = 0; off + sizeof v <= layout->size; off += sizeof v) {
        bool address = false;
        for (int w = 0; w < layout->n_addresses; w++) address |= layout->addresses[w] == off;
        if (!address) memcpy(buf + off, &v, sizeof v);
    }
}

int main(void) {
    const pw_kernel_set *set = pw_kernel_set_for(PW_DEVICE_CPU);
    CHECK(set != NULL);
    static const int64_t words[] = {INT64_MAX, INT64_MIN, INT64_MAX / 3, (int64_t)1 << 40,
                                    (int64_t)1 << 32, INT32_MAX, -1};
    static const unsigned char bytes[] = {0x7f, 0x80, 0xff, 0x41};
    int kernels = 0;
    for (int id = 0; id < PW_KERNEL_COUNT_; id++) {
        const pw_kernel *k = set->entries[id].kernel;
        if (!k || !k->args) continue;
        kernels++;
        unsigned char *buf = malloc(k->args->size);
        for (size_t b = 0; b < KT_LEN(bytes); b++) {
            memset(buf, bytes[b], k->args->size);
            ask_every_word(k, buf);
        }
        for (size_t v = 0; v < KT_LEN(words); v++) {
            memset(buf, 0, k->args->size);
            fill_words(buf, k->args, words[v]);
            ask_every_word(k, buf);
        }
        kt_seed((uint64_t)id + 1);
        for (int round = 0; round < 200; round++) {
            for (size_t i = 0; i < k->args->size; i++) buf[i] = (unsigned char)kt_next();
            ask_every_word(k, buf);
        }
        free(buf);
    }
    CHECK(kernels > 10);

    /* A forged matmul whose sizes overflow any product is too big for any
     * buffer; a real one keeps its exact sizes. */
    const pw_kernel *mm = set->entries[PW_KERNEL_MATMUL].kernel;
    CHECK(mm != NULL);
    pw_k_matmul_args a = {0};
    a.n_tokens = INT64_MAX / 3;
    a.n = INT64_MAX / 5;
    a.k = 1 << 20;
    bool nullable = false;
    for (int w = 0; w < mm->args->n_addresses; w++)
        CHECK(pw_kernel_word_extent(mm, &a, w, &nullable) == UINT64_MAX);
    a.n_tokens = 3;
    a.n = 64;
    a.k = 32;
    for (int w = 0; w < mm->args->n_addresses; w++) {
        uint64_t e = pw_kernel_word_extent(mm, &a, w, &nullable);
        uint16_t off = mm->args->addresses[w];
        if (off == offsetof(pw_k_matmul_args, y)) CHECK(e == 3 * 64 * sizeof(float));
        if (off == offsetof(pw_k_matmul_args, x)) CHECK(e == 3 * 32 * sizeof(float));
        if (off == offsetof(pw_k_matmul_args, w)) CHECK(e == 64 * 32 * sizeof(float));
    }
    /* Rows ldw apart: the last row ends (n - 1) ldw + k in; a stride below
     * a row is refused. */
    a.ldw = 96;
    for (int w = 0; w < mm->args->n_addresses; w++)
        if (mm->args->addresses[w] == offsetof(pw_k_matmul_args, w))
            CHECK(pw_kernel_word_extent(mm, &a, w, &nullable) == (63 * 96 + 32) * sizeof(float));
    a.ldw = 16;
    for (int w = 0; w < mm->args->n_addresses; w++)
        if (mm->args->addresses[w] == offsetof(pw_k_matmul_args, w))
            CHECK(pw_kernel_word_extent(mm, &a, w, &nullable) == UINT64_MAX);

    /* A quantized product's K-shards (op matmul_shards): S outputs, x's S
     * column ranges, the last shard's last row; forged counts are too big. */
    const pw_kernel *mq = set->entries[PW_KERNEL_MATMUL_QUANT].kernel;
    CHECK(mq != NULL);
    pw_k_matmul_quant_args q = {.n_tokens = 2, .n = 16, .k = 64, .type = PW_Q8_0,
                                .w_row_bytes = 4 * 68, .n_shards = 4, .shard_bytes = 68};
    for (int w = 0; w < mq->args->n_addresses; w++) {
        uint64_t e = pw_kernel_word_extent(mq, &q, w, &nullable);
        uint16_t off = mq->args->addresses[w];
        if (off == offsetof(pw_k_matmul_quant_args, y)) CHECK(e == 4 * 2 * 16 * sizeof(float));
        if (off == offsetof(pw_k_matmul_quant_args, x)) CHECK(e == 2 * 4 * 64 * sizeof(float));
        if (off == offsetof(pw_k_matmul_quant_args, w)) CHECK(e == 3 * 68 + 15 * 4 * 68 + 68);
    }
    q.n_shards = -1;
    for (int w = 0; w < mq->args->n_addresses; w++)
        CHECK(pw_kernel_word_extent(mq, &q, w, &nullable) == UINT64_MAX);
    q.n_shards = INT64_MAX;
    q.shard_bytes = INT64_MAX / 2;
    for (int w = 0; w < mq->args->n_addresses; w++)
        if (mq->args->addresses[w] == offsetof(pw_k_matmul_quant_args, w))
            CHECK(pw_kernel_word_extent(mq, &q, w, &nullable) == UINT64_MAX);
    printf("extents asked of %d kernels with hostile arguments\n", kernels);
    return pw_test_finish("kernels_extents");
}
