/* Test double of PTI's metrics-scope ABI (pti_metrics_scope.h and the device part of pti_metrics.h).
 *
 * Real PTI (intel-pti 1.2.0) exports the view and the metrics-scope functions from one library,
 * libpti_view.so. tests/scope/conftest.py mirrors that: it links this file with the view double
 * (every .c file of tests/xpu/double) into one library. Built alone it still works, with scripted records only.
 *
 * Records come from one of two sources:
 *  - the kernels the view double's last workload emitted (xpd_kernel_count/xpd_kernel_at), read when
 *    collection stops; values are derived from each kernel (GpuTime = its duration, ...), so a test
 *    can check the join against the kernel records;
 *  - a script (scope_double_script), for tests of decoding and value types.
 * scope_double_add_orphan appends a record whose kernel id matches no kernel.
 *
 * Calculated buffers are laid out as PTI's: an array of pti_metrics_scope_record_t, then the value
 * arrays and kernel names they point to. Records are spread over several collection buffers of
 * (buffer size / 256) scopes each, as PTI rotates buffers when one fills. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "double/pti_double.h"

/* Weak: absent when this file is built without the view double. */
extern size_t xpd_kernel_count(void) __attribute__((weak));
extern const xpd_kernel_info *xpd_kernel_at(size_t index) __attribute__((weak));

typedef union { uint32_t ui32; uint64_t ui64; float fp32; double fp64; uint8_t b8; } pti_value_t;
typedef struct { uint64_t kernel_id; void* queue; const char* kernel_name; pti_value_t* values; } scope_record_t;
typedef struct { size_t struct_size, count; uint32_t* types; const char** names; const char** units; } metadata_t;
typedef struct { size_t struct_size; void* device; size_t num_scopes, buffer_size; uint64_t t0, t1; const char* group; } cbprops_t;
typedef struct { void* handle; uint8_t d, b, dev, f; const char* model; uint8_t uuid[16]; } devprops_t;
typedef struct { void* handle; uint32_t type, domain, metric_count; void* props; const char* name; const char* desc; } groupprops_t;
typedef struct { void* handle; const char* name; const char* desc; uint32_t metric_type, value_type; const char* units; } metricprops_t;

/* The device's metric groups: name, unit, value type (0 u32, 1 u64, 2 f32, 3 f64), group. */
static const struct { const char* name; const char* unit; uint32_t type; const char* group; } kMetrics[] = {
  {"GpuTime", "ns", 1, "ComputeBasic"}, {"GpuCoreClocks", "cycles", 1, "ComputeBasic"},
  {"AvgGpuCoreFrequencyMHz", "MHz", 1, "ComputeBasic"},
  {"XVE_ACTIVE", "percent", 2, "ComputeBasic"}, {"XVE_STALL", "percent", 2, "ComputeBasic"},
  {"Counter5", "", 0, "TestOa"},
};
static const char* kGroups[] = {"ComputeBasic", "TestOa"};
enum { kNumMetrics = sizeof(kMetrics) / sizeof(kMetrics[0]), kNumGroups = 2, kMaxSel = 8, kMaxRec = 4096,
       kMaxBuf = 64, kScopeBytes = 256, kNameBytes = 64 };
#define DEVICE_HANDLE ((void*)(uintptr_t)0x1000)

static int g_sel[kMaxSel], g_nsel, g_enabled, g_started, g_scripted, g_nrec, g_norphan;
static uint64_t g_ids[kMaxRec], g_queues[kMaxRec];
static char g_knames[kMaxRec][kNameBytes];
static double g_vals[kMaxRec][kMaxSel];
static uint64_t g_orphans[16];
static size_t g_bufsize = 2048;
static uint8_t g_collection[kMaxBuf][64];
static const char* g_names[kMaxSel]; static const char* g_units[kMaxSel]; static uint32_t g_types[kMaxSel];

/* ------------------------------------------------------------------ test controls */
void scope_double_script(int n, const uint64_t* ids, const double* values /* n x nsel, row major */) {
  g_nrec = n > kMaxRec ? kMaxRec : n;
  for (int i = 0; i < g_nrec; ++i) {
    g_ids[i] = ids[i]; g_queues[i] = 0xabc0; strcpy(g_knames[i], "scripted_kernel");
    for (int k = 0; k < g_nsel; ++k) g_vals[i][k] = values[i * g_nsel + k];
  }
  g_scripted = 1;
}
void scope_double_add_orphan(uint64_t kernel_id) { if (g_norphan < 16) g_orphans[g_norphan++] = kernel_id; }
size_t scope_double_buffer_size(void) { return g_bufsize; }
int scope_double_started(void) { return g_started; }
void scope_double_reset(void) { g_nsel = g_enabled = g_started = g_scripted = g_nrec = g_norphan = 0; g_bufsize = 2048; }

