/* The emulated discrete device catches each class of bug that breaks a
 * first GPU run, naming the rule: a fault is planted for each and the
 * report checked. Faults the device can only stop the process for (a host
 * dereference, a free under queued work) are planted in a child process.
 * Also: results appear only after a synchronization, graphs replay as a
 * unit and update in place, and a dry run never reaches the device. */
#include "test_util.h"

#include "backend/emu/emu_backend.h"
#include "backend/stream_backend.h"
#include "mem/pool_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fill_args {
    float *x;
    int64_t n;
    float v;
    int32_t zero_pad;
} fill_args;

static void fill_kernel(const void *p) {
    const fill_args *a = p;
    for (int64_t i = 0; i < a->n; i++) a->x[i] = a->v;
}
static const pw_kernel_args fill_layout = {sizeof(fill_args), 1, {0}};
static const pw_kernel k_fill = {"fill", fill_kernel, NULL, &fill_layout};

#define N 256

typedef struct dev {
    pw_stream *s;
    pw_pool *pool, *gpool;
    float *buf;
} dev;

static void dev_open(dev *d) {
    CHECK_OK(pw_stream_new(PW_DEVICE_EMU, &d->s));
    CHECK_OK(pw_pool_new(PW_DEVICE_EMU, "act", &d->pool));
    CHECK_OK(pw_pool_new(PW_DEVICE_EMU, "graphs", &d->gpool));
    CHECK_OK(pw_pool_alloc(d->pool, N * sizeof(float), (void **)&d->buf));
    /* a warm-up: the stream's library handle exists from here on */
    fill_args a = {d->buf, N, 0.0f, 0};
    CHECK_OK(pw_launch(d->s, &k_fill, &a, sizeof a));
    CHECK_OK(pw_stream_synchronize(d->s));
}

static void dev_close(dev *d) {
    CHECK_OK(pw_stream_synchronize(d->s));
    CHECK_OK(pw_pool_release(d->pool, d->buf));
    pw_pool_free(d->gpool);
    pw_pool_free(d->pool);
    pw_stream_free(d->s);
}

/* Runs fn in a child; it must die by a signal with `rule` on stderr. The
 * child never synchronizes (the device worker is the parent's thread). */
static void expect_death(void (*fn)(dev *), const char *rule) {
    dev d;
    dev_open(&d);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[0]);
        fn(&d);
        _exit(0);
    }
    close(pfd[1]);
    char buf[4096];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    if (!strstr(buf, rule)) printf("expected rule '%s', child said: %s\n", rule, buf);
    CHECK(strstr(buf, rule) != NULL);
    dev_close(&d);
}

/* ---- planted faults ------------------------------------------------------------------------ */

static void host_reads_device(dev *d) {
    volatile float x = d->buf[3]; /* device memory: the host cannot touch it */
    (void)x;
}

static void host_reads_before_sync(dev *d) {
    float *pinned;
    if (pw_device_host_alloc(PW_DEVICE_EMU, N * sizeof(float), (void **)&pinned) != PW_OK) return;
    if (pw_stream_copy_d2h(d->s, pinned, d->buf, N * sizeof(float)) != PW_OK) return;
    volatile float x = pinned[0]; /* no pw_stream_synchronize first */
    (void)x;
}

static void host_reads_before_replay(dev *d) {
    float *pinned;
    pw_graph *g;
    if (pw_device_host_alloc(PW_DEVICE_EMU, N * sizeof(float), (void **)&pinned) != PW_OK) return;
    if (pw_stream_begin_capture(d->s, d->gpool) != PW_OK) return;
    if (pw_stream_copy_d2h(d->s, pinned, d->buf, N * sizeof(float)) != PW_OK) return;
    if (pw_stream_end_capture(d->s, &g) != PW_OK) return;
    volatile float x = pinned[0]; /* captured work writes it: replay and sync first */
    (void)x;
}

static void free_while_queued(dev *d) {
    pw_pool *p;
    float *x;
    if (pw_pool_new(PW_DEVICE_EMU, "doomed", &p) != PW_OK) return;
    if (pw_pool_alloc(p, N * sizeof(float), (void **)&x) != PW_OK) return;
    fill_args a = {x, N, 1.0f, 0};
    if (pw_launch(d->s, &k_fill, &a, sizeof a) != PW_OK) return;
    (void)pw_pool_release(p, x);
    pw_pool_free(p); /* the fill has not run yet */
}

