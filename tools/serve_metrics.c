/* piecewise serve: metrics. Counters and histograms behind one mutex,
 * written by HTTP threads and the engine thread, rendered as Prometheus
 * text for GET /metrics. */
#ifdef PW_HAVE_SERVE
#include "serve.h"

#include "piecewise/extend.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HIST_MAX 16

typedef struct histogram {
    const double *bounds;
    int n;
    int64_t counts[HIST_MAX]; /* counts[n] is +Inf */
    int64_t total;
    double sum;
} histogram;

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

#define N_STATUS 11
static const int tracked_status[N_STATUS] = {200, 400, 401, 404, 405, 408,
                                             413, 429, 431, 500, 503};
static const char *const drop_names[SERVE_DROP_N] = {"evicted", "refused", "header_timeout",
                                                     "body_timeout"};

static struct {
    pthread_mutex_t mu;
    int64_t received;
    int64_t requests[N_STATUS + 1]; /* last: other */
    int64_t cancelled;        /* requests whose client went away */
    int64_t engine_cancelled; /* jobs the engine dropped for that */
    int64_t dropped[SERVE_DROP_N];
    histogram ttft, itl;
    int64_t real_tokens[3], padded_tokens[3];
    pw_engine_stats engine;
    int64_t running, waiting;
    int64_t verify_checks, verify_mismatches;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

void serve_metrics_init(void) {
    pthread_mutex_lock(&M.mu);
    memset(M.requests, 0, sizeof M.requests);
    M.ttft = (histogram){ttft_bounds, (int)(sizeof ttft_bounds / sizeof ttft_bounds[0])};
    M.itl = (histogram){itl_bounds, (int)(sizeof itl_bounds / sizeof itl_bounds[0])};
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_request(int http_status) {
    int k = N_STATUS;
    for (int i = 0; i < N_STATUS; i++)
        if (tracked_status[i] == http_status) k = i;
    pthread_mutex_lock(&M.mu);
    M.requests[k]++;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_received(void) {
    pthread_mutex_lock(&M.mu);
    M.received++;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_request_cancelled(void) {
    pthread_mutex_lock(&M.mu);
    M.cancelled++;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_cancelled(void) {
    pthread_mutex_lock(&M.mu);
    M.engine_cancelled++;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_connection_dropped(serve_drop_reason why) {
    if ((int)why < 0 || why >= SERVE_DROP_N) return;
    pthread_mutex_lock(&M.mu);
    M.dropped[why]++;
    pthread_mutex_unlock(&M.mu);
}

static void observe(histogram *h, double v) {
    int k = h->n;
    for (int i = 0; i < h->n; i++)
        if (v <= h->bounds[i]) {
            k = i;
            break;
        }
    h->counts[k]++;
    h->total++;
    h->sum += v;
}

void serve_metrics_ttft(double seconds) {
    pthread_mutex_lock(&M.mu);
    observe(&M.ttft, seconds);
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_itl(double seconds) {
    pthread_mutex_lock(&M.mu);
    observe(&M.itl, seconds);
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_step(pw_runtime_mode mode, int64_t real_tokens, int64_t padded_tokens) {
    if ((int)mode < 0 || (int)mode > 2) return;
    pthread_mutex_lock(&M.mu);
    M.real_tokens[mode] += real_tokens;
    M.padded_tokens[mode] += padded_tokens;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_engine(const pw_engine_stats *st, int64_t running, int64_t waiting) {
    pthread_mutex_lock(&M.mu);
    M.engine = *st;
    M.running = running;
    M.waiting = waiting;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_verify(int64_t checks, int64_t mismatches) {
    pthread_mutex_lock(&M.mu);
    M.verify_checks = checks;
    M.verify_mismatches = mismatches;
    pthread_mutex_unlock(&M.mu);
}

static void render_histogram(pw_sb *b, const char *name, const char *help, const histogram *h) {
    pw_sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        pw_sb_printf(b, "%s_bucket{le=\"%g\"} %" PRId64 "\n", name, h->bounds[i], cum);
    }
    cum += h->counts[h->n];
    pw_sb_printf(b, "%s_bucket{le=\"+Inf\"} %" PRId64 "\n%s_sum %.6f\n%s_count %" PRId64 "\n", name,
              cum, name, h->sum, name, h->total);
}

static const char *const mode_names[3] = {"none", "piecewise", "full"};

char *serve_metrics_render(void) {
    pw_sb b = {0};
    pthread_mutex_lock(&M.mu);
    pw_sb_printf(&b,
              "# HELP piecewise_requests_received_total HTTP requests whose head was read; each "
              "is then answered (piecewise_requests_total) or cancelled.\n"
              "# TYPE piecewise_requests_received_total counter\n"
              "piecewise_requests_received_total %" PRId64 "\n",
              M.received);
    pw_sb_printf(&b, "# HELP piecewise_requests_total HTTP requests answered in full, by status code.\n"
                  "# TYPE piecewise_requests_total counter\n");
    for (int i = 0; i < N_STATUS; i++)
        pw_sb_printf(&b, "piecewise_requests_total{code=\"%d\"} %" PRId64 "\n", tracked_status[i],
                  M.requests[i]);
    pw_sb_printf(&b, "piecewise_requests_total{code=\"other\"} %" PRId64 "\n", M.requests[N_STATUS]);
    pw_sb_printf(&b,
              "# HELP piecewise_requests_cancelled_total Requests whose client went away before "
              "its whole answer was sent.\n# TYPE piecewise_requests_cancelled_total counter\n"
              "piecewise_requests_cancelled_total %" PRId64 "\n"
              "# HELP piecewise_engine_cancelled_total Jobs the engine dropped because their "
              "client went away.\n# TYPE piecewise_engine_cancelled_total counter\n"
              "piecewise_engine_cancelled_total %" PRId64 "\n",
              M.cancelled, M.engine_cancelled);
    pw_sb_printf(&b, "# HELP piecewise_connections_dropped_total Connections the server closed to "
                  "protect itself, by reason.\n"
                  "# TYPE piecewise_connections_dropped_total counter\n");
    for (int i = 0; i < SERVE_DROP_N; i++)
        pw_sb_printf(&b, "piecewise_connections_dropped_total{reason=\"%s\"} %" PRId64 "\n",
                  drop_names[i], M.dropped[i]);
    pw_sb_printf(&b,
              "# HELP piecewise_requests_running Requests in the engine.\n"
              "# TYPE piecewise_requests_running gauge\npiecewise_requests_running %" PRId64 "\n"
              "# HELP piecewise_requests_waiting Requests queued for an engine slot.\n"
              "# TYPE piecewise_requests_waiting gauge\npiecewise_requests_waiting %" PRId64 "\n",
              M.running, M.waiting);
    pw_sb_printf(&b,
              "# HELP piecewise_prompt_tokens_total Prompt tokens prefilled.\n"
              "# TYPE piecewise_prompt_tokens_total counter\npiecewise_prompt_tokens_total %" PRId64
              "\n# HELP piecewise_generation_tokens_total Tokens generated.\n"
              "# TYPE piecewise_generation_tokens_total counter\n"
              "piecewise_generation_tokens_total %" PRId64 "\n",
              M.engine.prompt_tokens, M.engine.generated_tokens);
    pw_sb_printf(&b,
              "# HELP piecewise_prefix_cache_queries_total Prompt tokens looked up in the prefix "
              "cache.\n# TYPE piecewise_prefix_cache_queries_total counter\n"
              "piecewise_prefix_cache_queries_total %" PRId64 "\n"
              "# HELP piecewise_prefix_cache_hits_total Prompt tokens whose K/V came from the "
              "prefix cache instead of a prefill.\n"
              "# TYPE piecewise_prefix_cache_hits_total counter\n"
              "piecewise_prefix_cache_hits_total %" PRId64 "\n",
              M.engine.prefix_cache_queries, M.engine.prefix_cache_hits);
    pw_sb_printf(&b,
              "# HELP piecewise_engine_seconds_total Time inside engine steps: steps that "
              "prefilled, and pure decode steps.\n# TYPE piecewise_engine_seconds_total counter\n"
              "piecewise_engine_seconds_total{phase=\"prefill\"} %.6f\n"
              "piecewise_engine_seconds_total{phase=\"decode\"} %.6f\n"
              "# HELP piecewise_engine_decode_tokens_total Real tokens in pure decode steps.\n"
              "# TYPE piecewise_engine_decode_tokens_total counter\n"
              "piecewise_engine_decode_tokens_total %" PRId64 "\n",
              M.engine.prefill_seconds, M.engine.decode_seconds, M.engine.decode_step_tokens);
    pw_sb_printf(&b, "# HELP piecewise_engine_steps_total Engine steps, by runtime mode.\n"
                  "# TYPE piecewise_engine_steps_total counter\n");
    for (int i = 0; i < 3; i++)
        pw_sb_printf(&b, "piecewise_engine_steps_total{mode=\"%s\"} %" PRId64 "\n", mode_names[i],
                  M.engine.steps_by_mode[i]);
    pw_sb_printf(&b, "# HELP piecewise_engine_tokens_total Tokens run by the forward, by runtime "
                  "mode: real ones and the batch padded to a capture size.\n"
                  "# TYPE piecewise_engine_tokens_total counter\n");
    for (int i = 0; i < 3; i++)
        pw_sb_printf(&b,
                  "piecewise_engine_tokens_total{mode=\"%s\",kind=\"real\"} %" PRId64 "\n"
                  "piecewise_engine_tokens_total{mode=\"%s\",kind=\"padded\"} %" PRId64 "\n",
                  mode_names[i], M.real_tokens[i], mode_names[i], M.padded_tokens[i]);
    pw_sb_printf(&b,
              "# HELP piecewise_graphs_captured Graphs captured (at start-up; with lazy capture, on first use).\n"
              "# TYPE piecewise_graphs_captured gauge\npiecewise_graphs_captured %" PRIu64 "\n"
              "# HELP piecewise_capture_seconds Time spent capturing graphs at start-up.\n"
              "# TYPE piecewise_capture_seconds gauge\npiecewise_capture_seconds %.6f\n"
              "# HELP piecewise_graph_pool_bytes Graph memory pool: reserved and peak allocated.\n"
              "# TYPE piecewise_graph_pool_bytes gauge\n"
              "piecewise_graph_pool_bytes{kind=\"reserved\"} %zu\n"
              "piecewise_graph_pool_bytes{kind=\"peak\"} %zu\n",
              M.engine.graphs_captured, M.engine.capture_seconds, M.engine.graph_pool_reserved,
              M.engine.graph_pool_peak);
    pw_sb_printf(&b,
              "# HELP piecewise_lazy_capture_total Lazy capture: steps without a graph, by how "
              "they were served (padded to a larger captured size, or eager), descriptors "
              "captured on first use, and descriptors evicted by the graph budget.\n"
              "# TYPE piecewise_lazy_capture_total counter\n"
              "piecewise_lazy_capture_total{event=\"padded_to_captured\"} %" PRId64 "\n"
              "piecewise_lazy_capture_total{event=\"eager\"} %" PRId64 "\n"
              "piecewise_lazy_capture_total{event=\"captured\"} %" PRId64 "\n"
              "piecewise_lazy_capture_total{event=\"evicted\"} %" PRId64 "\n"
              "# HELP piecewise_graph_bytes Host bytes of the recorded graphs kept (lazy "
              "capture).\n# TYPE piecewise_graph_bytes gauge\npiecewise_graph_bytes %zu\n",
              M.engine.lazy_padded, M.engine.lazy_eager, M.engine.lazy_captured,
              M.engine.graphs_evicted, M.engine.graph_bytes);
    pw_sb_printf(&b,
              "# HELP piecewise_verify_checks_total Steps re-run eagerly by --verify-every.\n"
              "# TYPE piecewise_verify_checks_total counter\npiecewise_verify_checks_total %" PRId64
              "\n# HELP piecewise_verify_mismatches_total Re-run steps whose logits differed "
              "bitwise.\n# TYPE piecewise_verify_mismatches_total counter\n"
              "piecewise_verify_mismatches_total %" PRId64 "\n",
              M.verify_checks, M.verify_mismatches);
    render_histogram(&b, "piecewise_time_to_first_token_seconds",
                     "Time from a request's arrival to its first token.", &M.ttft);
    render_histogram(&b, "piecewise_inter_token_latency_seconds",
                     "Time between consecutive tokens of a request.", &M.itl);
    pthread_mutex_unlock(&M.mu);
    char *text;
    return pw_sb_finish(&b, &text) == PW_OK ? text : NULL;
}
#endif
