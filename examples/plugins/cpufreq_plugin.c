/*
 * cpufreq_plugin.c -- an example xpuprof C plugin: samples the host CPUs' clock frequency.
 *
 * Build (the header ships with xpuprof: python -c "import xpuprof, os; print(os.path.dirname(xpuprof.__file__))"):
 *     cc -shared -fPIC -O2 -I<xpuprof>/include -o libcpufreq_plugin.so cpufreq_plugin.c -lpthread
 * Use:
 *     XPUPROF_PLUGIN_PATH=<dir with the .so> xpuprof run ...
 *
 * While profiling, a thread samples every CPU's frequency (sysfs cpufreq, else /proc/cpuinfo)
 * every `cpufreq_interval_us` microseconds (config key custom.cpufreq_interval_us, default
 * 10000), plus once at start and once at stop. process_events writes one "CPU frequency"
 * counter track (one metric per CPU, in MHz) and, when user annotations are enabled, a
 * "cpufreq sampling" slice covering the collection.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xpuprof_plugin.h"

#define MAX_CPUS 256
#define DEVICE_ID 0x43505546 /* "CPUF": a process row of its own */

typedef struct Sample {
    int64_t ts_ns;
    double mhz[MAX_CPUS];
} Sample;

struct XpuprofPluginProfiler {
    int want_counters, want_slice;
    long interval_us;
    int ncpus;
    const char *source;
    Sample *samples; /* owned by the plugin, freed in destroy */
    size_t count, capacity;
    int64_t start_ns, stop_ns;
    pthread_t thread;
    int thread_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    char error[256];
};

