/* Paged attention: reference check, and the batch-invariance properties the
 * engine relies on: one-shot prefill, chunked prefill, token-by-token decode
 * and mixed batches with padding all give the same bits per token. Bad
 * metadata gives zero rows, never a crash. */
#include "ops/cpu/attention_isa.h"
#include "ops/cpu/kernels.h"
#include "kernel_test_util.h"

enum { N_HEADS = 4, N_KV = 2, HD = 8, MAX_SEQS = 4, MAX_LEN = 320 };
#define QW (N_HEADS * HD)
#define KW (N_KV * HD)

typedef struct fixture {
    int block_size, max_blocks, num_blocks;
    float *k_cache, *v_cache;
    int32_t *block_tables; /* [MAX_SEQS][max_blocks] */
    /* per-sequence token data, [MAX_SEQS][MAX_LEN][..] */
    float *q, *k, *v;
} fixture;

/* A token of a batch: (seq, pos), or seq -1 for padding. */
typedef struct tok { int seq, pos; } tok;

static void fixture_init(fixture *f, int block_size, int max_blocks) {
    f->block_size = block_size;
    f->max_blocks = max_blocks;
    f->num_blocks = MAX_SEQS * max_blocks + 3;
    size_t cache = (size_t)f->num_blocks * block_size * KW;
    f->k_cache = kt_zeros(cache);
    f->v_cache = kt_zeros(cache);
    f->block_tables = malloc((size_t)MAX_SEQS * max_blocks * sizeof(int32_t));
    /* Physical blocks are handed out back to front and interleaved between
     * sequences, so a sequence's blocks are never contiguous. */
    for (int s = 0; s < MAX_SEQS; s++)
        for (int b = 0; b < max_blocks; b++)
            f->block_tables[s * max_blocks + b] = f->num_blocks - 1 - (b * MAX_SEQS + s);
    f->q = kt_random((size_t)MAX_SEQS * MAX_LEN * QW);
    f->k = kt_random((size_t)MAX_SEQS * MAX_LEN * KW);
    f->v = kt_random((size_t)MAX_SEQS * MAX_LEN * KW);
}

static void fixture_reset_cache(fixture *f) {
    size_t cache = (size_t)f->num_blocks * f->block_size * KW * sizeof(float);
    memset(f->k_cache, 0, cache);
    memset(f->v_cache, 0, cache);
}

static void fixture_free(fixture *f) {
    free(f->k_cache), free(f->v_cache), free(f->block_tables);
    free(f->q), free(f->k), free(f->v);
}

static int32_t slot_for(const fixture *f, int seq, int pos) {
    return f->block_tables[seq * f->max_blocks + pos / f->block_size] * f->block_size +
           pos % f->block_size;
}

/* Runs one attention step over the batch; returns out [n][QW]. Padding
 * tokens get garbage q/k/v so that leaking them would show. */
static float *run_step(fixture *f, const tok *batch, int n) {
    float *q = kt_random((size_t)n * QW), *k = kt_random((size_t)n * KW),
          *v = kt_random((size_t)n * KW), *out = kt_random((size_t)n * QW);
    int32_t *pos = malloc(n * sizeof *pos), *slot = malloc(n * sizeof *slot),
            *seq = malloc(n * sizeof *seq);
    for (int t = 0; t < n; t++) {
        if (batch[t].seq < 0) {
            pos[t] = 0, slot[t] = -1, seq[t] = 0;
            continue;
        }
        int s = batch[t].seq, p = batch[t].pos;
        memcpy(q + t * QW, f->q + ((size_t)s * MAX_LEN + p) * QW, QW * sizeof(float));
        memcpy(k + t * KW, f->k + ((size_t)s * MAX_LEN + p) * KW, KW * sizeof(float));
        memcpy(v + t * KW, f->v + ((size_t)s * MAX_LEN + p) * KW, KW * sizeof(float));
        pos[t] = p, slot[t] = slot_for(f, s, p), seq[t] = s;
    }
    pw_attn_meta meta = {pos, slot, seq, f->block_tables, f->max_blocks, f->block_size};
    pw_k_attention_args a = {out, q, k, v, f->k_cache, f->v_cache, &meta, n, N_HEADS, N_KV,
                             HD, QW, KW, f->num_blocks, MAX_SEQS};
    pw_k_attention(&a);
    free(q), free(k), free(v), free(pos), free(slot), free(seq);
    return out;
}

