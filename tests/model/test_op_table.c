/* The op table (src/ops/op_table.h) is the single source of the ops: every
 * op id has a name and a definition the registry binds, every kernel id has
 * a name and a CPU kernel of that name, each kernel set holds only kernels
 * of its own device, and the splitter's set is exactly the table's
 * splitting ops. */
#include "ops/cpu/kernels.h"
#include "ops/kernel_set.h"
#include "ops/ops.h"
#include "pw_config.h"
#include "test_util.h"

#include <stddef.h>
#include <string.h>

static void test_ops_have_names_and_bind(void) {
    CHECK_EQ_INT(pw_op_count(), PW_OP_COUNT_);
    pw_op_env env = {0};
    for (int i = 0; i < PW_OP_COUNT_; i++) {
        const char *name = pw_op_name(i);
        CHECK(name != NULL && name[0]);
        if (!name) continue;
        for (int j = 0; j < i; j++) CHECK(strcmp(name, pw_op_name(j)) != 0);
        pw_callable c;
        CHECK_OK(pw_op_resolve(&env, name, &c));
        CHECK(c.fn != NULL && c.user == &env && strcmp(c.name, name) == 0);
    }
    CHECK(pw_op_name(-1) == NULL && pw_op_name(PW_OP_COUNT_) == NULL);
    /* the ids are the table's rows: spot-check the names the builder writes */
    CHECK_STREQ(pw_op_name(PW_OP_MATMUL), "matmul");
    CHECK_STREQ(pw_op_name(PW_OP_ATTENTION), "attention");
    CHECK_STREQ(pw_op_name(PW_OP_GATE_UP_SILU), "gate_up_silu");
}

static void test_splitting_set(void) {
    const char *const *names = NULL;
    int n = pw_op_splitting_names(&names);
    CHECK(n >= 1 && names != NULL);
    if (!names) return;
    CHECK(names[n] == NULL);
    /* the set equals the ops the table marks splitting, in table order */
    int k = 0;
    for (int i = 0; i < PW_OP_COUNT_; i++) {
        if (!pw_op_is_splitting(pw_op_name(i))) continue;
        CHECK(k < n);
        if (k < n) CHECK_STREQ(names[k], pw_op_name(i));
        k++;
    }
    CHECK_EQ_INT(k, n);
    CHECK(pw_op_is_splitting("attention"));
    CHECK(!pw_op_is_splitting("matmul"));
}

/* A set's kernels belong to its device, under the kernel table's names,
 * and each carries the argument layout of its id (pw_kernel.args, generated
 * from the field table of its struct), which relocation reads. */
static void check_set(const pw_kernel_set *set, bool cpu) {
    for (int id = 0; id < PW_KERNEL_COUNT_; id++) {
        const pw_kernel *k = set->entries[id].kernel;
        if (!k) {
            CHECK(set->entries[id].scratch_bytes == NULL);
            continue;
        }
        CHECK_STREQ(k->name, pw_kernel_id_name(id));
        CHECK(k->args != NULL && k->args == pw_kernel_args_of(id));
        CHECK(cpu ? k->cpu != NULL && k->cuda == NULL : k->cpu == NULL && k->cuda != NULL);
    }
}

/* Layouts generated from the field tables: spot checks against the structs. */
static void test_arg_layouts(void) {
    const pw_kernel_args *mm = pw_kernel_args_of(PW_KERNEL_MATMUL);
    CHECK(mm != NULL);
    if (mm) {
        CHECK_EQ_INT(mm->size, sizeof(pw_k_matmul_args));
        CHECK_EQ_INT(mm->n_addresses, 4); /* y, x, w, scratch */
        CHECK_EQ_INT(mm->addresses[0], offsetof(pw_k_matmul_args, y));
        CHECK_EQ_INT(mm->addresses[3], offsetof(pw_k_matmul_args, scratch));
    }
    const pw_kernel_args *at = pw_kernel_args_of(PW_KERNEL_ATTENTION);
    CHECK(at != NULL);
    if (at) {
        CHECK_EQ_INT(at->n_addresses, 7); /* out, q, k, v, k_cache, v_cache, meta */
        CHECK_EQ_INT(at->addresses[6], offsetof(pw_k_attention_args, meta));
    }
    for (int id = 0; id < PW_KERNEL_COUNT_; id++) {
        const pw_kernel_args *a = pw_kernel_args_of(id);
        CHECK(a != NULL && a->size > 0 && a->size <= PW_MAX_KERNEL_ARG_BYTES);
        for (int w = 0; a && w < a->n_addresses; w++)
            CHECK(a->addresses[w] + sizeof(void *) <= a->size);
    }
    CHECK(pw_kernel_args_of(-1) == NULL && pw_kernel_args_of(PW_KERNEL_COUNT_) == NULL);
}

/* Extents (ops/kernel_extents.c): what a kernel touches through each word,
 * from the struct's values; sizes that overflow or are negative reach
 * everything, so no buffer holds them. */
