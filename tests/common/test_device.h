/* The device a test runs on, and host access to its memory.
 *
 * Tests that make their own streams and pools make them on
 * pw_test_device(): the device PW_DEVICE names (cpu by default), so that
 * CTest can run the same test on the emulated discrete device (label
 * "emu"). On a discrete device the host cannot touch device memory and
 * stream work is asynchronous, so a test writes and reads device buffers
 * only through these stream copies, which also synchronize. */
#ifndef PW_TEST_DEVICE_H
#define PW_TEST_DEVICE_H

#include "internal.h"
#include "test_util.h"

static inline pw_device pw_test_device(void) { return pw_device_from_env(); }

static void pw_test_noop_kernel(const void *args) { (void)args; }
static const pw_kernel pw_test_noop = {"noop", pw_test_noop_kernel, NULL, NULL};

/* A device that needs warm-ups (caps.needs_warmup: CUDA, the emulated
 * device) does one-time setup at a stream's first launch, which a capture
 * may not contain; pw_capture_all and the engine warm up before they
 * capture. A test that captures straight away warms its stream up with
 * this: one eager launch, synchronized. */
static inline pw_status pw_test_warm_up(pw_stream *s) {
    char unused = 0;
    PW_TRY(pw_launch(s, &pw_test_noop, &unused, sizeof unused));
    return pw_stream_synchronize(s);
}

/* Copies bytes from host src into device dst on s and waits for it. */
static inline pw_status pw_test_write(pw_stream *s, void *dst, const void *src, size_t bytes) {
    PW_TRY(pw_stream_copy_h2d(s, dst, src, bytes));
    return pw_stream_synchronize(s);
}

/* Copies bytes from device src into host dst on s, after the work queued
 * before it, and waits for it. */
static inline pw_status pw_test_read(pw_stream *s, void *dst, const void *src, size_t bytes) {
    PW_TRY(pw_stream_copy_d2h(s, dst, src, bytes));
    return pw_stream_synchronize(s);
}

/* A tensor's bytes (its numel floats, for f32) read into a new host array,
 * freed with free(); NULL on failure (the error is in pw_last_error). */
static inline void *pw_test_read_tensor(pw_stream *s, const pw_tensor *t) {
    size_t bytes = pw_tensor_nbytes(t);
    void *host = malloc(bytes ? bytes : 1);
    if (host && pw_test_read(s, host, pw_tensor_data(t), bytes) != PW_OK) {
        free(host);
        return NULL;
    }
    return host;
}

#endif