/* Double-precision attention of (seq, pos) straight from the token data. */
static void reference(const fixture *f, int s, int p, double *out) {
    for (int h = 0; h < N_HEADS; h++) {
        int kvh = h / (N_HEADS / N_KV);
        const float *q = f->q + ((size_t)s * MAX_LEN + p) * QW + h * HD;
        double *sc = malloc((p + 1) * sizeof *sc), mx = -INFINITY, den = 0;
        for (int j = 0; j <= p; j++) {
            const float *k = f->k + ((size_t)s * MAX_LEN + j) * KW + kvh * HD;
            double d = 0;
            for (int i = 0; i < HD; i++) d += (double)q[i] * k[i];
            sc[j] = d / sqrt((double)HD);
            if (sc[j] > mx) mx = sc[j];
        }
        for (int i = 0; i < HD; i++) out[h * HD + i] = 0;
        for (int j = 0; j <= p; j++) {
            double w = exp(sc[j] - mx);
            den += w;
            const float *v = f->v + ((size_t)s * MAX_LEN + j) * KW + kvh * HD;
            for (int i = 0; i < HD; i++) out[h * HD + i] += w * v[i];
        }
        for (int i = 0; i < HD; i++) out[h * HD + i] /= den;
        free(sc);
    }
}

static bool row_is_zero(const float *row) {
    for (int i = 0; i < QW; i++)
        if (row[i] != 0.0f) return false;
    return true;
}

/* Prefill of seq 0 in one go is the baseline for everything else. */
static float *prefill_solo(fixture *f, int seq, int len) {
    fixture_reset_cache(f);
    tok *b = malloc(len * sizeof *b);
    for (int i = 0; i < len; i++) b[i] = (tok){seq, i};
    float *out = run_step(f, b, len);
    free(b);
    return out;
}

static void test_prefill_chunked_decode(void) {
    fixture f;
    fixture_init(&f, 4, 16);
    const int L = 13;
    float *full = prefill_solo(&f, 0, L);

    double ref[QW];
    double worst = 0;
    for (int p = 0; p < L; p++) {
        reference(&f, 0, p, ref);
        double e = kt_max_rel_err(full + p * QW, ref, QW);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-5);
    /* The cache holds exactly what was written. */
    CHECK(kt_bitwise_equal(f.k_cache + (size_t)slot_for(&f, 0, 6) * KW, f.k + 6 * KW,
                           KW * sizeof(float)));

    /* Chunked prefill: 5 then 8 tokens. */
    fixture_reset_cache(&f);
    tok c1[5], c2[8];
    for (int i = 0; i < 5; i++) c1[i] = (tok){0, i};
    for (int i = 0; i < 8; i++) c2[i] = (tok){0, 5 + i};
    float *o1 = run_step(&f, c1, 5), *o2 = run_step(&f, c2, 8);
    CHECK(kt_bitwise_equal(o1, full, 5 * QW * sizeof(float)));
    CHECK(kt_bitwise_equal(o2, full + 5 * QW, 8 * QW * sizeof(float)));
    free(o1), free(o2);

    /* Token by token. */
    fixture_reset_cache(&f);
    int same = 0;
    for (int p = 0; p < L; p++) {
        tok one = {0, p};
        float *o = run_step(&f, &one, 1);
        same += kt_bitwise_equal(o, full + p * QW, QW * sizeof(float));
        free(o);
    }
    CHECK_EQ_INT(same, L);
    free(full);
    fixture_free(&f);
}