static void test_fatal_rules(void) {
    expect_death(host_reads_device, "host-access-to-device-memory");
    expect_death(host_reads_before_sync, "host-read-before-sync");
    expect_death(host_reads_before_replay, "host-read-before-replay");
    expect_death(free_while_queued, "free-while-queued");
}

static void test_capture_rules(void) {
    dev d;
    dev_open(&d);
    pw_graph *g = NULL;
    /* sync in capture */
    CHECK_OK(pw_stream_begin_capture(d.s, d.gpool));
    CHECK_ERR(pw_stream_synchronize(d.s), PW_ERR_CAPTURE, "synchronize called during a capture");
    CHECK_ERR(pw_stream_end_capture(d.s, &g), PW_ERR_CAPTURE, "synchronize called during a capture");
    CHECK(g == NULL);
    /* pageable copy in capture */
    float host[N];
    memset(host, 0, sizeof host);
    CHECK_OK(pw_stream_begin_capture(d.s, d.gpool));
    CHECK_ERR(pw_stream_copy_h2d(d.s, d.buf, host, sizeof host), PW_ERR_CAPTURE,
              "pageable-copy-in-capture");
    CHECK_ERR(pw_stream_end_capture(d.s, &g), PW_ERR_CAPTURE, "pageable-copy-in-capture");
    /* allocation outside the graph pool */
    void *p = NULL;
    CHECK_OK(pw_stream_begin_capture(d.s, d.gpool));
    CHECK_ERR(pw_pool_alloc(d.pool, 64, &p), PW_ERR_CAPTURE, "capture pool");
    CHECK_ERR(pw_stream_end_capture(d.s, &g), PW_ERR_CAPTURE, "capture pool");
    /* library handle created in capture: a stream with no eager launch yet */
    pw_stream *cold;
    CHECK_OK(pw_stream_new(PW_DEVICE_EMU, &cold));
    fill_args a = {d.buf, N, 2.0f, 0};
    CHECK_OK(pw_stream_begin_capture(cold, d.gpool));
    CHECK_ERR(pw_launch(cold, &k_fill, &a, sizeof a), PW_ERR_CAPTURE, "library-handle-in-capture");
    CHECK_ERR(pw_stream_end_capture(cold, &g), PW_ERR_CAPTURE, "library-handle-in-capture");
    pw_stream_free(cold);
    /* a kernel given host memory */
    fill_args bad = {host, N, 1.0f, 0};
    CHECK_ERR(pw_launch(d.s, &k_fill, &bad, sizeof bad), PW_ERR_INVALID_ARG,
              "kernel-reads-host-memory");
    /* a copy with its sides swapped */
    CHECK_ERR(pw_stream_copy_h2d(d.s, host, d.buf, sizeof host), PW_ERR_INVALID_ARG, "copy-side");
    dev_close(&d);
}

/* Results exist only after a synchronization: a read of a pageable copy's
 * destination before it finds the old bytes (what a missing sync reads on
 * a GPU, made certain). */
static void test_async_results(void) {
    dev d;
    dev_open(&d);
    fill_args a = {d.buf, N, 7.0f, 0};
    CHECK_OK(pw_launch(d.s, &k_fill, &a, sizeof a));
    float out[N];
    for (int i = 0; i < N; i++) out[i] = -1.0f;
    CHECK_OK(pw_stream_copy_d2h(d.s, out, d.buf, sizeof out));
    CHECK(out[0] == -1.0f && out[N - 1] == -1.0f); /* not yet */
    CHECK_OK(pw_stream_synchronize(d.s));
    CHECK(out[0] == 7.0f && out[N - 1] == 7.0f);
    dev_close(&d);
}

/* A graph replays as a unit, reads page-locked inputs at replay time, and a
 * re-capture of the same nodes updates it in place. */