static char g_error[256];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Fills mhz[] and returns the number of CPUs read, 0 when no source exists. */
static int read_freqs(double *mhz, const char **source) {
    int n = 0;
    for (; n < MAX_CPUS; n++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", n);
        FILE *f = fopen(path, "r");
        if (!f) break;
        long khz = 0;
        int ok = fscanf(f, "%ld", &khz) == 1;
        fclose(f);
        if (!ok) break;
        mhz[n] = khz / 1000.0;
    }
    if (n > 0) {
        *source = "sysfs";
        return n;
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[512];
    while (n < MAX_CPUS && fgets(line, sizeof line, f)) {
        double v;
        if (strncmp(line, "cpu MHz", 7) == 0 && sscanf(strchr(line, ':') + 1, "%lf", &v) == 1) mhz[n++] = v;
    }
    fclose(f);
    *source = "/proc/cpuinfo";
    return n;
}

static void take_sample(XpuprofPluginProfiler *p) {
    if (p->count == p->capacity) {
        size_t cap = p->capacity ? p->capacity * 2 : 64;
        Sample *grown = realloc(p->samples, cap * sizeof(Sample));
        if (!grown) return; /* keep what we have */
        p->samples = grown;
        p->capacity = cap;
    }
    Sample *s = &p->samples[p->count];
    const char *src = p->source;
    memset(s->mhz, 0, sizeof s->mhz);
    read_freqs(s->mhz, &src);
    s->ts_ns = now_ns();
    p->count++;
}

static void *sampler(void *arg) {
    XpuprofPluginProfiler *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + p->interval_us * 1000L;
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &until);
        if (!p->stopping) take_sample(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int query(char *name_buf, size_t name_len, int32_t *types, size_t max_types, size_t *num_types) {
    snprintf(name_buf, name_len, "cpufreq");
    size_t n = 0;
    if (n < max_types) types[n++] = XPUPROF_ACTIVITY_GPU_PM_COUNTER;
    if (n < max_types) types[n++] = XPUPROF_ACTIVITY_USER_ANNOTATION;
    *num_types = n;
    return XPUPROF_PLUGIN_OK;
}

static int probe(char *reason, size_t len) {
    double mhz[MAX_CPUS];
    const char *src = "";
    int n = read_freqs(mhz, &src);
    if (n == 0) {
        snprintf(reason, len, "no CPU frequency source (neither sysfs cpufreq nor 'cpu MHz' in /proc/cpuinfo)");
        return 0;
    }
    snprintf(reason, len, "%d CPUs via %s", n, src);
    return 1;
}

static int create(const int32_t *enabled, size_t num_enabled, const char *config_json, XpuprofPluginProfiler **out) {
    XpuprofPluginProfiler *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(g_error, sizeof g_error, "out of memory");
        return XPUPROF_PLUGIN_ERROR;
    }
    for (size_t i = 0; i < num_enabled; i++) {
        if (enabled[i] == XPUPROF_ACTIVITY_GPU_PM_COUNTER) p->want_counters = 1;
        if (enabled[i] == XPUPROF_ACTIVITY_USER_ANNOTATION) p->want_slice = 1;
    }
    if (!p->want_counters) { /* nothing of ours is enabled: take no part */
        free(p);
        return XPUPROF_PLUGIN_DECLINE;
    }
    p->interval_us = 10000;
    const char *key = config_json ? strstr(config_json, "\"cpufreq_interval_us\":") : NULL;
    if (key) {
        long v = strtol(key + strlen("\"cpufreq_interval_us\":"), NULL, 10);
        if (v > 0) p->interval_us = v;
    }
    double mhz[MAX_CPUS];
    p->source = "none";
    p->ncpus = read_freqs(mhz, &p->source);
    if (p->ncpus == 0) {
        snprintf(g_error, sizeof g_error, "no CPU frequency source");
        free(p);
        return XPUPROF_PLUGIN_ERROR;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    *out = p;
    return XPUPROF_PLUGIN_OK;
}

static int start(XpuprofPluginProfiler *p) {
    p->start_ns = now_ns();
    pthread_mutex_lock(&p->mu);
    take_sample(p);
    p->stopping = 0;
    pthread_mutex_unlock(&p->mu);
    if (pthread_create(&p->thread, NULL, sampler, p) != 0) {
        snprintf(p->error, sizeof p->error, "cannot start the sampling thread");
        return XPUPROF_PLUGIN_ERROR;
    }
    p->thread_running = 1;
    return XPUPROF_PLUGIN_OK;
}

static int stop(XpuprofPluginProfiler *p) {
    if (p->thread_running) {
        pthread_mutex_lock(&p->mu);
        p->stopping = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
        p->thread_running = 0;
    }
    take_sample(p);
    p->stop_ns = now_ns();
    return XPUPROF_PLUGIN_OK;
}

static int process_events(XpuprofPluginProfiler *p, const XpuprofTraceBuilderApi *api) {
    XpuprofDeviceRow dev = {sizeof dev, DEVICE_ID, DEVICE_ID, "CPU frequency", "cpufreq plugin"};
    api->add_device_row(api->builder, &dev);
    XpuprofResourceRow row = {sizeof row, DEVICE_ID, 0, 0, "sampler"};
    api->add_resource_row(api->builder, &row);

    char names[MAX_CPUS][16];
    const char *name_ptrs[MAX_CPUS];
    for (int i = 0; i < p->ncpus; i++) {
        snprintf(names[i], sizeof names[i], "cpu%d", i);
        name_ptrs[i] = names[i];
    }
    for (size_t i = 0; i < p->count; i++) {
        XpuprofCounter c = {sizeof c, XPUPROF_ACTIVITY_GPU_PM_COUNTER, 0, p->samples[i].ts_ns, DEVICE_ID, 0,
                            "CPU frequency (MHz)", (size_t)p->ncpus, name_ptrs, p->samples[i].mhz};
        api->add_counter(api->builder, &c);
    }
    if (p->want_slice) {
        char args[128];
        snprintf(args, sizeof args, "{\"samples\": %zu, \"source\": \"%s\", \"interval_us\": %ld}", p->count,
                 p->source, p->interval_us);
        XpuprofSlice s = {sizeof s, XPUPROF_ACTIVITY_USER_ANNOTATION, 0, p->start_ns, p->stop_ns, DEVICE_ID, 0, 0,
                          "cpufreq sampling", args};
        api->add_slice(api->builder, &s);
    }
    char meta[64];
    snprintf(meta, sizeof meta, "\"%s\"", p->source);
    api->set_metadata(api->builder, "cpufreq_source", meta);
    return XPUPROF_PLUGIN_OK;
}

static int destroy(XpuprofPluginProfiler *p) {
    if (p->thread_running) stop(p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->samples);
    free(p);
    return XPUPROF_PLUGIN_OK;
}

static int last_error(XpuprofPluginProfiler *p, char *buf, size_t len) {
    snprintf(buf, len, "%s", p && p->error[0] ? p->error : g_error);
    return XPUPROF_PLUGIN_OK;
}

XPUPROF_PLUGIN_EXPORT int xpuprof_plugin_register(XpuprofPluginInterface *table) {
    XpuprofPluginInterface mine = {
        .struct_size = sizeof(XpuprofPluginInterface),
        .abi_version = XPUPROF_PLUGIN_ABI_VERSION,
        .query = query,
        .create = create,
        .destroy = destroy,
        .start = start,
        .stop = stop,
        .process_events = process_events,
        .probe = probe,
        .last_error = last_error,
    };
    /* Fill at most the bytes xpuprof knows about (an older xpuprof has a shorter table). */
    size_t n = table->struct_size < sizeof mine ? table->struct_size : sizeof mine;
    mine.struct_size = n;
    memcpy(table, &mine, n);
    return XPUPROF_PLUGIN_OK;
}