/* What the double "measures" for a kernel of duration dur_ns (deterministic, per kernel id). */
static double derived_value(const char* metric, uint64_t id, uint64_t dur_ns) {
  if (!strcmp(metric, "GpuTime")) return (double)dur_ns;
  if (!strcmp(metric, "GpuCoreClocks")) return (double)(dur_ns * 3 / 2);  /* 1.5 GHz */
  if (!strcmp(metric, "AvgGpuCoreFrequencyMHz")) return 1500.0;
  if (!strcmp(metric, "XVE_ACTIVE")) return 40.0 + 10.0 * (double)(id % 5);
  if (!strcmp(metric, "XVE_STALL")) return 2.5 * (double)(id % 4);
  return (double)id;
}

static void add_record(uint64_t id, uint64_t queue, const char* name, uint64_t dur_ns) {
  if (g_nrec >= kMaxRec) return;
  g_ids[g_nrec] = id; g_queues[g_nrec] = queue;
  strncpy(g_knames[g_nrec], name ? name : "", kNameBytes - 1); g_knames[g_nrec][kNameBytes - 1] = 0;
  for (int k = 0; k < g_nsel; ++k) g_vals[g_nrec][k] = derived_value(g_names[k], id, dur_ns);
  g_nrec++;
}

/* Collection stops: the records of the kernels the last workload ran, then any orphans. */
static void capture_workload(void) {
  if (g_scripted) return;
  g_nrec = 0;
  if (xpd_kernel_count && xpd_kernel_at) {
    for (size_t i = 0; i < xpd_kernel_count(); ++i) {
      const xpd_kernel_info* k = xpd_kernel_at(i);
      add_record(k->kernel_id, 0x1000 + k->device_index, k->name, k->end_ns - k->start_ns);
    }
  }
  for (int i = 0; i < g_norphan; ++i) add_record(g_orphans[i], 0x1000, "", 1000);
}

static size_t scopes_per_buffer(void) { size_t s = g_bufsize / kScopeBytes; return s ? s : 1; }
static size_t buffer_count(void) {
  size_t n = ((size_t)g_nrec + scopes_per_buffer() - 1) / scopes_per_buffer();
  return n > kMaxBuf ? kMaxBuf : n;
}
static int buffer_index(const void* buf) {
  for (size_t i = 0; i < buffer_count(); ++i) if (buf == g_collection[i]) return (int)i;
  return -1;
}
static void buffer_range(int b, size_t* first, size_t* count) {
  *first = (size_t)b * scopes_per_buffer();
  size_t end = *first + scopes_per_buffer();
  if (end > (size_t)g_nrec) end = (size_t)g_nrec;
  *count = end - *first;
}

/* ------------------------------------------------------------------ pti_metrics.h (device part) */
uint32_t ptiMetricsGetDevices(devprops_t* out, uint32_t* n) {
  if (!n) return 3;
  if (out && *n >= 1) { memset(out, 0, sizeof(*out)); out->handle = DEVICE_HANDLE; out->model = "Intel(R) Arc(TM) B580 Graphics"; }
  *n = 1; return 0;
}
static metricprops_t g_props[kNumGroups][kNumMetrics];
uint32_t ptiMetricsGetMetricGroups(void* device, groupprops_t* out, uint32_t* n) {
  if (device != DEVICE_HANDLE || !n) return 3;
  if (out) {
    for (uint32_t g = 0; g < kNumGroups && g < *n; ++g) {
      uint32_t count = 0;
      for (int k = 0; k < kNumMetrics; ++k) if (!strcmp(kMetrics[k].group, kGroups[g])) count++;
      memset(&out[g], 0, sizeof out[g]);
      out[g].handle = (void*)(uintptr_t)(0x6000 + g); out[g].type = 1; out[g].metric_count = count;
      out[g].props = g_props[g]; out[g].name = kGroups[g]; out[g].desc = "double metric group";
    }
  }
  *n = kNumGroups; return 0;
}
uint32_t ptiMetricsGetMetricsProperties(void* group, metricprops_t* out) {
  uintptr_t g = (uintptr_t)group - 0x6000;
  if (g >= kNumGroups || !out) return 3;
  uint32_t j = 0;
  for (int k = 0; k < kNumMetrics; ++k) {
    if (strcmp(kMetrics[k].group, kGroups[g])) continue;
    memset(&out[j], 0, sizeof out[j]);
    out[j].handle = (void*)(uintptr_t)(0x7000 + k); out[j].name = kMetrics[k].name; out[j].desc = "";
    out[j].value_type = kMetrics[k].type; out[j].units = kMetrics[k].unit; j++;
  }
  return 0;
}