static void test_mixed_batches(void) {
    fixture f;
    fixture_init(&f, 4, 16);
    float *solo[3];
    for (int s = 0; s < 3; s++) solo[s] = prefill_solo(&f, s, 12);

    fixture_reset_cache(&f);
    /* Step A: two prefills with padding in between and after. */
    tok a[13];
    int n = 0;
    for (int i = 0; i < 7; i++) a[n++] = (tok){0, i};
    a[n++] = (tok){-1, 0};
    for (int i = 0; i < 4; i++) a[n++] = (tok){1, i};
    a[n++] = (tok){-1, 0};
    /* Step B: decode of seq 0, a prefill chunk of seq 1, a new seq 2. */
    tok b[11];
    int m = 0;
    b[m++] = (tok){1, 4};
    b[m++] = (tok){2, 0};
    b[m++] = (tok){0, 7};
    for (int i = 5; i < 10; i++) b[m++] = (tok){1, i};
    b[m++] = (tok){-1, 0};
    b[m++] = (tok){2, 1};
    b[m++] = (tok){2, 2};
    int bad = 0, pads = 0;
    const tok *steps[2] = {a, b};
    int sizes[2] = {n, m};
    for (int st = 0; st < 2; st++) {
        float *o = run_step(&f, steps[st], sizes[st]);
        for (int t = 0; t < sizes[st]; t++) {
            tok k = steps[st][t];
            if (k.seq < 0) {
                pads += row_is_zero(o + t * QW);
                continue;
            }
            if (!kt_bitwise_equal(o + t * QW, solo[k.seq] + k.pos * QW, QW * sizeof(float))) bad++;
        }
        free(o);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(pads, 3);
    for (int s = 0; s < 3; s++) free(solo[s]);
    fixture_free(&f);
}

/* Longer than one softmax chunk: the rescaling path. */
static void test_long_context(void) {
    fixture f;
    fixture_init(&f, 16, MAX_LEN / 16);
    /* Make scores grow along the sequence so later chunks raise the max. */
    for (int p = 0; p < MAX_LEN; p++)
        for (int i = 0; i < KW; i++) f.k[(size_t)p * KW + i] *= 1.0f + p / 64.0f;
    float *full = prefill_solo(&f, 0, MAX_LEN);
    double ref[QW], worst = 0;
    int probes[] = {0, 100, 255, 256, 257, MAX_LEN - 1};
    for (size_t i = 0; i < KT_LEN(probes); i++) {
        reference(&f, 0, probes[i], ref);
        double e = kt_max_rel_err(full + probes[i] * QW, ref, QW);
        if (e > worst) worst = e;
    }
    if (!(worst < 1e-5)) fprintf(stderr, "long context error %g\n", worst);
    CHECK(worst < 1e-5);
    /* Decode of the last token after a chunked prefill of the rest. */
    fixture_reset_cache(&f);
    tok *c = malloc(MAX_LEN * sizeof *c);
    for (int i = 0; i < MAX_LEN - 1; i++) c[i] = (tok){0, i};
    free(run_step(&f, c, MAX_LEN - 1));
    tok last = {0, MAX_LEN - 1};
    float *o = run_step(&f, &last, 1);
    CHECK(kt_bitwise_equal(o, full + (MAX_LEN - 1) * QW, QW * sizeof(float)));
    free(o), free(c), free(full);
    fixture_free(&f);
}

/* Out-of-range metadata: the row is zero and nothing outside the cache is
 * touched (ASan would see it). */
static void test_bad_metadata(void) {
    fixture f;
    fixture_init(&f, 4, 4);
    float q[3 * QW], k[3 * KW], v[3 * KW], out[3 * QW];
    for (int i = 0; i < 3 * QW; i++) q[i] = 1.0f, out[i] = 5.0f;
    for (int i = 0; i < 3 * KW; i++) k[i] = v[i] = 1.0f;
    int32_t capacity = f.num_blocks * f.block_size;
    struct {
        int32_t pos, slot, seq, table0;
    } cases[] = {
        {0, capacity, 0, 0},        /* slot past the cache */
        {0, 0, MAX_SEQS, 0},        /* sequence past the block tables */
        {16, 0, 0, 0},              /* position past max_blocks * block_size */
        {-2, 0, 0, 0},              /* negative position */
        {1, 1, 0, -1},              /* block table entry not mapped */
        {1, 1, 0, 1 << 20},         /* block id past the cache */
    };
    int zero_rows = 0;
    for (size_t c = 0; c < KT_LEN(cases); c++) {
        int32_t pos[1] = {cases[c].pos}, slot[1] = {cases[c].slot}, seq[1] = {cases[c].seq};
        f.block_tables[0] = cases[c].table0;
        pw_attn_meta meta = {pos, slot, seq, f.block_tables, f.max_blocks, f.block_size};
        pw_k_attention_args a = {out, q, k, v, f.k_cache, f.v_cache, &meta, 1, N_HEADS, N_KV,
                                 HD, QW, KW, f.num_blocks, MAX_SEQS};
        pw_k_attention(&a);
        zero_rows += row_is_zero(out);
    }
    CHECK_EQ_INT(zero_rows, (int)KT_LEN(cases));
    /* A bad row does not disturb a good one in the same batch. */
    f.block_tables[0] = 2;
    int32_t pos[3] = {0, 0, 0}, slot[3] = {8, -1, capacity + 5}, seq[3] = {0, 0, 0};
    pw_attn_meta meta = {pos, slot, seq, f.block_tables, f.max_blocks, f.block_size};
    pw_k_attention_args a = {out, q, k, v, f.k_cache, f.v_cache, &meta, 3, N_HEADS, N_KV, HD,
                             QW, KW, f.num_blocks, MAX_SEQS};
    pw_k_attention(&a);
    CHECK(out[0] == 1.0f); /* softmax over one position: v itself */
    CHECK(row_is_zero(out + QW) && row_is_zero(out + 2 * QW));
    fixture_free(&f);
}

/* Shapes off the fixture's: head_dim 8 / 64 / 128 / 256 (the specialised
 * instances), 4 and 12 and 20 (dims past the last block of 8), group sizes
 * 1..10 (past HEAD_GROUP_MAX), block sizes that do and do not keep groups
 * of 8 positions in one block, contexts across the softmax chunk. Every
 * row is checked against double precision, and the baseline and AVX2+FMA
 * copies of the body, called directly, give the same bits. */
typedef struct shape { int hd, heads, kv, block, len; } shape;

static void test_shapes_and_isa_copies(void) {
    const shape shapes[] = {
        {8, 8, 4, 16, 300}, {64, 9, 3, 16, 70}, {8, 4, 2, 4, 40},   {12, 6, 1, 8, 40},
        {4, 2, 2, 16, 20},  {128, 4, 1, 16, 20}, {20, 10, 1, 5, 30}, {64, 4, 4, 12, 270},
        {256, 4, 1, 16, 300}, {256, 4, 1, 12, 40}, /* Gemma 3: specialised, then general */
    };
#if PW_HAVE_FMA_KERNELS
    __builtin_cpu_init();
    const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    for (size_t c = 0; c < KT_LEN(shapes); c++) {
        const shape sh = shapes[c];
        const int qw = sh.heads * sh.hd, kw = sh.kv * sh.hd, n = sh.len;
        const int max_blocks = (n + sh.block - 1) / sh.block, num_blocks = max_blocks + 2;
        int32_t *table = malloc(max_blocks * sizeof *table);
        for (int b = 0; b < max_blocks; b++) table[b] = num_blocks - 1 - b; /* reversed */
        float *q = kt_random((size_t)n * qw), *k = kt_random((size_t)n * kw),
              *v = kt_random((size_t)n * kw);
        for (int p = 0; p < n; p++) /* scores grow along the sequence: rescaling */
            for (int i = 0; i < kw; i++) k[(size_t)p * kw + i] *= 1.0f + p / 64.0f;
        float *kc = kt_random((size_t)num_blocks * sh.block * kw),
              *vc = kt_random((size_t)num_blocks * sh.block * kw);
        int32_t *pos = malloc(n * sizeof *pos), *slot = malloc(n * sizeof *slot),
                *seq = calloc(n, sizeof *seq);
        for (int t = 0; t < n; t++)
            pos[t] = t, slot[t] = table[t / sh.block] * sh.block + t % sh.block;
        float *out = kt_zeros((size_t)n * qw), *out2 = kt_zeros((size_t)n * qw);
        pw_attn_meta meta = {pos, slot, seq, table, max_blocks, sh.block};
        pw_k_attention_args a = {out, q, k, v, kc, vc, &meta, n, sh.heads, sh.kv,
                                 sh.hd, qw, kw, num_blocks, 1};
        pw_k_attention(&a);
        double worst = 0, *ref = malloc(qw * sizeof *ref), *sc = malloc(n * sizeof *sc);
        for (int t = 0; t < n; t += (t < 9 ? 1 : 7)) {
            for (int h = 0; h < sh.heads; h++) {
                int kvh = h / (sh.heads / sh.kv);
                double mx = -INFINITY, den = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int i = 0; i < sh.hd; i++)
                        d += (double)q[(size_t)t * qw + h * sh.hd + i] * k[(size_t)j * kw + kvh * sh.hd + i];
                    sc[j] = d / sqrt((double)sh.hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int i = 0; i < sh.hd; i++) ref[h * sh.hd + i] = 0;
                for (int j = 0; j <= t; j++) {
                    double w = exp(sc[j] - mx);
                    den += w;
                    for (int i = 0; i < sh.hd; i++)
                        ref[h * sh.hd + i] += w * v[(size_t)j * kw + kvh * sh.hd + i];
                }
                for (int i = 0; i < sh.hd; i++) ref[h * sh.hd + i] /= den;
            }
            double e = kt_max_rel_err(out + (size_t)t * qw, ref, qw);
            if (e > worst) worst = e;
        }
        if (!(worst < 1e-5)) fprintf(stderr, "shape %zu: error %g\n", c, worst);
        CHECK(worst < 1e-5);
        /* The copies, called directly on the written cache. */
        a.out = out2;
        pw_k_attention_items_generic(&a, 0, n * pw_k_attention_groups(&a));
        if (!kt_bitwise_equal(out, out2, (size_t)n * qw * sizeof *out))
            fprintf(stderr, "shape %zu: baseline copy differs\n", c);
        CHECK(kt_bitwise_equal(out, out2, (size_t)n * qw * sizeof *out));
#if PW_HAVE_FMA_KERNELS
        if (fma) {
            memset(out2, 0, (size_t)n * qw * sizeof *out2);
            pw_k_attention_items_fma(&a, 0, n * pw_k_attention_groups(&a));
            if (!kt_bitwise_equal(out, out2, (size_t)n * qw * sizeof *out))
                fprintf(stderr, "shape %zu: FMA copy differs\n", c);
            CHECK(kt_bitwise_equal(out, out2, (size_t)n * qw * sizeof *out));
        }
#endif
        /* Decode of the last position alone gives its prefill row. */
        a.out = out2, a.n_tokens = 1, a.q = q + (size_t)(n - 1) * qw;
        a.k = k + (size_t)(n - 1) * kw, a.v = v + (size_t)(n - 1) * kw;
        meta.positions = pos + n - 1, meta.slot_mapping = slot + n - 1;
        pw_k_attention(&a);
        CHECK(kt_bitwise_equal(out2, out + (size_t)(n - 1) * qw, qw * sizeof *out));
        free(ref), free(sc), free(out), free(out2), free(pos), free(slot), free(seq);
        free(q), free(k), free(v), free(kc), free(vc), free(table);
    }
}

