/*
 * A test plugin for every C-ABI path, good and bad. Compile-time switches:
 *   PLUGIN_NAME "name"       backend name (default "cfault")
 *   FAULT_NO_SYMBOL          export no xpuprof_plugin_register
 *   FAULT_ABI_VERSION n      report this ABI version
 *   FAULT_REGISTER_RC n      xpuprof_plugin_register returns n
 *   FAULT_MISSING_STOP       leave the required `stop` pointer NULL
 *   FAULT_SMALL_TABLE        claim a table smaller than ABI v1 requires
 *   FAULT_STAGE "stage"      return -1 from that call: probe, create, start, stop, process
 *   FAULT_MALFORMED          mix malformed items among the good ones in process_events
 *   FAULT_PROBE_NO           probe says unavailable
 *   FAULT_HANG "stage"       block in that call until the test calls cfault_release(): register, query,
 *                            probe, create, start, stop, process, destroy (a hanging plugin; process writes a slice
 *                            "late_kernel" after its release, which must be ignored)
 *   FAULT_BAD_UTF8           one kernel slice (single and bulk) named with invalid UTF-8 bytes
 * Without switches it writes a device row, a resource row, two kernel slices linked by a flow
 * from a runtime slice, a counter and a metadata key.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xpuprof_plugin.h"

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "cfault"
#endif
#ifndef FAULT_STAGE
#define FAULT_STAGE ""
#endif

struct XpuprofPluginProfiler {
    int64_t start_ns, stop_ns;
    int enabled_mask;
    char error[128];
};

static int destroyed_count = 0; /* read by the tests through ctypes */
int cfault_destroyed(void) { return destroyed_count; }

static int fails(const char *stage) { return strcmp(FAULT_STAGE, stage) == 0; }

