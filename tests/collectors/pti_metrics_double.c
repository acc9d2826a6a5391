/* A C double of PTI's device (time-based) metrics API, pti_metrics.h of intel-pti 1.2.0 /
 * intel/pti-gpu: the structure layouts xpuprof reads (pti_device_properties_t,
 * pti_metrics_group_properties_t 48 bytes, pti_metric_properties_t 40 bytes,
 * pti_metrics_group_collection_params_t 32 bytes, pti_value_t 8 bytes) and the call rules
 * (configure before start; one params entry per call; value_count query with NULL).
 * One device "Intel(R) Arc(TM) B580 Graphics" with three groups:
 *   TestEventOnly  (type 1, event-based only)
 *   ComputeBasic   (type 3): QueryBeginTime TIMESTAMP u64 ns, GpuTime DURATION u64 ns,
 *                            GPU_BUSY RATIO f32 percent, XVE_ACTIVE RATIO f32 percent
 *   MemoryProfile  (type 2, no TIMESTAMP metric): GPU_MEMORY_BYTE_READ THROUGHPUT u64 bytes
 * Samples: one per interval between start and stop (at least one, at most 4096). */
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

typedef uint32_t pti_result;
typedef union { uint32_t ui32; uint64_t ui64; float fp32; double fp64; uint8_t b8; } pti_value_t;
typedef struct { void *_handle; uint8_t _domain, _bus, _device, _function; const char *_model_name; uint8_t _uuid[16]; } dev_props_t;
typedef struct { void *_handle; const char *_name; const char *_description; uint32_t _metric_type; uint32_t _value_type;
                 const char *_units; } metric_props_t;
typedef struct { void *_handle; uint32_t _type; uint32_t _domain; uint32_t _metric_count; metric_props_t *_metric_properties;
                 const char *_name; const char *_description; } group_props_t;
typedef struct { size_t _struct_size; void *_group_handle; uint32_t _sampling_interval; uint64_t _time_aggr_window; } params_t;

static char DEVICE, G_EVENT, G_COMPUTE, G_MEMORY, M[6];
static const struct { void *h; const char *name; uint32_t type, vtype; const char *units; } METRICS[] = {
    {&M[0], "TestEventMetric", 1, 1, "events"},
    {&M[1], "QueryBeginTime", 4, 1, "ns"}, {&M[2], "GpuTime", 0, 1, "ns"},
    {&M[3], "GPU_BUSY", 6, 2, "percent"}, {&M[4], "XVE_ACTIVE", 6, 2, "percent"},
    {&M[5], "GPU_MEMORY_BYTE_READ", 3, 1, "bytes"},
};
static const struct { void *h; const char *name; uint32_t type; int first, count; } GROUPS[] = {
    {&G_EVENT, "TestEventOnly", 1, 0, 1}, {&G_COMPUTE, "ComputeBasic", 3, 1, 4}, {&G_MEMORY, "MemoryProfile", 2, 5, 1},
};

static void *configured_group;
static int started, stopped;
static uint64_t start_ns, stop_ns;
uint32_t pti_double_interval_ns;   /* the last configured interval (tests read it) */
uint32_t pti_double_configure_calls;

uint64_t ptiViewGetTimestamp(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

pti_result ptiMetricsGetDevices(dev_props_t *out, uint32_t *count) {
    if (count == NULL) return 3;
    if (out == NULL) { *count = 1; return 0; }
    if (*count < 1) return 3;
    memset(out, 0, sizeof(*out));
    out->_handle = &DEVICE; out->_bus = 3; out->_model_name = "Intel(R) Arc(TM) B580 Graphics";
    *count = 1;
    return 0;
}

pti_result ptiMetricsGetMetricGroups(void *device, group_props_t *out, uint32_t *count) {
    if (device != &DEVICE || count == NULL) return 3;
    if (out == NULL) { *count = 3; return 0; }
    if (*count < 3) return 3;
    for (int i = 0; i < 3; i++) {
        out[i]._handle = GROUPS[i].h; out[i]._type = GROUPS[i].type; out[i]._domain = 0;
        out[i]._metric_count = (uint32_t)GROUPS[i].count; out[i]._metric_properties = NULL;
        out[i]._name = GROUPS[i].name; out[i]._description = "double";
    }
    *count = 3;
    return 0;
}

pti_result ptiMetricsGetMetricsProperties(void *group, metric_props_t *out) {
    for (int g = 0; g < 3; g++) {
        if (GROUPS[g].h != group) continue;
        if (out == NULL) return 3;
        for (int k = 0; k < GROUPS[g].count; k++) {
            int m = GROUPS[g].first + k;
            out[k]._handle = METRICS[m].h; out[k]._name = METRICS[m].name; out[k]._description = "double";
            out[k]._metric_type = METRICS[m].type; out[k]._value_type = METRICS[m].vtype; out[k]._units = METRICS[m].units;
        }
        return 0;
    }
    return 3;
}

pti_result ptiMetricsConfigureCollection(void *device, params_t *params, uint32_t count) {
    pti_double_configure_calls++;
    if (device != &DEVICE || params == NULL || count != 1 || params->_struct_size != sizeof(params_t)) return 3;
    if (params->_group_handle == &G_EVENT) return 105;  /* not a time-based group */
    if (params->_group_handle != &G_COMPUTE && params->_group_handle != &G_MEMORY) return 3;
    if (params->_sampling_interval == 0) return 3;
    configured_group = params->_group_handle;
    pti_double_interval_ns = params->_sampling_interval;
    started = stopped = 0;
    return 0;
}

pti_result ptiMetricsStartCollection(void *device) {
    if (device != &DEVICE) return 3;
    if (configured_group == NULL) return 105;
    if (started) return 104;
    started = 1; start_ns = ptiViewGetTimestamp();
    return 0;
}

pti_result ptiMetricsStopCollection(void *device) {
    if (device != &DEVICE) return 3;
    if (!started) return 100;
    started = 0; stopped = 1; stop_ns = ptiViewGetTimestamp();
    return 0;
}

static uint32_t samples(void) {
    uint64_t n = (stop_ns - start_ns) / pti_double_interval_ns;
    if (n < 1) n = 1;
    if (n > 4096) n = 4096;
    return (uint32_t)n;
}

pti_result ptiMetricsGetCalculatedData(void *device, void *group, pti_value_t *values, uint32_t *count) {
    if (device != &DEVICE || count == NULL) return 3;
    if (!stopped || group != configured_group) return 105;
    uint32_t per = group == &G_COMPUTE ? 4 : 1, n = samples();
    if (values == NULL) { *count = n * per; return 0; }
    if (*count < n * per) return 3;
    for (uint32_t i = 0; i < n; i++) {
        pti_value_t *v = values + (size_t)i * per;
        memset(v, 0xAB, per * sizeof(pti_value_t));  /* garbage in the unused union bytes */
        if (group == &G_COMPUTE) {
            v[0].ui64 = start_ns + (uint64_t)(i + 1) * pti_double_interval_ns;
            v[1].ui64 = pti_double_interval_ns;
            v[2].fp32 = (float)(10 * (i % 10));
            v[3].fp32 = 50.5f;
        } else {
            v[0].ui64 = 1000ull * (i + 1);
        }
    }
    *count = n * per;
    return 0;
}