/* The documented float sequence (attention_body.h) for head_dim 8 and a
 * context within the first chunk, written out scalar: exp_softmax's
 * operations one by one (fmaf for each multiply-add), the score tree, the
 * lane-wise denominator and the even/odd value sums. The kernel must give
 * exactly these bits (its decode fast path and its general path alike). */
static float model_exp(float x) {
    const float lo = -87.3f, magic = 12582912.0f + 127.0f;
    bool under = x < lo;
    x = lo > x ? lo : x;
    float t = fmaf(x, 1.44269504088896341f, magic), nf = t - magic;
    x = fmaf(nf, -0.693359375f, x);
    x = fmaf(nf, 2.12194440e-4f, x);
    float z = x * x;
    float y = fmaf(1.9875691500e-4f, x, 1.3981999507e-3f);
    y = fmaf(y, x, 8.3334519073e-3f);
    y = fmaf(y, x, 4.1665795894e-2f);
    y = fmaf(y, x, 1.6666665459e-1f);
    y = fmaf(y, x, 5.0000001201e-1f);
    y = fmaf(y, z, x) + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits <<= 23;
    float sc;
    memcpy(&sc, &bits, sizeof sc);
    return under ? 0.0f : y * sc;
}

static void model_hd8(const float *q, const float *k, const float *v, int kw, int kvh, int pos,
                      float *out) {
    const float scale = 1.0f / sqrtf(8.0f);
    float qs[8], s[256], d[8] = {0}, acc[2][8] = {{0}};
    for (int i = 0; i < 8; i++) qs[i] = q[i] * scale;
    float m = -INFINITY, lane_max[8];
    for (int j = 0; j < 8; j++) lane_max[j] = -INFINITY;
    for (int p = 0; p <= pos; p++) {
        const float *kr = k + (size_t)p * kw + kvh * 8;
        float pr[8];
        for (int i = 0; i < 8; i++) pr[i] = qs[i] * kr[i];
        s[p] = ((pr[0] + pr[1]) + (pr[2] + pr[3])) + ((pr[4] + pr[5]) + (pr[6] + pr[7]));
        lane_max[p % 8] = s[p] > lane_max[p % 8] ? s[p] : lane_max[p % 8];
    }
    /* hmax8's shuffles: halves, then pairs of pairs, then neighbours */
    float l4[8], l2[8], l1;
    for (int j = 0; j < 8; j++) l4[j] = lane_max[j] > lane_max[j ^ 4] ? lane_max[j] : lane_max[j ^ 4];
    for (int j = 0; j < 8; j++) l2[j] = l4[j] > l4[j ^ 2] ? l4[j] : l4[j ^ 2];
    l1 = l2[0] > l2[1] ? l2[0] : l2[1];
    if (l1 > m) m = l1;
    for (int p = 0; p <= pos; p++) {
        float w = model_exp(s[p] - m);
        d[p % 8] = d[p % 8] + w;
        const float *vr = v + (size_t)p * kw + kvh * 8;
        for (int i = 0; i < 8; i++) acc[p & 1][i] = fmaf(w, vr[i], acc[p & 1][i]);
    }
    float inv = 1.0f / (((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7])));
    for (int i = 0; i < 8; i++) out[i] = (acc[0][i] + acc[1][i]) * inv;
}