static void test_arg_extents(void) {
    for (int id = 0; id < PW_KERNEL_COUNT_; id++)
        CHECK(pw_kernel_args_of(id)->extent != NULL);
    const pw_kernel *mm = pw_kernel_set_cpu.entries[PW_KERNEL_MATMUL].kernel;
    pw_k_matmul_args a = {NULL, NULL, NULL, NULL, 3, 5, 7};
    bool nullable = true;
    CHECK_EQ_INT(mm->args->extent(mm, &a, 0, &nullable), 3 * 5 * 4); /* y [3][5] */
    CHECK(!nullable);
    CHECK_EQ_INT(mm->args->extent(mm, &a, 1, &nullable), 3 * 7 * 4); /* x [3][7] */
    CHECK_EQ_INT(mm->args->extent(mm, &a, 2, &nullable), 5 * 7 * 4); /* w [5][7] */
    (void)mm->args->extent(mm, &a, 3, &nullable);                    /* scratch */
    CHECK(nullable);
    a.k = -1;
    CHECK(mm->args->extent(mm, &a, 1, &nullable) == UINT64_MAX);
    a.k = INT64_MAX;
    CHECK(mm->args->extent(mm, &a, 1, &nullable) == UINT64_MAX);
    const pw_kernel *q = pw_kernel_set_cpu.entries[PW_KERNEL_MATMUL_QUANT].kernel;
    pw_k_matmul_quant_args b = {NULL, NULL, NULL, 2, 4, 64, PW_Q8_0, 0};
    CHECK_EQ_INT(q->args->extent(q, &b, 2, &nullable),
                 4 * pw_dtype_row_bytes(PW_Q8_0, 64)); /* w: 4 rows of 2 blocks */
    b.k = 33; /* not whole blocks */
    CHECK(q->args->extent(q, &b, 2, &nullable) == UINT64_MAX);
    const pw_kernel *at = pw_kernel_set_cpu.entries[PW_KERNEL_ATTENTION].kernel;
    pw_k_attention_args c = {.n_tokens = 2, .n_heads = 4, .head_dim = 8, .q_stride = 32};
    CHECK_EQ_INT(at->args->extent(at, &c, 6, &nullable), sizeof(pw_attn_meta));
    CHECK_EQ_INT(at->args->extent(at, &c, 4, &nullable), 0); /* the K cache: not derivable */
    CHECK(!nullable);
}

static void test_kernel_sets(void) {
    for (int id = 0; id < PW_KERNEL_COUNT_; id++) {
        CHECK(pw_kernel_id_name(id) != NULL);
        /* the CPU set is complete: every kernel, fused ones included */
        CHECK(pw_kernel_set_cpu.entries[id].kernel != NULL);
    }
    CHECK(pw_kernel_id_name(-1) == NULL && pw_kernel_id_name(PW_KERNEL_COUNT_) == NULL);
    CHECK(pw_kernel_set_for(PW_DEVICE_CPU) == &pw_kernel_set_cpu);
    CHECK(pw_kernel_set_for((pw_device)7) == NULL);
    check_set(&pw_kernel_set_cpu, true);
    /* the CPU matmul's scratch is the BLAS padding it documents */
    pw_k_matmul_args mm = {.n_tokens = 5, .n = 1024, .k = 1024};
    CHECK_EQ_INT(pw_kernel_set_cpu.entries[PW_KERNEL_MATMUL].scratch_bytes(&mm),
                 pw_k_matmul_scratch_floats(5, 1024, 1024) * sizeof(float));
#if PW_HAVE_CUDA
    CHECK(pw_kernel_set_for(PW_DEVICE_CUDA) == &pw_kernel_set_cuda);
    check_set(&pw_kernel_set_cuda, false);
    /* every kernel the unfused ops need on f32 weights */
    const pw_kernel_id needed[] = {PW_KERNEL_EMBEDDING, PW_KERNEL_RMS_NORM, PW_KERNEL_MATMUL,
                                   PW_KERNEL_ROPE,      PW_KERNEL_SILU_MUL, PW_KERNEL_ADD,
                                   PW_KERNEL_ARGMAX,    PW_KERNEL_ATTENTION};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        CHECK(pw_kernel_set_cuda.entries[needed[i]].kernel != NULL);
    CHECK(pw_kernel_set_cuda.entries[PW_KERNEL_MATMUL].scratch_bytes != NULL);
#else
    CHECK(pw_kernel_set_for(PW_DEVICE_CUDA) == NULL);
#endif
}

/* The host helpers the model layer uses are the CPU kernels' rules. */
static void test_host_helpers(void) {
    for (int t = 0; t < PW_DTYPE_COUNT_; t++)
        CHECK(pw_op_quantized_weight_supported((pw_dtype)t) == pw_k_quant_supported((pw_dtype)t));
    CHECK(pw_op_quantized_weight_supported(PW_Q8_0) && !pw_op_quantized_weight_supported(PW_F32));
    float a[8 * 4 * 2], b[8 * 4 * 2]; /* [max_pos][head_dim/2][2] */
    pw_op_rope_table(a, 8, 8, 10000.0);
    pw_k_rope_table(b, 8, 8, 10000.0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    const float row[] = {1.0f, 3.0f, 3.0f, -2.0f};
    CHECK_EQ_INT(pw_op_argmax_row(row, 4), 1);
}

int main(void) {
    test_ops_have_names_and_bind();
    test_splitting_set();
    test_arg_layouts();
    test_arg_extents();
    test_kernel_sets();
    test_host_helpers();
    return pw_test_finish("model_op_table");
}