/* ------------------------------------------------------------------ pti_metrics_scope.h */
uint32_t ptiMetricsScopeEnable(void** h) {
  if (!h) return 3;
  *h = (void*)0x5c09e; g_enabled = 1; g_nsel = 0; g_scripted = 0; g_nrec = 0; g_norphan = 0; return 0;
}
uint32_t ptiMetricsScopeConfigure(void* h, uint32_t mode, void** devs, uint32_t ndev, const char** names, size_t n) {
  if (!g_enabled || !h) return 100;
  if (mode == 2) return 2;
  if (mode != 1 || n == 0 || n > kMaxSel) return 3;
  for (uint32_t i = 0; i < ndev; ++i) if (devs[i] != DEVICE_HANDLE) return 3;
  const char* group = NULL;
  for (size_t i = 0; i < n; ++i) {
    int found = -1;
    for (int k = 0; k < kNumMetrics; ++k) if (strcmp(names[i], kMetrics[k].name) == 0) found = k;
    if (found < 0) return 151;
    if (group && strcmp(group, kMetrics[found].group) != 0) return 152;
    group = kMetrics[found].group;
    g_sel[i] = found; g_names[i] = kMetrics[found].name; g_units[i] = kMetrics[found].unit; g_types[i] = kMetrics[found].type;
  }
  g_nsel = (int)n; return 0;
}
uint32_t ptiMetricsScopeQueryCollectionBufferSize(void* h, size_t scopes, size_t* size) {
  if (!h || !size || !g_nsel) return 105;
  *size = scopes * kScopeBytes < 2048 ? 2048 : scopes * kScopeBytes; return 0;
}
uint32_t ptiMetricsScopeSetCollectionBufferSize(void* h, size_t size) {
  if (!h || !g_nsel) return 105;
  g_bufsize = size < 2048 ? 2048 : size; return 0;
}
uint32_t ptiMetricsScopeStartCollection(void* h) { if (!h || !g_nsel) return 105; g_started = 1; return 0; }
uint32_t ptiMetricsScopeStopCollection(void* h) {
  if (!h || !g_started) return 100;
  g_started = 0; capture_workload(); return 0;
}
uint32_t ptiMetricsScopeGetMetricsMetadata(void* h, metadata_t* md) {
  if (!h || !md || md->struct_size != sizeof(metadata_t) || !g_nsel) return 3;
  md->count = (size_t)g_nsel; md->types = g_types; md->names = g_names; md->units = g_units; return 0;
}
uint32_t ptiMetricsScopeGetCollectionBuffersCount(void* h, size_t* n) { if (!h || !n) return 3; *n = buffer_count(); return 0; }
uint32_t ptiMetricsScopeGetCollectionBuffer(void* h, size_t i, void** buf, size_t* size) {
  if (!h || i >= buffer_count()) return 3;
  *buf = g_collection[i]; *size = g_bufsize; return 0;
}
uint32_t ptiMetricsScopeGetCollectionBufferProperties(void* h, void* buf, cbprops_t* p) {
  int b = buffer_index(buf);
  if (!h || b < 0 || !p) return 3;
  size_t first, count; buffer_range(b, &first, &count);
  p->device = DEVICE_HANDLE; p->num_scopes = count; p->buffer_size = g_bufsize; p->group = kMetrics[g_sel[0]].group; return 0;
}
static size_t needed_bytes(size_t count) {
  return count * (sizeof(scope_record_t) + (size_t)g_nsel * sizeof(pti_value_t) + kNameBytes);
}
uint32_t ptiMetricsScopeQueryMetricsBufferSize(void* h, void* buf, size_t* need, size_t* nrec) {
  int b = buffer_index(buf);
  if (!h || b < 0) return 156;
  size_t first, count; buffer_range(b, &first, &count);
  *need = needed_bytes(count); *nrec = count; return 0;
}
uint32_t ptiMetricsScopeCalculateMetrics(void* h, void* buf, void* out, size_t size, size_t* nrec) {
  int b = buffer_index(buf);
  if (!h || b < 0) return 156;
  size_t first, count; buffer_range(b, &first, &count);
  if (size < needed_bytes(count)) return 155;
  scope_record_t* recs = (scope_record_t*)out;
  pti_value_t* vals = (pti_value_t*)(recs + count);
  char* names = (char*)(vals + count * (size_t)g_nsel);
  for (size_t r = 0; r < count; ++r) {
    size_t i = first + r;
    char* name = names + r * kNameBytes;
    memcpy(name, g_knames[i], kNameBytes);
    recs[r].kernel_id = g_ids[i]; recs[r].queue = (void*)(uintptr_t)g_queues[i];
    recs[r].kernel_name = name[0] ? name : NULL;
    recs[r].values = vals + r * (size_t)g_nsel;
    for (int k = 0; k < g_nsel; ++k) {
      pti_value_t* v = &recs[r].values[k]; memset(v, 0, sizeof *v);
      switch (g_types[k]) {
        case 0: v->ui32 = (uint32_t)g_vals[i][k]; break;
        case 1: v->ui64 = (uint64_t)g_vals[i][k]; break;
        case 2: v->fp32 = (float)g_vals[i][k]; break;
        default: v->fp64 = g_vals[i][k];
      }
    }
  }
  *nrec = count; return 0;
}
uint32_t ptiMetricsScopeDisable(void* h) { if (!h) return 3; g_enabled = 0; g_started = 0; return 0; }