/* Every position of a sequence within the first chunk, at head_dim 8, for
 * stories260K's shape (8 heads on 4 kv heads, its own instance), one kv
 * head per query head, four query heads per kv head, and block sizes 16
 * and 8: bit for bit the scalar model. */
static void test_hd8_bits(void) {
    static const shape shapes[] = {{8, 8, 4, 16, 256}, {8, 4, 4, 8, 41}, {8, 8, 2, 16, 70}};
    for (size_t c = 0; c < KT_LEN(shapes); c++) {
        const shape sh = shapes[c];
        const int qw = sh.heads * 8, kw = sh.kv * 8, n = sh.len;
        const int max_blocks = (n + sh.block - 1) / sh.block, num_blocks = max_blocks + 2;
        int32_t *table = malloc(max_blocks * sizeof *table);
        for (int b = 0; b < max_blocks; b++) table[b] = num_blocks - 1 - b;
        float *q = kt_random((size_t)n * qw), *k = kt_random((size_t)n * kw),
              *v = kt_random((size_t)n * kw);
        for (int p = 0; p < n; p++)
            for (int i = 0; i < kw; i++) k[(size_t)p * kw + i] *= 4.0f;
        float *kc = kt_random((size_t)num_blocks * sh.block * kw),
              *vc = kt_random((size_t)num_blocks * sh.block * kw);
        int32_t *pos = malloc(n * sizeof *pos), *slot = malloc(n * sizeof *slot),
                *seq = calloc(n, sizeof *seq);
        for (int t = 0; t < n; t++)
            pos[t] = t, slot[t] = table[t / sh.block] * sh.block + t % sh.block;
        float *out = kt_zeros((size_t)n * qw);
        pw_attn_meta meta = {pos, slot, seq, table, max_blocks, sh.block};
        pw_k_attention_args a = {out, q, k, v, kc, vc, &meta, n, sh.heads, sh.kv,
                                 8, qw, kw, num_blocks, 1};
        pw_k_attention(&a);
        int bad = 0;
        for (int t = 0; t < n; t++)
            for (int h = 0; h < sh.heads; h++) {
                float want[8];
                model_hd8(q + (size_t)t * qw + h * 8, k, v, kw, h / (sh.heads / sh.kv), t, want);
                if (!kt_bitwise_equal(want, out + (size_t)t * qw + h * 8, sizeof want)) bad++;
            }
        if (bad) fprintf(stderr, "hd8 shape %zu: %d rows differ from the scalar model\n", c, bad);
        CHECK_EQ_INT(bad, 0);
        free(out), free(pos), free(slot), free(seq), free(q), free(k), free(v), free(kc), free(vc);
        free(table);
    }
}

int main(void) {
    kt_seed(21);
    test_prefill_chunked_decode();
    test_mixed_batches();
    test_long_context();
    test_bad_metadata();
    test_shapes_and_isa_copies();
    test_hd8_bits();
    return pw_test_finish("kernels_attention");
}