#ifndef FAULT_HANG
#define FAULT_HANG ""
#endif
static pthread_mutex_t hang_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hang_cv = PTHREAD_COND_INITIALIZER;
static int released = 0, hanging = 0;
/* Blocks while the test has not released it (an Event, not a sleep: the test decides when). */
static void hang_if(const char *stage) {
    if (strcmp(FAULT_HANG, stage) != 0) return;
    pthread_mutex_lock(&hang_mu);
    hanging++;
    while (!released) pthread_cond_wait(&hang_cv, &hang_mu);
    pthread_mutex_unlock(&hang_mu);
}
void cfault_release(void) {
    pthread_mutex_lock(&hang_mu);
    released = 1;
    pthread_cond_broadcast(&hang_cv);
    pthread_mutex_unlock(&hang_mu);
}
static int late_done = 0, late_rc = 0;
/* The rc of the write a released process_events makes after its deadline; waits up to `seconds` for it. */
int cfault_late_rc(int seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&hang_mu);
    while (!late_done && pthread_cond_timedwait(&hang_cv, &hang_mu, &until) == 0) {
    }
    int rc = late_done ? late_rc : 99;
    pthread_mutex_unlock(&hang_mu);
    return rc;
}
int cfault_hanging(void) {
    pthread_mutex_lock(&hang_mu);
    int n = hanging;
    pthread_mutex_unlock(&hang_mu);
    return n;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char g_error[128];

static int query(char *name_buf, size_t name_len, int32_t *types, size_t max_types, size_t *num_types) {
    hang_if("query");
    snprintf(name_buf, name_len, "%s", PLUGIN_NAME);
    int32_t mine[] = {XPUPROF_ACTIVITY_CONCURRENT_KERNEL, XPUPROF_ACTIVITY_RUNTIME, XPUPROF_ACTIVITY_GPU_PM_COUNTER};
    size_t n = 0;
    for (; n < 3 && n < max_types; n++) types[n] = mine[n];
    *num_types = n;
    return 0;
}

static int probe(char *reason, size_t len) {
    hang_if("probe");
    if (fails("probe")) {
        snprintf(g_error, sizeof g_error, "injected failure in probe");
        return -1;
    }
#ifdef FAULT_PROBE_NO
    snprintf(reason, len, "no synthetic device attached");
    return 0;
#endif
    snprintf(reason, len, "synthetic device");
    return 1;
}

static int create(const int32_t *enabled, size_t n, const char *config_json, XpuprofPluginProfiler **out) {
    hang_if("create");
    if (fails("create")) {
        snprintf(g_error, sizeof g_error, "injected failure in create");
        return -1;
    }
    XpuprofPluginProfiler *p = calloc(1, sizeof *p);
    for (size_t i = 0; i < n; i++) p->enabled_mask |= 1 << enabled[i];
    (void)config_json;
    *out = p;
    return 0;
}

static int destroy(XpuprofPluginProfiler *p) {
    hang_if("destroy");
    free(p);
    destroyed_count++;
    return 0;
}

static int start(XpuprofPluginProfiler *p) {
    p->start_ns = now_ns();
    hang_if("start");
    if (fails("start")) {
        snprintf(p->error, sizeof p->error, "injected failure in start");
        return -1;
    }
    return 0;
}

static int stop(XpuprofPluginProfiler *p) {
    p->stop_ns = now_ns();
    hang_if("stop");
    if (fails("stop")) {
        snprintf(p->error, sizeof p->error, "injected failure in stop");
        return -1;
    }
    return 0;
}

static int process_events(XpuprofPluginProfiler *p, const XpuprofTraceBuilderApi *api) {
    XpuprofTraceBuilder *b = api->builder;
    int64_t t0 = p->start_ns + 1000, dev = 77, q = 3;
    if (strcmp(FAULT_HANG, "process") == 0) {
        hang_if("process");
        XpuprofSlice late = {sizeof late, XPUPROF_ACTIVITY_CONCURRENT_KERNEL, 0, t0, t0 + 10, dev, q, 0, "late_kernel",
                             NULL};
        int rc = api->add_slice(b, &late); /* after the deadline: must be refused */
        pthread_mutex_lock(&hang_mu);
        late_done = 1;
        late_rc = rc;
        pthread_cond_broadcast(&hang_cv);
        pthread_mutex_unlock(&hang_mu);
        return 0;
    }
    XpuprofDeviceRow row = {sizeof row, dev, dev, "Synthetic device 0", "cfault"};
    api->add_device_row(b, &row);
    XpuprofResourceRow res = {sizeof res, dev, q, 1, "queue 3"};
    api->add_resource_row(b, &res);
    XpuprofSlice launch = {sizeof launch, XPUPROF_ACTIVITY_RUNTIME, 0, t0, t0 + 500, 1, 1, 42, "synthLaunchKernel",
                           "{\"queue\": 3}"};
    api->add_slice(b, &launch);
    XpuprofSlice k1 = {sizeof k1, XPUPROF_ACTIVITY_CONCURRENT_KERNEL, 0, t0 + 1000, t0 + 5000, dev, q, 42, "gemm_kernel",
                       "{\"grid\": [8, 1, 1], \"note\": \"quote \\\" inside\"}"};
    api->add_slice(b, &k1);
    XpuprofFlow fs = {sizeof fs, 42, t0, 1, 1, XPUPROF_FLOW_ASYNC_CPU_GPU, 1};
    XpuprofFlow ff = {sizeof ff, 42, t0 + 1000, dev, q, XPUPROF_FLOW_ASYNC_CPU_GPU, 0};
    api->add_flow(b, &fs);
    api->add_flow(b, &ff);
    const char *metrics[] = {"busy_pct", "power_w"};
    double values[] = {87.5, 250.0};
    XpuprofCounter c = {sizeof c, XPUPROF_ACTIVITY_GPU_PM_COUNTER, 0, t0 + 1000, dev, 0, "synthetic utilization", 2,
                        metrics, values};
    api->add_counter(b, &c);
    api->set_metadata(b, "cfault_version", "\"1.0\"");
    XpuprofSlice bulk[3];
    for (int i = 0; i < 3; i++) {
        XpuprofSlice k = {sizeof k, XPUPROF_ACTIVITY_CONCURRENT_KERNEL, 0, t0 + 10000 + i * 100, t0 + 10050 + i * 100,
                          dev, q, 0, "bulk_kernel", i == 1 ? "{\"index\": 1}" : NULL};
        bulk[i] = k;
    }
    api->add_slices(b, bulk, 3);
#ifdef FAULT_BAD_UTF8
    XpuprofSlice u = k1;
    u.name = "bad \xff\xfe name";
    api->add_slice(b, &u);
    XpuprofSlice ubulk[2] = {bulk[0], bulk[1]};
    ubulk[0].name = "bulk \xc3\x28 name";
    api->add_slices(b, ubulk, 2);
#endif
#ifdef FAULT_MALFORMED
    XpuprofSlice bad = k1;
    bad.name = NULL;
    api->add_slice(b, &bad); /* NULL name */
    bad = k1;
    bad.end_ns = bad.start_ns - 10;
    api->add_slice(b, &bad); /* ends before it starts */
    bad = k1;
    bad.activity_type = 999;
    api->add_slice(b, &bad); /* unknown type */
    bad = k1;
    bad.args_json = "{not json";
    api->add_slice(b, &bad);
    bad = k1;
    bad.name = "\xff\xfe broken";
    api->add_slice(b, &bad); /* invalid UTF-8 */
    bad = k1;
    bad.struct_size = 8;
    api->add_slice(b, &bad); /* too small */
    api->add_slice(b, NULL);
    double nan_values[] = {0.0 / 0.0, 1.0};
    XpuprofCounter badc = c;
    badc.values = nan_values;
    api->add_counter(b, &badc);
    XpuprofFlow badf = fs;
    badf.flow_type = 7;
    api->add_flow(b, &badf);
    api->set_metadata(b, "traceEvents", "[]");
    api->set_metadata(b, "x", "not json");
    api->add_slice((XpuprofTraceBuilder *)0x1234, &k1); /* wrong handle */
    XpuprofSlice badbulk[3] = {bulk[0], bulk[1], bulk[2]};
    badbulk[0].end_ns = badbulk[0].start_ns - 1; /* ends before it starts */
    badbulk[2].activity_type = 999;              /* unknown type */
    badbulk[1].name = "bulk_survivor";
    api->add_slices(b, badbulk, 3);
    api->add_slices(b, NULL, 2);                 /* NULL array: both counted */
    /* a good one after the bad ones still lands */
    XpuprofSlice k2 = {sizeof k2, XPUPROF_ACTIVITY_CONCURRENT_KERNEL, 0, t0 + 6000, t0 + 7000, dev, q, 0, "after_bad",
                       NULL};
    api->add_slice(b, &k2);
#endif
    if (fails("process")) {
        snprintf(p->error, sizeof p->error, "injected failure in process_events");
        return -1;
    }
    return 0;
}

static int last_error(XpuprofPluginProfiler *p, char *buf, size_t len) {
    snprintf(buf, len, "%s", p && p->error[0] ? p->error : g_error);
    return 0;
}

#ifndef FAULT_NO_SYMBOL
XPUPROF_PLUGIN_EXPORT int xpuprof_plugin_register(XpuprofPluginInterface *table) {
    hang_if("register");
    XpuprofPluginInterface mine = {sizeof mine, XPUPROF_PLUGIN_ABI_VERSION, 0, query, create, destroy, start, stop,
                                   process_events, probe, last_error};
#ifdef FAULT_ABI_VERSION
    mine.abi_version = FAULT_ABI_VERSION;
#endif
#ifdef FAULT_MISSING_STOP
    mine.stop = NULL;
#endif
    size_t n = table->struct_size < sizeof mine ? table->struct_size : sizeof mine;
    mine.struct_size = n;
#ifdef FAULT_SMALL_TABLE
    mine.struct_size = 24;
#endif
    memcpy(table, &mine, n);
#ifdef FAULT_REGISTER_RC
    return FAULT_REGISTER_RC;
#endif
    return 0;
}
#else
XPUPROF_PLUGIN_EXPORT int some_other_entry(void) { return 0; }
#endif
