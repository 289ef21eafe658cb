/* GET /metrics's text (tools/serve_metrics.c): the whole exposition when
 * memory suffices (the engine's counters among it), and when any one of its allocations fails (injected with
 * pw_host_fail_nth) no text at all with PW_ERR_OOM's message, so the server
 * answers 500 rather than a silently truncated page. */
#include "serve.h"
#include "test_util.h"

/* The last line the exposition writes: present only in a complete text. */
#define LAST_LINE "piecewise_inter_token_latency_seconds_count 1\n"

int main(void) {
    pw_log_set_level(PW_LOG_ERROR);
    serve_metrics_init();
    serve_metrics_request(200);
    serve_metrics_ttft(0.2);
    serve_metrics_itl(0.01);
    pw_engine_stats st = {0};
    st.prefix_cache_queries = 1009;
    st.prefix_cache_hits = 992;
    serve_metrics_engine(&st, 0, 0);

    char *full = serve_metrics_render();
    CHECK(full != NULL);
    if (!full) return pw_test_finish("serve_metrics");
    CHECK(strstr(full, "piecewise_requests_total{code=\"200\"} 1\n") != NULL);
    CHECK(strstr(full, "\npiecewise_prefix_cache_queries_total 1009\n") != NULL);
    CHECK(strstr(full, "\npiecewise_prefix_cache_hits_total 992\n") != NULL);
    size_t n = strlen(full), last = strlen(LAST_LINE);
    CHECK(n > last && strcmp(full + n - last, LAST_LINE) == 0);

    /* Fail the 1st, 2nd, ... allocation until rendering needs no more. */
    int failures = 0;
    int64_t k = 1;
    for (; k < 1000; k++) {
        pw_clear_error();
        pw_host_fail_nth(k);
        char *text = serve_metrics_render();
        pw_host_fail_nth(0);
        if (text) {
            CHECK_STREQ(text, full); /* never a partial text */
            free(text);
            break;
        }
        failures++;
        CHECK(strstr(pw_last_error(), "out of host memory") != NULL);
    }
    CHECK(failures > 0);
    CHECK(k < 1000);
    printf("allocations 1..%lld failed in turn: %d renders refused\n", (long long)k - 1, failures);
    free(full);
    return pw_test_finish("serve_metrics");
}