static void test_graphs(void) {
    dev d;
    dev_open(&d);
    float *in, *out;
    CHECK_OK(pw_device_host_alloc(PW_DEVICE_EMU, N * sizeof(float), (void **)&in));
    CHECK_OK(pw_device_host_alloc(PW_DEVICE_EMU, N * sizeof(float), (void **)&out));
    pw_graph *g;
    CHECK_OK(pw_stream_begin_capture(d.s, d.gpool));
    CHECK_OK(pw_stream_copy_h2d(d.s, d.buf, in, N * sizeof(float)));
    CHECK_OK(pw_stream_copy_d2h(d.s, out, d.buf, N * sizeof(float)));
    CHECK_OK(pw_stream_end_capture(d.s, &g));
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < N; i++) in[i] = (float)(round * 100 + i);
        CHECK_OK(pw_graph_replay(g, d.s));
        CHECK_OK(pw_stream_synchronize(d.s));
        CHECK(out[5] == (float)(round * 100 + 5));
    }
    pw_emu_stats s0, s1;
    pw_emu_get_stats(&s0);
    CHECK_OK(pw_stream_begin_capture(d.s, d.gpool));
    CHECK_OK(pw_stream_copy_h2d(d.s, d.buf, in, N * sizeof(float)));
    CHECK_OK(pw_stream_copy_d2h(d.s, out, d.buf, N * sizeof(float)));
    CHECK_OK(pw_stream_end_capture_update(d.s, g));
    pw_emu_get_stats(&s1);
    CHECK_EQ_INT(s1.graphs_updated - s0.graphs_updated, 1);
    CHECK_EQ_INT(s1.graphs_instantiated, s0.graphs_instantiated);
    CHECK_OK(pw_graph_replay(g, d.s));
    CHECK_OK(pw_stream_synchronize(d.s));
    pw_graph_free(g);
    pw_device_host_free(PW_DEVICE_EMU, in);
    pw_device_host_free(PW_DEVICE_EMU, out);
    dev_close(&d);
}

/* A memory-planning dry run records against a shadow pool, whose addresses
 * back nothing: none of it may reach the device (no device capture, no
 * copy, no library setup). */
static void test_dry_run_stays_off_the_device(void) {
    dev d;
    dev_open(&d);
    pw_pool *shadow;
    CHECK_OK(pw_pool_new(PW_DEVICE_EMU, "shadow", &shadow));
    CHECK_OK(pw_pool_set_shadow(shadow, true));
    pw_emu_stats s0, s1;
    pw_emu_get_stats(&s0);
    pw_mem_dry_run_begin();
    pw_graph *g = NULL;
    CHECK_OK(pw_stream_begin_capture(d.s, shadow));
    float *x = NULL;
    CHECK_OK(pw_pool_alloc(shadow, N * sizeof(float), (void **)&x));
    fill_args a = {x, N, 1.0f, 0};
    CHECK_OK(pw_launch(d.s, &k_fill, &a, sizeof a));
    CHECK_OK(pw_stream_memset(d.s, x, 0, N * sizeof(float)));
    CHECK_OK(pw_stream_copy_d2d(d.s, d.buf, x, N * sizeof(float)));
    CHECK_OK(pw_stream_end_capture(d.s, &g));
    CHECK(g && pw_graph_num_launches(g) == 3);
    CHECK_OK(pw_graph_replay(g, d.s)); /* eager in a dry run: dropped */
    CHECK_OK(pw_stream_synchronize(d.s));
    pw_mem_dry_run_end();
    pw_emu_get_stats(&s1);
    CHECK_EQ_INT(s1.graphs_instantiated, s0.graphs_instantiated);
    CHECK_EQ_INT(s1.flushes, s0.flushes);
    CHECK_EQ_INT(s1.items_executed, s0.items_executed);
    CHECK_ERR(pw_graph_replay(g, d.s), PW_ERR_STATE, "dry run");
    pw_graph_free(g);
    CHECK_OK(pw_pool_release(shadow, x));
    pw_pool_free(shadow);
    dev_close(&d);
}

static void test_caps(void) {
    pw_device_caps caps;
    CHECK_OK(pw_device_get_caps(PW_DEVICE_EMU, &caps));
    CHECK(caps.graphs && caps.graph_update && caps.async_copy && caps.needs_warmup);
    pw_device d;
    CHECK_OK(pw_device_parse("emu", &d));
    CHECK(d == PW_DEVICE_EMU && strcmp(pw_device_name(d), "emu") == 0);
}

int main(void) {
    test_caps();
    test_capture_rules();
    test_async_results();
    test_graphs();
    test_dry_run_stays_off_the_device();
    test_fatal_rules();
    return pw_test_finish("emu_rules");
}
